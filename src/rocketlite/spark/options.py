"""The ``rocketmq`` topic source's options: parsed and checked before any broker is asked.

Names follow Spark's Kafka source where there is one, so Spark users recognise them; Spark hands
them over lower-cased (``maxOffsetsPerTrigger`` arrives as ``maxoffsetspertrigger``), so they are
matched without case and errors quote the documented spelling.

=============================  =====================================================================
option                         meaning
=============================  =====================================================================
nameserver (required)          NameServer addresses, ``host:port;host:port``
subscribe                      topics, comma separated
subscribePattern               a regular expression; every topic of the NameServer it fully matches
assign                         queues: ``{"topic":{"broker-a":[0,1]}}``
startingOffsets                ``earliest``, ``latest`` or ``{"topic":{"broker-a":{"0":23}}}``
                               (-2 earliest, -1 latest; a queue left out starts at earliest).
                               Default: ``latest`` for streams, ``earliest`` for batch
startingTimestamp              ms since the epoch: each queue starts at its first message stored at
                               or after it (the broker's search by time; the queue's end if none)
startingOffsetsByTimestamp     the same per queue: ``{"topic":{"broker-a":{"0":1700000000000}}}``
endingOffsets                  batch only: ``latest`` (default) or JSON (-1 latest; a queue left out
                               ends at latest)
maxOffsetsPerTrigger           streams only: at most this many offsets per micro-batch, shared over
                               the queues in proportion to their backlog
failOnDataLoss                 ``true`` (default): fail when messages to read are gone (retention);
                               ``false``: log a warning and continue at the oldest one left
subExpression                  tag filter, RocketMQ's syntax: ``*`` (default) or ``TagA || TagB``
group                          consumer group for the pulls (default ``spark-rocketmq-source``,
                               which brokers create on first use unless autoCreateSubscriptionGroup
                               is off); with it a stream also commits each finished batch's offsets
                               to the brokers, for lag monitoring only (the Spark checkpoint
                               decides where a query resumes)
=============================  =====================================================================

Exactly one of subscribe / subscribePattern / assign; at most one of startingOffsets /
startingTimestamp / startingOffsetsByTimestamp. Anything unknown or contradictory is a
``ValueError`` naming the option.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from rocketlite.client.errors import MQClientError
from rocketlite.client.message import check_topic
from rocketlite.spark.offsets import (
    EARLIEST,
    LATEST,
    Offsets,
    QueueKey,
    offsets_from_json,
    queues_from_json,
)

OPTION_NAMES = (
    "nameserver", "subscribe", "subscribePattern", "assign", "startingOffsets", "startingTimestamp",
    "startingOffsetsByTimestamp", "endingOffsets", "maxOffsetsPerTrigger", "failOnDataLoss",
    "subExpression", "group",
)
_CANONICAL = {name.lower(): name for name in OPTION_NAMES}
_GROUP = re.compile(r"[%|a-zA-Z0-9_-]{1,255}")

PositionKind = Literal["earliest", "latest", "offsets", "timestamp", "timestamps"]


@dataclass(frozen=True, slots=True)
class Position:
    """Where reading starts or ends, before any broker is asked.

    ``earliest`` / ``latest``: every queue's min / max offset. ``offsets``: ``per_queue`` values
    are offsets (``EARLIEST``/``LATEST`` allowed); ``timestamp``: one time for every queue;
    ``timestamps``: ``per_queue`` values are times. Queues missing from ``per_queue`` take
    ``default`` (``earliest`` or ``latest``)."""

    kind: PositionKind
    per_queue: Mapping[QueueKey, int] = field(default_factory=dict)
    timestamp: int = 0
    default: Literal["earliest", "latest"] = "earliest"
    option: str = ""


@dataclass(frozen=True, slots=True)
class Selection:
    """Which queues: ``topics`` (subscribe), ``pattern`` (subscribePattern) or ``queues``
    (assign); exactly one is set."""

    topics: tuple[str, ...] = ()
    pattern: re.Pattern[str] | None = None
    queues: tuple[QueueKey, ...] = ()

    def allows_topic(self, topic: str) -> bool:
        if self.pattern is not None:
            return self.pattern.fullmatch(topic) is not None
        if self.queues:
            return any(q.topic == topic for q in self.queues)
        return topic in self.topics

    def describe(self) -> str:
        if self.pattern is not None:
            return f"subscribePattern {self.pattern.pattern!r}"
        if self.queues:
            return f"assign {sorted({q.topic for q in self.queues})}"
        return f"subscribe {list(self.topics)}"


@dataclass(frozen=True, slots=True)
class SourceOptions:
    nameserver: str
    selection: Selection
    starting: Position
    ending: Position | None  # batch only (default latest); None for streams
    max_offsets_per_trigger: int | None = None
    fail_on_data_loss: bool = True
    sub_expression: str = "*"
    tags: frozenset[str] | None = None  # None: every tag
    group: str | None = None

    def tag_matches(self, tag: str | None) -> bool:
        return self.tags is None or (tag is not None and tag in self.tags)


def _bad(name: str, message: str) -> ValueError:
    return ValueError(f"rocketmq source option {name}: {message}")


def _topics(name: str, text: str) -> tuple[str, ...]:
    topics = tuple(dict.fromkeys(t.strip() for t in text.split(",") if t.strip()))
    if not topics:
        raise _bad(name, f"no topic in {text!r} (expected a comma separated list)")
    for t in topics:
        try:
            check_topic(t)
        except MQClientError as e:
            raise _bad(name, str(e)) from None
    return topics


def _selection(opts: Mapping[str, str]) -> Selection:
    given = [n for n in ("subscribe", "subscribePattern", "assign") if n.lower() in opts]
    if len(given) != 1:
        got = f"got {', '.join(given)}" if given else "got none"
        raise ValueError("rocketmq source: exactly one of the options subscribe, subscribePattern "
                         f"or assign is required ({got})")
    name = given[0]
    text = opts[name.lower()]
    if name == "subscribe":
        return Selection(topics=_topics(name, text))
    if name == "subscribePattern":
        if not text.strip():
            raise _bad(name, "the pattern is empty")
        try:
            return Selection(pattern=re.compile(text))
        except re.error as e:
            raise _bad(name, f"{text!r} is not a regular expression: {e}") from None
    try:
        queues = queues_from_json(text, "assign")
    except ValueError as e:
        raise _bad(name, str(e)) from None
    for q in queues:
        _topics(name, q.topic)
    return Selection(queues=tuple(queues))


def _check_topics(name: str, per_queue: Mapping[QueueKey, int], selection: Selection) -> None:
    for q in per_queue:
        if not selection.allows_topic(q.topic):
            raise _bad(name, f"topic {q.topic!r} is not one the query reads ({selection.describe()})")
        if selection.queues and q not in selection.queues:
            raise _bad(name, f"{q} is not one of the assigned queues")


def _int(name: str, text: str, minimum: int) -> int:
    try:
        n = int(text.strip())
    except ValueError:
        raise _bad(name, f"{text!r} is not an integer") from None
    if n < minimum:
        raise _bad(name, f"{n} is below {minimum}")
    return n


def _offsets_position(name: str, text: str, selection: Selection, *, ending: bool,
                      streaming: bool) -> Position:
    word = text.strip().lower()
    if word in ("earliest", "latest"):
        if not streaming and word == ("earliest" if ending else "latest"):
            raise _bad(name, f"{word!r} makes no sense for a batch query's "
                             f"{'end' if ending else 'start'} (it reads nothing)")
        return Position("earliest" if word == "earliest" else "latest", option=name)
    try:
        per_queue = offsets_from_json(text, name, minimum=EARLIEST)
    except ValueError as e:
        raise _bad(name, f"expected earliest, latest or JSON: {e}") from None
    if not streaming:
        forbidden = EARLIEST if ending else LATEST
        for q, n in per_queue.items():
            if n == forbidden:
                raise _bad(name, f"{q}: {n} ({'earliest' if ending else 'latest'}) is not allowed "
                                 "in a batch query")
    _check_topics(name, per_queue, selection)
    return Position("offsets", per_queue, default="latest" if ending else "earliest", option=name)


def _starting(opts: Mapping[str, str], selection: Selection, streaming: bool) -> Position:
    given = [n for n in ("startingOffsets", "startingTimestamp", "startingOffsetsByTimestamp")
             if n.lower() in opts]
    if len(given) > 1:
        raise ValueError(f"rocketmq source: the options {' and '.join(given)} contradict each other "
                         "(give at most one)")
    if not given:
        return Position("latest" if streaming else "earliest", option="startingOffsets")
    name = given[0]
    text = opts[name.lower()]
    if name == "startingOffsets":
        return _offsets_position(name, text, selection, ending=False, streaming=streaming)
    if name == "startingTimestamp":
        return Position("timestamp", timestamp=_int(name, text, 0), option=name)
    try:
        per_queue = offsets_from_json(text, name, minimum=0)
    except ValueError as e:
        raise _bad(name, str(e)) from None
    _check_topics(name, per_queue, selection)
    return Position("timestamps", per_queue, option=name)


def _bool(name: str, text: str) -> bool:
    word = text.strip().lower()
    if word not in ("true", "false"):
        raise _bad(name, f"expected true or false, got {text!r}")
    return word == "true"


def parse_tags(expression: str) -> frozenset[str] | None:
    """RocketMQ's tag expression: ``*`` or empty -> None (every tag), ``a || b`` -> {a, b}."""
    text = expression.strip()
    if not text or text == "*":
        return None
    tags = [t.strip() for t in text.split("||")]
    if any(not t for t in tags):
        raise _bad("subExpression", f"{expression!r} has an empty tag (expected * or TagA || TagB)")
    return frozenset(tags)


