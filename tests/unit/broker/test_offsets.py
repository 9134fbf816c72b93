"""ConsumerOffsetManager: commit/query, negative commits, consumerOffset.json in fastjson's form
(bare integer keys) read and written, the .bak fallback, corrupt files."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketlite.broker import config_file
from rocketlite.broker.offsets import ConsumerOffsetManager
from rocketlite.common.errors import ConfigError


def manager(tmp_path: Path) -> ConsumerOffsetManager:
    return ConsumerOffsetManager(tmp_path / "config" / "consumerOffset.json")


def test_commit_and_query(tmp_path: Path) -> None:
    m = manager(tmp_path)
    assert m.query("G", "T", 0) == -1
    m.commit("G", "T", 0, 5)
    m.commit("G", "T", 1, 7)
    m.commit("G", "T", 0, 6)
    m.commit("G2", "T", 0, 1)
    assert (m.query("G", "T", 0), m.query("G", "T", 1), m.query("G", "T", 2)) == (6, 7, -1)
    assert m.query("G2", "T", 0) == 1 and m.query("G", "Other", 0) == -1
    assert m.offsets_of("G", "T") == {0: 6, 1: 7}
    assert m.groups_of("T") == {"G", "G2"} and m.groups_of("Other") == set()
    assert ConsumerOffsetManager.key("T", "G") == "T@G"


def test_a_negative_commit_is_ignored(tmp_path: Path) -> None:
    m = manager(tmp_path)
    m.commit("G", "T", 0, 9)
    m.commit("G", "T", 0, -1)  # ali-ons, for a queue it never consumed
    m.commit("G", "T", 1, -1)
    assert m.query("G", "T", 0) == 9 and m.query("G", "T", 1) == -1
    assert "T@G" in m.table and 1 not in m.table["T@G"]


def test_a_commit_may_move_backwards(tmp_path: Path) -> None:
    m = manager(tmp_path)
    m.commit("G", "T", 0, 100)
    m.commit("G", "T", 0, 3)  # a reset
    assert m.query("G", "T", 0) == 3


def test_remove_topic(tmp_path: Path) -> None:
    m = manager(tmp_path)
    m.commit("G", "T", 0, 1)
    m.commit("G", "TT", 0, 2)
    m.commit("G", "%RETRY%G", 0, 3)
    m.remove_topic("T")
    assert m.query("G", "T", 0) == -1 and m.query("G", "TT", 0) == 2
    assert m.query("G", "%RETRY%G", 0) == 3


def test_writes_fastjsons_bare_integer_keys(tmp_path: Path) -> None:
    m = manager(tmp_path)
    m.commit("G", "T", 0, 5)
    m.persist()
    assert m.path.read_bytes() == b'{"offsetTable":{"T@G":{0:5}}}'


def test_reads_fastjsons_bare_integer_keys(tmp_path: Path) -> None:
    m = manager(tmp_path)
    m.path.parent.mkdir(parents=True)
    m.path.write_bytes(b'{"offsetTable":{"T@G":{0:5}}}')
    m.load()
    assert m.query("G", "T", 0) == 5


JAVA_CONSUMER_OFFSET_JSON = b"""{
\t"dataVersion":{
\t\t"counter":12,
\t\t"stateVersion":0,
\t\t"timestamp":1718000000000
\t},
\t"offsetTable":{
\t\t"%RETRY%please_rename_unique_group_name_4@please_rename_unique_group_name_4":{0:0
\t\t},
\t\t"TopicTest@please_rename_unique_group_name_4":{0:250,1:251,2:249,3:250
\t\t}
\t}
}"""


def test_reads_a_java_written_file_and_rewrites_it(tmp_path: Path) -> None:
    m = manager(tmp_path)
    m.path.parent.mkdir(parents=True)
    m.path.write_bytes(JAVA_CONSUMER_OFFSET_JSON)
    m.load()
    g = "please_rename_unique_group_name_4"
    assert m.offsets_of(g, "TopicTest") == {0: 250, 1: 251, 2: 249, 3: 250}
    assert m.query(g, f"%RETRY%{g}", 0) == 0
    m.commit(g, "TopicTest", 1, 300)
    m.persist()
    again = manager(tmp_path)
    again.load()
    assert again.offsets_of(g, "TopicTest") == {0: 250, 1: 300, 2: 249, 3: 250}
    # the previous version is kept as the backup
    bak = m.path.with_name("consumerOffset.json.bak")
    assert bak.read_bytes() == JAVA_CONSUMER_OFFSET_JSON


def test_quoted_keys_and_string_offsets_are_read_too(tmp_path: Path) -> None:
    m = manager(tmp_path)
    m.path.parent.mkdir(parents=True)
    m.path.write_bytes(b'{"offsetTable":{"T@G":{"0":"5","1":6}}}')
    m.load()
    assert m.offsets_of("G", "T") == {0: 5, 1: 6}


def test_bad_entries_are_skipped(tmp_path: Path) -> None:
    m = manager(tmp_path)
    m.path.parent.mkdir(parents=True)
    m.path.write_bytes(b'{"offsetTable":{"nogroup":{0:1},"T@G":[1,2],"U@G":{0:"x",1:4}}}')
    m.load()
    assert m.table == {"U@G": {1: 4}}


def test_missing_file_is_an_empty_table(tmp_path: Path) -> None:
    m = manager(tmp_path)
    m.load()
    assert m.table == {}
    m.path.parent.mkdir(parents=True)
    m.path.write_bytes(b"{}")
    m.load()
    assert m.table == {}


def test_an_empty_file_is_an_empty_table_as_in_java(tmp_path: Path) -> None:
    m = manager(tmp_path)
    m.path.parent.mkdir(parents=True)
    m.path.write_bytes(b"")
    m.load()
    assert m.table == {}
    # an empty file with a good backup: the backup
    m.path.with_name("consumerOffset.json.bak").write_bytes(b'{"offsetTable":{"T@G":{0:3}}}')
    m.load()
    assert m.query("G", "T", 0) == 3


def test_falls_back_to_the_backup(tmp_path: Path) -> None:
    m = manager(tmp_path)
    m.commit("G", "T", 0, 1)
    m.persist()
    m.commit("G", "T", 0, 2)
    m.persist()  # .bak holds offset 1
    m.path.write_bytes(b'{"offsetTable":{"T@G":{0:')  # torn
    again = manager(tmp_path)
    again.load()
    assert again.query("G", "T", 0) == 1
    # the main file missing altogether: the backup too
    m.path.unlink()
    again = manager(tmp_path)
    again.load()
    assert again.query("G", "T", 0) == 1


@pytest.mark.parametrize("content", [b"not json", b'{"offsetTable":{"T@G":{0:', b"\xff\xfe"])
def test_corrupt_file_without_backup_is_a_config_error(tmp_path: Path, content: bytes) -> None:
    m = manager(tmp_path)
    m.path.parent.mkdir(parents=True)
    m.path.write_bytes(content)
    with pytest.raises(ConfigError, match=r"consumerOffset\.json"):
        m.load()


@pytest.mark.parametrize("content", [b"[1,2]", b'{"offsetTable":[1]}', b"5"])
def test_wrong_shape_is_a_config_error(tmp_path: Path, content: bytes) -> None:
    m = manager(tmp_path)
    m.path.parent.mkdir(parents=True)
    m.path.write_bytes(content)
    with pytest.raises(ConfigError, match="offsetTable"):
        m.load()


def test_periodic_persist_writes_only_when_dirty(tmp_path: Path) -> None:
    m = manager(tmp_path)
    m.persist(force=False)
    assert not m.path.exists()
    m.commit("G", "T", 0, 1)
    m.persist(force=False)
    assert m.path.exists()
    m.path.unlink()
    m.persist(force=False)  # nothing changed since
    assert not m.path.exists()
    m.remove_topic("T")
    m.persist(force=False)
    assert m.path.exists()


def test_a_failed_persist_is_retried_by_the_next_periodic_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    m = manager(tmp_path)
    m.commit("G", "T", 0, 1)
    real_save = config_file.save

    def failing_save(path: Path, data: bytes) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(config_file, "save", failing_save)
    with pytest.raises(OSError):
        m.persist(force=False)
    monkeypatch.setattr(config_file, "save", real_save)
    m.persist(force=False)  # the offsets are still unsaved: written now
    again = manager(tmp_path)
    again.load()
    assert again.query("G", "T", 0) == 1


@given(st.dictionaries(
    st.tuples(st.sampled_from(["T", "%RETRY%G", "Top_ic-1", "a|b"]),
              st.sampled_from(["G", "G2", "CID_x"])),
    st.dictionaries(st.integers(0, 1023), st.integers(0, 2**63 - 1), min_size=1, max_size=5),
    max_size=6,
))
def test_persist_load_round_trip(table: dict[tuple[str, str], dict[int, int]]) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        m = manager(Path(d))
        for (topic, group), queues in table.items():
            for q, off in queues.items():
                m.commit(group, topic, q, off)
        m.persist()
        again = manager(Path(d))
        again.load()
        assert again.table == m.table
