"""What the verify job compares, as Arrow batches, without Spark: for each CommitLog record the
ConsumeQueue unit and index keys dispatch should have written (``dispatch_range``), and what the
ConsumeQueue files (``unit_batches``) and IndexFiles (``index_batches``) actually hold.

The expected side applies ``rocketlite.store.dispatch_check``, the same rules ``rocketlite store
verify`` uses. A record that does not verify becomes a row with ``error`` set rather than an
exception: verify reports every problem it can see instead of stopping at the first.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rocketlite.formats import message_record as rec
from rocketlite.formats.delay import DEFAULT_DELAY_LEVELS, parse_delay_levels
from rocketlite.formats.properties import decode_properties
from rocketlite.spark.store_scan import Decoded, iter_range
from rocketlite.store import dispatch_check, store_reader
from rocketlite.store.store_reader import ByteRange, QueueFile

if TYPE_CHECKING:
    import pyarrow as pa

DISPATCH_DDL = (
    "commitlog_offset BIGINT, stored_offset BIGINT, size INT, topic STRING, queue_id INT, "
    "queue_offset BIGINT, sys_flag INT, store_timestamp BIGINT, tags_code BIGINT, "
    "index_keys ARRAY<STRING>, index_hashes ARRAY<INT>, error STRING"
)
UNIT_DDL = ("topic STRING, queue_id INT, queue_offset BIGINT, commitlog_offset BIGINT, size INT, "
            "tags_code BIGINT")
INDEX_DDL = ("file STRING, entry INT, key_hash INT, commitlog_offset BIGINT, time_diff INT, "
             "prev_index INT")


def delay_levels(options: Mapping[str, str]) -> tuple[int, ...]:
    """The store's ``messageDelayLevel`` from option ``delayLevels`` (RocketMQ's default table)."""
    return parse_delay_levels(options.get("delaylevels") or DEFAULT_DELAY_LEVELS)


def _dispatch_schema() -> pa.Schema:
    import pyarrow as pa

    return pa.schema([
        ("commitlog_offset", pa.int64()), ("stored_offset", pa.int64()), ("size", pa.int32()),
        ("topic", pa.string()), ("queue_id", pa.int32()), ("queue_offset", pa.int64()),
        ("sys_flag", pa.int32()), ("store_timestamp", pa.int64()), ("tags_code", pa.int64()),
        ("index_keys", pa.list_(pa.string())), ("index_hashes", pa.list_(pa.int32())),
        ("error", pa.string()),
    ])


def _fields(d: Decoded) -> tuple[int, int, str, int, int, int, int, str]:
    """(size, stored offset, topic, queue id, queue offset, sys flag, store ms, properties)."""
    if isinstance(d, rec.MessageRecord):
        return (d.total_size, d.commit_log_offset, d.topic, d.queue_id, d.queue_offset, d.sys_flag,
                d.store_timestamp, d.properties_text)
    f, _, topic, text = d
    return f[0], f[6], topic, f[3], f[5], f[7], f[10], text



def dispatch_range(rng: ByteRange, levels: Sequence[int], batch_rows: int = 8192
                   ) -> Iterator[pa.RecordBatch]:
    """One row per record starting in ``rng``: where it is and what dispatch owes it."""
    import pyarrow as pa

    schema = _dispatch_schema()
    rows: list[tuple[object, ...]] = []

    def flush() -> pa.RecordBatch:
        cols = list(zip(*rows, strict=True))
        return pa.RecordBatch.from_arrays(
            [pa.array(c, schema.field(i).type) for i, c in enumerate(cols)], schema=schema)

    with store_reader.mapped(Path(rng.path)) as mm:
        for pos, d, err in iter_range(mm, rng):
            if d is None:
                rows.append((rng.base + pos, None, None, None, None, None, None, None, None, None,
                             None, err))
            else:
                size, stored, topic, qid, qoff, sys_flag, store_ts, text = _fields(d)
                props = decode_properties(text)
                code = dispatch_check.expected_unit_tags_code(topic, qid, sys_flag, props, store_ts,
                                                             levels)
                keys = dispatch_check.index_keys(topic, sys_flag, props)
                rows.append((rng.base + pos, stored, size, topic, qid, qoff, sys_flag, store_ts, code,
                             keys, dispatch_check.index_hashes(keys), None))
            if len(rows) >= batch_rows:
                yield flush()
                rows = []
        if rows:
            yield flush()


# -- ConsumeQueue units ------------------------------------------------------------------------


def plan_unit_files(root: Path, units_per_partition: int) -> list[list[QueueFile]]:
    """ConsumeQueue files grouped into partitions of about ``units_per_partition`` unit slots."""
    groups: list[list[QueueFile]] = []
    current: list[QueueFile] = []
    room = 0
    for qf in store_reader.queue_files(root):
        if current and room + qf.size // 20 > units_per_partition:
            groups.append(current)
            current, room = [], 0
        current.append(qf)
        room += qf.size // 20
    if current:
        groups.append(current)
    return groups


def unit_batches(files: Sequence[QueueFile], batch_rows: int = 65536) -> Iterator[pa.RecordBatch]:
    """Every valid unit of ``files``: (topic, queue_id, queue_offset, commitlog_offset, size,
    tags_code)."""
    import pyarrow as pa

    schema = pa.schema([("topic", pa.string()), ("queue_id", pa.int32()), ("queue_offset", pa.int64()),
                        ("commitlog_offset", pa.int64()), ("size", pa.int32()), ("tags_code", pa.int64())])
    for qf in files:
        with store_reader.mapped(qf.path) as mm:
            units = list(store_reader.iter_units(mm, qf.first_unit))
        for at in range(0, len(units), batch_rows):
            part = units[at : at + batch_rows]
            qoff, off, size, tag = (list(c) for c in zip(*part, strict=True))
            yield pa.RecordBatch.from_arrays(
                [pa.array([qf.topic] * len(part), pa.string()),
                 pa.array([qf.queue_id] * len(part), pa.int32()),
                 pa.array(qoff, pa.int64()), pa.array(off, pa.int64()), pa.array(size, pa.int32()),
                 pa.array(tag, pa.int64())], schema=schema)


# -- IndexFile entries -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class IndexSlice:
    """Entries [first, stop) of one index file with ``slots`` hash slots."""

    path: str
    slots: int
    first: int
    stop: int


@dataclass(frozen=True, slots=True)
class IndexPlan:
    slices: list[IndexSlice]
    first_indexed: int | None  # smallest beginPhyOffset of a file with entries


def plan_index(root: Path, hash_slot_num: int | None, entries_per_partition: int) -> IndexPlan:
    """Read every index file's header (and geometry) on the driver; split entries into slices."""
    slices: list[IndexSlice] = []
    first: int | None = None
    for path in store_reader.index_files(root):
        with store_reader.mapped(path) as mm:
            head = store_reader.read_index_header(mm)
            if head is None:
                raise ValueError(f"index file {path} is shorter than its 40-byte header")
            if head.index_count <= 1:
                continue
            slots = store_reader.index_slot_num(mm, head, hash_slot_num)
        if slots is None:
            raise ValueError(f"index file {path}: cannot tell its hash slot count from its size; "
                             "pass hashSlotNum (the store's maxHashSlotNum)")
        first = head.begin_phy_offset if first is None else min(first, head.begin_phy_offset)
        slices.extend(IndexSlice(str(path), slots, a, min(head.index_count, a + entries_per_partition))
                      for a in range(1, head.index_count, entries_per_partition))
    return IndexPlan(slices, first)


def index_batches(part: IndexSlice, batch_rows: int = 65536) -> Iterator[pa.RecordBatch]:
    """Entries of one slice: (file, entry, key_hash, commitlog_offset, time_diff, prev_index)."""
    import pyarrow as pa

    schema = pa.schema([("file", pa.string()), ("entry", pa.int32()), ("key_hash", pa.int32()),
                        ("commitlog_offset", pa.int64()), ("time_diff", pa.int32()),
                        ("prev_index", pa.int32())])
    name = Path(part.path).name
    with store_reader.mapped(Path(part.path)) as mm:
        for at in range(part.first, part.stop, batch_rows):
            end = min(part.stop, at + batch_rows)
            entries = list(store_reader.iter_index_entries(mm, part.slots, at, end))
            cols = [list(c) for c in zip(*entries, strict=True)]
            yield pa.RecordBatch.from_arrays(
                [pa.array([name] * len(entries), pa.string()),
                 *(pa.array(c, schema.field(i + 1).type) for i, c in enumerate(cols))], schema=schema)
