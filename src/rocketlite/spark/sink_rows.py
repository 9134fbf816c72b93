"""The pure half of the topic sink (no pyspark, no I/O): options, the input schema, rows ->
``Message``, deterministic UNIQ_KEYs and the exactly-once commit marker. ``topic_sink`` wires it
to Spark; ``sink_client`` talks to the brokers.

Input columns (matched case-insensitively; any other column is ignored, so a DataFrame read with
``format("rocketmq")`` can be written back as it is, given ``dropReservedProperties``):

============  ====================================  =========================================
column        type                                  meaning
============  ====================================  =========================================
body          binary or string (UTF-8), required    the message body; null or empty fails
topic         string                                the target topic (the ``topic`` option wins)
tags          string                                TAGS
keys          string (space separated) or           KEYS, indexed by the broker
              array<string>
properties    map<string,string>                    user properties (null values skipped)
queue_id      int                                   the queue (null: the producer picks one)
broker_name   string                                with queue_id: which broker's queue (else
                                                    the first broker by name that has it)
============  ====================================  =========================================

The ``topic`` option overrides the column, as Kafka's sink does, so one DataFrame read from a
topic can be copied to another by naming it. Property names RocketMQ reserves (``UNIQ_KEY``,
``TAGS``, ``KEYS``, ...) fail the row unless ``dropReservedProperties`` is set (a read
DataFrame's ``properties`` holds them all).

UNIQ_KEY: 32 upper-case hex digits, BLAKE2b with a 16-byte digest over (sink id, batch id,
partition id, row index in the partition). Spark re-runs a failed task or a micro-batch after a
crash with the same partitions and rows (for deterministic plans), so both copies of a row carry
one id: at-least-once consumers deduplicate on it, and the exactly-once commit finds by it what
a crashed commit already made visible. The sink id is the streaming query id (stable across
restarts from one checkpoint) unless the ``sinkId`` option sets it; a batch write uses a random
one per ``save()`` unless ``sinkId`` is given (then a re-run of the same job repeats the ids).

The exactly-once marker is one integer per sink (a consumer offset on the broker, see
``sink_client``): ``2 * batch + 1`` while batch's commits are going out, ``2 * batch + 2`` once
they all went out. One integer, so both facts change in one write.
"""

from __future__ import annotations

import enum
import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rocketlite.client.message import RESERVED_PROPERTIES, Message


class SinkError(ValueError):
    """A sink misconfiguration or a row that cannot become a message; the text names the
    option, column or row."""


class Guarantee(enum.Enum):
    AT_LEAST_ONCE = "at_least_once"
    EXACTLY_ONCE = "exactly_once"


# Option names as users write them; Spark hands them over lower-cased.
OPTION_NAMES = (
    "nameserver", "topic", "producerGroup", "deliveryGuarantee", "sinkId", "stateTopic",
    "sendTimeoutMs", "batchSize", "maxInFlight", "dropReservedProperties", "maxRowsPerTask",
)
_SPARK_OPTIONS = frozenset({"checkpointlocation", "queryname"})  # streaming passes these along
_NAME = re.compile(r"[%|a-zA-Z0-9_-]{1,200}")
DEFAULT_GROUP = "rocketlite-spark-sink"
BATCH_BYTES = 1 << 20  # bodies per SEND_BATCH_MESSAGE, well under the 4 MiB message limit
PENDING_BYTES = 16 << 20  # at-least-once: bodies held in not yet full batches, over all queues
MAX_ROWS_PER_TASK = 100_000  # exactly-once: receipts one task holds and ships to the driver


