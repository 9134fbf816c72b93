from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from rocketlite.formats.javahash import index_key_hash, java_string_hash, tags_code


def test_java_vectors() -> None:
    assert java_string_hash("TagA") == 2598919
    assert java_string_hash("TopicTest#key1") == -1655984460
    assert java_string_hash("polygenelubricants") == -(2**31)
    assert java_string_hash("emoji😀tag") == 1935494865
    assert java_string_hash("") == 0


def test_index_hash_maps_min_value_to_zero() -> None:
    assert index_key_hash("TopicTest#key1") == 1655984460
    assert index_key_hash("polygenelubricants") == 0


def test_tags_code() -> None:
    assert tags_code(None) == 0
    assert tags_code("") == 0
    assert tags_code("TagA") == 2598919


def _reference(s: str) -> int:
    b = s.encode("utf-16-be")
    h = 0
    for i in range(0, len(b), 2):
        h = (31 * h + int.from_bytes(b[i : i + 2], "big")) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


@given(st.text())
def test_matches_utf16_reference(s: str) -> None:
    assert java_string_hash(s) == _reference(s)
    assert 0 <= index_key_hash(s) <= 0x7FFFFFFF
