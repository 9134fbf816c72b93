"""``spark.read.format("rocketmq")`` and ``spark.readStream.format("rocketmq")``: topics as rows.

Options: ``rocketlite.spark.options``; offset arithmetic: ``rocketlite.spark.offsets``; broker
requests: ``rocketlite.spark.topic_access``. This module decides *when* each happens:

* **Batch** (:class:`TopicBatchReader`). ``partitions()`` (on the driver) finds the queues,
  resolves ``startingOffsets``/timestamps and ``endingOffsets`` against the queues' current bounds,
  applies ``failOnDataLoss`` to starts below a queue's minimum and returns one partition per queue
  range. ``read()`` (on an executor) pulls its range.
* **Streaming** (:class:`TopicStreamReader`). Spark's checkpoint holds the offsets and is the only
  truth about where a query resumes. ``initialOffset()`` resolves the starting position once and
  caches it (Spark calls it twice at start, and "latest" must not move between the calls);
  ``latestOffset(start, limit)`` asks the brokers where each queue ends, settles data loss, caps
  at the ``availableNow`` target fixed by ``prepareForTriggerAvailableNow()`` and shares a
  ``ReadMaxRows`` limit (``maxOffsetsPerTrigger``) over the queues. A queue that appears (a new
  topic matching ``subscribePattern``, more queues) or was recreated first joins the offsets at its
  minimum, and is read from there by the next batch. ``commit(end)`` writes the ``group``'s
  offsets to the brokers when a group is set: lag monitoring only, and Spark calls it one batch
  late (never for the last batch of an ``availableNow`` run; ``stop()`` is not called at all).

Readers are pickled to the executors: they hold only parsed options and plain offsets, and open
their broker connections inside each call (``read()`` included), closing them before returning.
``read()`` yields Arrow record batches (``rows.to_record_batch``), several pulls per batch.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from rocketlite.client.message import MessageExt
from rocketlite.common.errors import RocketliteError
from rocketlite.spark.offsets import (
    JsonOffsets,
    Offsets,
    QueueKey,
    QueueRange,
    batch_ranges,
    next_end,
    offsets_from_json,
    offsets_to_json,
    plan_ranges,
)
from rocketlite.spark.options import Selection, SourceOptions, parse_source_options, resolve_position
from rocketlite.spark.rows import COLUMNS, to_record_batch
from rocketlite.spark.topic_access import DEFAULT_GROUP, PullSpec, TopicAccess, is_internal_topic

log = logging.getLogger(__name__)

ARROW_ROWS = 4096
"""Messages per Arrow batch handed to Spark (several pulls each: fewer, larger conversions)."""
ARROW_BYTES = 8 << 20
"""...or fewer when their bodies reach this many bytes."""


def _columns(schema: StructType) -> list[str] | None:
    """The requested columns when they are a strict subset or reordering of the source's, else None."""
    names = list(schema.fieldNames())
    if names == list(COLUMNS):
        return None
    unknown = [n for n in names if n not in COLUMNS]
    if unknown:
        raise ValueError(f"rocketmq source: unknown column(s) {unknown} in the schema; the columns are "
                         f"{', '.join(COLUMNS)}")
    return names


def select_queues(selection: Selection, access: TopicAccess, *, strict: bool) -> list[QueueKey]:
    """The queues ``selection`` names now, sorted.

    ``strict`` (a query's first resolution): a subscribed or assigned topic without a route, or an
    assigned queue the route lacks, is a ``ValueError``. Later (each trigger) they are skipped with
    a warning, and the query keeps their last offsets."""
    if selection.pattern is not None:
        topics = [t for t in access.topics()
                  if not is_internal_topic(t) and selection.pattern.fullmatch(t) is not None]
    else:
        topics = sorted(set(selection.topics) | {q.topic for q in selection.queues})
    out: list[QueueKey] = []
    for topic in topics:
        queues = access.queues(topic)
        if queues is None:
            if selection.pattern is not None:
                continue  # deleted since the topic list was read
            message = (f"rocketmq source: topic {topic!r} does not exist (the NameServer "
                       f"{access.nameserver} has no route for it)")
            if strict:
                raise ValueError(message)
            log.warning("%s; its queues are skipped", message)
            continue
        if selection.queues:
            wanted = [q for q in selection.queues if q.topic == topic]
            absent = [q for q in wanted if q not in queues]
            if absent and strict:
                raise ValueError(f"rocketmq source option assign: {absent[0]} does not exist (the topic's "
                                 f"readable queues: {[(q.broker, q.queue_id) for q in queues]})")
            queues = [q for q in wanted if q in queues]
        out.extend(queues)
    return sorted(out)


def _spec(opts: SourceOptions) -> PullSpec:
    return PullSpec(group=opts.group or DEFAULT_GROUP, expression=opts.sub_expression, tags=opts.tags,
                    fail_on_data_loss=opts.fail_on_data_loss)


