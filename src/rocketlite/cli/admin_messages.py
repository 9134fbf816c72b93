"""``rocketlite admin`` message commands (mqadmin's names and options), over
``rocketlite.admin.messages`` / ``ranges`` / ``produce``.

=====================  =================================================================
queryMsgById           a message by its offset msgId (-i); with -t also by its UNIQ_KEY
queryMsgByKey          the messages of a topic with a key (-t, -k), between -s and -e
queryMsgByUniqueKey    a message by its UNIQ_KEY, the id the producer got (-t, -i)
queryMsgByOffset       the message at an offset (-t, -b broker name, -i queue, -o offset)
printMsg               every message of a topic (or a broker, a queue) between -s and -e
consumeMessage         up to -c messages from an offset or time, committing nothing
sendMessage            send one message (-t, -p body, -k keys, -c tags)
=====================  =================================================================

Bodies show as UTF-8 text by default (``--body hex|base64|none``); with ``--json`` they are
base64 unless ``--body`` says otherwise.
"""

from __future__ import annotations

from typing import Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from rocketlite.admin import (
    AdminSession,
    MessageView,
    consume_message,
    print_msg,
    query_msg_by_id,
    query_msg_by_key,
    query_msg_by_offset,
    query_msg_by_unique_key,
    send_message,
)
from rocketlite.admin.messages import END_OF_TIME, MAX_KEY_RESULTS, TOOLS_GROUP
from rocketlite.admin.ranges import DEFAULT_CONSUME_COUNT
from rocketlite.cli.admin_common import (
    AsJson,
    Begin,
    BodyFormat,
    BodyOpt,
    Debug,
    End,
    Namesrv,
    Topic,
    console,
    message_table,
    print_json,
    print_message,
    run,
    timestamp,
)

BrokerName = Annotated[str | None, typer.Option("-b", "--broker-name",
                                                help="only the queues of this broker")]
QueueId = Annotated[int | None, typer.Option("-i", "--queue-id", help="only this queue")]


def _show(msgs: list[MessageView], as_json: bool, body: BodyFormat, title: str) -> None:
    if as_json:
        print_json(msgs, body)
    elif msgs:
        message_table(msgs, body, title)
    else:
        console().print(f"{title}: no message", highlight=False, markup=False)


def _show_one(m: MessageView, as_json: bool, body: BodyFormat) -> None:
    if as_json:
        print_json(m, body)
    else:
        print_message(m, body)


def _json_body(body: BodyFormat | None, as_json: bool) -> BodyFormat:
    """The body format: as asked, else base64 in JSON and text for people."""
    if body is not None:
        return body
    return BodyFormat.BASE64 if as_json else BodyFormat.TEXT


def query_msg_by_id_command(
    msg_id: Annotated[str, typer.Option("-i", "--msg-id", help="the offset msgId")],
    namesrv: Namesrv = None,
    topic: Annotated[str | None, typer.Option(
        "-t", "--topic", help="its topic: then a UNIQ_KEY is found too")] = None,
    body: BodyOpt = None, as_json: AsJson = False, debug: Debug = False,
) -> None:
    """A message by its offset msgId (the broker and CommitLog offset are in it)."""
    m = run(lambda s: query_msg_by_id(s, msg_id, topic), namesrv, debug)
    _show_one(m, as_json, _json_body(body, as_json))


def query_msg_by_key_command(
    topic: Topic,
    key: Annotated[str, typer.Option("-k", "--key", help="one of the messages' KEYS")],
    namesrv: Namesrv = None, begin: Begin = None, end: End = None,
    max_num: Annotated[int, typer.Option("-c", "--max-num",
                                         help="at most this many per broker")] = MAX_KEY_RESULTS,
    body: BodyOpt = None, as_json: AsJson = False, debug: Debug = False,
) -> None:
    """The messages of a topic with a key, stored between -s and -e."""

    async def go(s: AdminSession) -> list[MessageView]:
        lo, hi = timestamp(begin), timestamp(end)
        return await query_msg_by_key(s, topic, key, max_num=max_num, begin_ms=lo or 0,
                                      end_ms=END_OF_TIME if hi is None else hi)

    msgs = run(go, namesrv, debug)
    _show(msgs, as_json, _json_body(body, as_json), f"{topic} key {key}")


def query_msg_by_unique_key_command(
    topic: Topic,
    uniq_key: Annotated[str, typer.Option("-i", "--msg-id",
                                          help="the UNIQ_KEY (the id the producer got)")],
    namesrv: Namesrv = None, body: BodyOpt = None, as_json: AsJson = False,
    debug: Debug = False,
) -> None:
    """A message by its UNIQ_KEY (the producer's msgId)."""
    msgs = run(lambda s: query_msg_by_unique_key(s, topic, uniq_key), namesrv, debug)
    fmt = _json_body(body, as_json)
    if as_json:
        print_json(msgs, fmt)
    else:
        for m in msgs:
            print_message(m, fmt)