def parse_source_options(options: Mapping[str, str], *, streaming: bool) -> SourceOptions:
    """Check ``options`` (as Spark gives them: keys in any case) for a batch or streaming read."""
    opts = {k.lower(): str(v) for k, v in options.items()}
    unknown = sorted(k for k in opts if k not in _CANONICAL)
    if unknown:
        raise ValueError(f"rocketmq source: unknown option(s) {', '.join(unknown)}; the options are "
                         f"{', '.join(OPTION_NAMES)}")
    nameserver = opts.get("nameserver", "").strip()
    if not nameserver:
        raise _bad("nameserver", "required: the NameServer addresses, host:port;host:port")
    selection = _selection(opts)
    starting = _starting(opts, selection, streaming)
    ending: Position | None = None
    if "endingoffsets" in opts:
        if streaming:
            raise _bad("endingOffsets", "only batch queries (spark.read) have an end; a stream reads on "
                                        "(use trigger(availableNow=True) to stop at the data present "
                                        "when it starts)")
        ending = _offsets_position("endingOffsets", opts["endingoffsets"], selection, ending=True,
                                   streaming=False)
    elif not streaming:
        ending = Position("latest", option="endingOffsets")
    limit = None
    if "maxoffsetspertrigger" in opts:
        if not streaming:
            raise _bad("maxOffsetsPerTrigger", "only streaming queries (spark.readStream) have "
                                               "triggers; a batch query reads its whole range")
        limit = _int("maxOffsetsPerTrigger", opts["maxoffsetspertrigger"], 1)
    fail = _bool("failOnDataLoss", opts.get("failondataloss", "true"))
    expression = opts.get("subexpression", "*").strip() or "*"
    tags = parse_tags(expression)
    group = opts.get("group")
    if group is not None:
        group = group.strip()
        if _GROUP.fullmatch(group) is None:
            raise _bad("group", f"{group!r} is not a group name (1-255 of letters, digits, %, |, _, -)")
    return SourceOptions(nameserver, selection, starting, ending, limit, fail,
                         expression if tags is not None else "*", tags, group)