def read_range(opts: SourceOptions, rng: QueueRange, columns: list[str] | None) -> Iterator[Any]:
    """The Arrow record batches of one queue range (opens and closes its own broker access)."""
    access = TopicAccess(opts.nameserver)
    pulls = access.pull_range(rng, _spec(opts))
    try:
        pending: list[MessageExt] = []
        size = 0
        for msgs in pulls:
            pending += msgs
            size += sum(len(m.body) for m in msgs)
            if len(pending) >= ARROW_ROWS or size >= ARROW_BYTES:
                yield _batch(pending, rng.broker, columns)
                pending, size = [], 0
        if pending:
            yield _batch(pending, rng.broker, columns)
    finally:  # Spark may stop reading early (a limit): end the pulls, then close the connections
        pulls.close()
        access.close()


def _batch(msgs: list[MessageExt], broker: str, columns: list[str] | None) -> Any:
    batch = to_record_batch(msgs, broker)
    return batch if columns is None else batch.select(columns)


def _read(opts: SourceOptions, partition: InputPartition, columns: list[str] | None) -> Iterator[Any]:
    rng = partition.value
    if rng is None:  # Spark's stand-in partition when a batch read planned none: nothing to read
        return iter(())
    if not isinstance(rng, QueueRange):
        raise TypeError(f"rocketmq source: not a queue range partition: {partition!r}")
    return read_range(opts, rng, columns)


class TopicBatchReader(DataSourceReader):
    """``spark.read.format("rocketmq")``: the queue ranges between two positions."""

    def __init__(self, options: dict[str, str], schema: StructType) -> None:
        self.opts = parse_source_options(options, streaming=False)
        self.columns = _columns(schema)

    def plan(self) -> list[QueueRange]:
        opts = self.opts
        assert opts.ending is not None
        with TopicAccess(opts.nameserver) as access:
            queues = select_queues(opts.selection, access, strict=True)
            bounds = access.bounds(queues)
            start = resolve_position(opts.starting, bounds, access.search)
            end = resolve_position(opts.ending, bounds, access.search)
        return batch_ranges(start, end, bounds, fail=opts.fail_on_data_loss,
                            names=(opts.starting.option, opts.ending.option))

    def partitions(self) -> list[InputPartition]:
        return [InputPartition(r) for r in self.plan()]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return _read(self.opts, partition, self.columns)


class TopicStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream.format("rocketmq")``; offsets as the module doc describes."""

    def __init__(self, options: dict[str, str], schema: StructType) -> None:
        self.opts = parse_source_options(options, streaming=True)
        self.columns = _columns(schema)
        self._initial: JsonOffsets | None = None
        self._target: Offsets | None = None
        self._reported: JsonOffsets | None = None

    def _access(self) -> TopicAccess:
        return TopicAccess(self.opts.nameserver)

    def initialOffset(self) -> JsonOffsets:
        """The starting position, resolved on the first call only. Starts below a queue's minimum
        are kept: ``latestOffset`` applies ``failOnDataLoss`` to them, as to checkpointed ones."""
        if self._initial is None:
            with self._access() as access:
                queues = select_queues(self.opts.selection, access, strict=True)
                bounds = access.bounds(queues)
                start = resolve_position(self.opts.starting, bounds, access.search)
            self._initial = offsets_to_json(start)
            log.info("rocketmq source: starting offsets %s", self._initial)
        return self._initial

    def getDefaultReadLimit(self) -> ReadLimit:
        n = self.opts.max_offsets_per_trigger
        return ReadAllAvailable() if n is None else ReadMaxRows(n)

    def prepareForTriggerAvailableNow(self) -> None:
        """Fix the end of data: ``latestOffset`` never goes past the queues' ends as of now."""
        with self._access() as access:
            queues = select_queues(self.opts.selection, access, strict=False)
            bounds = access.bounds(queues)
        self._target = {q: hi for q, (_, hi) in bounds.items()}

    def latestOffset(self, start: JsonOffsets, limit: ReadLimit) -> JsonOffsets:
        begin = offsets_from_json(start, "the query's start offset")
        with self._access() as access:
            queues = select_queues(self.opts.selection, access, strict=False)
            bounds = access.bounds(queues)
        self._reported = offsets_to_json({**begin, **{q: hi for q, (_, hi) in bounds.items()}})
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        return offsets_to_json(next_end(begin, bounds, max_rows=max_rows, target=self._target,
                                        fail=self.opts.fail_on_data_loss))

    def reportLatestOffset(self) -> JsonOffsets | None:
        """Where the queues ended at the last ``latestOffset`` (Spark's ``latestOffset`` metric)."""
        return self._reported

    def partitions(self, start: JsonOffsets, end: JsonOffsets) -> list[InputPartition]:
        ranges = plan_ranges(offsets_from_json(start, "the batch's start offset"),
                             offsets_from_json(end, "the batch's end offset"))
        return [InputPartition(r) for r in ranges]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return _read(self.opts, partition, self.columns)

    def commit(self, end: JsonOffsets) -> None:
        """Store ``end`` as the ``group``'s offsets (informational: failures are only logged)."""
        group = self.opts.group
        if group is None:
            return
        try:
            offsets = offsets_from_json(end, "the committed offset")
            with self._access() as access:
                access.commit(group, offsets)
        except (RocketliteError, ValueError, OSError) as e:  # lag monitoring never fails the query
            log.warning("rocketmq source: committing offsets of group %s failed: %s", group, e)

    def stop(self) -> None:
        """Nothing to release: every call closes its own connections (Spark may never call this)."""
