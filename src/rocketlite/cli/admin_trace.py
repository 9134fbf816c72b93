"""``rocketlite admin queryMsgTraceById``: a message's trace (mqadmin's command of that name) over
``rocketlite.admin.trace``: its sends (producer group, broker, send and store time, cost) and
each consumption (group, when, result, cost), as tables or ``--json``.
"""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table
from rich.text import Text

from rocketlite.admin import MessageTrace, query_msg_trace_by_id
from rocketlite.admin.timeparse import format_timestamp
from rocketlite.cli.admin_common import AsJson, Debug, Namesrv, console, print_json, run
from rocketlite.client.trace_codec import TRACE_TOPIC


def _time(ms: int | None) -> str:
    return format_timestamp(ms) if ms else "-"


def print_trace(tr: MessageTrace) -> None:
    out = console()
    pubs = Table(title=f"message {tr.msg_id}: sent ({tr.trace_topic})")
    for col in ("producer group", "topic", "broker", "send time", "store time", "cost ms",
                "status", "type", "tags", "keys"):
        pubs.add_column(col, justify="right" if col == "cost ms" else "left")
    for p in tr.pubs:
        pubs.add_row(*(Text(c) for c in (
            p.producer_group or "", p.topic or "", p.broker or "", _time(p.send_time),
            _time(p.store_time), str(p.cost_ms), "success" if p.success else "failed",
            p.msg_type, p.tags or "", p.keys or "")))
    out.print(pubs)
    subs = Table(title=f"message {tr.msg_id}: consumed")
    for col in ("consumer group", "consume time", "retry", "status", "cost ms", "request id"):
        subs.add_column(col, justify="right" if col in ("retry", "cost ms") else "left")
    for s in tr.subs:
        status = "running" if s.success is None else (
            f"success ({s.status})" if s.success else f"failed ({s.status})")
        subs.add_row(*(Text(c) for c in (
            s.consumer_group or "?", _time(s.consume_time), str(s.retry_times), status,
            "-" if s.cost_ms is None else str(s.cost_ms), s.request_id or "")))
    out.print(subs)
    for e in tr.end_transactions:
        out.print(f"transaction {e.transaction_id} ended {e.state} by {e.producer_group} at "
                  f"{_time(e.time)}{' (check)' if e.from_transaction_check else ''}",
                  highlight=False, markup=False)


def query_msg_trace_by_id_command(
    msg_id: Annotated[str, typer.Option("-i", "--msg-id", help="the message id the producer got")],
    namesrv: Namesrv = None,
    trace_topic: Annotated[str, typer.Option("-t", "--trace-topic",
                                             help="the trace topic")] = TRACE_TOPIC,
    as_json: AsJson = False, debug: Debug = False,
) -> None:
    """A message's trace: who sent it, when it was stored, who consumed it, with what result."""
    tr = run(lambda s: query_msg_trace_by_id(s, msg_id, trace_topic), namesrv, debug)
    if as_json:
        print_json(tr)
    else:
        print_trace(tr)


def register(app: typer.Typer) -> None:
    app.command("queryMsgTraceById")(query_msg_trace_by_id_command)
