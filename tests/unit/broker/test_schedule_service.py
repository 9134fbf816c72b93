"""The delay-level service driven round by round with a fake clock: divert rules, the deliver-time
tag code (live and recovery dispatch agree), delivery at (never before) the due time, the
rebuilt message, delayOffset.json, restarts (clean: nothing repeated; crash: nothing lost)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from rocketlite.broker.schedule import DELIVER_BATCH, ScheduleMessageService
from rocketlite.common.errors import ConfigError
from rocketlite.formats.delay import SCHEDULE_TOPIC
from rocketlite.formats.javahash import tags_code
from rocketlite.formats.message_record import MessageRecord, decode_record
from rocketlite.formats.properties import decode_properties, encode_properties
from rocketlite.store.config import StoreConfig
from rocketlite.store.message import MessageToStore
from rocketlite.store.message_store import MessageStore
from storehelp import Clock, small_config, wait_dispatched

LEVELS = "1s 2s 3s"
TOPIC = "DelayTopic"


@dataclass
class Env:
    root: Path
    clock: Clock
    store: MessageStore
    service: ScheduleMessageService

    def send(self, props: dict[str, str], body: bytes = b"x", queue_id: int = 1,
             sys_flag: int = 0, topic: str = TOPIC) -> MessageToStore:
        m = MessageToStore(topic, body, queue_id, properties=encode_properties(props),
                           sys_flag=sys_flag, born_timestamp=123, reconsume_times=2)
        out = self.service.divert(m) or m
        self.store.put_messages_sync([out])
        wait_dispatched(self.store)
        return out

    def units(self, level: int) -> list[tuple[int, int, int]]:
        cq = self.store.find_queue(SCHEDULE_TOPIC, level - 1)
        out: list[tuple[int, int, int]] = []
        while cq is not None and len(out) < cq.max_offset:
            out += cq.get_units(len(out), 10_000)  # one segment at a time
        return out

    def run(self) -> int:
        """Rounds until nothing is due; how many were delivered."""
        total = 0
        while True:
            n, due = self.service.deliver_round()
            total += n
            wait_dispatched(self.store)
            if due is None or due > self.clock.t:
                return total

    def delivered(self, queue_id: int = 1) -> list[MessageRecord]:
        got = self.store.get_message(TOPIC, queue_id, 0, 100_000, 1 << 40)
        return [m for raw in got.messages if (m := decode_record(raw)) is not None]

    def restart(self, crash: bool = False) -> None:
        if crash:
            self.store.halt()  # the service's offsets die with it: nothing persisted
        else:
            self.service.persist()
            self.store.shutdown()
        self.store = MessageStore(config(self.root)).start()
        self.service = ScheduleMessageService(self.store, self.clock)
        self.service.load()


def config(root: Path) -> StoreConfig:
    return small_config(root, mappedFileSizeCommitLog="1048576", messageDelayLevel=LEVELS)


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    store = MessageStore(config(tmp_path)).start()
    clock = Clock(0)
    e = Env(tmp_path, clock, store, ScheduleMessageService(store, clock))
    yield e
    e.store.shutdown()


def props_of(m: MessageRecord) -> dict[str, str]:
    return decode_properties(m.properties_text)


# -- divert -----------------------------------------------------------------------------------


def test_divert_parks_a_delayed_message_in_its_level_queue(env: Env) -> None:
    m = MessageToStore(TOPIC, b"x", 3, properties=encode_properties(
        {"DELAY": "2", "TAGS": "t", "UNIQ_KEY": "U1"}))
    out = env.service.divert(m)
    assert out is not None
    assert (out.topic, out.queue_id, out.body) == (SCHEDULE_TOPIC, 1, b"x")
    p = decode_properties(out.properties)
    assert p == {"DELAY": "2", "TAGS": "t", "UNIQ_KEY": "U1", "REAL_TOPIC": TOPIC, "REAL_QID": "3"}


@pytest.mark.parametrize(("delay", "level"), [("3", 3), ("4", 3), ("1000", 3), ("1", 1)])
def test_a_level_beyond_the_table_is_clamped(env: Env, delay: str, level: int) -> None:
    out = env.service.divert(MessageToStore(TOPIC, b"x", 0, properties=encode_properties(
        {"DELAY": delay})))
    assert out is not None and out.queue_id == level - 1
    assert decode_properties(out.properties)["DELAY"] == str(level)


@pytest.mark.parametrize(("props", "sys_flag"), [
    ({"TAGS": "t"}, 0),  # not delayed
    ({"DELAY": "0"}, 0),
    ({"DELAY": "-2"}, 0),
    ({"DELAY": "soon"}, 0),
    ({"DELAY": "2"}, 0x4),  # a prepared transactional message waits for its commit
    ({"DELAY": "2"}, 0xC),  # rolled back
])
def test_divert_passes(env: Env, props: dict[str, str], sys_flag: int) -> None:
    m = MessageToStore(TOPIC, b"x", 0, properties=encode_properties(props), sys_flag=sys_flag)
    assert env.service.divert(m) is None


def test_a_committed_transactional_message_is_delayed(env: Env) -> None:
    m = MessageToStore(TOPIC, b"x", 0, properties=encode_properties({"DELAY": "1"}), sys_flag=0x8)
    assert env.service.divert(m) is not None


# -- tag code = deliver time ------------------------------------------------------------------


def test_the_unit_carries_the_deliver_time(env: Env) -> None:
    for level in (1, 2, 3):
        env.send({"DELAY": str(level), "TAGS": "t"})
    for level in (1, 2, 3):
        [(phys, _, code)] = env.units(level)
        rec = env.store.look_message(phys)
        assert rec is not None
        assert code == rec.store_timestamp + level * 1000


def test_recovery_dispatch_rebuilds_the_same_units(env: Env) -> None:
    for i in range(30):
        env.send({"DELAY": str(1 + i % 3), "TAGS": "t"}, body=b"%d" % i)
    before = {lv: env.units(lv) for lv in (1, 2, 3)}
    env.store.shutdown()
    shutil.rmtree(env.root / "consumequeue")  # rebuilt by parsing the CommitLog
    env.store = MessageStore(config(env.root)).start()
    wait_dispatched(env.store)
    assert {lv: env.units(lv) for lv in (1, 2, 3)} == before


# -- delivery ---------------------------------------------------------------------------------


def test_delivered_when_due_and_not_before(env: Env) -> None:
    env.send({"DELAY": "2", "TAGS": "t", "UNIQ_KEY": "U1", "KEYS": "k"}, body=b"payload")
    [(_, _, due)] = env.units(2)
    env.clock.t = due - 1
    assert env.run() == 0 and env.delivered() == []
    env.clock.t = due
    assert env.run() == 1
    [m] = env.delivered()
    assert (m.topic, m.queue_id, m.body, m.born_timestamp, m.reconsume_times) == (
        TOPIC, 1, b"payload", 123, 2)
    p = props_of(m)
    assert "DELAY" not in p
    assert p["UNIQ_KEY"] == "U1" and p["KEYS"] == "k" and p["REAL_TOPIC"] == TOPIC
    cq = env.store.find_queue(TOPIC, 1)
    assert cq is not None and cq.get_units(0, 1)[0][2] == tags_code("t")  # the tag hash again
    assert env.service.offsets == {2: 1}
    assert env.run() == 0  # delivered once


def test_levels_are_independent(env: Env) -> None:
    env.send({"DELAY": "3"}, body=b"slow")
    env.send({"DELAY": "1"}, body=b"fast")
    [(_, _, due1)] = env.units(1)
    env.clock.t = due1
    env.run()
    assert [m.body for m in env.delivered()] == [b"fast"]
    env.clock.t = due1 + 2000
    env.run()
    assert [m.body for m in env.delivered()] == [b"fast", b"slow"]


def test_a_level_is_read_in_bounded_batches(env: Env) -> None:
    n = DELIVER_BATCH + 30
    env.store.put_messages_sync([
        env.service.divert(MessageToStore(TOPIC, b"%d" % i, 1, properties=encode_properties(
            {"DELAY": "1"}))) or MessageToStore(TOPIC, b"", 1) for i in range(n)])
    wait_dispatched(env.store)
    env.clock.t = max(u[2] for u in env.units(1))
    first, due = env.service.deliver_round()
    assert first == 20 and due == env.clock.t  # a segment's end (20 units here): more at once
    assert env.run() == n - 20
    assert env.service.offsets[1] == n
    assert [m.body for m in env.delivered()] == [b"%d" % i for i in range(n)]


def test_a_deliver_time_beyond_the_delay_is_corrected_to_now(env: Env) -> None:
    """The clock went back (or the table shrank): Java's correctDeliverTimestamp delivers at
    once instead of holding the message for the jump."""
    env.send({"DELAY": "1"})
    [(_, _, due)] = env.units(1)
    env.clock.t = due - 3600_000
    assert env.run() == 1


def test_an_unreadable_unit_is_skipped(env: Env) -> None:
    env.send({"DELAY": "1"}, body=b"a")
    env.send({"TAGS": "x"}, topic=SCHEDULE_TOPIC, queue_id=0)  # no REAL_TOPIC: dropped, logged
    env.send({"DELAY": "1"}, body=b"b")
    env.clock.t = max(u[2] for u in env.units(1)) + 1000
    env.run()
    assert [m.body for m in env.delivered()] == [b"a", b"b"]
    assert env.service.dropped == 1 and env.service.offsets[1] == 3


# -- progress ---------------------------------------------------------------------------------


def test_offsets_are_persisted_in_rocketmqs_shape(env: Env) -> None:
    env.send({"DELAY": "1"})
    env.send({"DELAY": "3"})
    env.clock.t = env.units(1)[0][2]
    env.run()
    env.service.persist()
    saved = json.loads((env.root / "config" / "delayOffset.json").read_text())
    assert saved == {"offsetTable": {"1": 1, "3": 0}}
    assert json.loads(env.service.encode()) == saved


def test_a_clean_restart_repeats_nothing(env: Env) -> None:
    for i in range(6):
        env.send({"DELAY": str(1 + i % 3)}, body=b"%d" % i)
    env.clock.t = env.units(2)[-1][2]
    env.run()
    assert len(env.delivered()) == 4
    env.restart()
    env.clock.t = env.units(3)[-1][2]
    env.run()
    assert sorted(m.body for m in env.delivered()) == [b"%d" % i for i in range(6)]


def test_a_crash_repeats_but_never_loses(env: Env) -> None:
    for i in range(6):
        env.send({"DELAY": str(1 + i % 3)}, body=b"%d" % i)
    env.clock.t = env.units(2)[-1][2]
    env.service.persist()  # the last periodic write: before any delivery
    env.run()
    env.restart(crash=True)
    env.clock.t = env.units(3)[-1][2]
    env.run()
    bodies = [m.body for m in env.delivered()]
    assert set(bodies) == {b"%d" % i for i in range(6)}
    assert len(bodies) <= 6 + 4  # at most what was delivered since the last write, again


def test_a_damaged_offset_file_stops_the_start(env: Env) -> None:
    path = env.root / "config" / "delayOffset.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('{"offsetTable": [1, 2]}')
    with pytest.raises(ConfigError, match="offsetTable"):
        env.service.load()


def test_an_offset_outside_the_queue_is_moved_inside(env: Env) -> None:
    env.send({"DELAY": "1"})
    env.service.offsets[1] = 50  # e.g. a delayOffset.json from another store
    env.clock.t = env.units(1)[0][2]
    env.run()
    assert env.service.offsets[1] == 1 and env.delivered() == []
