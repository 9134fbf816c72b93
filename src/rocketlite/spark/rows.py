"""The row schema both Spark sources share (topic source and store scan), and messages -> Arrow.

Columns keep RocketMQ's names (``MessageExt``), in this order:

=================  ====================  ==================================================
column             Spark type            from
=================  ====================  ==================================================
topic              string                the record's topic
broker_name        string                the broker that served it (store scan: an option)
queue_id           int                   QUEUEID
queue_offset       bigint                QUEUEOFFSET (the ConsumeQueue index)
commitlog_offset   bigint                PHYSICALOFFSET
msg_id             string                UNIQ_KEY if the producer set one, else the offset id
uniq_key           string (nullable)     the UNIQ_KEY property
keys               array<string>         the KEYS property, split on spaces
tags               string (nullable)     the TAGS property
body               binary                the body, decompressed
properties         map<string,string>    every property, system ones included
born_timestamp     timestamp             BORNTIMESTAMP (ms since the epoch, UTC)
store_timestamp    timestamp             STORETIMESTAMP
born_host          string                BORNHOST as ``ip:port``
store_host         string                STOREHOST as ``ip:port``
reconsume_times    int                   RECONSUMETIMES
sys_flag           int                   SYSFLAG
=================  ====================  ==================================================

Arrow is built column by column (one list comprehension per column, not a dict per row).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from rocketlite.formats.properties import KEY_SEPARATOR, KEYS, TAGS, UNIQ_KEY

if TYPE_CHECKING:
    import pyarrow as pa

    from rocketlite.client.message import MessageExt

SCHEMA_DDL = (
    "topic STRING, broker_name STRING, queue_id INT, queue_offset BIGINT, commitlog_offset BIGINT, "
    "msg_id STRING, uniq_key STRING, keys ARRAY<STRING>, tags STRING, body BINARY, "
    "properties MAP<STRING, STRING>, born_timestamp TIMESTAMP, store_timestamp TIMESTAMP, "
    "born_host STRING, store_host STRING, reconsume_times INT, sys_flag INT"
)
COLUMNS = (
    "topic", "broker_name", "queue_id", "queue_offset", "commitlog_offset", "msg_id", "uniq_key", "keys",
    "tags", "body", "properties", "born_timestamp", "store_timestamp", "born_host", "store_host",
    "reconsume_times", "sys_flag",
)


def arrow_schema() -> pa.Schema:
    import pyarrow as pa

    ts = pa.timestamp("us", tz="UTC")
    return pa.schema([
        ("topic", pa.string()), ("broker_name", pa.string()), ("queue_id", pa.int32()),
        ("queue_offset", pa.int64()), ("commitlog_offset", pa.int64()), ("msg_id", pa.string()),
        ("uniq_key", pa.string()), ("keys", pa.list_(pa.string())), ("tags", pa.string()),
        ("body", pa.binary()), ("properties", pa.map_(pa.string(), pa.string())),
        ("born_timestamp", ts), ("store_timestamp", ts), ("born_host", pa.string()),
        ("store_host", pa.string()), ("reconsume_times", pa.int32()), ("sys_flag", pa.int32()),
    ])


def _keys(props: dict[str, str]) -> list[str]:
    text = props.get(KEYS)
    return [k for k in text.split(KEY_SEPARATOR) if k] if text else []


def to_record_batch(msgs: Sequence[MessageExt], broker_name: str | None = None) -> pa.RecordBatch:
    """``msgs`` as one Arrow batch in the schema above; ``broker_name`` overrides each message's."""
    import pyarrow as pa

    schema = arrow_schema()
    props = [m.properties for m in msgs]
    micros = pa.int64()
    ts = schema.field("born_timestamp").type
    broker = [broker_name] * len(msgs) if broker_name is not None else [m.broker_name for m in msgs]
    arrays = [
        pa.array([m.topic for m in msgs], pa.string()),
        pa.array(broker, pa.string()),
        pa.array([m.queue_id for m in msgs], pa.int32()),
        pa.array([m.queue_offset for m in msgs], pa.int64()),
        pa.array([m.commit_log_offset for m in msgs], pa.int64()),
        pa.array([m.msg_id for m in msgs], pa.string()),
        pa.array([p.get(UNIQ_KEY) for p in props], pa.string()),
        pa.array([_keys(p) for p in props], pa.list_(pa.string())),
        pa.array([p.get(TAGS) for p in props], pa.string()),
        pa.array([m.body for m in msgs], pa.binary()),
        pa.array([list(p.items()) for p in props], pa.map_(pa.string(), pa.string())),
        pa.array([m.born_timestamp * 1000 for m in msgs], micros).cast(ts),
        pa.array([m.store_timestamp * 1000 for m in msgs], micros).cast(ts),
        pa.array([m.born_host for m in msgs], pa.string()),
        pa.array([m.store_host for m in msgs], pa.string()),
        pa.array([m.reconsume_times for m in msgs], pa.int32()),
        pa.array([m.sys_flag for m in msgs], pa.int32()),
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)