@dataclass(frozen=True, slots=True)
class SinkOptions:
    nameserver: str
    topic: str | None = None
    producer_group: str = DEFAULT_GROUP
    guarantee: Guarantee = Guarantee.AT_LEAST_ONCE
    sink_id: str | None = None
    state_topic: str | None = None
    send_timeout_s: float = 3.0
    batch_size: int = 256
    max_in_flight: int | None = None
    drop_reserved_properties: bool = False
    max_rows_per_task: int = MAX_ROWS_PER_TASK

    @property
    def exactly_once(self) -> bool:
        return self.guarantee is Guarantee.EXACTLY_ONCE

    @property
    def window(self) -> int:
        """Requests in flight per task: batches (at-least-once) or half messages and ENDs
        (exactly-once, one message per request, so more of them)."""
        if self.max_in_flight is not None:
            return self.max_in_flight
        return 64 if self.exactly_once else 8


def _int(options: Mapping[str, str], name: str, default: int, lo: int, hi: int) -> int:
    text = options.get(name.lower())
    if text is None:
        return default
    try:
        value = int(text)
    except ValueError:
        raise SinkError(f"option {name}={text!r} is not an integer") from None
    if not lo <= value <= hi:
        raise SinkError(f"option {name}={value} is out of range [{lo}, {hi}]")
    return value


def _bool(options: Mapping[str, str], name: str) -> bool:
    text = options.get(name.lower(), "false").strip().lower()
    if text not in ("true", "false"):
        raise SinkError(f"option {name}={text!r} is not true or false")
    return text == "true"


def _name(options: Mapping[str, str], name: str) -> str | None:
    text = options.get(name.lower())
    if text is not None and _NAME.fullmatch(text) is None:
        raise SinkError(f"option {name}={text!r}: use 1-200 letters, digits, '%', '|', '_' or '-'")
    return text


def parse_options(options: Mapping[str, str]) -> SinkOptions:
    """``options`` as Spark passes them (lower-cased keys) -> ``SinkOptions``; unknown names and
    bad values raise ``SinkError`` naming the option."""
    known = {n.lower(): n for n in OPTION_NAMES}
    unknown = sorted(k for k in options if k.lower() not in known and k.lower() not in _SPARK_OPTIONS)
    if unknown:
        hint = " (save() takes no path: name the topic with .option('topic', ...))" \
            if "path" in unknown else ""
        raise SinkError(f"unknown option(s) {', '.join(unknown)} for the rocketmq sink{hint}; "
                        f"known: {', '.join(OPTION_NAMES)}")
    opts = {k.lower(): v for k, v in options.items()}
    nameserver = opts.get("nameserver", "").strip()
    if not nameserver:
        raise SinkError("option nameserver is required (host:port, several separated by ';')")
    text = opts.get("deliveryguarantee", Guarantee.AT_LEAST_ONCE.value).strip().lower()
    try:
        guarantee = Guarantee(text)
    except ValueError:
        raise SinkError(f"option deliveryGuarantee={text!r}: use at_least_once or exactly_once") from None
    return SinkOptions(
        nameserver=nameserver,
        topic=_name(opts, "topic"),
        producer_group=_name(opts, "producerGroup") or DEFAULT_GROUP,
        guarantee=guarantee,
        sink_id=_name(opts, "sinkId"),
        state_topic=_name(opts, "stateTopic"),
        send_timeout_s=_int(opts, "sendTimeoutMs", 3000, 1, 3_600_000) / 1000,
        batch_size=_int(opts, "batchSize", 256, 1, 10_000),
        max_in_flight=_int(opts, "maxInFlight", 0, 1, 1024) if "maxinflight" in opts else None,
        drop_reserved_properties=_bool(opts, "dropReservedProperties"),
        max_rows_per_task=_int(opts, "maxRowsPerTask", MAX_ROWS_PER_TASK, 1, 100_000_000),
    )


# -- the input schema --------------------------------------------------------------------------

_TYPES: dict[str, tuple[str, ...]] = {
    "body": ("binary", "string"),
    "topic": ("string",),
    "tags": ("string",),
    "keys": ("string", "array<string>"),
    "properties": ("map<string,string>",),
    "queue_id": ("int",),
    "broker_name": ("string",),
}


