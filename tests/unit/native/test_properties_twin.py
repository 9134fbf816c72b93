"""The compiled property codecs against their pure-Python reference, on the same inputs."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from nativehelp import twin
from rocketlite.formats import properties as ref

C = twin("rocketlite.formats._properties_c")

# Text dense in separators, so every malformed shape (empty names and values, stray \x01) shows up.
prop_text = st.text(alphabet=st.sampled_from(["\x01", "\x02", "a", "B", "7", " ", "é", "\u4e2d"]),
                    max_size=80) | st.text(max_size=80)
NAMES = [b"TAGS\x01", b"KEYS\x01", b"UNIQ_KEY\x01", b"a\x01", b"\x01"]


@given(prop_text)
def test_decode_properties(text: str) -> None:
    assert C.decode_properties(text) == ref._decode_properties_py(text)


@given(st.dictionaries(st.text(alphabet="ABCKEYS_é", min_size=1, max_size=8),
                       st.text(alphabet="xyz 01é\u4e2d", min_size=1, max_size=20), max_size=6))
def test_decode_properties_of_encoded_maps(props: dict[str, str]) -> None:
    text = ref.encode_properties(props)
    assert C.decode_properties(text) == ref._decode_properties_py(text) == props


@given(prop_text.map(lambda t: t.encode()) | st.binary(max_size=80), st.sampled_from(NAMES))
def test_find_property(props: bytes, name: bytes) -> None:
    assert C.find_property(props, name) == ref._find_property_py(props, name)


def test_find_property_examples() -> None:
    p = b"TAGS\x01TagA\x02XTAGS\x01no\x02KEYS\x01\x02UNIQ_KEY\x01\xff\x02"
    for name in NAMES:
        assert C.find_property(p, name) == ref._find_property_py(p, name)
    assert C.find_property(p, b"TAGS\x01") == "TagA"
    assert C.find_property(p, b"KEYS\x01") is None
    assert C.find_property(p, b"UNIQ_KEY\x01") == "\ufffd"
