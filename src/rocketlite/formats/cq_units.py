"""The ConsumeQueue units (``consume_queue_unit``) of a run of messages packed in one call: what
the dispatcher writes for a batch an append described (``Dispatcher._dispatch_hint``).
``pack_units`` is the compiled twin (``_cq_units_c``) unless ``ROCKETLITE_PURE``; the pure
function is the reference."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import chain

from rocketlite.common import native
from rocketlite.formats.consume_queue_unit import units_struct

__all__ = ["pack_units"]


def _pack_units_py(offsets: Sequence[int], sizes: Sequence[int], codes: Sequence[int]) -> bytes:
    """One unit per message, back to back: (CommitLog offset, size, tags code) each; ValueError
    when the columns differ in length, ``struct.error`` for a value out of its field's range."""
    return units_struct(len(offsets)).pack(
        *chain.from_iterable(zip(offsets, sizes, codes, strict=True))
    )


pack_units: Callable[[Sequence[int], Sequence[int], Sequence[int]], bytes] = _pack_units_py
_c = native.load("rocketlite.formats._cq_units_c")
if _c is not None:
    pack_units = _c.pack_units
