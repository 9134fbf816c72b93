"""The topic source's offset logic without Spark: offset JSON, rate-limit split, data loss, ranges."""

from __future__ import annotations

import json
import logging
import math
import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketlite.spark.offsets import (
    DataLoss,
    DataLossError,
    QueueKey,
    QueueRange,
    batch_ranges,
    cap_to,
    find_data_loss,
    next_end,
    offsets_from_json,
    offsets_text,
    offsets_to_json,
    plan_ranges,
    queues_from_json,
    settle_data_loss,
    split_limit,
)

A0, A1, A2 = (QueueKey("TopicA", "broker-a", i) for i in range(3))
B0 = QueueKey("TopicA", "broker-b", 0)

queue_keys = st.builds(QueueKey, st.sampled_from(["T1", "T2", "t-3"]), st.sampled_from(["broker-a", "b"]),
                       st.integers(0, 20))


# ------------------------------------------------------------------------------------------- JSON


def test_offsets_json_has_string_keys_sorted_as_strings() -> None:
    offsets = {QueueKey("Z", "b", 2): 5, QueueKey("A", "b", 10): 7, QueueKey("A", "b", 2): 3,
               QueueKey("A", "a", 0): 1}
    nested = offsets_to_json(offsets)
    assert nested == {"A": {"a": {"0": 1}, "b": {"10": 7, "2": 3}}, "Z": {"b": {"2": 5}}}
    text = json.dumps(nested)
    assert text == json.dumps(nested, sort_keys=True)
    assert list(nested) == ["A", "Z"] and list(nested["A"]["b"]) == ["10", "2"]


@given(st.dictionaries(queue_keys, st.integers(0, 2**63 - 1), max_size=12))
def test_offsets_round_trip_through_sparks_json(offsets: dict[QueueKey, int]) -> None:
    text = offsets_text(offsets)
    # Spark: json.dumps in Python, a string in the JVM / checkpoint, json.loads back.
    back = offsets_from_json(json.loads(text))
    assert back == offsets
    assert offsets_text(back) == text  # equal positions give equal text, whatever the dict order
    assert offsets_text(dict(reversed(list(offsets.items())))) == text


def test_offsets_from_json_accepts_text_and_user_markers() -> None:
    text = '{"TopicA": {"broker-a": {"0": 23, "1": -2, "2": -1}}}'
    assert offsets_from_json(text, minimum=-2) == {A0: 23, A1: -2, A2: -1}


@pytest.mark.parametrize(("obj", "fragment"), [
    ("not json", "not valid JSON"),
    ([1, 2], "must be a JSON object"),
    ({"TopicA": [0]}, "must be a JSON object"),
    ({"TopicA": {"broker-a": [0]}}, 'expected {"queueId": offset}'),
    ({"TopicA": {"broker-a": {"x": 1}}}, "queue id 'x' is not a non-negative integer"),
    ({"TopicA": {"broker-a": {"-1": 1}}}, "queue id '-1'"),
    ({"TopicA": {"broker-a": {"0": -1}}}, "is not an offset"),
    ({"TopicA": {"broker-a": {"0": 1.5}}}, "is not an offset"),
    ({"TopicA": {"broker-a": {"0": True}}}, "is not an offset"),
    ({"TopicA": {"broker-a": {"0": "5"}}}, "is not an offset"),
    ({"TopicA": {"": {"0": 1}}}, "must map broker names"),
])
def test_offsets_from_json_rejects_malformed_offsets(obj: object, fragment: str) -> None:
    with pytest.raises(ValueError, match="the start") as e:
        offsets_from_json(obj, "the start")
    assert fragment in str(e.value)


def test_queues_from_json() -> None:
    assert queues_from_json('{"TopicA": {"broker-b": [0], "broker-a": [2, 0, 2]}}', "assign") == [A0, A2, B0]
    for bad in ('{"TopicA": {"broker-a": []}}', '{"TopicA": {"broker-a": [-1]}}', '{"TopicA": ["x"]}'):
        with pytest.raises(ValueError, match="assign"):
            queues_from_json(bad, "assign")


# ------------------------------------------------------------------------------------- rate limit


def test_split_limit_is_proportional_to_backlog() -> None:
    start = {A0: 0, A1: 0}
    available = {A0: 60, A1: 40}
    ends = []
    while start != available:
        start = split_limit(start, available, 30)
        ends.append(dict(start))
    assert ends == [{A0: 18, A1: 12}, {A0: 36, A1: 24}, {A0: 54, A1: 36}, {A0: 60, A1: 40}]


