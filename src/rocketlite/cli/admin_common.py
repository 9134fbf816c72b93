"""What every ``rocketlite admin`` command shares: the options mqadmin's runbooks use (``-n``,
``--json``, ``--debug``), the one error path and the rendering of messages.

The error path: an expected failure (``AdminError``: a NameServer or broker that cannot be
reached, a topic, group or message that does not exist, a broker's refusal; a client error from
the producer or consumer) prints ``error: <reason>`` on one line to stderr and exits 1. With
``--debug`` the exception propagates with its traceback (and the client's logs are shown). Any
other exception is a bug and keeps its traceback.
"""

from __future__ import annotations

import asyncio
import base64
import enum
import json
import logging
import sys
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, TypeVar

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from rocketlite.acl.sign import Credentials
from rocketlite.admin import AdminSession, MessageView, jsonable, parse_timestamp
from rocketlite.admin.timeparse import format_timestamp
from rocketlite.cli.errors import debugging, reported
from rocketlite.cli.term import console as console  # re-exported: the admin modules print with it
from rocketlite.remoting.tls import TlsOption, make_client_context

T = TypeVar("T")

Namesrv = Annotated[str | None, typer.Option(
    "-n", "--namesrv", envvar="NAMESRV_ADDR",
    help="NameServer address(es), host:port[;host:port] (default: $NAMESRV_ADDR)")]
AsJson = Annotated[bool, typer.Option("--json", help="print JSON (for scripts)")]
Debug = Annotated[bool, typer.Option("--debug", help="on failure, show the traceback")]
Topic = Annotated[str, typer.Option("-t", "--topic", help="the topic")]
Begin = Annotated[str | None, typer.Option(
    "-s", "--begin", help="from this store time: ms since the epoch or yyyy-MM-dd#HH:mm:ss:SSS")]
End = Annotated[str | None, typer.Option(
    "-e", "--end", help="to this store time: ms since the epoch or yyyy-MM-dd#HH:mm:ss:SSS")]


ACCESS_KEY_ENV = "ROCKETLITE_ACCESS_KEY"
SECRET_KEY_ENV = "ROCKETLITE_SECRET_KEY"
AccessKey = Annotated[str | None, typer.Option(
    "--access-key", envvar=ACCESS_KEY_ENV,
    help=f"ACL access key: requests are signed (default: ${ACCESS_KEY_ENV})")]
SecretKey = Annotated[str | None, typer.Option(
    "--secret-key", envvar=SECRET_KEY_ENV,
    help=f"ACL secret key, with --access-key (default: ${SECRET_KEY_ENV})")]
_credentials: list[Credentials | None] = [None]  # set by the admin group's options


def acl_credentials(access_key: str | None, secret_key: str | None) -> Credentials | None:
    """``--access-key``/``--secret-key`` as credentials (both keys, or neither: None)."""
    if (access_key is None) != (secret_key is None):
        raise typer.BadParameter("give both --access-key and --secret-key, or neither",
                                 param_hint="--access-key/--secret-key")
    return None if access_key is None or secret_key is None else Credentials(access_key, secret_key)


def set_credentials(access_key: str | None, secret_key: str | None) -> None:
    """The ACL credentials every admin command of this run signs with (both keys, or neither)."""
    _credentials[0] = acl_credentials(access_key, secret_key)


class BodyFormat(enum.StrEnum):
    TEXT = "text"
    HEX = "hex"
    BASE64 = "base64"
    NONE = "none"


BodyOpt = Annotated[BodyFormat | None, typer.Option(
    "--body", help="message bodies as UTF-8 text, hex, base64 or none (default: text; "
                   "base64 with --json)")]


TlsFlag = Annotated[bool, typer.Option(
    "--tls", envvar="ROCKETLITE_TLS",
    help="connect with TLS (to tlsServerMode=permissive or enforcing servers)")]
TlsCa = Annotated[str | None, typer.Option(
    "--ca", envvar="ROCKETLITE_TLS_CA",
    help="TLS: the CA certificates (PEM) to trust (default: the system's); implies --tls")]
TlsCert = Annotated[str | None, typer.Option(
    "--cert", envvar="ROCKETLITE_TLS_CERT", help="TLS: a client certificate (PEM), for mutual TLS")]
TlsKey = Annotated[str | None, typer.Option(
    "--key", envvar="ROCKETLITE_TLS_KEY", help="TLS: the client certificate's key")]


def tls_option(tls: bool, ca: str | None, cert: str | None, key: str | None) -> TlsOption:
    """The client context ``--tls``/``--ca``/``--cert``/``--key`` ask for (None: plain); a bad
    file is a ConfigError naming it."""
    if not tls and ca is None:
        return None
    return make_client_context(ca, cert, key)


