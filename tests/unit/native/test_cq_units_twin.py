"""The ConsumeQueue units of a run (``formats/cq_units.py``) against the compiled twin
(``_cq_units_c``): the same bytes for any columns, each unit what ``encode_cq_unit`` writes, and the
same error for columns of different lengths or a value out of its field's range."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nativehelp import twin
from rocketlite.formats import cq_units as ref
from rocketlite.formats.consume_queue_unit import encode_cq_unit

C = twin("rocketlite.formats._cq_units_c")

I64 = st.integers(-(2**63), 2**63 - 1)
I32 = st.integers(-(2**31), 2**31 - 1)


@given(st.lists(st.tuples(I64, I32, I64), max_size=40))
def test_units_are_the_unit_encoding(units: list[tuple[int, int, int]]) -> None:
    offsets, sizes, codes = ([u[i] for u in units] for i in range(3))
    want = ref._pack_units_py(offsets, sizes, codes)
    assert C.pack_units(offsets, sizes, codes) == want
    assert want == b"".join(encode_cq_unit(*u) for u in units)


@pytest.mark.parametrize(("offsets", "sizes", "codes", "error"), [
    ([1, 2], [3], [4, 5], ValueError),
    ([2**63], [3], [4], struct.error),
    ([1], [2**31], [4], struct.error),
    ([1], [3], [-(2**63) - 1], struct.error),
    ([1], ["3"], [4], struct.error),
])
def test_bad_columns_are_refused_alike(offsets: list[object], sizes: list[object],
                                       codes: list[object], error: type[Exception]) -> None:
    for fn in (C.pack_units, ref._pack_units_py):
        with pytest.raises(error):
            fn(offsets, sizes, codes)
