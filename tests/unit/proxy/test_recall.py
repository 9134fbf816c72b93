"""The recall handle (``RecallMessageHandle.HandleV1``): its codec, Java's vectors and refusals."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketlite.broker.recall import RecallError, RecallHandle
from rocketlite.broker.timer_divert import TIMER_TOPIC
from rocketlite.formats.properties import encode_properties
from rocketlite.protocol.codes import ResponseCode
from rocketlite.proxy.recall import handle_for, recall_handle
from rocketlite.store.message import MessageToStore

# A field of a handle: any text without the separator (Java's split would cut it).
FIELD = st.text(st.characters(blacklist_characters=" ", blacklist_categories=["Cs"]), min_size=1,
                max_size=40)


def b64(raw: str) -> str:
    return base64.urlsafe_b64encode(raw.encode()).decode()


def test_java_layout() -> None:
    h = recall_handle("topic", "broker-0", 1_700_000_000_999, "7F0000010001")
    assert h == b64("v1 topic broker-0 1700000001000 7F0000010001")  # TIMER_OUT_MS + 1
    assert RecallHandle.decode(h) == RecallHandle("topic", "broker-0", "1700000001000",
                                                  "7F0000010001")


@given(FIELD, FIELD, FIELD, FIELD)
def test_round_trip(topic: str, broker: str, ts: str, msg_id: str) -> None:
    h = RecallHandle(topic, broker, ts, msg_id)
    text = h.encode()
    assert set(text) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_=")
    assert RecallHandle.decode(text) == h
    assert RecallHandle.decode(text.rstrip("=")) == h  # Java's URL decoder: padding optional


def test_extra_fields_are_ignored() -> None:
    assert RecallHandle.decode(b64("v1 t b 5 id more")) == RecallHandle("t", "b", "5", "id")


@pytest.mark.parametrize("bad", [
    "", b64("v1 a b c"), b64("v2 a b c d"), "v1 a b c d", "!!!!", b64("v1 a b c d") + "*",
    b64("v1 a b c "), "A" * 5000,
])
def test_invalid_handles(bad: str) -> None:
    with pytest.raises(RecallError, match="recall handle is invalid") as e:
        RecallHandle.decode(bad)
    assert e.value.response_code == ResponseCode.ILLEGAL_OPERATION


def test_handle_for_a_stored_message() -> None:
    def stored(topic: str, **props: str) -> MessageToStore:
        return MessageToStore(topic, b"x", properties=encode_properties(props))

    timed = stored(TIMER_TOPIC, TIMER_OUT_MS="1000", REAL_TOPIC="T", UNIQ_KEY="U")
    assert RecallHandle.decode(handle_for(timed, "b")) == RecallHandle("T", "b", "1001", "U")
    assert handle_for(stored("T", UNIQ_KEY="U"), "b") == ""  # not timed
    assert handle_for(stored(TIMER_TOPIC, TIMER_OUT_MS="1000", REAL_TOPIC="%RETRY%G",
                             UNIQ_KEY="U"), "b") == ""
    assert handle_for(stored(TIMER_TOPIC, REAL_TOPIC="T", UNIQ_KEY="U"), "b") == ""
