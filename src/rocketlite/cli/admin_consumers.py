"""``rocketlite admin consumerStatus`` (mqadmin's name and options), over
``rocketlite.admin.consumer_status``: each online member of a group as it describes itself.

Without ``-i``: a row per member (its queues and cached messages, or why it could not answer),
then whether the members subscribe alike and what looks stuck. With ``-i``: that member's
properties, subscriptions, queues, rates and (``-s``) thread dump, as mqadmin prints them. A
member that cannot answer (gone, or a client that does not answer the request) is an
``error:`` line and exit code 1, after what the others answered.
"""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table
from rich.text import Text

from rocketlite.admin import ClientStatus, GroupStatus, consumer_status
from rocketlite.admin.timeparse import format_timestamp
from rocketlite.cli.admin_common import AsJson, Debug, Namesrv, console, print_json, run
from rocketlite.cli.errors import fail

Group = Annotated[str, typer.Option("-g", "--group", help="the consumer group")]


def _time(ms: int) -> str:
    return format_timestamp(ms) if ms > 0 else "-"


def _members(st: GroupStatus) -> None:
    t = Table(title=f"{st.group}: {len(st.clients)} member(s)")
    for col in ("#Index", "#ClientId", "#Address", "#Language", "#Version", "#Queues", "#Cached",
                "#Answer"):
        t.add_column(col, justify="right" if col in ("#Index", "#Version", "#Queues", "#Cached")
                     else "left")
    for i, c in enumerate(st.clients, 1):
        t.add_row(str(i), Text(c.client_id), Text(c.client_addr), c.language, str(c.version),
                  str(len(c.queues)), str(sum(q.info.cachedMsgCount for q in c.queues)),
                  Text(c.error or "ok"))
    out = console()
    out.print(t)
    if st.same_subscription:
        out.print("Same subscription in the same group of consumer", highlight=False)
    else:
        out.print("WARN: Different subscription in the same group of consumer!!!",
                  highlight=False)
    for w in st.warnings:
        out.print(w, highlight=False, markup=False)


def _detail(c: ClientStatus) -> None:
    out = console()
    out.print("#Consumer Properties#", highlight=False, markup=False)
    for k, v in c.properties.items():
        out.print(f"{k:<40}: {v}", highlight=False, markup=False)
    subs = Table(title="#Consumer Subscription#")
    for col in ("#Topic", "#Expression", "#Type"):
        subs.add_column(col)
    for s in c.subscriptions:
        subs.add_row(Text(s.topic), Text(s.subString or "*"), s.expressionType)
    out.print(subs)
    queues = Table(title="#Consumer MQ Detail#")
    for col in ("#Topic", "#Broker Name", "#QID", "#Commit Offset", "#Cached", "#Cached Min",
                "#Cached Max", "#Locked", "#Last Pull", "#Last Consume"):
        queues.add_column(col)
    for q in c.queues:
        i = q.info
        queues.add_row(Text(q.topic), Text(q.broker_name), str(q.queue_id), str(i.commitOffset),
                       str(i.cachedMsgCount), str(i.cachedMsgMinOffset), str(i.cachedMsgMaxOffset),
                       str(i.locked).lower(), _time(i.lastPullTimestamp),
                       _time(i.lastConsumeTimestamp))
    out.print(queues)
    rates = Table(title="#Consumer RT&TPS#")
    for col in ("#Topic", "#Pull RT", "#Pull TPS", "#Consume RT", "#ConsumeOK TPS",
                "#ConsumeFailed TPS", "#ConsumeFailedMsgs"):
        rates.add_column(col, justify="left" if col == "#Topic" else "right")
    for topic, cs in c.status.items():
        rates.add_row(Text(topic), f"{cs.pullRT:.2f}", f"{cs.pullTPS:.2f}", f"{cs.consumeRT:.2f}",
                      f"{cs.consumeOKTPS:.2f}", f"{cs.consumeFailedTPS:.2f}",
                      str(cs.consumeFailedMsgs))
    out.print(rates)
    if c.jstack:
        out.print("#Consumer jstack#", highlight=False, markup=False)
        out.print(c.jstack, highlight=False, markup=False)


def consumer_status_command(
    group: Group,
    client_id: Annotated[str | None, typer.Option(
        "-i", "--client-id", help="only this member (its full running info)")] = None,
    broker_addr: Annotated[str | None, typer.Option(
        "-b", "--broker-addr", help="ask through this broker, host:port")] = None,
    jstack: Annotated[bool, typer.Option(
        "-s", "--jstack", help="also each member's thread dump")] = False,
    namesrv: Namesrv = None, as_json: AsJson = False, debug: Debug = False,
) -> None:
    """Each online member of a consumer group as it describes itself (its queues, offsets,
    cached messages, rates; -s its threads)."""
    st = run(lambda s: consumer_status(s, group, client_id, broker_addr=broker_addr,
                                       jstack=jstack), namesrv, debug)
    if as_json:
        print_json(st)
    elif client_id is not None:
        _detail(st.clients[0])
    else:
        _members(st)
        for c in st.clients:
            if c.jstack:
                console().print(f"#{c.client_id} jstack#\n{c.jstack}", highlight=False,
                                markup=False)
    failed = [c for c in st.clients if c.error is not None]
    if failed:
        fail(f"{len(failed)} of {len(st.clients)} member(s) of {group} did not answer: "
             + "; ".join(f"{c.client_id}: {c.error}" for c in failed))


def register(app: typer.Typer) -> None:
    app.command("consumerStatus")(consumer_status_command)
