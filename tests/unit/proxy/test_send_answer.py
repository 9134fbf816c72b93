"""``send_answer`` writes the bytes protobuf writes for a SendMessageResponse."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from rocketlite.proxy import send_answer as answer
from rocketlite.proxy.pb import definition_pb2 as pb
from rocketlite.proxy.pb import service_pb2 as spb

texts = st.text(max_size=80)
codes = st.sampled_from([int(v) for v in pb.Code.values()])
entries = st.lists(st.tuples(texts, texts, st.integers(-(2**63), 2**63 - 1), texts), max_size=8)


@given(codes, texts, entries)
def test_the_bytes_are_protobufs(code: int, message: str,
                                 items: list[tuple[str, str, int, str]]) -> None:
    expected = spb.SendMessageResponse()
    expected.status.code = code  # type: ignore[assignment]
    expected.status.message = message
    for mid, tid, offset, recall in items:
        e = expected.entries.add()
        e.status.CopyFrom(expected.status)
        e.message_id, e.transaction_id, e.offset, e.recall_handle = mid, tid, offset, recall
    status = answer.status(code, message)
    field = answer.status_field(status)
    got = answer.response(status, [answer.entry(field, *item) for item in items])
    assert got == expected.SerializeToString()
    assert spb.SendMessageResponse.FromString(got) == expected
    assert answer.Encoded(got).SerializeToString() is got


def test_varints() -> None:
    assert answer.varint(0) == b"\x00"
    assert answer.varint(127) == b"\x7f"
    assert answer.varint(300) == b"\xac\x02"
    assert answer.varint(-1) == b"\xff" * 9 + b"\x01"  # int64 -1: ten bytes


@given(st.lists(st.tuples(texts, st.integers(0, 2**63 - 1)), max_size=8))
def test_plain_ok_is_response_of_ok_entries(items: list[tuple[str, int]]) -> None:
    status = answer.status(20, "OK")
    field = answer.status_field(status)
    assert answer.plain_ok(field, [i for i, _ in items], [o for _, o in items]) == \
        answer.response(status, [answer.entry(field, mid, "", off, "") for mid, off in items])
