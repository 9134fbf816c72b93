"""The compiled twins for tests (not a test module): every ``_*_c.pyx`` under src/rocketlite and
its extension, imported directly, so twin tests run under ``ROCKETLITE_PURE=1`` as well."""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType

SRC = Path(__file__).resolve().parent.parent / "src"


def extension_names() -> list[str]:
    return sorted(".".join(p.relative_to(SRC).with_suffix("").parts)
                  for p in SRC.glob("rocketlite/**/_*_c.pyx"))


def twin(name: str) -> ModuleType:
    """The compiled extension ``name``; fails (never skips) when it was not built."""
    try:
        return importlib.import_module(name)
    except ImportError as e:
        raise AssertionError(
            f"{name} is not built ({e}): `pip install -e .` builds it (Cython and a C compiler); "
            "the twin tests compare it with its pure-Python reference") from e
