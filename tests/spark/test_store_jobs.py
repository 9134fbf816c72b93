"""Spark over a live broker's store directory: the ``rocketmq-store`` scan against what was sent
and what the broker counts, Parquet export, stats, and verify on a good and a damaged copy."""

from __future__ import annotations

import datetime as dt
import json
import shutil
import time
import zlib
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from rocketlite.cli.main import app
from rocketlite.formats.consume_queue_unit import CQ_UNIT, CQ_UNIT_SIZE
from rocketlite.formats.index_layout import INDEX_ENTRY, entry_position
from rocketlite.spark import jobs
from rocketlite.store import store_reader

TOPIC_A, TOPIC_B = "SparkStoreA", "SparkStoreB"
QUEUES_A = 4
HASH_SLOTS = 4096  # conftest's maxHashSlotNum


@dataclass(frozen=True)
class Sent:
    root: Path
    end: int  # the CommitLog end when the checkpoint covered every send
    msgs: dict[str, dict[str, Any]]  # msg_id -> what was sent and where it landed
    per_queue: dict[tuple[str, int], int]  # the broker's own count: ConsumeQueue max - min


def _bodies(n: int, seed: int) -> list[bytes]:
    out = []
    for i in range(n):
        if i % 400 == 7:  # over the producer's 4 KiB threshold: stored zlib-compressed
            out.append(b"compressible %d " % i * 600)
        else:
            out.append(zlib.crc32(b"%d-%d" % (seed, i)).to_bytes(4, "big") * (50 + i % 300))
    return out


@pytest.fixture(scope="module")
def sent(broker: Any) -> Sent:
    broker.create_topic(TOPIC_A, QUEUES_A)
    broker.create_topic(TOPIC_B, 2)
    msgs: dict[str, dict[str, Any]] = {}
    plan = [(TOPIC_A, "TagA", 1200, 1), (TOPIC_A, "TagB", 600, 2), (TOPIC_B, None, 300, 3)]
    for topic, tags, n, seed in plan:
        bodies = _bodies(n, seed)
        keys = [f"order-{seed}-{i % 250}" for i in range(n)]  # 250 distinct keys per batch
        for body, key, r in zip(bodies, keys, broker.send(topic, bodies, tags=tags, keys=keys), strict=True):
            msgs[r.msg_id] = {"topic": topic, "queue_id": r.queue.queueId, "queue_offset": r.queue_offset,
                              "body": body, "tags": tags, "keys": [key]}
    store = broker.broker.store
    end = broker.call(lambda: store.commitlog.max_offset)
    root = broker.store_root
    deadline = time.monotonic() + 10
    while (cp := store_reader.read_checkpoint(root)) is None or cp.confirm_phy_offset < end:
        assert time.monotonic() < deadline, f"checkpoint never reached {end}: {cp}"
        time.sleep(0.02)
    assert (root / "abort").exists()  # a running broker: the checkpoint bounds the scan
    assert len(store_reader.commitlog_segments(root)) >= 2  # 1 MiB segments: the scan spans several
    per_queue = broker.call(lambda: {k: cq.max_offset - cq.min_offset for k, cq in store.queues.items()})
    return Sent(root, end, msgs, per_queue)


COLS = ["topic", "queue_id", "queue_offset", "commitlog_offset", "msg_id", "uniq_key", "keys", "tags",
        "body", "broker_name", "reconsume_times"]


def _rows(df: Any, *extra: str) -> list[dict[str, Any]]:
    return sorted((r.asDict() for r in df.select(*COLS, *extra).collect()),
                  key=lambda r: r["commitlog_offset"])


@pytest.fixture(scope="module")
def scanned(spark: Any, sent: Sent) -> list[dict[str, Any]]:
    """The store scanned with the defaults (and the broker name set), up to the sends' end."""
    df = spark.read.format("rocketmq-store").option("brokerName", "broker-a").load(str(sent.root))
    return _rows(df, "store_timestamp")


