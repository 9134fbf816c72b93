"""The one error path of the command line: an expected failure is one line and exit code 1.

Expected failures are the ones a user can act on without reading code: a port already in use, a
store held by another process, a bad ``broker.conf`` key or value, a NameServer or broker that
cannot be reached, a topic or group that does not exist (every ``RocketliteError``, and the
``OSError``\\ s of binding, connecting and opening files). They print ``error: <reason>`` on one line
to stderr and exit 1. With ``--debug`` (``rocketlite --debug CMD``, or the command's own
``--debug``) the exception keeps its traceback, and so does any other exception: that one is a bug.
"""

from __future__ import annotations

import errno
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import NoReturn

import typer

from rocketlite.common.errors import RocketliteError

_EXPECTED_ERRNOS = frozenset({
    errno.EADDRINUSE, errno.EADDRNOTAVAIL, errno.EACCES, errno.EPERM, errno.ECONNREFUSED,
    errno.ENOENT, errno.ENOTDIR, errno.EISDIR, errno.ENOSPC, errno.EROFS, errno.EHOSTUNREACH,
    errno.ENETUNREACH, errno.ETIMEDOUT,
})
_ERRNO = re.compile(r"\[Errno \d+\] ")
_BIND_IN_USE = re.compile(
    r"error while attempting to bind on address \('([^']*)', (\d+)\): address already in use")


class _State:
    debug = False


def begin(debug: bool) -> None:
    """A new command line starts: ``rocketlite --debug`` or not (the root callback; it resets what
    an earlier invocation in the same process, a test's, set)."""
    _State.debug = debug


def set_debug(debug: bool) -> None:
    """Show tracebacks from now on when ``debug`` (a ``--debug`` option was given)."""
    if debug:
        _State.debug = True


def debugging() -> bool:
    return _State.debug


def _errno(e: BaseException) -> int | None:
    """The errno of ``e`` or of the ``OSError`` it wraps (``raise OSError(context) from e``)."""
    while isinstance(e, OSError):
        if e.errno is not None:
            return e.errno
        if e.__cause__ is None:
            return None
        e = e.__cause__
    return None


def is_expected(e: BaseException) -> bool:
    """A failure the user can act on (module doc), not a bug."""
    return isinstance(e, RocketliteError) or _errno(e) in _EXPECTED_ERRNOS


def reason(e: BaseException) -> str:
    """``e``'s message on one line (its class name when it has none); asyncio's bind failure
    reworded to name the port."""
    text = " ".join(str(e).split()) or type(e).__name__
    if isinstance(e, OSError):
        text = _ERRNO.sub("", text)
        text = _BIND_IN_USE.sub(r"port \2 is already in use (another process listens there)",
                                text)
    return text


def fail(text: str) -> NoReturn:
    """Print ``error: text`` (one line) on stderr and exit 1."""
    typer.echo(f"error: {' '.join(text.split())}", err=True)
    raise typer.Exit(1)


@contextmanager
def reported(debug: bool = False) -> Iterator[None]:
    """Turn an expected failure inside the block into the one line and exit 1; with ``debug``
    (or a ``--debug`` seen earlier) let it propagate with its traceback."""
    try:
        yield
    except Exception as e:
        if debug or _State.debug or not is_expected(e):
            raise
        fail(reason(e))
