"""The compiled header decoder against the pure one ``headers._compile`` writes: same object out,
or the same error, for every header class and for any ext fields, lenient coercions included."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nativehelp import twin
from rocketlite.common.errors import HeaderError
from rocketlite.protocol import headers as h

C = twin("rocketlite.protocol._headers_c")

CLASSES = sorted((c for c in vars(h).values() if isinstance(c, type) and issubclass(c, h.Header)
                  and c is not h.Header and dataclasses.is_dataclass(c)), key=lambda c: c.__name__)
PAIRS = [(cls, h._field_table(cls)) for cls in CLASSES]
PAIRS.append((h.SendMessageRequestHeader, h._field_table(h.SendMessageRequestHeader,
                                                        h.SendMessageRequestHeader.V2_KEYS)))

# Values a client may send for any field: digits (in and out of range), signs, empty, booleans in
# odd cases, garbage, and the non-string values a JSON header can carry.
values = st.one_of(
    st.integers(-(2**70), 2**70).map(str),
    st.from_regex(r"[+-]?[0-9]{0,21}", fullmatch=True),
    st.sampled_from(["", "true", "false", "TRUE", "False", "1", "0", "yes", " 1", "١٢", "null"]),
    st.text(max_size=12),
    st.integers(-(2**40), 2**40), st.booleans(), st.floats(allow_nan=False), st.none(),
)


def outcome(decode: object, ext: dict[str, object]) -> object:
    try:
        return decode(ext)  # type: ignore[operator]
    except HeaderError as e:
        return ("HeaderError", str(e), e.field, getattr(e, "value", None))


@pytest.mark.parametrize(("cls", "table"), PAIRS, ids=lambda x: getattr(x, "__name__", "V2"))
@given(data=st.data())
def test_compiled_decoder_equals_the_pure_one(cls: type, table: tuple[h._Field, ...],
                                              data: st.DataObject) -> None:
    keys = [f.key for f in table] + ["ns", "extra"]
    ext = data.draw(st.dictionaries(st.sampled_from(keys), values, max_size=len(keys)))
    pure = h._compile(cls, table).decode
    compiled = C.Decoder(cls, table, h._defaults(cls), h._HELPERS)
    assert outcome(compiled, ext) == outcome(pure, ext)


def test_a_typical_v2_send_header() -> None:
    ext = {"a": "PG", "b": "T", "c": "TBW102", "d": "4", "e": "-1", "f": "0", "g": "1795599582362",
           "h": "0", "i": "TAGS\x01A\x02", "j": "0", "k": "false", "m": "1"}
    table = h._field_table(h.SendMessageRequestHeader, h.SendMessageRequestHeader.V2_KEYS)
    pure = h._compile(h.SendMessageRequestHeader, table).decode(ext)
    cls = h.SendMessageRequestHeader
    assert C.Decoder(cls, table, h._defaults(cls), h._HELPERS)(ext) == pure
    assert pure.queueId == -1 and pure.bornTimestamp == 1795599582362 and pure.batch is True