@dataclass(frozen=True, slots=True)
class Columns:
    """Where each known column sits in a row (None: absent), and whether ``body`` is text."""

    body: int
    body_is_text: bool
    topic: int | None = None
    tags: int | None = None
    keys: int | None = None
    properties: int | None = None
    queue_id: int | None = None
    broker_name: int | None = None

    def project(self) -> tuple[list[int], Columns]:
        """The input positions the sink reads, and these columns renumbered for rows that hold
        just those, in that order (the Arrow path converts only what it uses: a DataFrame read
        from a topic has 17 columns, the sink needs at most 7)."""
        names = [n for n in _TYPES if getattr(self, n) is not None]
        positions: list[int] = [getattr(self, n) for n in names]
        at = {n: i for i, n in enumerate(names)}
        return positions, Columns(
            body=at["body"], body_is_text=self.body_is_text, topic=at.get("topic"), tags=at.get("tags"),
            keys=at.get("keys"), properties=at.get("properties"), queue_id=at.get("queue_id"),
            broker_name=at.get("broker_name"))


def check_schema(fields: Sequence[tuple[str, str]], opts: SinkOptions) -> Columns:
    """``fields`` as (name, Spark ``simpleString`` type) pairs -> the column positions; a
    missing body, a wrongly typed column or no topic at all raise ``SinkError`` naming it."""
    found: dict[str, tuple[int, str]] = {}
    for i, (name, dtype) in enumerate(fields):
        key = name.lower()
        if key not in _TYPES:
            continue
        if key in found:
            raise SinkError(f"columns {fields[found[key][0]][0]!r} and {name!r} both name the {key} column")
        dtype = dtype.replace(" ", "").lower()
        if dtype not in _TYPES[key]:
            want = " or ".join(_TYPES[key])
            raise SinkError(f"column {name!r} is {dtype}; the rocketmq sink needs {want} (cast it)")
        found[key] = (i, dtype)
    if "body" not in found:
        raise SinkError("the rocketmq sink needs a body column (binary or string); columns: "
                        + ", ".join(n for n, _ in fields))
    if "topic" not in found and opts.topic is None:
        raise SinkError("no topic: set .option('topic', ...) or add a topic column (string)")

    def at(key: str) -> int | None:
        return found[key][0] if key in found else None

    return Columns(body=found["body"][0], body_is_text=found["body"][1] == "string", topic=at("topic"),
                   tags=at("tags"), keys=at("keys"), properties=at("properties"),
                   queue_id=at("queue_id"), broker_name=at("broker_name"))


# -- rows -> messages --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Target:
    """Where a row goes: the topic and, when the row names one, the queue (and broker)."""

    topic: str
    queue_id: int | None = None
    broker_name: str | None = None


class UniqKeys:
    """Deterministic UNIQ_KEYs of one task: ``key(row_index)`` for (sink, batch, partition)."""

    def __init__(self, sink_id: str, batch_id: int, partition_id: int) -> None:
        self._prefix = hashlib.blake2b(f"{sink_id}\x00{batch_id}\x00{partition_id}\x00".encode(),
                                       digest_size=16)

    def key(self, row_index: int) -> str:
        h = self._prefix.copy()
        h.update(str(row_index).encode())
        return h.hexdigest().upper()


def uniq_key(sink_id: str, batch_id: int, partition_id: int, row_index: int) -> str:
    return UniqKeys(sink_id, batch_id, partition_id).key(row_index)


