"""The store scan without Spark: partition planning over segments, the scan bound rules, walking
byte ranges, decoding to Arrow, the verify rows and the shared dispatch rules."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import pyarrow as pa
import pytest

from rocketlite.client.message import iter_messages
from rocketlite.common.errors import CorruptRecordError
from rocketlite.formats import message_record as rec
from rocketlite.formats.checkpoint_layout import CHECKPOINT, CHECKPOINT_FILE_SIZE
from rocketlite.formats.delay import DEFAULT_DELAY_LEVELS, SCHEDULE_TOPIC, parse_delay_levels
from rocketlite.formats.javahash import index_key_hash, tags_code
from rocketlite.formats.properties import encode_properties
from rocketlite.spark.rows import to_record_batch
from rocketlite.spark.store_check_scan import dispatch_range
from rocketlite.spark.store_scan import (
    INTERNAL_TOPICS,
    StoreScanOptions,
    decode_range,
    is_internal_topic,
    iter_range,
    plan,
)
from rocketlite.store import dispatch_check, store_reader
from rocketlite.store.index_file import IndexFile
from rocketlite.store.store_reader import ByteRange, Segment, plan_ranges

SEG = 4096
V4 = b"\x7f\x00\x00\x01"
V6 = bytes(15) + b"\x01"
LEVELS = parse_delay_levels(DEFAULT_DELAY_LEVELS)


def record(at: int, i: int, *, topic: str = "TopicA", body: bytes | None = None, ts: int = 1000,
           props: dict[str, str] | None = None, sys_flag: int = 0) -> bytes:
    """Record ``i`` of a test log, stored at CommitLog offset ``at``."""
    host = V6 if sys_flag & rec.SYSFLAG_BORNHOST_V6 else V4
    store_host = V6 if sys_flag & rec.SYSFLAG_STOREHOST_V6 else V4
    return rec.encode_record(
        topic=topic.encode(), body=b"body-%d" % i * (i % 5 + 1) if body is None else body,
        properties=encode_properties(props if props is not None else {"TAGS": f"t{i % 3}",
                                                                       "KEYS": f"k{i} shared"}).encode(),
        queue_id=i % 2, flag=i, queue_offset=i // 2, commit_log_offset=at, sys_flag=sys_flag,
        born_timestamp=ts - 5, born_host=host, born_port=4000 + i, store_timestamp=ts,
        store_host=store_host, store_port=10911, reconsume_times=i % 4)


def write_log(root: Path, records: list[list[bytes]], seg_size: int = SEG, *, blank_full: bool = True,
              extra_empty: int = 0) -> list[int]:
    """Segments of ``seg_size`` bytes holding ``records`` (one list per segment), each full one
    closed by a BLANK; returns the start offset of every record."""
    (root / "commitlog").mkdir(parents=True, exist_ok=True)
    starts = []
    for n, recs in enumerate(records):
        data = bytearray()
        for r in recs:
            starts.append(n * seg_size + len(data))
            data += r
        if blank_full and n < len(records) - 1:
            data += rec.encode_blank(seg_size - len(data))
        (root / "commitlog" / f"{n * seg_size:020d}").write_bytes(bytes(data).ljust(seg_size, b"\0"))
    for n in range(len(records), len(records) + extra_empty):
        (root / "commitlog" / f"{n * seg_size:020d}").write_bytes(bytes(seg_size))
    return starts


def build(root: Path, counts: list[int], **kw: object) -> tuple[list[int], list[bytes]]:
    """A log of ``counts[n]`` generated records in segment n; (start offsets, records)."""
    segs: list[list[bytes]] = []
    flat: list[bytes] = []
    i = 0
    for n, count in enumerate(counts):
        recs, pos = [], 0
        for _ in range(count):
            r = record(n * SEG + pos, i, ts=1000 + i)
            recs.append(r)
            pos += len(r)
            i += 1
        assert pos + 8 <= SEG
        segs.append(recs)
        flat.extend(recs)
    return write_log(root, segs, **kw), flat  # type: ignore[arg-type]


def checkpoint(root: Path, physic_ts: int = 0, confirm: int = 0) -> None:
    (root / "checkpoint").write_bytes(CHECKPOINT.pack(physic_ts, 0, 0, 0, confirm)
                                      .ljust(CHECKPOINT_FILE_SIZE, b"\0"))


def opts(root: Path, **kw: str) -> StoreScanOptions:
    return StoreScanOptions.parse({"path": str(root), **{k.lower(): v for k, v in kw.items()}})


def scan(root: Path, **kw: str) -> pa.Table:
    o = opts(root, **kw)
    _, ranges = plan(o)
    return pa.Table.from_batches([b for r in ranges for b in decode_range(r, o)],
                                 schema=to_record_batch([]).schema)


# -- planning ----------------------------------------------------------------------------------


def test_ranges_tile_each_segment_below_the_bound() -> None:
    segs = [Segment(Path(f"/s/{b:020d}"), b, 1000) for b in (0, 1000, 2000)]
    ranges = plan_ranges(segs, 2500, per_segment=3)
    assert [(r.base, r.start, r.stop, r.limit) for r in ranges] == [
        (0, 0, 334, 1000), (0, 334, 668, 1000), (0, 668, 1000, 1000),
        (1000, 0, 334, 1000), (1000, 334, 668, 1000), (1000, 668, 1000, 1000),
        (2000, 0, 167, 500), (2000, 167, 334, 500), (2000, 334, 500, 500)]
    assert [r.bound_inside for r in ranges[-4:]] == [False, True, True, True]
    # startOffset drops whole segments below it and starts mid-segment; tiny tails get fewer ranges
    assert [(r.base, r.start, r.stop) for r in plan_ranges(segs, 2002, per_segment=4, start_offset=1500)] \
        == [(1000, 500, 625), (1000, 625, 750), (1000, 750, 875), (1000, 875, 1000),
            (2000, 0, 1), (2000, 1, 2)]
    assert plan_ranges(segs, 0) == []
    with pytest.raises(ValueError, match="at least 1"):
        plan_ranges(segs, 10, per_segment=0)


def test_walking_heads_finds_record_starts_and_stops_at_blank_or_garbage(tmp_path: Path) -> None:
    starts, _ = build(tmp_path, [20, 5])
    data = (tmp_path / "commitlog" / f"{0:020d}").read_bytes()
    first = [s for s in starts if s < SEG]
    for target in (0, 1, first[3], first[3] + 1, first[-1]):
        want = min(s for s in first if s >= target)
        assert store_reader.first_record_at_or_after(data, target, SEG) == want
    end_of_records = first[-1] + len(record(0, 19, ts=1019))
    assert store_reader.first_record_at_or_after(data, SEG, SEG) == end_of_records  # the BLANK
    broken = bytearray(data)
    broken[first[5]:first[5] + 8] = bytes(8)
    assert store_reader.first_record_at_or_after(bytes(broken), first[9], SEG) == first[5]


@pytest.mark.parametrize("per_segment", [1, 2, 3, 7, 50])
def test_every_record_is_read_by_exactly_one_range(tmp_path: Path, per_segment: int) -> None:
    starts, _ = build(tmp_path, [20, 20, 7])
    _, ranges = plan(opts(tmp_path, partitionsPerSegment=str(per_segment)))
    seen = []
    for r in ranges:
        with store_reader.mapped(Path(r.path)) as mm:
            seen.extend(r.base + pos for pos, d, err in iter_range(mm, r) if err is None and d is not None)
    assert seen == starts


# -- the bound ---------------------------------------------------------------------------------


def test_a_clean_store_is_read_to_its_written_end(tmp_path: Path) -> None:
    starts, recs = build(tmp_path, [20, 6], extra_empty=1)  # a pre-allocated, still empty segment
    bound = store_reader.resolve_bound(tmp_path)
    assert bound.end == starts[-1] + len(recs[-1]) and "clean" in bound.rule
    assert scan(tmp_path).num_rows == 26


def test_a_running_store_stops_at_the_checkpoints_confirmed_offset(tmp_path: Path) -> None:
    starts, _ = build(tmp_path, [20, 6])
    (tmp_path / "abort").touch()
    checkpoint(tmp_path, physic_ts=1_000_000, confirm=starts[23])
    bound = store_reader.resolve_bound(tmp_path)
    assert bound.end == starts[23] and "confirmPhyOffset" in bound.rule
    table = scan(tmp_path)
    assert table.column("commitlog_offset").to_pylist() == starts[:23]
    # valid ignores the checkpoint: everything that verifies
    assert scan(tmp_path, bound="valid").num_rows == 26


def test_without_a_confirmed_offset_the_flushed_timestamp_bounds_the_scan(tmp_path: Path) -> None:
    starts, _ = build(tmp_path, [20, 6])  # record i is stored at 1000 + i
    (tmp_path / "abort").touch()
    checkpoint(tmp_path, physic_ts=1000 + 21)
    assert store_reader.resolve_bound(tmp_path).end == starts[22]
    checkpoint(tmp_path, physic_ts=1000 + 12)  # inside the first segment
    assert store_reader.resolve_bound(tmp_path).end == starts[13]
    checkpoint(tmp_path, physic_ts=10)  # before every record: nothing is known to be flushed
    assert store_reader.resolve_bound(tmp_path).end == 0
    assert scan(tmp_path).num_rows == 0


def test_a_last_segment_starting_with_garbage_is_corruption_not_preallocation(tmp_path: Path) -> None:
    build(tmp_path, [20, 6], extra_empty=1)
    path = tmp_path / "commitlog" / f"{SEG:020d}"
    corrupt(tmp_path, SEG, 0, b"\xde\xad\xbe\xef\x01\x02\x03\x04")  # the last segment with data
    with pytest.raises(CorruptRecordError, match=rf"{path}.*offset {SEG}\)"):
        store_reader.resolve_bound(tmp_path)
    with pytest.raises(CorruptRecordError, match=str(path)):
        store_reader.written_end(store_reader.commitlog_segments(tmp_path))
    # valid stops at the first record that does not verify: the garbage segment's base
    bound = store_reader.resolve_bound(tmp_path, "valid")
    assert bound.end == SEG and "more bytes" not in bound.rule
    assert scan(tmp_path, bound="valid").num_rows == 20
    # a segment whose first 8 bytes are zero is still pre-allocated: skipped
    corrupt(tmp_path, SEG, 0, bytes(8))
    assert store_reader.resolve_bound(tmp_path).end == SEG


def test_an_abort_file_with_a_zeroed_or_truncated_checkpoint_is_an_error(tmp_path: Path) -> None:
    build(tmp_path, [20, 6])
    (tmp_path / "abort").touch()
    checkpoint(tmp_path)  # all zero
    with pytest.raises(ValueError, match=r"zeroed or truncated.*bound=valid"):
        store_reader.resolve_bound(tmp_path)
    with pytest.raises(ValueError, match="zeroed or truncated"):
        plan(opts(tmp_path))
    (tmp_path / "checkpoint").write_bytes(b"\x00\x00\x01")  # shorter than one field
    with pytest.raises(ValueError, match="zeroed or truncated"):
        store_reader.resolve_bound(tmp_path)
    assert scan(tmp_path, bound="valid").num_rows == 26
    # no records at all (a fresh running broker): an empty scan, not an error
    fresh = tmp_path / "fresh"
    write_log(fresh, [[]])
    (fresh / "abort").touch()
    checkpoint(fresh)
    assert store_reader.resolve_bound(fresh).end == 0
    assert scan(fresh).num_rows == 0


def test_readers_give_no_rows_for_the_partition_pyspark_adds_when_none_are_planned(
        tmp_path: Path) -> None:
    from pyspark.sql.datasource import InputPartition
    from pyspark.sql.types import StringType, StructField, StructType

    from rocketlite.spark import store_source as src
    from rocketlite.spark.rows import COLUMNS

    (tmp_path / "commitlog").mkdir()
    options = {"path": str(tmp_path)}
    schema = StructType([StructField(c, StringType()) for c in COLUMNS])
    readers = [src.StoreBatchReader(options, schema), src._DispatchReader(options),
               src._UnitReader(options), src._IndexReader(options)]
    for reader in readers:
        assert list(reader.partitions()) == []
        assert list(reader.read(InputPartition(None))) == []
    # a start offset past the bound and endOffset=0 plan nothing either
    build(tmp_path / "s", [5])
    assert plan(opts(tmp_path / "s", startOffset=str(SEG)))[1] == []
    assert plan(opts(tmp_path / "s", endOffset="0"))[1] == []


def test_a_torn_tail_ends_the_valid_scan_without_error(tmp_path: Path) -> None:
    starts, recs = build(tmp_path, [10])
    path = tmp_path / "commitlog" / f"{0:020d}"
    data = bytearray(path.read_bytes())
    end = starts[-1] + len(recs[-1])
    torn = record(end, 10)[:50]  # a record whose write stopped half way
    data[end:end + len(torn)] = torn
    path.write_bytes(bytes(data))
    assert store_reader.resolve_bound(tmp_path, "valid").end == end
    assert scan(tmp_path, bound="valid").num_rows == 10
    # a cleanly stopped store has no torn tail: the default bound reports it instead
    with pytest.raises(CorruptRecordError, match=f"offset {end}"):
        scan(tmp_path)


def test_a_record_with_a_nul_in_its_properties_does_not_stop_the_valid_scan(tmp_path: Path) -> None:
    """What a whole record contains is no reason to stop (recovery keeps it too)."""
    recs = [record(0, 0)]
    recs.append(record(len(recs[0]), 1, props={"KEYS": "k\x00ey", "TAGS": "t\x00"}))
    recs.append(record(len(recs[0]) + len(recs[1]), 2))
    write_log(tmp_path, [recs])
    end = sum(map(len, recs))
    assert store_reader.resolve_bound(tmp_path, "valid").end == end
    table = scan(tmp_path, bound="valid")
    assert table.num_rows == 3 and table.column("keys")[1].as_py() == ["k\x00ey"]


def test_the_valid_bound_says_how_much_follows_the_record_that_stops_it(tmp_path: Path) -> None:
    starts, recs = build(tmp_path, [10])
    corrupt(tmp_path, starts[6], rec.FIXED_SIZE_V4 - 3, b"\xff")
    bound = store_reader.resolve_bound(tmp_path, "valid")
    assert bound.end == starts[6]
    assert f"{starts[-1] + len(recs[-1]) - starts[6]} more bytes" in bound.rule


def test_end_offset_between_records_leaves_out_the_record_across_it(tmp_path: Path) -> None:
    starts, _ = build(tmp_path, [10])
    table = scan(tmp_path, endOffset=str(starts[4] + 3), startOffset=str(starts[1] + 1))
    assert table.column("commitlog_offset").to_pylist() == starts[2:4]


# -- corruption --------------------------------------------------------------------------------


def corrupt(root: Path, offset: int, at: int, value: bytes) -> None:
    path = root / "commitlog" / f"{offset // SEG * SEG:020d}"
    data = bytearray(path.read_bytes())
    pos = offset % SEG + at
    data[pos:pos + len(value)] = value
    path.write_bytes(bytes(data))


def test_a_bad_crc_fails_with_file_and_offset_or_is_skipped(tmp_path: Path) -> None:
    starts, _ = build(tmp_path, [20, 6])
    corrupt(tmp_path, starts[7], rec.FIXED_SIZE_V4 - 3, b"\xff")  # a body byte
    with pytest.raises(CorruptRecordError, match=rf"{SEG * 0:020d} position {starts[7]} "
                                                 rf"\(offset {starts[7]}\): body CRC"):
        scan(tmp_path, partitionsPerSegment="3")
    skipped = scan(tmp_path, partitionsPerSegment="3", onCorrupt="skip")
    assert skipped.column("commitlog_offset").to_pylist() == starts[:7] + starts[8:]


def test_zeros_below_the_bound_are_corruption_not_the_end(tmp_path: Path) -> None:
    starts, _ = build(tmp_path, [20, 6])
    corrupt(tmp_path, starts[9], 0, bytes(8))  # a broken head: nothing after it can be found
    with pytest.raises(CorruptRecordError, match=f"offset {starts[9]}"):
        scan(tmp_path, partitionsPerSegment="2")
    kept = scan(tmp_path, partitionsPerSegment="2", onCorrupt="skip").column("commitlog_offset")
    assert kept.to_pylist() == starts[:9] + starts[20:]  # the rest of that segment is lost


# -- decoding ----------------------------------------------------------------------------------


def test_columns_equal_the_client_decoder_for_every_record_shape(tmp_path: Path) -> None:
    shapes: list[bytes] = []
    pos = 0

    def add(i: int, **kw: object) -> None:
        nonlocal pos
        r = record(pos, i, **kw)  # type: ignore[arg-type]
        shapes.append(r)
        pos += len(r)

    add(0)
    add(1, sys_flag=rec.SYSFLAG_BORNHOST_V6 | rec.SYSFLAG_STOREHOST_V6)  # IPv6: the full parser
    add(2, topic="T" * 200)  # a V2 record (2-byte topic length)
    add(3, body=zlib.compress(b"z" * 5000), sys_flag=rec.SYSFLAG_COMPRESSED)
    add(4, props={"UNIQ_KEY": "AC11000100002A9F0000000000000004", "KEYS": "a  b", "u": "v"})
    add(5, props={})
    add(6, props={"KEYS": "odd\x00key", "u": "a\x00b"})  # odd content (another broker wrote it)
    write_log(tmp_path, [shapes])
    got = scan(tmp_path, brokerName="broker-x", includeSystemTopics="true", batchRows="4")
    want = to_record_batch(list(iter_messages(b"".join(shapes))), "broker-x")
    assert got.equals(pa.Table.from_batches([want]))
    assert got.column("body")[3].as_py() == b"z" * 5000
    assert got.column("msg_id")[4].as_py() == "AC11000100002A9F0000000000000004"


def test_topic_filters_and_internal_topics(tmp_path: Path) -> None:
    topics = ["TopicA", "RMQ_SYS_TRANS_HALF_TOPIC", SCHEDULE_TOPIC, "rmq_sys_wheel_timer",
              "%RETRY%g1", "%DLQ%g1", "TopicB"]
    recs, pos = [], 0
    for i, t in enumerate(topics):
        recs.append(record(pos, i, topic=t))
        pos += len(recs[-1])
    write_log(tmp_path, [recs])

    def names(**kw: str) -> list[str]:
        return scan(tmp_path, **kw).column("topic").to_pylist()

    assert names() == ["TopicA", "%RETRY%g1", "%DLQ%g1", "TopicB"]
    assert names(includeSystemTopics="true") == topics
    assert names(topics="TopicB, TopicA") == ["TopicA", "TopicB"]
    assert names(topics=SCHEDULE_TOPIC) == [SCHEDULE_TOPIC]  # asked for by name: given
    assert scan(tmp_path).column("broker_name")[0].as_py() == tmp_path.name


def test_internal_topics_are_the_brokers_system_topics() -> None:
    from rocketlite.broker import topics

    brokers = topics.NOT_ALLOWED_SEND_TOPICS | {topics.AUTO_CREATE_TOPIC, topics.OFFSET_MOVED_EVENT}
    assert all(is_internal_topic(t) for t in brokers | INTERNAL_TOPICS)
    # spelled out: the broker's names that the RMQ_SYS_ prefix does not already cover
    assert {t for t in brokers if not t.startswith("RMQ_SYS_")} == \
        {t for t in INTERNAL_TOPICS if not t.startswith("RMQ_SYS_")}
    assert is_internal_topic(topics.SYSTEM_TOPIC_PREFIX + "wheel_timer")
    assert not is_internal_topic(topics.RETRY_GROUP_TOPIC_PREFIX + "g")
    assert not is_internal_topic(topics.DLQ_GROUP_TOPIC_PREFIX + "g")


def test_options_are_checked() -> None:
    with pytest.raises(ValueError, match="unknown rocketmq-store option"):
        StoreScanOptions.parse({"path": "/x", "topic": "A"})
    with pytest.raises(ValueError, match="bound"):
        StoreScanOptions.parse({"path": "/x", "bound": "maybe"})
    with pytest.raises(ValueError, match="partitionsPerSegment"):
        StoreScanOptions.parse({"path": "/x", "partitionspersegment": "0"})
    with pytest.raises(ValueError, match="load"):
        StoreScanOptions.parse({})


# -- verify rows and the dispatch rules --------------------------------------------------------


def test_dispatch_rules() -> None:
    props = {"TAGS": "TagA", "KEYS": " k1 k2  k1 ", "UNIQ_KEY": "U1"}
    assert dispatch_check.expected_unit_tags_code("T", 0, 0, props, 5, LEVELS) == tags_code("TagA")
    assert dispatch_check.index_keys("T", 0, props) == ["T#U1", "T#k1", "T#k2"]
    prepared, rollback, commit = (rec.SYSFLAG_TRANSACTION_PREPARED, rec.SYSFLAG_TRANSACTION_ROLLBACK,
                                  rec.SYSFLAG_TRANSACTION_COMMIT)
    assert dispatch_check.expected_unit_tags_code("T", 0, prepared, props, 5, LEVELS) is None
    assert dispatch_check.index_keys("T", prepared, props) == ["T#U1", "T#k1", "T#k2"]
    assert dispatch_check.expected_unit_tags_code("T", 0, rollback, props, 5, LEVELS) is None
    assert dispatch_check.index_keys("T", rollback, props) == []
    assert dispatch_check.expected_unit_tags_code("T", 0, commit, {}, 5, LEVELS) == 0
    # a record the store did not write whose topic or queue id cannot name a queue directory:
    # no unit, but indexed
    for topic, qid in (("a/b", 0), ("..", 0), ("T\x00", 0), ("T\n", 0), ("T", -1), ("T", 65536)):
        assert dispatch_check.expected_unit_tags_code(topic, qid, 0, props, 5, LEVELS) is None
    assert dispatch_check.index_keys("a/b", 0, props) == ["a/b#U1", "a/b#k1", "a/b#k2"]
    # a delayed message waiting in its level's queue: the tag code is its deliver time
    assert dispatch_check.expected_unit_tags_code(SCHEDULE_TOPIC, 0, 0, {"DELAY": "3", "TAGS": "x"}, 1000,
                                                  LEVELS) == 1000 + 10_000
    assert dispatch_check.expected_unit_tags_code(SCHEDULE_TOPIC, 0, 0, {"TAGS": "x"}, 1000, LEVELS) == \
        tags_code("x")


def test_dispatch_rows_carry_units_keys_and_errors(tmp_path: Path) -> None:
    starts, recs = build(tmp_path, [6])
    corrupt(tmp_path, starts[2], rec.FIXED_SIZE_V4 - 3, b"\xff")
    _, (r,) = plan(opts(tmp_path))
    rows = pa.Table.from_batches(list(dispatch_range(r, LEVELS))).to_pylist()
    assert [row["commitlog_offset"] for row in rows] == starts
    assert rows[2]["error"] is not None and "body CRC" in rows[2]["error"] and rows[2]["topic"] is None
    one = rows[1]
    assert (one["topic"], one["queue_id"], one["queue_offset"], one["size"], one["stored_offset"]) == \
        ("TopicA", 1, 0, len(recs[1]), starts[1])
    assert one["tags_code"] == tags_code("t1") and one["error"] is None
    assert one["index_keys"] == ["TopicA#k1", "TopicA#shared"]
    assert one["index_hashes"] == [index_key_hash("TopicA#k1"), index_key_hash("TopicA#shared")]


@pytest.mark.parametrize(("slots", "entries"), [(4096, 20000), (64, 256)])
def test_index_geometry_is_inferred_from_the_file(tmp_path: Path, slots: int, entries: int) -> None:
    f = IndexFile(tmp_path / "idx", slots, entries, create=True)
    for i in range(250):
        f.put(f"T#k{i % 120}", 1000 + 37 * (i // 2), 5000 + i)
    f.close()
    with store_reader.mapped(tmp_path / "idx") as mm:
        head = store_reader.read_index_header(mm)
        assert head is not None and head.index_count == 251
        assert store_reader.index_slot_num(mm, head) == slots
        assert store_reader.index_slot_num(mm, head, slots) == slots
        assert store_reader.index_slot_num(mm, head, slots + 1) is None
        got = list(store_reader.iter_index_entries(mm, slots, 1, head.index_count))
    assert [(h, phy) for _, h, phy, _, _ in got] == \
        [(index_key_hash(f"T#k{i % 120}"), 1000 + 37 * (i // 2)) for i in range(250)]


def test_units_of_a_queue_file(tmp_path: Path) -> None:
    unit = struct.Struct(">qiq")
    data = unit.pack(100, 50, 7) + unit.pack(150, 60, 0) + bytes(20) + unit.pack(-1, 0, 0)
    assert list(store_reader.iter_units(data + b"\x01\x02", 40)) == [(40, 100, 50, 7), (41, 150, 60, 0)]


def test_byte_range_bound_inside() -> None:
    assert ByteRange("p", 0, 0, 10, 10, 20).bound_inside
    assert not ByteRange("p", 0, 0, 20, 20, 20).bound_inside


def test_expected_dispatch_matches_what_the_store_wrote(tmp_path: Path) -> None:
    """The shared rules against the real dispatcher: transactions, delays, keys and UNIQ_KEYs."""
    from rocketlite.cli.store_commands import verify_store
    from rocketlite.store.message import MessageToStore
    from rocketlite.store.message_store import MessageStore
    from storehelp import small_config, wait_dispatched

    def m(topic: str, i: int, sys_flag: int = 0, **props: str) -> MessageToStore:
        return MessageToStore(topic=topic, body=b"b%d" % i, queue_id=i % 2, sys_flag=sys_flag,
                              properties=encode_properties({"UNIQ_KEY": f"U{i:04d}", **props}))

    msgs = [m("TopicA", i, TAGS=f"t{i % 3}", KEYS=f"k{i} k{i % 4}") for i in range(12)]
    msgs += [m("RMQ_SYS_TRANS_HALF_TOPIC", 20, rec.SYSFLAG_TRANSACTION_PREPARED, KEYS="half"),
             m("TopicA", 21, rec.SYSFLAG_TRANSACTION_COMMIT, KEYS="committed"),
             m("TopicA", 22, rec.SYSFLAG_TRANSACTION_ROLLBACK, KEYS="rolled"),
             m(SCHEDULE_TOPIC, 23, DELAY="3", TAGS="later"), m(SCHEDULE_TOPIC, 24, TAGS="nodelay")]
    with MessageStore(small_config(tmp_path)) as store:
        store.put_messages_sync(msgs)
        wait_dispatched(store)
    assert verify_store(tmp_path, hash_slot_num=64) == []
    o = opts(tmp_path)
    _, ranges = plan(o)
    rows = pa.Table.from_batches([b for r in ranges for b in dispatch_range(r, LEVELS)]).to_pylist()
    assert len(rows) == len(msgs) and not any(r["error"] for r in rows)
    want = {(r["topic"], r["queue_id"], r["queue_offset"]): (r["commitlog_offset"], r["size"], r["tags_code"])
            for r in rows if r["tags_code"] is not None}
    have = {(t, q, u[0]): u[1:] for t, q, qdir in store_reader.queue_dirs(tmp_path)
            for u in store_reader.read_units(qdir)}
    assert want == have  # prepared and rolled-back records have no unit, every other one has its own
    keyed = {(h, r["commitlog_offset"]) for r in rows for h in r["index_hashes"]}
    entries = set()
    for f in store_reader.index_files(tmp_path):
        with store_reader.mapped(f) as mm:
            head = store_reader.read_index_header(mm)
            assert head is not None
            entries |= {(h, phy) for _, h, phy, _, _ in
                        store_reader.iter_index_entries(mm, 64, 1, head.index_count)}
    assert keyed == entries  # the prepared half is indexed, the rolled-back record is not
    delayed, plain = (next(r for r in rows if f"{SCHEDULE_TOPIC}#U00{n}" in r["index_keys"])
                      for n in (23, 24))
    assert delayed["tags_code"] == delayed["store_timestamp"] + 10_000  # level 3: 10 s
    assert plain["tags_code"] == tags_code("nodelay")