def query_msg_by_offset_command(
    topic: Topic,
    broker_name: Annotated[str, typer.Option("-b", "--broker-name", help="the broker name")],
    queue_id: Annotated[int, typer.Option("-i", "--queue-id", help="the queue id")],
    offset: Annotated[int, typer.Option("-o", "--offset", help="the queue offset")],
    namesrv: Namesrv = None, body: BodyOpt = None, as_json: AsJson = False,
    debug: Debug = False,
) -> None:
    """The message at an offset of a queue."""
    m = run(lambda s: query_msg_by_offset(s, topic, broker_name, queue_id, offset), namesrv,
            debug)
    _show_one(m, as_json, _json_body(body, as_json))


def print_msg_command(
    topic: Topic, namesrv: Namesrv = None, broker_name: BrokerName = None,
    queue_id: QueueId = None, begin: Begin = None, end: End = None,
    limit: Annotated[int | None, typer.Option("--max", help="at most this many messages")] = None,
    body: BodyOpt = None, as_json: AsJson = False, debug: Debug = False,
) -> None:
    """Every message of a topic (or a broker, a queue) stored between -s and -e."""
    progress = Progress(TextColumn("[progress.description]{task.description}"), BarColumn(),
                        MofNCompleteColumn(), TimeElapsedColumn(), console=console(stderr=True),
                        transient=True)
    task = progress.add_task(f"printMsg {topic}", total=None)

    async def go(s: AdminSession) -> list[MessageView]:
        return await print_msg(
            s, topic, broker_name=broker_name, queue_id=queue_id, begin_ms=timestamp(begin),
            end_ms=timestamp(end), limit=limit,
            on_total=lambda n: progress.update(task, total=n),
            on_progress=lambda n: progress.advance(task, n))

    with progress:
        msgs = run(go, namesrv, debug)
    _show(msgs, as_json, _json_body(body, as_json), topic)


def consume_message_command(
    topic: Topic, namesrv: Namesrv = None, broker_name: BrokerName = None,
    queue_id: QueueId = None,
    offset: Annotated[int | None, typer.Option(
        "-o", "--offset", help="from this offset (with -b and -i)")] = None,
    group: Annotated[str, typer.Option("-g", "--group",
                                       help="pull as this group")] = TOOLS_GROUP,
    begin: Begin = None, end: End = None,
    count: Annotated[int, typer.Option("-c", "--count",
                                       help="at most this many messages")] = DEFAULT_CONSUME_COUNT,
    body: BodyOpt = None, as_json: AsJson = False, debug: Debug = False,
) -> None:
    """Up to -c messages from an offset or a time, pulled without committing."""
    if offset is not None and (broker_name is None or queue_id is None):
        raise typer.BadParameter("-o/--offset needs -b/--broker-name and -i/--queue-id",
                                 param_hint="-o")

    async def go(s: AdminSession) -> list[MessageView]:
        return await consume_message(s, topic, broker_name=broker_name, queue_id=queue_id,
                                     offset=offset, begin_ms=timestamp(begin),
                                     end_ms=timestamp(end), count=count, group=group)

    msgs = run(go, namesrv, debug)
    _show(msgs, as_json, _json_body(body, as_json), topic)


def send_message_command(
    topic: Topic,
    message_body: Annotated[str, typer.Option("-p", "--message-body", help="the body (UTF-8)")],
    namesrv: Namesrv = None,
    keys: Annotated[str | None, typer.Option("-k", "--keys",
                                             help="keys, separated by spaces")] = None,
    tags: Annotated[str | None, typer.Option("-c", "--tags", help="the tag")] = None,
    broker_name: Annotated[str | None, typer.Option(
        "-b", "--broker-name", help="to this broker's queue -i")] = None,
    queue_id: Annotated[int | None, typer.Option("-i", "--queue-id",
                                                 help="to this queue (with -b)")] = None,
    as_json: AsJson = False, debug: Debug = False,
) -> None:
    """Send one message."""
    if (broker_name is None) != (queue_id is None):
        raise typer.BadParameter("give -b/--broker-name and -i/--queue-id together",
                                 param_hint="-b/-i")
    r = run(lambda s: send_message(s, topic, message_body.encode(), tags=tags,
                                   keys=keys.split() if keys else None,
                                   broker_name=broker_name, queue_id=queue_id), namesrv, debug)
    if as_json:
        print_json(r)
        return
    console().print(f"{r.status} msgId {r.msg_id} offsetMsgId {r.offset_msg_id} to "
                    f"{r.topic}/{r.broker_name}/{r.queue_id} at offset {r.queue_offset}",
                    highlight=False, markup=False)


def register(app: typer.Typer) -> None:
    app.command("queryMsgById")(query_msg_by_id_command)
    app.command("queryMsgByKey")(query_msg_by_key_command)
    app.command("queryMsgByUniqueKey")(query_msg_by_unique_key_command)
    app.command("queryMsgByOffset")(query_msg_by_offset_command)
    app.command("printMsg")(print_msg_command)
    app.command("consumeMessage")(consume_message_command)
    app.command("sendMessage")(send_message_command)
