"""Which build of the hot paths runs: the compiled core or its pure-Python twins.

A few functions touch every message (record decode, frame split, header coercion, ...). Each has
a pure-Python reference implementation in the module that owns it, and may have a compiled twin
(a Cython extension module beside it, named ``_<name>_c``) with the same signature and the same
results, checked equal by hypothesis tests. The owning module asks ``load`` for the extension
and binds the compiled functions when it is there:

    _c = native.load("rocketlite.formats._record_c")
    decode = _c.decode if _c is not None else _decode_py

``ROCKETLITE_PURE=1`` (read once, at import) forces every module onto its pure twin. An extension
that was not built (no compiler at install time, ``ROCKETLITE_NO_EXTENSIONS=1``) or that fails to
import leaves its module on the pure path too; ``describe`` says which path runs, for the start-up
log line.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

__all__ = ["PURE", "describe", "load", "loaded"]

PURE = os.environ.get("ROCKETLITE_PURE", "").strip().lower() not in ("", "0", "false", "no")
"""True when ``ROCKETLITE_PURE`` asks for the pure-Python path."""

_state: dict[str, str | None] = {}  # extension module -> None if loaded, else why not


def load(name: str) -> ModuleType | None:
    """The compiled extension ``name``, or None when the pure twin must run (``ROCKETLITE_PURE``,
    not built, or it fails to import)."""
    if PURE:
        _state[name] = "ROCKETLITE_PURE is set"
        return None
    try:
        mod = importlib.import_module(name)
    except ImportError as e:
        _state[name] = f"not built: {e}"
        return None
    _state[name] = None
    return mod


def loaded() -> dict[str, str | None]:
    """Every extension asked for so far: None if it runs, else why its pure twin runs instead."""
    return dict(_state)


def describe() -> str:
    """One line for the start-up log: which path the hot paths run on."""
    if not _state:
        return "pure Python (no compiled module asked for)"
    missing = {name: why for name, why in _state.items() if why is not None}
    if not missing:
        return f"compiled core ({len(_state)} modules)"
    if PURE:
        return "pure Python (ROCKETLITE_PURE is set)"
    if len(missing) == len(_state):
        return f"pure Python (the compiled core is {next(iter(missing.values()))})"
    return (f"compiled core, partly: {len(_state) - len(missing)} of {len(_state)} modules "
            f"(pure: {', '.join(sorted(missing))})")
