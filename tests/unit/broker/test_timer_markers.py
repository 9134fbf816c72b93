"""Delete markers in the timer wheel (RocketMQ 5.3's recall), driven round by round with the fake
clock of ``test_timer_service``: a marker due with its message stops it, markers are never
delivered, and they still work after a clean restart or a crash."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from test_timer_service import T0, TOPIC, Env, bodies, make_env

from rocketlite.broker.timer_divert import (
    TIMER_DEL_UNIQKEY,
    TIMER_TOPIC,
    build_delete_key,
    delete_key_of,
)
from rocketlite.formats.properties import decode_properties, encode_properties
from rocketlite.store.message import MessageToStore


def send_at(env: Env, deliver: int, uniq: str, body: bytes) -> None:
    env.send({"TIMER_DELIVER_MS": str(deliver), "UNIQ_KEY": uniq}, body)


def mark(env: Env, deliver: int, uniq: str, topic: str = TOPIC) -> MessageToStore:
    """A delete marker as the broker's recall writes it."""
    msg = MessageToStore(topic, b"0", 0, properties=encode_properties({
        "TIMER_DELIVER_MS": str(deliver), "UNIQ_KEY": uniq,
        TIMER_DEL_UNIQKEY: build_delete_key(topic, uniq)}))
    out = env.timer.divert(msg)
    assert out is not None and out.topic == TIMER_TOPIC
    env.store.put_messages_sync([out])
    return out


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    e = make_env(tmp_path)
    yield e
    e.timer.shutdown()
    e.store.shutdown()


def test_delete_key() -> None:
    assert build_delete_key("T", "U") == "T+U"
    text = encode_properties({"REAL_TOPIC": "T", "UNIQ_KEY": "U"})
    assert delete_key_of(text) == "T+U"
    assert delete_key_of(encode_properties({"UNIQ_KEY": "U"})) is None


def test_marker_stops_its_message_and_is_never_delivered(env: Env) -> None:
    deliver = T0 + 3001  # the handle's time: TIMER_OUT_MS + 1
    send_at(env, deliver, "A", b"a")
    send_at(env, deliver, "B", b"b")
    send_at(env, deliver, "C", b"c")
    env.pump()
    m = mark(env, deliver, "B")
    assert decode_properties(m.properties)["REAL_QID"] == "0"
    env.at(T0 + 10_000)
    assert bodies(env.delivered()) == [b"a", b"c"]
    assert env.delivered(queue_id=0) == []  # the marker's own queue: nothing
    assert env.timer.stats.recalled == 1 and env.timer.stats.delivered == 2


def test_marker_of_another_topic_or_time_stops_nothing(env: Env) -> None:
    send_at(env, T0 + 3001, "A", b"a")
    send_at(env, T0 + 5001, "B", b"b")
    mark(env, T0 + 3001, "A", topic="Other")  # same key, other topic
    mark(env, T0 + 3001, "B")  # right key, another slot
    env.at(T0 + 10_000)
    assert sorted(bodies(env.delivered())) == [b"a", b"b"]
    assert env.delivered(queue_id=0) == [] and env.delivered(0, "Other") == []


def test_marker_too_late_for_its_slot_is_dropped_not_delivered(env: Env) -> None:
    send_at(env, T0 + 2001, "A", b"a")
    env.pump()
    out = env.timer.divert(MessageToStore(TOPIC, b"0", 0, properties=encode_properties({
        "TIMER_DELIVER_MS": str(T0 + 2001), "UNIQ_KEY": "A",
        TIMER_DEL_UNIQKEY: build_delete_key(TOPIC, "A")})))
    assert out is not None
    env.at(T0 + 3500)  # the slot is delivered before the marker is enqueued
    env.store.put_messages_sync([out])
    env.pump()
    assert bodies(env.delivered()) == [b"a"] and env.delivered(queue_id=0) == []


def test_markers_survive_a_clean_restart(env: Env) -> None:
    send_at(env, T0 + 4001, "A", b"a")
    send_at(env, T0 + 4001, "B", b"b")
    mark(env, T0 + 4001, "A")
    env.pump()
    env.restart(clock=T0 + 20_000)
    env.pump()
    assert bodies(env.delivered()) == [b"b"] and env.delivered(queue_id=0) == []


def test_markers_survive_a_crash_mid_way(tmp_path: Path) -> None:
    e = make_env(tmp_path)
    try:
        for i in range(20):
            send_at(e, T0 + 3001, f"U{i}", b"%d" % i)
        e.pump()
        e.timer.flush()  # the checkpoint does not cover the markers
        for i in range(0, 20, 2):
            mark(e, T0 + 3001, f"U{i}")
        e.pump()
        e.restart(crash=True)
        e.at(T0 + 30_000)
        got = set(bodies(e.delivered()))
        assert got == {b"%d" % i for i in range(1, 20, 2)}
        assert e.delivered(queue_id=0) == []
    finally:
        e.timer.shutdown()
        e.store.shutdown()


def test_rolling_marker_rolls_and_still_stops_its_message(tmp_path: Path) -> None:
    e = make_env(tmp_path, timer_roll_window_slot=20)
    try:
        far = T0 + 100_001  # beyond the 20-tick window: both roll first
        send_at(e, far, "A", b"a")
        send_at(e, far, "B", b"b")
        mark(e, far, "A")
        for t in range(T0 + 1000, T0 + 103_000, 1000):
            e.at(t)
        assert bodies(e.delivered()) == [b"b"] and e.delivered(queue_id=0) == []
        assert e.timer.stats.rolled >= 3
    finally:
        e.timer.shutdown()
        e.store.shutdown()
