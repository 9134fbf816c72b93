"""The topic source's options without Spark: parsing, defaults, contradictions, resolution."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from rocketlite.spark.offsets import EARLIEST, LATEST, Offsets, QueueKey
from rocketlite.spark.options import Position, parse_source_options, parse_tags, resolve_position

NS = "127.0.0.1:9876;127.0.0.2:9876"
A0, A1 = QueueKey("TopicA", "broker-a", 0), QueueKey("TopicA", "broker-a", 1)
B0 = QueueKey("TopicB", "broker-a", 0)


def opts(**kw: str) -> dict[str, str]:
    """Options as Spark hands them over: keys lower-cased."""
    return {k.lower(): v for k, v in {"nameserver": NS, **kw}.items()}


def test_defaults_for_streams_and_batch() -> None:
    stream = parse_source_options(opts(subscribe="TopicA"), streaming=True)
    assert stream.nameserver == NS
    assert stream.selection.topics == ("TopicA",)
    assert stream.starting.kind == "latest" and stream.ending is None
    assert stream.max_offsets_per_trigger is None and stream.fail_on_data_loss
    assert stream.sub_expression == "*" and stream.tags is None and stream.group is None
    batch = parse_source_options(opts(subscribe="TopicA"), streaming=False)
    assert batch.starting.kind == "earliest"
    assert batch.ending is not None and batch.ending.kind == "latest"


def test_every_option_parsed_whatever_its_case() -> None:
    o = parse_source_options({"NameServer": NS, "SUBSCRIBE": " TopicA, TopicB ,TopicA",
                              "startingoffsets": "earliest", "maxOffsetsPerTrigger": "30",
                              "FailOnDataLoss": "False", "subexpression": " TagA || TagB ",
                              "group": "GID_spark"}, streaming=True)
    assert o.selection.topics == ("TopicA", "TopicB")
    assert o.starting.kind == "earliest"
    assert o.max_offsets_per_trigger == 30
    assert not o.fail_on_data_loss
    assert o.tags == frozenset({"TagA", "TagB"}) and o.sub_expression == "TagA || TagB"
    assert o.tag_matches("TagA") and not o.tag_matches("TagC") and not o.tag_matches(None)
    assert o.group == "GID_spark"


@pytest.mark.parametrize(("given", "fragment"), [
    ({}, "exactly one of the options subscribe, subscribePattern or assign is required (got none)"),
    ({"subscribe": "A", "assign": '{"A":{"b":[0]}}'}, "(got subscribe, assign)"),
    ({"subscribe": " , "}, "option subscribe: no topic"),
    ({"subscribe": "bad topic!"}, "option subscribe: topic 'bad topic!' is invalid"),
    ({"subscribePattern": "("}, "option subscribePattern: '(' is not a regular expression"),
    ({"assign": '{"A": {"b": []}}'}, "option assign"),
    ({"subscribe": "A", "topic": "A"}, "unknown option(s) topic"),
    ({"subscribe": "A", "kafka.bootstrap.servers": "x"}, "unknown option(s) kafka.bootstrap.servers"),
    ({"subscribe": "A", "maxOffsetsPerTrigger": "0"}, "option maxOffsetsPerTrigger: 0 is below 1"),
    ({"subscribe": "A", "maxOffsetsPerTrigger": "ten"},
     "option maxOffsetsPerTrigger: 'ten' is not an integer"),
    ({"subscribe": "A", "failOnDataLoss": "yes"}, "option failOnDataLoss: expected true or false"),
    ({"subscribe": "A", "subExpression": "a ||"}, "option subExpression"),
    ({"subscribe": "A", "group": "a group"}, "option group"),
    ({"subscribe": "A", "startingOffsets": "soon"},
     "option startingOffsets: expected earliest, latest or JSON"),
    ({"subscribe": "A", "startingOffsets": '{"B": {"b": {"0": 1}}}'},
     "option startingOffsets: topic 'B' is not one the query reads (subscribe ['A'])"),
    ({"subscribePattern": "A.*", "startingOffsetsByTimestamp": '{"B": {"b": {"0": 1}}}'},
     "topic 'B' is not one the query reads (subscribePattern 'A.*')"),
    ({"assign": '{"A": {"b": [0]}}', "startingOffsets": '{"A": {"b": {"1": 1}}}'},
     "queue 1 is not one of the assigned queues"),
    ({"subscribe": "A", "startingOffsets": "earliest", "startingTimestamp": "5"},
     "the options startingOffsets and startingTimestamp contradict each other"),
    ({"subscribe": "A", "startingTimestamp": "-5"}, "option startingTimestamp: -5 is below 0"),
    ({"subscribe": "A", "endingOffsets": "latest"}, "option endingOffsets: only batch queries"),
])
def test_stream_option_errors_name_the_option(given: dict[str, str], fragment: str) -> None:
    with pytest.raises(ValueError) as e:
        parse_source_options(opts(**given), streaming=True)
    assert fragment in str(e.value)


@pytest.mark.parametrize(("given", "fragment"), [
    ({"maxOffsetsPerTrigger": "5"}, "option maxOffsetsPerTrigger: only streaming queries"),
    ({"startingOffsets": "latest"}, "option startingOffsets: 'latest' makes no sense"),
    ({"endingOffsets": "earliest"}, "option endingOffsets: 'earliest' makes no sense"),
    ({"startingOffsets": '{"A": {"b": {"0": -1}}}'}, "-1 (latest) is not allowed in a batch query"),
    ({"endingOffsets": '{"A": {"b": {"0": -2}}}'}, "-2 (earliest) is not allowed in a batch query"),
])
def test_batch_option_errors_name_the_option(given: dict[str, str], fragment: str) -> None:
    with pytest.raises(ValueError) as e:
        parse_source_options(opts(subscribe="A", **given), streaming=False)
    assert fragment in str(e.value)


def test_missing_nameserver() -> None:
    with pytest.raises(ValueError, match="option nameserver: required"):
        parse_source_options({"subscribe": "A"}, streaming=False)


def test_selections() -> None:
    pattern = parse_source_options(opts(subscribePattern="Topic[AB]"), streaming=True).selection
    assert pattern.allows_topic("TopicA") and not pattern.allows_topic("TopicAB")  # a full match
    assign = parse_source_options(opts(assign='{"TopicA": {"broker-a": [1, 0]}}'), streaming=True).selection
    assert assign.queues == (A0, A1)
    assert assign.allows_topic("TopicA") and not assign.allows_topic("TopicB")


def test_positions_from_json_and_timestamps() -> None:
    o = parse_source_options(opts(subscribe="TopicA",
                                  startingOffsets='{"TopicA":{"broker-a":{"0":5,"1":-2}}}',
                                  endingOffsets='{"TopicA":{"broker-a":{"0":9}}}'), streaming=False)
    assert o.starting == Position("offsets", {A0: 5, A1: EARLIEST}, option="startingOffsets")
    assert o.ending == Position("offsets", {A0: 9}, default="latest", option="endingOffsets")
    ts = parse_source_options(opts(subscribe="TopicA", startingTimestamp="1700000000000"), streaming=True)
    assert ts.starting == Position("timestamp", timestamp=1700000000000, option="startingTimestamp")
    by_ts = '{"TopicA":{"broker-a":{"1":77}}}'
    by = parse_source_options(opts(subscribe="TopicA", startingOffsetsByTimestamp=by_ts), streaming=True)
    assert by.starting == Position("timestamps", {A1: 77}, option="startingOffsetsByTimestamp")


def test_parse_tags() -> None:
    assert parse_tags("*") is None and parse_tags("  ") is None
    assert parse_tags("a||b || c") == frozenset({"a", "b", "c"})
    with pytest.raises(ValueError, match="empty tag"):
        parse_tags("a |||| b")


# ------------------------------------------------------------------------------------- resolution

BOUNDS = {A0: (10, 100), A1: (0, 50), B0: (0, 0)}


def fake_search(times: Mapping[QueueKey, int]) -> Offsets:
    """A broker whose queues hold one message per ms from time 1000 on, offset = ms - 1000."""
    return {q: min(max(t - 1000, BOUNDS[q][0]), BOUNDS[q][1]) for q, t in times.items()}


def test_resolve_earliest_latest_and_json() -> None:
    assert resolve_position(Position("earliest"), BOUNDS, fake_search) == {A0: 10, A1: 0, B0: 0}
    assert resolve_position(Position("latest"), BOUNDS, fake_search) == {A0: 100, A1: 50, B0: 0}
    start = Position("offsets", {A0: 5, A1: LATEST}, option="startingOffsets")
    # Below the min stays (the caller applies failOnDataLoss); unnamed queues take the default.
    assert resolve_position(start, BOUNDS, fake_search) == {A0: 5, A1: 50, B0: 0}
    end = Position("offsets", {A0: 60}, default="latest", option="endingOffsets")
    assert resolve_position(end, BOUNDS, fake_search) == {A0: 60, A1: 50, B0: 0}


def test_resolve_timestamps() -> None:
    at = Position("timestamp", timestamp=1030)
    assert resolve_position(at, BOUNDS, fake_search) == {A0: 30, A1: 30, B0: 0}
    by = Position("timestamps", {A1: 1040})
    assert resolve_position(by, BOUNDS, fake_search) == {A0: 10, A1: 40, B0: 0}


def test_resolve_rejects_unknown_queues_and_offsets_beyond_the_end() -> None:
    unknown = Position("offsets", {QueueKey("TopicA", "broker-a", 7): 1}, option="startingOffsets")
    with pytest.raises(ValueError, match=r"startingOffsets: topic 'TopicA' broker 'broker-a' queue 7 does "
                                         r"not exist \(queues of that topic on that broker: \[0, 1\]\)"):
        resolve_position(unknown, BOUNDS, fake_search)
    with pytest.raises(ValueError, match=r"endingOffsets: .* queue 1: offset 51 is beyond the queue's "
                                         r"end \(50\)"):
        resolve_position(Position("offsets", {A1: 51}, option="endingOffsets"), BOUNDS, fake_search)
