"""The topic source's offset logic, kept free of Spark and of the network so it can be tested alone.

**Offsets.** A Spark offset of the ``rocketmq`` source is, per queue, the next queue offset to read
(exclusive end of what was read), nested ``{"topic": {"broker": {"queueId": next}}}``. Spark moves
offsets between the JVM and Python as JSON and compares them *as strings*: an offset equal to the
batch's start means "no new data", which is how an ``availableNow`` query learns it is done. So
every offset this source hands Spark is built by :func:`offsets_to_json` alone: string keys,
each level sorted as strings (exactly what ``json.dumps(..., sort_keys=True)`` would order), so
equal positions always give equal strings. Inside Python an offset is a flat
``{QueueKey: int}``; :func:`offsets_from_json` reads Spark's copy (and the user's
``startingOffsets`` JSON, where -2 means earliest and -1 latest) back with validation.

**Rate limit.** :func:`split_limit` shares ``maxOffsetsPerTrigger`` over the queues in proportion
to their backlog (the largest remainder method), as Kafka's source does: deterministic, never more
than the limit, never more than a queue has, and at least one offset of progress whenever any queue
has data, so a tiny limit over many queues still moves.

**Data loss.** A queue whose wanted start is below its minimum offset lost messages to retention;
one whose maximum is below the start was recreated (or its store replaced). :func:`find_data_loss`
names both; :func:`settle_data_loss` either raises :class:`DataLossError` (``failOnDataLoss=true``)
or logs and moves the start to the queue's minimum.

**Partitions.** :func:`plan_ranges`: one ``QueueRange`` (topic, broker, queue, start, end) per
queue with something to read; each is one Spark input partition.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

log = logging.getLogger(__name__)

EARLIEST = -2
"""In a user's offsets JSON: the queue's minimum offset (Kafka's -2)."""
LATEST = -1
"""In a user's offsets JSON: the queue's maximum offset (Kafka's -1)."""

MAX_OFFSET = 2**63 - 1


class QueueKey(NamedTuple):
    """One queue: topic, broker name, queue id. Tuples sort by topic, broker, then queue id."""

    topic: str
    broker: str
    queue_id: int

    def __str__(self) -> str:
        return f"topic {self.topic!r} broker {self.broker!r} queue {self.queue_id}"


Offsets = dict[QueueKey, int]
JsonOffsets = dict[str, dict[str, dict[str, int]]]


# ------------------------------------------------------------------------------- (de)serialization


def offsets_to_json(offsets: Mapping[QueueKey, int]) -> JsonOffsets:
    """``{QueueKey: n}`` -> ``{"topic": {"broker": {"queueId": n}}}``, every level in string order.

    The order is part of the value: Spark compares offsets as JSON text, and ``json.dumps`` keeps
    insertion order."""
    nested: dict[str, dict[str, dict[str, int]]] = {}
    for q, n in offsets.items():
        nested.setdefault(q.topic, {}).setdefault(q.broker, {})[str(q.queue_id)] = int(n)
    return {t: {b: dict(sorted(qs.items())) for b, qs in sorted(brokers.items())}
            for t, brokers in sorted(nested.items())}


def offsets_text(offsets: Mapping[QueueKey, int]) -> str:
    """The JSON text Spark stores for ``offsets`` (for messages and tests)."""
    return json.dumps(offsets_to_json(offsets))


def _queue_id(text: object, where: str) -> int:
    if isinstance(text, int) and not isinstance(text, bool):
        qid = text
    elif isinstance(text, str) and text.isascii() and text.isdigit():
        qid = int(text)
    else:
        raise ValueError(f"{where}: queue id {text!r} is not a non-negative integer")
    if not 0 <= qid < 2**31:
        raise ValueError(f"{where}: queue id {qid} is out of range")
    return qid


def _load(obj: object, what: str) -> object:
    if isinstance(obj, str):
        try:
            return json.loads(obj)
        except json.JSONDecodeError as e:
            raise ValueError(f"{what} is not valid JSON ({e}): {obj!r}") from None
    return obj


def _nested_dict(obj: object, what: str, example: str) -> dict[str, dict[str, Any]]:
    if not isinstance(obj, dict) or not all(
            isinstance(t, str) and t and isinstance(b, dict) for t, b in obj.items()):
        raise ValueError(f"{what} must be a JSON object like {example}, got {obj!r}")
    for t, brokers in obj.items():
        if not all(isinstance(b, str) and b for b in brokers):
            raise ValueError(f"{what}: topic {t!r} must map broker names to queues, got {brokers!r}")
    return obj


def offsets_from_json(obj: object, what: str = "offset", *, minimum: int = 0) -> Offsets:
    """``{"topic": {"broker": {"queueId": n}}}`` (a dict or its JSON text) -> ``{QueueKey: n}``.

    ``minimum`` is the smallest value allowed: 0 for Spark's offsets, ``EARLIEST`` for a user's
    ``startingOffsets``. Raises ``ValueError`` naming ``what`` for anything else."""
    example = '{"topic":{"broker-a":{"0":23,"1":-2}}}'
    nested = _nested_dict(_load(obj, what), what, example)
    out: Offsets = {}
    for topic, brokers in nested.items():
        for broker, queues in brokers.items():
            where = f"{what}, topic {topic!r} broker {broker!r}"
            if not isinstance(queues, dict):
                raise ValueError(f"{where}: expected {{\"queueId\": offset}}, got {queues!r}")
            for qid, n in queues.items():
                key = QueueKey(topic, broker, _queue_id(qid, where))
                if isinstance(n, bool) or not isinstance(n, int) or not minimum <= n <= MAX_OFFSET:
                    raise ValueError(f"{where} queue {qid}: {n!r} is not an offset (an integer >= {minimum})")
                if key in out:
                    raise ValueError(f"{where}: queue {key.queue_id} is given twice")
                out[key] = n
    return out


def queues_from_json(obj: object, what: str) -> list[QueueKey]:
    """``assign``: ``{"topic": {"broker": [0, 1]}}`` -> the queues, sorted, each once."""
    nested = _nested_dict(_load(obj, what), what, '{"topic":{"broker-a":[0,1]}}')
    out: set[QueueKey] = set()
    for topic, brokers in nested.items():
        for broker, ids in brokers.items():
            where = f"{what}, topic {topic!r} broker {broker!r}"
            if not isinstance(ids, list) or not ids:
                raise ValueError(f"{where}: expected a non-empty list of queue ids, got {ids!r}")
            out.update(QueueKey(topic, broker, _queue_id(i, where)) for i in ids)
    return sorted(out)


# ------------------------------------------------------------------------------------- rate limit


def split_limit(start: Mapping[QueueKey, int], available: Mapping[QueueKey, int], limit: int) -> Offsets:
    """End offsets that read at most ``limit`` offsets in total, shared in proportion to backlog.

    ``available`` is each queue's end of data (its max offset, or the availableNow target);
    ``start`` where reading starts (a queue missing from it starts at its available end: no
    backlog). A queue's backlog is ``available - start`` (none when negative). Each gets
    ``floor(limit * backlog / total)``; the offsets left over go one each to the largest fractional
    remainders, ties broken by queue order. The result covers every queue of ``available`` and
    never goes below its start. With ``limit >= 1`` and any backlog, at least one queue advances."""
    if limit < 1:
        raise ValueError(f"the read limit must be at least 1, got {limit}")
    begin = {q: start.get(q, end) for q, end in available.items()}
    backlog = {q: max(0, available[q] - begin[q]) for q in sorted(available)}
    total = sum(backlog.values())
    if total <= limit:
        return {q: begin[q] + backlog[q] for q in available}
    shares = {q: limit * b // total for q, b in backlog.items()}
    left = limit - sum(shares.values())
    # Remainders as exact integers, (limit * b) mod total: largest first, then queue order (the
    # sort is stable). A queue with a remainder always has room: its share is below its backlog.
    by_remainder = sorted((q for q, b in backlog.items() if limit * b % total),
                          key=lambda q: -(limit * backlog[q] % total))
    for q in by_remainder[:left]:
        shares[q] += 1
    return {q: begin[q] + shares[q] for q in available}


def cap_to(available: Mapping[QueueKey, int], target: Mapping[QueueKey, int],
           start: Mapping[QueueKey, int]) -> Offsets:
    """``available`` capped at ``target`` (availableNow's end of data), never below ``start``.

    A queue missing from ``target`` appeared after the target was fixed: all its data is newer, so
    it gets none (its end stays at its start)."""
    out: Offsets = {}
    for q, end in available.items():
        base = start.get(q, end)
        out[q] = max(base, min(end, target.get(q, base)))
    return out


# -------------------------------------------------------------------------------------- data loss


@dataclass(frozen=True, slots=True)
class DataLoss:
    """A queue that cannot be read from ``wanted``: the queue holds ``[min_offset, max_offset)``."""

    queue: QueueKey
    wanted: int
    min_offset: int
    max_offset: int

    @property
    def deleted(self) -> bool:
        """True: retention deleted the messages below ``min_offset``; False: the queue was reset."""
        return self.wanted < self.min_offset

    def describe(self) -> str:
        if self.deleted:
            return (f"{self.queue}: messages at offsets {self.wanted}..{self.min_offset - 1} are gone "
                    f"(retention deleted them), the oldest left is at offset {self.min_offset}")
        return (f"{self.queue}: the queue ends at offset {self.max_offset}, below offset {self.wanted} "
                f"the query needs (the topic or its store was recreated)")


class DataLossError(RuntimeError):
    """Raised with ``failOnDataLoss=true`` when messages the query should read no longer exist."""

    def __init__(self, losses: list[DataLoss]) -> None:
        self.losses = losses
        details = "; ".join(loss.describe() for loss in losses)
        super().__init__(
            f"rocketmq source: data loss, failOnDataLoss=true: {details}. Set the option "
            "failOnDataLoss=false to log this and continue from the oldest message still stored.")

    def __reduce__(self) -> tuple[type[DataLossError], tuple[list[DataLoss]]]:
        return DataLossError, (self.losses,)  # picklable, should Spark ship it between processes


def find_data_loss(start: Mapping[QueueKey, int],
                   bounds: Mapping[QueueKey, tuple[int, int]]) -> list[DataLoss]:
    """Queues of ``start`` (and ``bounds``) whose start is below their min or above their max."""
    out = []
    for q in sorted(start):
        if q not in bounds:
            continue
        lo, hi = bounds[q]
        s = start[q]
        if s < lo or s > hi:
            out.append(DataLoss(q, s, lo, hi))
    return out


def settle_data_loss(start: Mapping[QueueKey, int], bounds: Mapping[QueueKey, tuple[int, int]], *,
                     fail: bool) -> Offsets:
    """``start`` with each lost position moved to its queue's min offset, logged as a warning.

    With ``fail`` any loss raises ``DataLossError`` instead."""
    losses = find_data_loss(start, bounds)
    if losses and fail:
        raise DataLossError(losses)
    out = dict(start)
    for loss in losses:
        log.warning("rocketmq source: data loss, failOnDataLoss=false: %s; continuing at offset %d",
                    loss.describe(), loss.min_offset)
        out[loss.queue] = loss.min_offset
    return out


# ------------------------------------------------------------------------------------ next batch


def next_end(begin: Mapping[QueueKey, int], bounds: Mapping[QueueKey, tuple[int, int]], *,
             max_rows: int | None, target: Mapping[QueueKey, int] | None, fail: bool) -> Offsets:
    """A micro-batch's end offset: from its start ``begin`` and the queues' current ``bounds``
    (``{queue: (min, max)}``), at most ``max_rows`` offsets (``maxOffsetsPerTrigger``), never past
    ``target`` (``availableNow``'s end of data).

    * A start below its queue's min is data loss (``settle_data_loss``): raised with ``fail``, else
      the batch's share is counted from the min (the read skips the gap and logs it).
    * A queue new to ``begin`` (another topic matching the pattern, more queues), or one whose max
      fell below its start (recreated; only without ``fail``), joins at its min: nothing of it is
      read in this batch, the next one starts there.
    * A queue of ``begin`` no longer in ``bounds`` keeps its offset.

    With nothing new the result equals ``begin``: that is how an ``availableNow`` query ends."""
    known = {q: n for q, n in begin.items() if q in bounds}
    resets = {loss.queue for loss in find_data_loss(known, bounds) if not loss.deleted}
    first = settle_data_loss(known, bounds, fail=fail)
    joining = {q: lo for q, (lo, _) in bounds.items() if q not in begin or q in resets}
    for q in sorted(q for q in joining if q not in begin):
        log.info("rocketmq source: new %s joins at offset %d", q, joining[q])
    first.update(joining)
    available = {q: hi for q, (_, hi) in bounds.items()}
    available.update(joining)
    if target is not None:
        available = cap_to(available, target, first)
    if max_rows is not None:
        ends = split_limit(first, available, max_rows)
    else:
        ends = {q: max(first[q], available[q]) for q in available}
    return {**begin, **ends}


# ------------------------------------------------------------------------------------- partitions


@dataclass(frozen=True, slots=True)
class QueueRange:
    """Offsets ``[start, end)`` of one queue: one Spark input partition."""

    topic: str
    broker: str
    queue_id: int
    start: int
    end: int

    @property
    def queue(self) -> QueueKey:
        return QueueKey(self.topic, self.broker, self.queue_id)

    @property
    def size(self) -> int:
        return self.end - self.start


def plan_ranges(start: Mapping[QueueKey, int], end: Mapping[QueueKey, int]) -> list[QueueRange]:
    """The non-empty ranges from ``start`` to ``end``, in queue order.

    A queue missing from ``start`` joined after the batch began: the source put it into ``end`` at
    its first offset, so there is nothing to read yet. An end below its start is a queue whose reset
    was accepted (``failOnDataLoss=false``): the next batch reads from the new end."""
    return [QueueRange(q.topic, q.broker, q.queue_id, start[q], e)
            for q, e in sorted(end.items()) if q in start and e > start[q]]


def batch_ranges(start: Mapping[QueueKey, int], end: Mapping[QueueKey, int],
                 bounds: Mapping[QueueKey, tuple[int, int]], *, fail: bool,
                 names: tuple[str, str] = ("startingOffsets", "endingOffsets")) -> list[QueueRange]:
    """A batch query's ranges from its resolved ``start`` and ``end``.

    A start below its queue's min is data loss (``settle_data_loss``); when accepted, the range
    begins at the min, or is empty if the min is past its end. Any other start after its end is
    a ``ValueError`` naming the two options (``names``)."""
    settled = settle_data_loss(start, bounds, fail=fail)
    begin: Offsets = {}
    for q in sorted(start):
        if settled[q] != start[q]:
            begin[q] = min(settled[q], end[q])
        elif start[q] > end[q]:
            raise ValueError(f"rocketmq source: {q} starts at offset {start[q]} ({names[0]}) after it "
                             f"ends at offset {end[q]} ({names[1]})")
        else:
            begin[q] = start[q]
    return plan_ranges(begin, end)
