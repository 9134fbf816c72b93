"""The command line: store inspect, store verify."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from rocketlite.cli.main import app
from rocketlite.formats.consume_queue_unit import CQ_UNIT
from rocketlite.formats.delay import SCHEDULE_TOPIC
from rocketlite.formats.properties import encode_properties
from rocketlite.store.message import MessageToStore
from rocketlite.store.message_store import MessageStore
from storehelp import msg, small_config, wait_dispatched

pytestmark = pytest.mark.integration
runner = CliRunner()


def make_store(root: Path) -> None:
    with MessageStore(small_config(root)) as s:
        s.put_messages_sync([msg(keys=f"k{i}", queue_id=i % 2, body=b"b%d" % i) for i in range(30)])
        wait_dispatched(s)


def test_verify_passes_on_a_consistent_store(tmp_path: Path) -> None:
    make_store(tmp_path)
    r = runner.invoke(app, ["store", "verify", str(tmp_path), "--hash-slot-num", "64"])
    assert r.exit_code == 0, r.output
    assert "agree" in r.output


def test_verify_finds_a_wrong_consume_queue_unit(tmp_path: Path) -> None:
    make_store(tmp_path)
    seg = sorted((tmp_path / "consumequeue" / "TopicTest" / "0").iterdir())[0]
    data = bytearray(seg.read_bytes())
    off, size, tag = CQ_UNIT.unpack_from(data, 20)
    CQ_UNIT.pack_into(data, 20, off, size + 1, tag)
    seg.write_bytes(bytes(data))
    r = runner.invoke(app, ["store", "verify", str(tmp_path), "--hash-slot-num", "64"])
    assert r.exit_code == 1
    assert "TopicTest-0 offset 1" in r.output


def test_verify_finds_a_missing_index_entry(tmp_path: Path) -> None:
    make_store(tmp_path)
    for f in (tmp_path / "index").iterdir():
        data = bytearray(f.read_bytes())
        data[40 + 64 * 4 + 20 : 40 + 64 * 4 + 24] = b"\xff\xff\xff\x7f"  # entry 1's hash
        f.write_bytes(bytes(data))
    r = runner.invoke(app, ["store", "verify", str(tmp_path), "--hash-slot-num", "64"])
    assert r.exit_code == 1
    assert "not indexed" in r.output


def test_verify_takes_the_stores_delay_levels(tmp_path: Path) -> None:
    """A schedule unit's tag code is its deliver time by the broker's messageDelayLevel: a store
    of a broker with its own table agrees with its CommitLog only by that table."""
    with MessageStore(small_config(tmp_path, messageDelayLevel="1s 2s")) as s:
        s.put_messages_sync([MessageToStore(topic=SCHEDULE_TOPIC, body=b"later", queue_id=1,
                                            properties=encode_properties({"DELAY": "2"}))])
        wait_dispatched(s)
    args = ["store", "verify", str(tmp_path), "--hash-slot-num", "64"]
    r = runner.invoke(app, [*args, "--delay-levels", "1s 2s"])
    assert r.exit_code == 0, r.output
    r = runner.invoke(app, args)  # RocketMQ's table: level 2 is 5 s
    assert r.exit_code == 1
    assert f"{SCHEDULE_TOPIC}-1 offset 0" in r.output
    r = runner.invoke(app, [*args, "--delay-levels", "1x"])
    assert r.exit_code == 2
    assert "--delay-levels" in r.output


def test_inspect_prints_messages_units_and_headers(tmp_path: Path) -> None:
    make_store(tmp_path)
    r = runner.invoke(app, ["store", "inspect", str(tmp_path), "--messages", "3"])
    assert r.exit_code == 0, r.output
    for text in ("CommitLog", "TopicTest", "ConsumeQueue", "IndexFile headers", "checkpoint"):
        assert text in r.output
