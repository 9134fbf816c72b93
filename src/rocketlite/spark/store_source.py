"""Spark readers over a store directory (read-only, no broker): the ``rocketmq-store`` message
scan and three small sources the verify job joins.

=========================  ===============================================================
format                     rows
=========================  ===============================================================
``rocketmq-store``         messages in the shared schema (``rows.SCHEMA_DDL``)
``rocketmq-store-dispatch``  per CommitLog record: the ConsumeQueue unit and index keys
                           dispatch owes it, or the error that makes it unreadable
``rocketmq-store-cq``      every valid ConsumeQueue unit on disk
``rocketmq-store-index``   every IndexFile entry on disk
=========================  ===============================================================

``spark.read.format(...).load(STORE_DIR)`` for each. Planning (the scan bound, byte ranges, index
geometry) runs on the driver, decoding in the executors, which open and map the files inside
``read()``: a reader is pickled to them and must hold nothing but paths and numbers. On a
cluster the store must sit on a path the driver and every executor see.

When ``partitions()`` plans nothing (an empty store, a start offset at or past the bound, no
ConsumeQueues or IndexFiles) pyspark still calls ``read()`` once with ``InputPartition(None)``:
every reader returns no rows for it.

Options of ``rocketmq-store`` are documented in ``rocketlite.spark.store_scan``. The dispatch
source takes ``bound``, ``startOffset``, ``endOffset``, ``partitionsPerSegment`` and
``delayLevels`` (the store's ``messageDelayLevel``); ``rocketmq-store-cq`` takes
``unitsPerPartition``; ``rocketmq-store-index`` takes ``hashSlotNum`` (else inferred per file)
and ``entriesPerPartition``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from rocketlite.spark import store_check_scan as check
from rocketlite.spark.store_scan import StoreScanOptions, decode_range, plan

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import SparkSession


def _positive(options: dict[str, str], name: str, default: int) -> int:
    text = options.get(name.lower(), str(default))
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"option {name}: expected an integer, not {text!r}") from None
    if value < 1:
        raise ValueError(f"option {name}: must be at least 1, not {value}")
    return value


def _root(options: dict[str, str]) -> Path:
    path = options.get("path")
    if not path:
        raise ValueError("load(STORE_DIR): the store directory is missing")
    root = Path(path)
    if not root.is_dir():
        raise FileNotFoundError(f"no store directory at {root}")
    return root


class _PlannedReader(DataSourceReader):
    """A reader whose partitions are plain values: ``plan()`` on the driver, ``read_one(value)`` in
    a task. When ``plan()`` gives nothing, pyspark still reads one ``InputPartition(None)``: that
    reads no rows."""

    def plan(self) -> Sequence[object]:
        raise NotImplementedError

    def read_one(self, value: Any) -> Iterator[pa.RecordBatch]:
        raise NotImplementedError

    def partitions(self) -> Sequence[InputPartition]:
        return [InputPartition(v) for v in self.plan()]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if partition.value is None:
            return iter(())
        return self.read_one(partition.value)


class StoreBatchReader(_PlannedReader):
    """``rocketmq-store``: CommitLog byte ranges up to the scan bound, decoded to Arrow batches."""

    def __init__(self, options: dict[str, str], schema: StructType) -> None:
        # rows imports the client package (~0.5 s): only here and in the tasks that build rows,
        # not in every process that unpickles this module (the verify sources' workers).
        from rocketlite.spark.rows import COLUMNS

        if list(schema.fieldNames()) != list(COLUMNS):
            raise ValueError("rocketmq-store has a fixed schema (rocketlite.spark.rows.SCHEMA_DDL); "
                             "select columns after load() instead of passing a schema")
        self.opts = StoreScanOptions.parse(options)

    def plan(self) -> Sequence[object]:
        return plan(self.opts)[1]

    def read_one(self, value: Any) -> Iterator[pa.RecordBatch]:
        return decode_range(value, self.opts)


class _DispatchReader(_PlannedReader):
    def __init__(self, options: dict[str, str]) -> None:
        self.levels = check.delay_levels(options)
        # Every topic: dispatch_range does not filter (system topics have queues too).
        self.opts = StoreScanOptions.parse({k: v for k, v in options.items() if k != "delaylevels"})

    def plan(self) -> Sequence[object]:
        return plan(self.opts)[1]

    def read_one(self, value: Any) -> Iterator[pa.RecordBatch]:
        return check.dispatch_range(value, self.levels)


class StoreDispatchDataSource(DataSource):
    """``rocketmq-store-dispatch``: what dispatch owes each CommitLog record (all topics)."""

    @classmethod
    def name(cls) -> str:
        return "rocketmq-store-dispatch"

    def schema(self) -> str:
        return check.DISPATCH_DDL

    def reader(self, schema: StructType) -> DataSourceReader:
        return _DispatchReader(dict(self.options))


class _UnitReader(_PlannedReader):
    def __init__(self, options: dict[str, str]) -> None:
        self.root = _root(options)
        self.per_partition = _positive(options, "unitsPerPartition", 4_000_000)

    def plan(self) -> Sequence[object]:
        return check.plan_unit_files(self.root, self.per_partition)

    def read_one(self, value: Any) -> Iterator[pa.RecordBatch]:
        return check.unit_batches(value)


class StoreUnitDataSource(DataSource):
    """``rocketmq-store-cq``: the valid units of every ConsumeQueue file."""

    @classmethod
    def name(cls) -> str:
        return "rocketmq-store-cq"

    def schema(self) -> str:
        return check.UNIT_DDL

    def reader(self, schema: StructType) -> DataSourceReader:
        return _UnitReader(dict(self.options))


class _IndexReader(_PlannedReader):
    def __init__(self, options: dict[str, str]) -> None:
        self.root = _root(options)
        slots = options.get("hashslotnum")
        self.hash_slot_num = None if slots is None else _positive(options, "hashSlotNum", 1)
        self.per_partition = _positive(options, "entriesPerPartition", 2_000_000)

    def plan(self) -> Sequence[object]:
        return check.plan_index(self.root, self.hash_slot_num, self.per_partition).slices

    def read_one(self, value: Any) -> Iterator[pa.RecordBatch]:
        return check.index_batches(value)


class StoreIndexDataSource(DataSource):
    """``rocketmq-store-index``: the entries of every IndexFile."""

    @classmethod
    def name(cls) -> str:
        return "rocketmq-store-index"

    def schema(self) -> str:
        return check.INDEX_DDL

    def reader(self, schema: StructType) -> DataSourceReader:
        return _IndexReader(dict(self.options))


def register_store_sources(spark: SparkSession) -> None:
    """Register ``rocketmq-store`` and the three verify sources with ``spark``."""
    from rocketlite.spark.datasource import RocketMQStoreDataSource

    for cls in (RocketMQStoreDataSource, StoreDispatchDataSource, StoreUnitDataSource,
                StoreIndexDataSource):
        spark.dataSource.register(cls)