class TlsChoice:
    """The admin group's TLS options (``admin_commands.admin_options``), for every command's
    session (``run``; a bad file is reported there)."""

    ca: str | None = None
    cert: str | None = None
    key: str | None = None
    enabled = False

    @classmethod
    def option(cls) -> TlsOption:
        return tls_option(cls.enabled, cls.ca, cls.cert, cls.key)


def run(make: Callable[[AdminSession], Awaitable[T]], namesrv: str | None, debug: bool) -> T:
    """``make(session)`` on a fresh event loop and session; the shared error path (module doc,
    ``rocketlite.cli.errors``)."""
    if debug or debugging():
        logging.basicConfig(level=logging.DEBUG, stream=sys.stderr)

    async def go() -> T:
        async with AdminSession(namesrv, tls=TlsChoice.option(),
                                credentials=_credentials[0]) as session:
            return await make(session)

    with reported(debug):
        return asyncio.run(go())


def timestamp(text: str | None) -> int | None:
    """A ``-s``/``-e`` value in ms (AdminError for a bad one, reported by ``run``)."""
    return None if text is None else parse_timestamp(text)


def true_false(text: str | None, flag: str) -> bool | None:
    """mqadmin's ``true``/``false`` option values (None when the option was not given)."""
    if text is None:
        return None
    if text.lower() not in ("true", "false"):
        raise typer.BadParameter(f"{text!r} is not true or false", param_hint=flag)
    return text.lower() == "true"


class ProgressBar:
    """A rich progress bar on stderr (gone when done) fed by an admin function's ``on_total`` /
    ``on_progress`` callbacks; use as a context manager around ``run``."""

    def __init__(self, description: str) -> None:
        self.progress = Progress(TextColumn("[progress.description]{task.description}"),
                                 BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                                 console=console(stderr=True), transient=True)
        self.task = self.progress.add_task(description, total=None)

    def total(self, n: int) -> None:
        self.progress.update(self.task, total=n)

    def advance(self, n: int) -> None:
        self.progress.advance(self.task, n)

    def __enter__(self) -> ProgressBar:
        self.progress.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.__exit__(None, None, None)


def render_body(body: bytes, fmt: BodyFormat) -> str:
    if fmt is BodyFormat.HEX:
        return body.hex()
    if fmt is BodyFormat.BASE64:
        return base64.b64encode(body).decode("ascii")
    if fmt is BodyFormat.NONE:
        return ""
    return body.decode("utf-8", "backslashreplace")


def print_json(obj: Any, body: BodyFormat = BodyFormat.BASE64) -> None:
    """``obj`` as indented JSON on stdout, message bodies in the ``body`` format."""
    print(json.dumps(jsonable(obj, lambda b: render_body(b, body)), indent=2, ensure_ascii=False))


def _time(ms: int) -> str:
    return format_timestamp(ms) if ms > 0 else "-"


def print_message(m: MessageView, body: BodyFormat) -> None:
    """One message as mqadmin's ``queryMsgById`` prints it: a field per line, then the body."""
    rows = [("OffsetID", m.offset_msg_id), ("Topic", m.topic), ("Tags", m.tags or ""),
            ("Keys", " ".join(m.keys)), ("Broker", m.broker_name), ("Queue ID", m.queue_id),
            ("Queue Offset", m.queue_offset), ("CommitLog Offset", m.commit_log_offset),
            ("Reconsume Times", m.reconsume_times), ("Born Timestamp", _time(m.born_timestamp)),
            ("Store Timestamp", _time(m.store_timestamp)), ("Born Host", m.born_host),
            ("Store Host", m.store_host), ("System Flag", m.sys_flag),
            ("Properties", json.dumps(m.properties, ensure_ascii=False)),
            ("Message Id", m.msg_id), ("Body Size", len(m.body))]
    out = console()
    for k, v in rows:
        out.print(f"{k + ':':<20}{v}", highlight=False, markup=False)
    if body is not BodyFormat.NONE:
        out.print(f"{'Message Body:':<20}{render_body(m.body, body)}", highlight=False,
                  markup=False)


PREVIEW = 80


def message_table(msgs: list[MessageView], body: BodyFormat, title: str | None = None) -> None:
    """Messages a row each (bodies cut to a preview)."""
    t = Table(title=title)
    for col in ("msgId", "broker", "queue", "offset", "tags", "keys", "stored"):
        t.add_column(col, justify="right" if col in ("queue", "offset") else "left")
    if body is not BodyFormat.NONE:
        t.add_column("body")
    for m in msgs:
        row = [m.msg_id, m.broker_name, str(m.queue_id), str(m.queue_offset), m.tags or "",
               " ".join(m.keys), _time(m.store_timestamp)]
        if body is not BodyFormat.NONE:
            text = render_body(m.body, body)
            row.append(text if len(text) <= PREVIEW else text[:PREVIEW - 3] + "...")
        t.add_row(*(Text(c) for c in row))
    console().print(t)
