"""The compiled ``String.hashCode`` against the pure one: the same int (or the same error) for any
text, ASCII, the BMP, astral characters and lone surrogates."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from nativehelp import twin
from rocketlite.formats import javahash as ref

C = twin("rocketlite.formats._javahash_c")
HASH = C.Hasher(ref._java_string_hash_py)


def outcome(f: object, s: str) -> object:
    try:
        return f(s)  # type: ignore[operator]
    except UnicodeError as e:
        return type(e).__name__


@given(st.text(max_size=200) | st.text(alphabet="\ud800\udfff\ue000\uffff\U0001f600a", max_size=20))
def test_hash(s: str) -> None:
    assert outcome(HASH, s) == outcome(ref._java_string_hash_py, s)


def test_known_values() -> None:
    # Values the JVM gives ("TagA".hashCode() etc.), as in tests/unit/formats/test_javahash.py.
    for s in ("", "TagA", "TopicTest#KEY-1", "中文", "\U0001f600", "polygenelubricants"):
        assert HASH(s) == ref._java_string_hash_py(s)
    assert HASH("polygenelubricants") == -2147483648
