"""The compiled ``gather`` (a pull's records copied out of a segment in one pass) against the
pure ``_gather_py``: the same bytes for any ranges, the same refusal of ranges outside the
segment, from bytes and from a real mapping."""

from __future__ import annotations

import mmap

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nativehelp import twin
from rocketlite.store import get_message as ref

C = twin("rocketlite.store._gather_c")


@st.composite
def segments_and_spans(draw: st.DrawFn) -> tuple[bytes, list[int]]:
    data = draw(st.binary(max_size=300))
    spans: list[int] = []
    for _ in range(draw(st.integers(0, 8))):
        start = draw(st.integers(-2, len(data) + 2))
        spans += (start, draw(st.integers(-1, len(data) - start + 2 if start < len(data) else 3)))
    if draw(st.booleans()):
        spans.append(0)  # an odd length
    return data, spans


def _outcome(fn: object, data: object, spans: list[int]) -> bytes | str:
    try:
        return fn(data, spans)  # type: ignore[operator,no-any-return]
    except ValueError as e:
        return f"ValueError: {e}"


@given(segments_and_spans())
def test_gather(case: tuple[bytes, list[int]]) -> None:
    data, spans = case
    assert _outcome(C.gather, data, spans) == _outcome(ref._gather_py, data, spans)


def test_gather_reads_a_mapping_and_lets_it_close() -> None:
    with mmap.mmap(-1, 4096) as mm:
        mm[:10] = b"0123456789"
        spans = [2, 3, 0, 2, 9, 1]
        assert C.gather(mm, spans) == ref._gather_py(mm, spans) == b"234019"
        with pytest.raises(ValueError, match="outside"):
            C.gather(mm, [4090, 7])
    # the context manager closed the mapping: no export was left behind by either path