class RowConverter:
    """Rows (tuples laid out as ``cols`` says) -> (``Message``, ``Target``)."""

    def __init__(self, cols: Columns, opts: SinkOptions) -> None:
        self.cols = cols
        self.topic = opts.topic
        self.drop_reserved = opts.drop_reserved_properties

    def convert(self, row: Sequence[Any], uniq: str, where: str) -> tuple[Message, Target]:
        """``where`` names the row in errors (e.g. "partition 3 row 17")."""
        c = self.cols
        body = row[c.body]
        if body is None:
            raise SinkError(f"{where}: body is null")
        if c.body_is_text:
            body = body.encode()
        elif not isinstance(body, bytes):
            body = bytes(body)
        if not body:
            raise SinkError(f"{where}: body is empty (RocketMQ refuses empty messages)")
        topic = self.topic
        if topic is None:
            topic = row[c.topic] if c.topic is not None else None
            if not topic:
                raise SinkError(f"{where}: topic is null and no topic option is set")
        tags = row[c.tags] if c.tags is not None else None
        keys = row[c.keys] if c.keys is not None else None
        if keys is not None and not isinstance(keys, str):
            keys = [k for k in keys if k]
        props = self._properties(row[c.properties], where) if c.properties is not None else {}
        qid = row[c.queue_id] if c.queue_id is not None else None
        broker = row[c.broker_name] if c.broker_name is not None and qid is not None else None
        msg = Message(topic, body, tags=tags or None, keys=keys, properties=props, uniq_key=uniq)
        return msg, Target(topic, qid, broker)

    def _properties(self, value: Mapping[str, str | None] | Sequence[tuple[str, str | None]] | None,
                    where: str) -> dict[str, str]:
        """A map column's value: a dict from Spark rows, (key, value) pairs from Arrow."""
        if not value:
            return {}
        out: dict[str, str] = {}
        for name, text in value.items() if isinstance(value, Mapping) else value:
            if text is None:
                continue
            if name in RESERVED_PROPERTIES:
                if self.drop_reserved:
                    continue
                raise SinkError(f"{where}: property {name!r} is reserved by RocketMQ (use the tags/keys "
                                "columns, or option dropReservedProperties=true to drop such names)")
            if not name or not text or any(ch in s for s in (name, text) for ch in "\x01\x02"):
                raise SinkError(f"{where}: property {name!r}: names and values must be non-empty and "
                                "free of \\x01 and \\x02")
            out[name] = text
        return out


# -- the exactly-once marker -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Marker:
    batch_id: int
    done: bool  # False: the batch's ENDs were going out (maybe some, maybe all arrived)

    def encode(self) -> int:
        return 2 * self.batch_id + (2 if self.done else 1)

    @staticmethod
    def decode(value: int) -> Marker:
        if value < 1:
            raise SinkError(f"a sink marker is at least 1, not {value}")
        return Marker((value - 1) // 2, value % 2 == 0)


class Action(enum.Enum):
    COMMIT = "commit"  # a batch not seen before: commit every half message
    RESUME = "resume"  # a commit of this batch was cut short: commit only what is not visible yet
    SKIP = "skip"  # the batch was committed: roll the replay's half messages back


def decide(marker: Marker | None, batch_id: int, sink_id: str | None = None) -> Action:
    """What ``commit(batch_id)`` does given the sink's marker. A batch before the marker's (the
    sink id reused by a new or reset checkpoint) raises ``SinkError``: committing or skipping it
    would be a guess. A batch past a marker still in progress is new: Spark plans batch N + 1 only
    after ``commit(N)`` returned, so that marker only lost its "done" mark (a broker crash before
    its offsets were saved)."""
    if marker is None:
        return Action.COMMIT
    sink = "the sink" if sink_id is None else f"sink {sink_id!r}"
    if batch_id < marker.batch_id:
        raise SinkError(
            f"{sink}: commit of batch {batch_id}, but the sink's marker is at batch "
            f"{marker.batch_id} ({'done' if marker.done else 'in progress'}): the sinkId is reused "
            "by a new or reset checkpoint (batch ids start again); give this query its own sinkId")
    if batch_id > marker.batch_id:
        return Action.COMMIT
    if marker.done:
        return Action.SKIP
    return Action.RESUME
