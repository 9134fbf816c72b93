"""Consoles for the command line's tables and lines.

On a terminal a table fits the window. Piped (``rocketlite store inspect | less``, ``> file``) it is
printed full width instead: no column is cut to ``offs…`` to fit 80 columns, a line is one row, and
no colour codes are written (``--json`` is there for scripts)."""

from __future__ import annotations

import sys

from rich.console import Console

PIPED_WIDTH = 10_000
"""Wide enough for any row; a rich table only takes the width its cells need."""


def console(stderr: bool = False) -> Console:
    """A console on stdout (or stderr) sized as the module doc says. The stdout one writes to
    whatever ``sys.stdout`` is when it prints (a module-level console follows a test runner's
    capture); its width is decided now."""
    stream = sys.stderr if stderr else sys.stdout
    return Console(file=stream if stderr else None,
                   width=None if stream.isatty() else PIPED_WIDTH, soft_wrap=False)
