"""The Spark verify job: recompute every ConsumeQueue unit and IndexFile entry from the CommitLog
(``rocketmq-store-dispatch``) and compare them with the files (``rocketmq-store-cq``,
``rocketmq-store-index``), both ways, as joins. ``rocketlite store verify`` does the same in one
process; both take their rules from ``rocketlite.store.dispatch_check``.

=========================  ===================================================================
kind                       meaning
=========================  ===================================================================
corrupt_record             a CommitLog record below the scan bound does not verify
wrong_physical_offset      a record whose PHYSICALOFFSET field is not where it lies
missing_unit               no ConsumeQueue unit at a record's (topic, queue, queue offset)
wrong_unit                 a unit there whose (offset, size, tags code) differs
dangling_unit              a unit at a queue offset no record has, pointing into the CommitLog
missing_index_entry        a record's ``topic#key`` hash is not indexed at its offset
dangling_index_entry       an index entry whose (hash, offset) is no key of any record
=========================  ===================================================================

A unit or index entry pointing at a corrupt record is not reported again as dangling. Unlike
``store verify``, which stops a segment at its first corrupt record, the scan steps over a record
whose head is sound, so one damaged body is one mismatch, not one per later record.

What is *not* a mismatch, as in ``store verify``: units and entries pointing below the first
CommitLog segment (retention deleted those records), records of queues with no ConsumeQueue
directory (a deleted topic), records below a queue's smallest unit (its head was deleted or
rebuilt) and records older than the oldest IndexFile. Units and entries pointing at or past the
scan bound are ignored too: a running broker dispatches records before they are flushed, and
those records are outside the scan. A store with no index entries at all (``messageIndexEnable``
off) gets no index check.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pyspark import StorageLevel
from pyspark.sql import functions as F

from rocketlite.spark.store_check_scan import plan_index
from rocketlite.spark.store_source import register_store_sources
from rocketlite.store import store_reader
from rocketlite.store.store_reader import ScanBound

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

KINDS = ("corrupt_record", "wrong_physical_offset", "missing_unit", "wrong_unit", "dangling_unit",
         "missing_index_entry", "dangling_index_entry")
_COLUMNS = ("kind", "topic", "queue_id", "queue_offset", "commitlog_offset", "detail")


@dataclass(frozen=True, slots=True)
class Mismatch:
    kind: str
    topic: str | None
    queue_id: int | None
    queue_offset: int | None
    commitlog_offset: int | None
    detail: str

    def __str__(self) -> str:
        where = f"{self.topic}-{self.queue_id} offset {self.queue_offset}: " if self.topic else ""
        return f"{self.kind}: {where}{self.detail}"


@dataclass(frozen=True, slots=True)
class VerifyReport:
    bound: ScanBound
    records: int  # CommitLog records scanned (corrupt ones included)
    units: int  # valid ConsumeQueue units on disk
    index_entries: int | None  # None: no index entries, so no index check
    counts: dict[str, int]  # mismatches per kind
    mismatches: list[Mismatch]  # the first ``limit``, by kind then CommitLog offset

    @property
    def ok(self) -> bool:
        return not self.counts


def _out(df: DataFrame, kind: str, detail: object, *, topic: bool = True) -> DataFrame:
    cols = [F.lit(kind).alias("kind")]
    if topic:
        cols += [F.col("topic"), F.col("queue_id"), F.col("queue_offset")]
    else:
        cols += [F.lit(None).cast("string").alias("topic"), F.lit(None).cast("int").alias("queue_id"),
                 F.lit(None).cast("bigint").alias("queue_offset")]
    return df.select(*cols, F.col("commitlog_offset").cast("bigint").alias("commitlog_offset"),
                     F.expr(str(detail)).alias("detail"))


def _record_problems(exp: DataFrame) -> list[DataFrame]:
    bad = exp.where(F.col("error").isNotNull())
    moved = exp.where(F.col("error").isNull() & (F.col("stored_offset") != F.col("commitlog_offset")))
    return [_out(bad, "corrupt_record", "error", topic=False),
            _out(moved, "wrong_physical_offset",
                 "format_string('record says PHYSICALOFFSET %d', stored_offset)")]


def _corrupt(exp: DataFrame) -> DataFrame:
    """Offsets of records that do not verify: a unit or entry pointing at one is reported once,
    as the corrupt record, not again as dangling."""
    return exp.where(F.col("error").isNotNull()).select("commitlog_offset")


def _unit_problems(exp: DataFrame, units: DataFrame, cl_min: int, end: int) -> list[DataFrame]:
    key = ["topic", "queue_id", "queue_offset"]
    want = exp.where(F.col("error").isNull() & F.col("tags_code").isNotNull()).select(
        *key, F.col("commitlog_offset").alias("e_off"), F.col("size").alias("e_size"),
        F.col("tags_code").alias("e_tag"))
    have = units.where(F.col("commitlog_offset") < end).select(
        *key, F.col("commitlog_offset").alias("a_off"), F.col("size").alias("a_size"),
        F.col("tags_code").alias("a_tag"))
    qmin = units.groupBy("topic", "queue_id").agg(F.min("queue_offset").alias("qmin"))
    j = want.join(have, key, "full_outer")
    both = j.where(F.col("e_off").isNotNull() & F.col("a_off").isNotNull())
    wrong = both.where((F.col("e_off") != F.col("a_off")) | (F.col("e_size") != F.col("a_size"))
                       | (F.col("e_tag") != F.col("a_tag"))).withColumn("commitlog_offset", F.col("e_off"))
    missing = j.where(F.col("a_off").isNull()).join(qmin, ["topic", "queue_id"]) \
        .where(F.col("queue_offset") >= F.col("qmin")).withColumn("commitlog_offset", F.col("e_off"))
    dangling = j.where(F.col("e_off").isNull() & (F.col("a_off") >= cl_min)) \
        .withColumn("commitlog_offset", F.col("a_off")).join(_corrupt(exp), "commitlog_offset", "left_anti")
    return [
        _out(wrong, "wrong_unit", "format_string('unit (%d, %d, %d) but CommitLog has (%d, %d, %d)', "
                                  "a_off, a_size, a_tag, e_off, e_size, e_tag)"),
        _out(missing, "missing_unit", "format_string('no unit for the record at %d', e_off)"),
        _out(dangling, "dangling_unit",
             "format_string('unit points at %d (size %d): no record has this queue offset', "
             "a_off, a_size)"),
    ]


def _index_problems(exp: DataFrame, entries: DataFrame, first_indexed: int, cl_min: int
                    ) -> list[DataFrame]:
    keys = exp.where(F.col("error").isNull() & (F.size("index_keys") > 0)
                     & (F.col("commitlog_offset") >= first_indexed)) \
        .select("topic", "queue_id", "queue_offset", "commitlog_offset",
                F.explode(F.arrays_zip("index_keys", "index_hashes")).alias("k")) \
        .select("topic", "queue_id", "queue_offset", "commitlog_offset",
                F.col("k.index_keys").alias("key"), F.col("k.index_hashes").alias("key_hash"))
    on = ["key_hash", "commitlog_offset"]
    missing = keys.join(entries, on, "left_anti")
    dangling = entries.where(F.col("commitlog_offset") >= cl_min).join(keys, on, "left_anti") \
        .join(_corrupt(exp), "commitlog_offset", "left_anti")
    return [
        _out(missing, "missing_index_entry", "format_string('key %s is not indexed', key)"),
        _out(dangling, "dangling_index_entry", "format_string('index file %s entry %d: hash %d at "
                                               "offset %d is no key of a record', file, entry, "
                                               "key_hash, commitlog_offset)", topic=False),
    ]


def verify(spark: SparkSession, store: str | Path, *, hash_slot_num: int | None = None,
           delay_levels: str | None = None, bound: str = "flushed", end_offset: int | None = None,
           partitions_per_segment: int = 1, limit: int = 1000) -> VerifyReport:
    """Compare the store's ConsumeQueues and IndexFiles with its CommitLog (see the module
    docstring); ``delay_levels`` is the store's ``messageDelayLevel`` if not RocketMQ's default,
    ``hash_slot_num`` its ``maxHashSlotNum`` if the index geometry cannot be inferred."""
    register_store_sources(spark)
    root = Path(store)
    scan = store_reader.resolve_bound(root, bound)
    if end_offset is not None and end_offset < scan.end:
        scan = ScanBound(end_offset, f"endOffset {end_offset}")
    segs = store_reader.commitlog_segments(root)
    cl_min = segs[0].base if segs else 0
    opts = {"bound": bound, "endOffset": str(scan.end), "partitionsPerSegment": str(partitions_per_segment)}
    if delay_levels:
        opts["delayLevels"] = delay_levels
    index_plan = plan_index(root, hash_slot_num, 2_000_000)
    keep = StorageLevel.MEMORY_AND_DISK
    exp = spark.read.format("rocketmq-store-dispatch").options(**opts).load(str(root)).persist(keep)
    units = spark.read.format("rocketmq-store-cq").load(str(root)).persist(keep)
    cached = [exp, units]
    try:
        # Counting materializes each cache before the joins read it several times over: one
        # Python scan per input (measured: joins over unmaterialized caches ran 2-3x longer).
        records, unit_count = exp.count(), units.count()
        parts = _record_problems(exp) + _unit_problems(exp, units, cl_min, scan.end)
        entry_count: int | None = None
        if index_plan.first_indexed is not None:
            reader = spark.read.format("rocketmq-store-index")
            if hash_slot_num is not None:
                reader = reader.option("hashSlotNum", str(hash_slot_num))
            entries = reader.load(str(root)).where(F.col("commitlog_offset") < scan.end).persist(keep)
            cached.append(entries)
            entry_count = entries.count()
            parts += _index_problems(exp, entries, index_plan.first_indexed, cl_min)
        found = functools.reduce(lambda a, b: a.unionByName(b), parts).persist(keep)
        cached.append(found)
        counts = {r["kind"]: int(r["count"]) for r in found.groupBy("kind").count().collect()}
        rows = found.orderBy("kind", "commitlog_offset", "topic", "queue_id", "queue_offset") \
            .limit(limit).collect() if counts else []
    finally:
        for df in cached:
            df.unpersist()
    mismatches = [Mismatch(*(r[c] for c in _COLUMNS)) for r in rows]
    ordered = {k: counts[k] for k in KINDS if k in counts}
    return VerifyReport(scan, records, unit_count, entry_count, ordered, mismatches)