def test_store_scan_counts_what_the_broker_counts_and_holds_what_was_sent(
        spark: Any, sent: Sent, scanned: list[dict[str, Any]]) -> None:
    # like with like: the scan skips internal topics, the broker's queues of user topics
    broker_counts = {k: n for k, n in sent.per_queue.items() if n}
    assert Counter((r["topic"], r["queue_id"]) for r in scanned) == broker_counts
    assert len(scanned) == len(sent.msgs) == 2100
    assert {r["topic"] for r in scanned} == {TOPIC_A, TOPIC_B}
    assert scanned[-1]["commitlog_offset"] < sent.end
    for r in scanned:
        m = sent.msgs[r["msg_id"]]
        where = (r["topic"], r["queue_id"], r["queue_offset"])
        assert where == (m["topic"], m["queue_id"], m["queue_offset"])
        assert (bytes(r["body"]), r["tags"], r["keys"]) == (m["body"], m["tags"], m["keys"])
        assert r["uniq_key"] == r["msg_id"] and r["broker_name"] == "broker-a"
    # more partitions per segment: the same rows
    split = spark.read.format("rocketmq-store").option("brokerName", "broker-a") \
        .option("partitionsPerSegment", 5).option("endOffset", sent.end).load(str(sent.root))
    assert split.rdd.getNumPartitions() >= 10
    assert _rows(split, "store_timestamp") == scanned


def test_export_writes_parquet_by_topic_and_date_and_reads_back_equal(
        spark: Any, sent: Sent, scanned: list[dict[str, Any]], tmp_path: Path) -> None:
    out = tmp_path / "parquet"
    result = jobs.export(spark, sent.root, out, end_offset=sent.end, broker_name="broker-a")
    assert result.rows_by_topic == {TOPIC_A: 1800, TOPIC_B: 300}
    dates = [p.name for p in (out / f"topic={TOPIC_A}").iterdir()]
    assert dates and all(d.startswith("date=20") for d in dates)
    back = _rows(spark.read.parquet(str(out)), "store_timestamp", "date")
    for r in back:  # the date partition is the store time's UTC date
        assert r.pop("date") == r["store_timestamp"].astimezone(dt.UTC).date()
    assert back == scanned


def test_export_of_a_topic_range_through_the_broker(spark: Any, broker: Any, scanned: list[dict[str, Any]],
                                                    tmp_path: Path) -> None:
    out = tmp_path / "topic"
    result = jobs.export_topic(spark, broker.ns_addr, [TOPIC_B], out)
    assert result.rows_by_topic == {TOPIC_B: 300}
    assert [p.name.split("=")[0] for p in out.iterdir() if not p.name.startswith(("_", "."))] == ["topic"]
    back = _rows(spark.read.parquet(str(out)), "store_timestamp")
    assert back == [r for r in scanned if r["topic"] == TOPIC_B]


def test_stats_match_what_was_sent(spark: Any, sent: Sent) -> None:
    report = jobs.stats(spark, sent.root, end_offset=sent.end)
    by_topic = {t.topic: t for t in report.topics}
    assert set(by_topic) == {TOPIC_A, TOPIC_B}
    for topic, queues in ((TOPIC_A, QUEUES_A), (TOPIC_B, 2)):
        mine = [m for m in sent.msgs.values() if m["topic"] == topic]
        t = by_topic[topic]
        assert (t.messages, t.queues, t.keyed_messages) == (len(mine), queues, len(mine))
        assert t.body_bytes == sum(len(m["body"]) for m in mine)
        assert t.distinct_keys == len({k for m in mine for k in m["keys"]})
        assert t.first_store is not None and t.last_store is not None and t.first_store <= t.last_store
    assert by_topic[TOPIC_A].distinct_keys == 500
    hourly: Counter[tuple[str, int]] = Counter()
    for h in report.hourly:
        hourly[h.topic, h.queue_id] += h.messages
        assert h.hour.minute == 0 and h.hour.tzinfo is not None
    assert hourly == Counter((m["topic"], m["queue_id"]) for m in sent.msgs.values())
    assert report.as_json()["topics"][0]["topic"] == TOPIC_A