def test_split_limit_gives_leftover_to_largest_remainders_then_queue_order() -> None:
    # A limit above the total backlog reads everything...
    assert split_limit({A0: 0, A1: 0, A2: 0}, {A0: 1, A1: 1, A2: 1}, 10) == {A0: 1, A1: 1, A2: 1}
    # ...limit 2 over three equal backlogs: remainders tie, queue order decides.
    assert split_limit({A0: 0, A1: 0, A2: 0}, {A0: 5, A1: 5, A2: 5}, 2) == {A0: 1, A1: 1, A2: 0}
    # limit 1 over 4, 5, 5: the larger remainders (the 5s) win, A1 before A2.
    assert split_limit({A0: 0, A1: 0, A2: 0}, {A0: 4, A1: 5, A2: 5}, 1) == {A0: 0, A1: 1, A2: 0}


def test_split_limit_keeps_queues_without_backlog_and_never_goes_back() -> None:
    assert split_limit({A0: 50, A1: 3}, {A0: 50, A1: 10, A2: 7}, 4) == {A0: 50, A1: 7, A2: 7}
    assert split_limit({A0: 90}, {A0: 50}, 10) == {A0: 90}  # start beyond the end: stays
    with pytest.raises(ValueError, match="at least 1"):
        split_limit({A0: 0}, {A0: 5}, 0)


@given(st.dictionaries(queue_keys, st.tuples(st.integers(0, 10**6), st.integers(0, 5000)), max_size=10),
       st.integers(1, 3000))
def test_split_limit_invariants(queues: dict[QueueKey, tuple[int, int]], limit: int) -> None:
    start = {q: s for q, (s, _) in queues.items()}
    available = {q: s + n for q, (s, n) in queues.items()}
    total = sum(n for _, n in queues.values())
    ends = split_limit(start, available, limit)
    assert set(ends) == set(available)
    assert all(start[q] <= ends[q] <= available[q] for q in ends)
    read = sum(ends[q] - start[q] for q in ends)
    assert read == min(limit, total)  # never above the limit; progress whenever there is data
    assert split_limit(dict(reversed(list(start.items()))), available, limit) == ends  # deterministic
    # Repeated triggers drain everything in the fewest batches the limit allows.
    batches, cur = 0, start
    while cur != available:
        cur = split_limit(cur, available, limit)
        batches += 1
    assert batches == math.ceil(total / limit)


def test_cap_to_target() -> None:
    available = {A0: 100, A1: 100, A2: 100}
    target = {A0: 60, A1: 200}
    # A2 appeared after the target was fixed: none of its data is read.
    assert cap_to(available, target, {A0: 10, A1: 10, A2: 40}) == {A0: 60, A1: 100, A2: 40}
    assert cap_to(available, target, {A0: 70}) == {A0: 70, A1: 100, A2: 100}


# -------------------------------------------------------------------------------------- data loss


def test_find_data_loss_below_min_and_above_max() -> None:
    bounds = {A0: (100, 200), A1: (0, 10), A2: (0, 0)}
    losses = find_data_loss({A0: 40, A1: 50, A2: 0, B0: 5}, bounds)
    assert losses == [DataLoss(A0, 40, 100, 200), DataLoss(A1, 50, 0, 10)]
    assert losses[0].deleted and not losses[1].deleted
    assert find_data_loss({A0: 100, A1: 10}, bounds) == []


def test_settle_data_loss_fails_with_a_clear_message() -> None:
    with pytest.raises(DataLossError) as e:
        settle_data_loss({A0: 40, A1: 5}, {A0: (100, 200), A1: (0, 10)}, fail=True)
    text = str(e.value)
    assert "failOnDataLoss=true" in text
    assert "topic 'TopicA' broker 'broker-a' queue 0: messages at offsets 40..99 are gone" in text
    assert "oldest left is at offset 100" in text
    assert e.value.losses == [DataLoss(A0, 40, 100, 200)]
    assert str(pickle.loads(pickle.dumps(e.value))) == text