def resolve_position(position: Position, bounds: Mapping[QueueKey, tuple[int, int]],
                     search: Callable[[Mapping[QueueKey, int]], Offsets]) -> Offsets:
    """The offset ``position`` names for each queue of ``bounds`` (``{queue: (min, max)}``).

    ``search`` maps ``{queue: timestamp}`` to offsets (the broker's search by time). An offset
    given in JSON may lie below the queue's min (the caller decides about that data loss) but not
    above its max, and may only name existing queues: both are ``ValueError``s."""
    name = position.option or "offsets"
    queues = sorted(bounds)
    missing = sorted(set(position.per_queue) - set(bounds))
    if missing:
        first = missing[0]
        ids = [q.queue_id for q in queues if (q.topic, q.broker) == (first.topic, first.broker)]
        raise _bad(name, f"{first} does not exist (queues of that topic on that broker: {ids})")
    if position.kind == "earliest":
        return {q: bounds[q][0] for q in queues}
    if position.kind == "latest":
        return {q: bounds[q][1] for q in queues}
    if position.kind == "timestamp":
        return dict(search(dict.fromkeys(queues, position.timestamp)))
    if position.kind == "timestamps":
        found = search({q: position.per_queue[q] for q in queues if q in position.per_queue})
        return {q: found[q] if q in found else bounds[q][0] for q in queues}
    out: Offsets = {}
    for q in queues:
        lo, hi = bounds[q]
        n = position.per_queue.get(q, LATEST if position.default == "latest" else EARLIEST)
        if n > hi:
            raise _bad(name, f"{q}: offset {n} is beyond the queue's end ({hi})")
        out[q] = lo if n == EARLIEST else hi if n == LATEST else n
    return out
