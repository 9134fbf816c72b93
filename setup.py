"""Build of rocketlite's compiled core: the Cython twins of the functions that touch every message.

Everything else about the package is in ``pyproject.toml``. The extensions are optional: without a
C compiler, without Cython, or with ``ROCKETLITE_NO_EXTENSIONS=1``, the package installs with a
warning and runs on its pure-Python twins (``rocketlite.common.native`` picks the path at import;
``ROCKETLITE_PURE=1`` forces the pure one at run time).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent
SRC = ROOT / "src"


def _warn(what: str, err: BaseException | str) -> None:
    print(f"rocketlite: {what}: {err}; the pure-Python twins will run instead", file=sys.stderr)


def extensions() -> list[Extension]:
    """One extension per ``_*_c.pyx`` under src/rocketlite, named after its path."""
    if os.environ.get("ROCKETLITE_NO_EXTENSIONS", "").strip() not in ("", "0"):
        return []
    try:
        from Cython.Build import cythonize
    except ImportError as e:
        _warn("Cython is not available", e)
        return []
    exts = [Extension(".".join(p.relative_to(SRC).with_suffix("").parts),
                      [os.path.relpath(p, ROOT)], extra_compile_args=["-O2"])
            for p in sorted(SRC.glob("rocketlite/**/_*_c.pyx"))]
    out: list[Extension] = []
    for ext in exts:  # one at a time: a module that fails leaves the others compiled
        try:
            out += cythonize([ext], quiet=True, include_path=[str(SRC)],
                             compiler_directives={"language_level": "3"})
        except Exception as e:  # noqa: BLE001 - a failed translation must not fail the install
            _warn(f"Cython could not translate {ext.name}", e)
    return out


class OptionalBuildExt(build_ext):
    """``build_ext`` that warns instead of failing: the extensions only speed things up. It
    compiles the extensions in parallel, one job per CPU, unless ``-j``/``--parallel`` says
    otherwise (``pip install -e`` gives none: a serial build was most of a fresh CI venv's time)."""

    def finalize_options(self) -> None:
        super().finalize_options()
        if not self.parallel:
            self.parallel = os.cpu_count() or 1

    def run(self) -> None:
        try:
            super().run()
        except Exception as e:  # noqa: BLE001 - no compiler, no headers: install pure
            _warn("the compiled core could not be built", e)

    def build_extension(self, ext: Extension) -> None:
        try:
            super().build_extension(ext)
        except Exception as e:  # noqa: BLE001 - one module failing leaves the others compiled
            _warn(f"{ext.name} could not be built", e)


setup(ext_modules=extensions(), cmdclass={"build_ext": OptionalBuildExt})