def test_nothing_planned_reads_no_rows_and_verify_reports_nothing(spark: Any, sent: Sent,
                                                                  tmp_path: Path) -> None:
    # partitions() == []: pyspark reads one InputPartition(None), which must give no rows
    empty = tmp_path / "empty"
    (empty / "commitlog").mkdir(parents=True)
    for fmt in ("rocketmq-store", "rocketmq-store-dispatch", "rocketmq-store-cq", "rocketmq-store-index"):
        assert spark.read.format(fmt).load(str(empty)).count() == 0, fmt
    report = jobs.verify(spark, empty)
    assert report.ok and (report.records, report.units) == (0, 0) and report.bound.end == 0
    past = spark.read.format("rocketmq-store").option("startOffset", 1 << 40).load(str(sent.root))
    assert past.count() == 0
    assert spark.read.format("rocketmq-store").option("endOffset", 0).load(str(sent.root)).count() == 0


def _damage(root: Path) -> tuple[tuple[int, int], int, int]:
    """Corrupt a copy: one unit's size, one unit zeroed, one index entry's hash. Returns the
    queue offsets of the two units and the CommitLog offset of the damaged entry."""
    seg = sorted((root / "consumequeue" / TOPIC_A / "1").iterdir())[0]
    data = bytearray(seg.read_bytes())
    off, size, tag = CQ_UNIT.unpack_from(data, 5 * CQ_UNIT_SIZE)
    CQ_UNIT.pack_into(data, 5 * CQ_UNIT_SIZE, off, size + 1, tag)
    data[9 * CQ_UNIT_SIZE:10 * CQ_UNIT_SIZE] = bytes(CQ_UNIT_SIZE)
    seg.write_bytes(bytes(data))
    (index,) = store_reader.index_files(root)
    data = bytearray(index.read_bytes())
    at = entry_position(100, HASH_SLOTS)
    h, phy, diff, prev = INDEX_ENTRY.unpack_from(data, at)
    INDEX_ENTRY.pack_into(data, at, h ^ 0x5A5A, phy, diff, prev)
    index.write_bytes(bytes(data))
    return (5, 9), phy, h ^ 0x5A5A


def test_verify_finds_nothing_on_the_live_store_and_each_damage_on_a_copy(spark: Any, sent: Sent,
                                                                           tmp_path: Path) -> None:
    good = jobs.verify(spark, sent.root)
    assert good.ok, good.mismatches
    assert good.records >= 2100 and good.units == good.records and good.index_entries == 2 * 2100
    assert good.bound.end >= sent.end and "confirmPhyOffset" in good.bound.rule

    copy = tmp_path / "store"
    shutil.copytree(sent.root, copy, ignore=shutil.ignore_patterns("lock"))
    (wrong_qoff, zeroed_qoff), entry_phy, bad_hash = _damage(copy)
    r = CliRunner().invoke(app, ["spark", "verify", str(copy), "--json", "--limit", "20"])
    assert r.exit_code == 1, r.output
    report = json.loads(r.output.strip().splitlines()[-1])
    assert report["counts"] == {"missing_unit": 1, "wrong_unit": 1, "missing_index_entry": 1,
                                "dangling_index_entry": 1}
    found = {m["kind"]: m for m in report["mismatches"]}
    wrong, missing = found["wrong_unit"], found["missing_unit"]
    assert (wrong["topic"], wrong["queue_id"], wrong["queue_offset"]) == (TOPIC_A, 1, wrong_qoff)
    assert (missing["topic"], missing["queue_id"], missing["queue_offset"]) == (TOPIC_A, 1, zeroed_qoff)
    assert found["missing_index_entry"]["commitlog_offset"] == entry_phy
    assert found["dangling_index_entry"]["commitlog_offset"] == entry_phy
    assert f"hash {bad_hash}" in found["dangling_index_entry"]["detail"]
