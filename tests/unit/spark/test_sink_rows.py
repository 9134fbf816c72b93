"""The topic sink's pure half, without Spark: options, input schema checks, row -> message
conversion, deterministic UNIQ_KEYs and the exactly-once marker."""

from __future__ import annotations

import re

import pytest

from rocketlite.spark.sink_rows import (
    Action,
    Guarantee,
    Marker,
    RowConverter,
    SinkError,
    SinkOptions,
    Target,
    UniqKeys,
    check_schema,
    decide,
    parse_options,
    uniq_key,
)

NS = {"nameserver": "127.0.0.1:9876"}
FULL = [("topic", "string"), ("Body", "binary"), ("tags", "string"), ("keys", "array<string>"),
        ("properties", "map<string,string>"), ("queue_id", "int"), ("extra", "bigint")]


# -- options -----------------------------------------------------------------------------------

def test_options_defaults_and_spellings() -> None:
    o = parse_options({**NS, "checkpointlocation": "/tmp/x", "queryname": "q"})
    assert o == SinkOptions(nameserver="127.0.0.1:9876")
    assert o.guarantee is Guarantee.AT_LEAST_ONCE and o.window == 8
    o = parse_options({**NS, "topic": "T", "deliveryguarantee": "EXACTLY_ONCE", "sinkid": "s-1",
                       "sendtimeoutms": "500", "batchsize": "10", "producergroup": "PG",
                       "dropreservedproperties": "true", "statetopic": "S"})
    assert (o.topic, o.sink_id, o.producer_group, o.state_topic) == ("T", "s-1", "PG", "S")
    assert o.exactly_once and o.window == 64 and o.send_timeout_s == 0.5 and o.batch_size == 10
    assert o.drop_reserved_properties
    assert parse_options({**NS, "maxinflight": "3"}).window == 3
    assert o.max_rows_per_task == 100_000
    assert parse_options({**NS, "maxrowspertask": "10"}).max_rows_per_task == 10


@pytest.mark.parametrize(("options", "message"), [
    ({}, "nameserver is required"),
    ({**NS, "subscribe": "T"}, r"unknown option\(s\) subscribe"),
    ({**NS, "path": "/x"}, "takes no path"),
    ({**NS, "deliveryguarantee": "twice"}, "deliveryGuarantee='twice'"),
    ({**NS, "batchsize": "0"}, r"batchSize=0 is out of range"),
    ({**NS, "sendtimeoutms": "soon"}, "sendTimeoutMs='soon' is not an integer"),
    ({**NS, "topic": "bad topic"}, "option topic='bad topic'"),
    ({**NS, "sinkid": "a/b"}, "option sinkId"),
    ({**NS, "dropreservedproperties": "yes"}, "dropReservedProperties='yes'"),
    ({**NS, "maxrowspertask": "0"}, r"maxRowsPerTask=0 is out of range"),
])
def test_bad_options_name_the_option(options: dict[str, str], message: str) -> None:
    with pytest.raises(SinkError, match=message):
        parse_options(options)


# -- schema ------------------------------------------------------------------------------------

def test_schema_positions_case_insensitive_and_extra_columns_ignored() -> None:
    cols = check_schema(FULL, parse_options(NS))
    assert (cols.topic, cols.body, cols.tags, cols.keys, cols.properties, cols.queue_id) == (0, 1, 2, 3, 4, 5)
    assert not cols.body_is_text and cols.broker_name is None
    cols = check_schema([("body", "string")], parse_options({**NS, "topic": "T"}))
    assert cols.body_is_text and cols.topic is None


@pytest.mark.parametrize(("fields", "message"), [
    ([("value", "binary"), ("topic", "string")], "needs a body column .* columns: value, topic"),
    ([("body", "int"), ("topic", "string")], "column 'body' is int; .* binary or string"),
    ([("body", "binary"), ("topic", "binary")], "column 'topic' is binary; .* string"),
    ([("body", "binary"), ("topic", "string"), ("keys", "array<int>")],
     "'keys' is array<int>; .* string or array<string>"),
    ([("body", "binary"), ("topic", "string"), ("properties", "map<string,int>")], "'properties'"),
    ([("body", "binary"), ("topic", "string"), ("queue_id", "bigint")], "'queue_id' is bigint; .* int"),
    ([("body", "binary"), ("topic", "string"), ("tags", "array<string>")], "'tags'"),
    ([("body", "binary")], "no topic: set .option"),
    ([("body", "binary"), ("BODY", "string"), ("topic", "string")], "'body' and 'BODY' both"),
])
def test_schema_errors_name_the_column(fields: list[tuple[str, str]], message: str) -> None:
    with pytest.raises(SinkError, match=message):
        check_schema(fields, parse_options(NS))


# -- rows --------------------------------------------------------------------------------------

def converter(**options: str) -> RowConverter:
    opts = parse_options({**NS, **options})
    return RowConverter(check_schema(FULL, opts), opts)


def test_row_to_message_with_every_column() -> None:
    row = ("T1", bytearray(b"hello"), "TagA", ["k1", None, "k2"], {"a": "1", "skip": None}, 3, 99)
    msg, target = converter().convert(row, "U" * 32, "row 0")
    assert (msg.topic, msg.body, msg.tags, msg.keys, msg.properties) == (
        "T1", b"hello", "TagA", ["k1", "k2"], {"a": "1"})
    assert msg.uniq_key == "U" * 32 and msg.key_list() == ["k1", "k2"]
    assert target == Target("T1", 3, None)
    msg, target = converter(topic="Over").convert(("T1", b"x", None, None, None, None, 0), "u", "r")
    assert target == Target("Over", None, None) and msg.topic == "Over"  # the option wins
    assert msg.tags is None and msg.key_list() == [] and msg.properties == {}


