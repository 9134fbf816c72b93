"""Offset stores: the remote one against a fake broker, the local file one in tmp_path."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rocketlite.client.errors import MQClientError
from rocketlite.client.offset_store import (
    OFFSET_STORE_DIR_ENV,
    LocalFileOffsetStore,
    OffsetFileError,
    ReadOffsetType,
    RemoteOffsetStore,
    decode_offsets,
    default_offset_store_dir,
    encode_offsets,
)
from rocketlite.common.errors import BodyError, RemotingError
from rocketlite.protocol import fastjson
from rocketlite.protocol.bodies import MessageQueue

MQ0 = MessageQueue(topic="T", brokerName="b", queueId=0)
MQ1 = MessageQueue(topic="T", brokerName="b", queueId=1)
MQX = MessageQueue(topic="X", brokerName="b", queueId=0)


class FakeBackend:
    def __init__(self) -> None:
        self.offsets: dict[tuple[str, MessageQueue], int] = {}
        self.updates: list[tuple[str, MessageQueue, int, bool]] = []
        self.queries = 0
        self.fail_updates_for: set[MessageQueue] = set()
        self.fail_queries = False

    async def query_offset(self, group: str, mq: MessageQueue) -> int | None:
        self.queries += 1
        if self.fail_queries:
            raise RemotingError("connection lost")
        return self.offsets.get((group, mq))

    async def update_offset(self, group: str, mq: MessageQueue, offset: int, oneway: bool) -> None:
        if mq in self.fail_updates_for:
            raise MQClientError(f"the broker[{mq.brokerName}] not exist")
        self.updates.append((group, mq, offset, oneway))
        self.offsets[(group, mq)] = offset


# -- in memory (shared) ------------------------------------------------------------------------


async def test_update_increase_only() -> None:
    store = RemoteOffsetStore("g", FakeBackend())
    await store.update(MQ0, 10, True)  # first value is taken either way
    await store.update(MQ0, 5, True)
    assert await store.read(MQ0, ReadOffsetType.READ_FROM_MEMORY) == 10
    await store.update(MQ0, 12, True)
    assert await store.read(MQ0, ReadOffsetType.READ_FROM_MEMORY) == 12
    await store.update(MQ0, 3, False)
    assert await store.read(MQ0, ReadOffsetType.READ_FROM_MEMORY) == 3


async def test_clone_table_and_remove() -> None:
    store = RemoteOffsetStore("g", FakeBackend())
    await store.update(MQ0, 1, False)
    await store.update(MQ1, 2, False)
    await store.update(MQX, 3, False)
    assert await store.clone_table("T") == {MQ0: 1, MQ1: 2}
    assert await store.clone_table(None) == {MQ0: 1, MQ1: 2, MQX: 3}
    assert await store.clone_table("  ") == {MQ0: 1, MQ1: 2, MQX: 3}
    table = await store.clone_table()
    table[MQ0] = 99  # a copy
    await store.remove(MQ1)
    await store.remove(MQ1)
    assert await store.clone_table() == {MQ0: 1, MQX: 3}


# -- remote ------------------------------------------------------------------------------------


async def test_remote_read_types() -> None:
    backend = FakeBackend()
    backend.offsets[("g", MQ0)] = 40
    store = RemoteOffsetStore("g", backend)
    assert await store.read(MQ0, ReadOffsetType.READ_FROM_MEMORY) == -1
    assert backend.queries == 0
    assert await store.read(MQ0, ReadOffsetType.MEMORY_FIRST_THEN_STORE) == 40
    assert backend.queries == 1
    assert await store.read(MQ0, ReadOffsetType.READ_FROM_MEMORY) == 40  # the broker's answer is kept
    await store.update(MQ0, 45, True)
    assert await store.read(MQ0, ReadOffsetType.MEMORY_FIRST_THEN_STORE) == 45
    assert backend.queries == 1
    assert await store.read(MQ0, ReadOffsetType.READ_FROM_STORE) == 40  # always asks, replaces memory
    assert backend.queries == 2
    assert await store.read(MQ0, ReadOffsetType.READ_FROM_MEMORY) == 40


async def test_remote_not_found_is_minus_one_and_not_cached() -> None:
    backend = FakeBackend()
    store = RemoteOffsetStore("g", backend)
    assert await store.read(MQ0, ReadOffsetType.READ_FROM_STORE) == -1
    assert await store.read(MQ0, ReadOffsetType.MEMORY_FIRST_THEN_STORE) == -1
    assert await store.clone_table() == {}


async def test_remote_query_failure_raises() -> None:
    backend = FakeBackend()
    backend.fail_queries = True
    store = RemoteOffsetStore("g", backend)
    with pytest.raises(RemotingError):
        await store.read(MQ0, ReadOffsetType.READ_FROM_STORE)


async def test_remote_persist_all_sends_in_use_and_drops_unused() -> None:
    backend = FakeBackend()
    store = RemoteOffsetStore("g", backend)
    await store.load()
    for mq, off in ((MQ0, 5), (MQ1, 6), (MQX, 7)):
        await store.update(mq, off, False)
    await store.persist_all({MQ0, MQX})
    assert sorted(backend.updates) == sorted([("g", MQ0, 5, True), ("g", MQX, 7, True)])
    assert await store.clone_table() == {MQ0: 5, MQX: 7}


async def test_remote_persist_all_of_nothing_keeps_the_table() -> None:
    backend = FakeBackend()
    store = RemoteOffsetStore("g", backend)
    await store.update(MQ0, 5, False)
    await store.persist_all([])
    assert backend.updates == []
    assert await store.clone_table() == {MQ0: 5}


async def test_remote_persist_failures_are_logged_and_others_go_on(caplog: pytest.LogCaptureFixture) -> None:
    backend = FakeBackend()
    backend.fail_updates_for = {MQ0}
    store = RemoteOffsetStore("g", backend, oneway=False)
    await store.update(MQ0, 5, False)
    await store.update(MQ1, 6, False)
    await store.persist_all([MQ0, MQ1])
    assert backend.updates == [("g", MQ1, 6, False)]
    assert "could not update the offset" in caplog.text
    await store.persist(MQ0)  # logged again, not raised
    await store.persist(MQX)  # unknown queue: nothing sent
    await store.persist(MQ1)
    assert backend.updates[-1] == ("g", MQ1, 6, False)
    assert len(backend.updates) == 2


# -- local file --------------------------------------------------------------------------------


def local(tmp_path: Path, client_id: str = "10.0.0.1@1#2") -> LocalFileOffsetStore:
    return LocalFileOffsetStore(client_id, "g", tmp_path)


async def test_local_round_trip(tmp_path: Path) -> None:
    store = local(tmp_path)
    assert store.path == tmp_path / "10.0.0.1@1#2" / "g" / "offsets.json"
    await store.load()  # no file yet
    await store.update(MQ0, 5, False)
    await store.update(MQX, 2**40, False)
    await store.persist_all([MQ0, MQX])
    again = local(tmp_path)
    await again.load()
    assert await again.clone_table() == {MQ0: 5, MQX: 2**40}
    assert await again.read(MQ1, ReadOffsetType.READ_FROM_MEMORY) == -1


async def test_local_file_shape_is_fastjson_offset_serialize_wrapper(tmp_path: Path) -> None:
    store = local(tmp_path)
    await store.update(MQ0, 42, False)
    await store.persist(MQ0)
    text = store.path.read_text()
    assert text == '{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:42}}'
    # what a Java client writes (fastjson, pretty) reads too
    java = (
        '{\n\t"offsetTable":{{\n\t\t"brokerName":"broker-a",\n\t\t"queueId":3,\n\t\t"topic":"TopicTest"\n'
        '\t}:17,{"brokerName":"broker-a","queueId":1,"topic":"TopicTest"}:9\n\t}\n}'
    )
    assert decode_offsets(java.encode()) == {
        MessageQueue(topic="TopicTest", brokerName="broker-a", queueId=3): 17,
        MessageQueue(topic="TopicTest", brokerName="broker-a", queueId=1): 9,
    }
    assert decode_offsets(b'{"offsetTable":{}}') == {}
    assert decode_offsets(b"{}") == {}
    assert decode_offsets(encode_offsets({MQ0: 1, MQ1: 2})) == {MQ0: 1, MQ1: 2}


@pytest.mark.parametrize("bad", [b"[1]", b'{"offsetTable":[]}', b'{"offsetTable":{"T":1}}',
                                 b'{"offsetTable":{{"topic":"T","queueId":0,"brokerName":"b"}:"x"}}',
                                 b'{"offsetTable":{{"topic":"T"}:1}}', b'{"offsetTable":{'])
def test_decode_rejects_other_shapes(bad: bytes) -> None:
    with pytest.raises(BodyError):
        decode_offsets(bad)


async def test_local_write_is_atomic_and_keeps_a_backup(tmp_path: Path) -> None:
    store = local(tmp_path)
    await store.update(MQ0, 1, False)
    await store.persist_all([MQ0])
    assert not store.backup_path.exists()
    await store.update(MQ0, 2, False)
    await store.persist_all([MQ0])
    assert decode_offsets(store.backup_path.read_bytes()) == {MQ0: 1}
    assert decode_offsets(store.path.read_bytes()) == {MQ0: 2}
    assert sorted(p.name for p in store.path.parent.iterdir()) == ["offsets.json", "offsets.json.bak"]


async def test_local_failed_write_leaves_the_old_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    store = local(tmp_path)
    await store.update(MQ0, 1, False)
    await store.persist_all([MQ0])

    def broken_fsync(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fsync", broken_fsync)
    await store.update(MQ0, 2, False)
    await store.persist_all([MQ0])  # logged, not raised
    monkeypatch.undo()
    assert "could not write" in caplog.text
    assert decode_offsets(store.path.read_bytes()) == {MQ0: 1}
    assert not store.path.with_name("offsets.json.tmp").exists()


async def test_local_load_falls_back_to_backup(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    store = local(tmp_path)
    await store.update(MQ0, 1, False)
    await store.persist_all([MQ0])
    await store.update(MQ0, 2, False)
    await store.persist_all([MQ0])
    store.path.write_bytes(b'{"offsetTable":{{"brokerName":"b","queue')  # torn write
    again = local(tmp_path)
    await again.load()
    assert await again.clone_table() == {MQ0: 1}
    assert "using its backup" in caplog.text
    # the next write does not copy the corrupt file over the good backup
    await again.persist_all([MQ0])
    assert decode_offsets(store.backup_path.read_bytes()) == {MQ0: 1}


async def test_local_empty_main_file_uses_backup(tmp_path: Path) -> None:
    store = local(tmp_path)
    store.path.parent.mkdir(parents=True)
    store.path.write_bytes(b"")
    store.backup_path.write_bytes(encode_offsets({MQ1: 8}))
    await store.load()
    assert await store.clone_table() == {MQ1: 8}


@pytest.mark.parametrize("backup", [b"garbage", None])
async def test_local_load_both_unreadable_is_a_clear_error(tmp_path: Path, backup: bytes | None) -> None:
    store = local(tmp_path)
    store.path.parent.mkdir(parents=True)
    store.path.write_bytes(b"not json")
    if backup is not None:
        store.backup_path.write_bytes(backup)
    with pytest.raises(OffsetFileError, match=r"offsets\.json") as info:
        await store.load()
    assert isinstance(info.value, MQClientError)
    assert await store.read(MQ0, ReadOffsetType.READ_FROM_STORE) == -1  # read logs and gives -1


async def test_local_read_from_store_rereads_the_file(tmp_path: Path) -> None:
    store = local(tmp_path)
    await store.update(MQ0, 5, False)
    await store.persist_all([MQ0])
    await store.update(MQ0, 9, False)
    assert await store.read(MQ0, ReadOffsetType.MEMORY_FIRST_THEN_STORE) == 9
    assert await store.read(MQ0, ReadOffsetType.READ_FROM_STORE) == 5
    assert await store.read(MQ0, ReadOffsetType.READ_FROM_MEMORY) == 5
    assert await store.read(MQ1, ReadOffsetType.MEMORY_FIRST_THEN_STORE) == -1


async def test_local_persist_writes_only_the_table_it_holds(tmp_path: Path) -> None:
    store = local(tmp_path)
    await store.update(MQ0, 5, False)
    await store.update(MQ1, 6, False)
    await store.persist_all([MQ0])  # only the queues in use
    assert decode_offsets(store.path.read_bytes()) == {MQ0: 5}
    await store.persist(MQ1)  # the whole table
    assert decode_offsets(store.path.read_bytes()) == {MQ0: 5, MQ1: 6}
    await store.remove(MQ1)
    await store.persist(MQ1)  # no longer held: nothing written
    assert decode_offsets(store.path.read_bytes()) == {MQ0: 5, MQ1: 6}
    await store.persist(MQ0)
    assert decode_offsets(store.path.read_bytes()) == {MQ0: 5}
    mtime = store.path.stat().st_mtime_ns
    await store.persist_all(set())
    assert store.path.stat().st_mtime_ns == mtime


def test_local_default_root(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(OFFSET_STORE_DIR_ENV, raising=False)
    assert default_offset_store_dir() == Path.home() / ".rocketmq_offsets"
    monkeypatch.setenv(OFFSET_STORE_DIR_ENV, str(tmp_path / "elsewhere"))
    store = LocalFileOffsetStore("c", "g")
    assert store.path == tmp_path / "elsewhere" / "c" / "g" / "offsets.json"


@pytest.mark.parametrize("client_id,group", [("", "g"), ("c", ".."), ("a/b", "g"), ("c", "g/../x")])
def test_local_rejects_names_that_are_not_directory_names(tmp_path: Path, client_id: str, group: str) -> None:
    with pytest.raises(ValueError, match="directory name"):
        LocalFileOffsetStore(client_id, group, tmp_path)


def test_object_keys_are_fastjson_object_keys() -> None:
    parsed = fastjson.loads(encode_offsets({MQ0: 3}))
    (key,) = parsed["offsetTable"]
    assert isinstance(key, fastjson.ObjectKey)
    assert key.to_dict() == {"brokerName": "b", "queueId": 0, "topic": "T"}