def test_settle_data_loss_skips_ahead_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, "rocketlite.spark.offsets"):
        out = settle_data_loss({A0: 40, A1: 50, A2: 3}, {A0: (100, 200), A1: (0, 10), A2: (0, 9)}, fail=False)
    assert out == {A0: 100, A1: 0, A2: 3}
    assert "failOnDataLoss=false" in caplog.text and "queue 0" in caplog.text
    assert "queue 1: the queue ends at offset 10, below offset 50" in caplog.text


# ------------------------------------------------------------------------------------ next batch


def test_next_end_reads_what_is_available_and_ends_with_the_start() -> None:
    bounds = {A0: (0, 60), A1: (0, 40)}
    assert next_end({A0: 0, A1: 0}, bounds, max_rows=None, target=None, fail=True) == {A0: 60, A1: 40}
    assert next_end({A0: 0, A1: 0}, bounds, max_rows=30, target=None, fail=True) == {A0: 18, A1: 12}
    # Nothing new: the same offsets, the same JSON text (how availableNow stops).
    end = next_end({A0: 60, A1: 40}, bounds, max_rows=30, target=None, fail=True)
    assert offsets_text(end) == offsets_text({A1: 40, A0: 60})


def test_next_end_respects_the_available_now_target() -> None:
    bounds = {A0: (0, 100), A1: (0, 100), A2: (0, 100)}
    target = {A0: 50, A1: 80}  # A2 appeared after availableNow fixed its target
    begin = {A0: 0, A1: 70, A2: 10}
    assert next_end(begin, bounds, max_rows=None, target=target, fail=True) == {A0: 50, A1: 80, A2: 10}
    assert next_end(begin, bounds, max_rows=6, target=target, fail=True) == {A0: 5, A1: 71, A2: 10}


def test_next_end_new_vanished_and_recreated_queues() -> None:
    bounds = {A0: (0, 10), A1: (5, 9), B0: (0, 3)}
    # A1 is new (joins at its min, read next batch); A2 vanished (keeps its offset); B0 was
    # recreated: it ends at 3 below the start 50, and rejoins at its min.
    begin = {A0: 2, A2: 7, B0: 50}
    assert next_end(begin, bounds, max_rows=None, target=None, fail=False) == {A0: 10, A1: 5, A2: 7, B0: 0}
    with pytest.raises(DataLossError, match="queue ends at offset 3, below offset 50"):
        next_end(begin, bounds, max_rows=None, target=None, fail=True)


def test_next_end_after_retention() -> None:
    bounds = {A0: (100, 200), A1: (0, 10)}
    with pytest.raises(DataLossError, match=r"offsets 40\.\.99 are gone"):
        next_end({A0: 40, A1: 0}, bounds, max_rows=None, target=None, fail=True)
    # Without failing, the share is counted from the min: 22 over backlogs 100 and 10.
    assert next_end({A0: 40, A1: 0}, bounds, max_rows=22, target=None, fail=False) == {A0: 120, A1: 2}


# ------------------------------------------------------------------------------------- partitions


def test_plan_ranges() -> None:
    start = {A0: 0, A1: 10, A2: 30}
    end = {A0: 5, A1: 10, A2: 20, B0: 7}
    # A1 empty; A2 reset (end below start): nothing now; B0 joined this batch: nothing yet.
    assert plan_ranges(start, end) == [QueueRange("TopicA", "broker-a", 0, 0, 5)]
    rng = plan_ranges({A0: 3}, {A0: 8})[0]
    assert (rng.queue, rng.size) == (A0, 5)


def test_batch_ranges() -> None:
    bounds = {A0: (100, 200), A1: (0, 50), A2: (0, 50)}
    start, end = {A0: 40, A1: 10, A2: 0}, {A0: 150, A1: 30, A2: 0}
    with pytest.raises(DataLossError, match=r"offsets 40\.\.99 are gone"):
        batch_ranges(start, end, bounds, fail=True)
    assert batch_ranges(start, end, bounds, fail=False) == [QueueRange("TopicA", "broker-a", 0, 100, 150),
                                                           QueueRange("TopicA", "broker-a", 1, 10, 30)]
    # All of A0's range is gone: nothing to read there.
    assert batch_ranges({A0: 40}, {A0: 90}, bounds, fail=False) == []
    with pytest.raises(ValueError, match=r"queue 1 starts at offset 40 \(startingOffsets\) after it ends at "
                                         r"offset 30 \(endingOffsets\)"):
        batch_ranges({A1: 40}, {A1: 30}, bounds, fail=True)