def test_projection_keeps_only_the_sink_columns_and_arrow_map_pairs() -> None:
    """The Arrow path reads just the columns the sink uses; a map arrives as (key, value) pairs."""
    opts = parse_options(NS)
    fields = [("msg_id", "string"), ("queue_id", "int"), ("body", "binary"), ("topic", "string"),
              ("born_host", "string"), ("properties", "map<string,string>")]
    positions, cols = check_schema(fields, opts).project()
    assert positions == [2, 3, 5, 1]  # body, topic, properties, queue_id
    assert (cols.body, cols.topic, cols.properties, cols.queue_id, cols.tags) == (0, 1, 2, 3, None)
    row = (b"x", "T", [("a", "1"), ("b", None)], 1)
    msg, target = RowConverter(cols, opts).convert(row, "u", "r")
    assert msg.properties == {"a": "1"} and target == Target("T", 1, None)


def test_string_body_keys_string_and_broker_name() -> None:
    opts = parse_options({**NS, "topic": "T"})
    fields = [("body", "string"), ("keys", "string"), ("queue_id", "int"), ("broker_name", "string")]
    conv = RowConverter(check_schema(fields, opts), opts)
    msg, target = conv.convert(("héllo", "a b", 1, "broker-b"), "u", "r")
    assert msg.body == "héllo".encode() and msg.key_list() == ["a", "b"]
    assert target == Target("T", 1, "broker-b")
    _, target = conv.convert(("x", None, None, "broker-b"), "u", "r")
    assert target == Target("T", None, None)  # a broker without a queue names nothing


@pytest.mark.parametrize(("row", "message"), [
    (("T", None, None, None, None, None, 0), "partition 1 row 7: body is null"),
    (("T", b"", None, None, None, None, 0), "body is empty"),
    ((None, b"x", None, None, None, None, 0), "topic is null"),
    (("T", b"x", None, None, {"UNIQ_KEY": "u"}, None, 0), "'UNIQ_KEY' is reserved"),
    (("T", b"x", None, None, {"a": "b\x01c"}, None, 0), "free of"),
])
def test_bad_rows_fail_naming_the_row(row: tuple[object, ...], message: str) -> None:
    with pytest.raises(SinkError, match=message):
        converter().convert(row, "u", "partition 1 row 7")


def test_reserved_properties_dropped_on_request() -> None:
    row = ("T", b"x", None, None, {"UNIQ_KEY": "old", "TAGS": "t", "mine": "1"}, None, 0)
    msg, _ = converter(dropreservedproperties="true").convert(row, "new", "r")
    assert msg.properties == {"mine": "1"} and msg.uniq_key == "new"


# -- UNIQ_KEY ----------------------------------------------------------------------------------

def test_uniq_keys_are_deterministic_hex_and_distinct() -> None:
    keys = UniqKeys("query-1", 4, 2)
    k = keys.key(17)
    assert re.fullmatch(r"[0-9A-F]{32}", k)
    assert k == uniq_key("query-1", 4, 2, 17) == UniqKeys("query-1", 4, 2).key(17)
    variants = {uniq_key(s, b, p, r) for s, b, p, r in [
        ("query-1", 4, 2, 17), ("query-2", 4, 2, 17), ("query-1", 5, 2, 17), ("query-1", 4, 3, 17),
        ("query-1", 4, 2, 18), ("query-1", 42, 2, 17), ("query-1", 4, 21, 7)]}
    assert len(variants) == 7  # every part counts, and the parts do not run together
    assert len({keys.key(i) for i in range(10_000)}) == 10_000


# -- the marker --------------------------------------------------------------------------------

def test_marker_round_trip_and_decisions() -> None:
    for batch in (0, 1, 7, 10**12):
        for done in (False, True):
            assert Marker.decode(Marker(batch, done).encode()) == Marker(batch, done)
    assert Marker(0, False).encode() == 1 and Marker(0, True).encode() == 2
    with pytest.raises(SinkError):
        Marker.decode(0)
    assert decide(None, 0) is Action.COMMIT
    assert decide(Marker(3, True), 4) is Action.COMMIT
    assert decide(Marker(3, False), 4) is Action.COMMIT  # 3's done mark was lost; Spark moved on
    assert decide(Marker(3, True), 3) is Action.SKIP
    assert decide(Marker(3, False), 3) is Action.RESUME
    assert decide(Marker(3, True), 9) is Action.COMMIT  # batches in between were empty
    # 3's done mark was lost and 4 was empty: Spark planned 5 only after commit(3) returned
    assert decide(Marker(3, False), 5) is Action.COMMIT


@pytest.mark.parametrize(("marker", "batch", "message"), [
    # A reused sinkId with a new or reset checkpoint: batch ids start again below the marker's.
    (Marker(3, True), 1, r"sink 'S': commit of batch 1, but the sink's marker is at batch 3 \(done\)"
                         r".*reused by a new or reset checkpoint"),
    (Marker(3, False), 2, r"commit of batch 2, .* marker is at batch 3 \(in progress\)"),
    (Marker(3, True), 0, "reused"),
])
def test_decide_refuses_to_guess(marker: Marker, batch: int, message: str) -> None:
    with pytest.raises(SinkError, match=message):
        decide(marker, batch, "S")
