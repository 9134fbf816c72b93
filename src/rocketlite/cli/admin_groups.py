"""``rocketlite admin`` group commands (mqadmin's names and options), over
``rocketlite.admin.groups`` and ``rocketlite.admin.offsets``.

======================  ================================================================
consumerProgress        a group's queues: broker and consumer offsets, lag (-g; all groups
                        without it)
consumerConnection      a group's online members and subscriptions (-g)
producerConnection      a producer group's connections to a topic's brokers (-g -t)
updateSubGroup          create or change a subscription group (-g, -b/-c, settings)
deleteSubGroup          delete a subscription group (-g, -b/-c, -r: its offsets too)
resetOffsetByTime       move a group's offsets on a topic to a time (-g -t -s), online or not
skipAccumulatedMessage  move a group's offsets on a topic to the end (-g -t)
======================  ================================================================
"""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from rocketlite.admin import (
    GroupProgress,
    QueueReset,
    consumer_connection,
    consumer_progress,
    delete_sub_group,
    producer_connection,
    reset_offset_by_time,
    skip_accumulated,
    update_sub_group,
)
from rocketlite.admin.timeparse import format_timestamp
from rocketlite.cli.admin_common import (
    AsJson,
    Debug,
    Namesrv,
    ProgressBar,
    Topic,
    console,
    print_json,
    run,
    timestamp,
    true_false,
)
from rocketlite.protocol.versions import version_desc

Group = Annotated[str, typer.Option("-g", "--group", help="the consumer group")]
BrokerAddr = Annotated[str | None, typer.Option("-b", "--broker-addr",
                                                help="on this broker, host:port")]
Cluster = Annotated[str | None, typer.Option("-c", "--cluster",
                                             help="on every master of this cluster (needs -n)")]
TF = "true|false"


def _time(ms: int) -> str:
    return format_timestamp(ms) if ms > 0 else "-"


def _one_target(broker_addr: str | None, cluster: str | None) -> None:
    if (broker_addr is None) == (cluster is None):
        raise typer.BadParameter("give exactly one of -b/--broker-addr and -c/--cluster",
                                 param_hint="-b/-c")


def _progress_table(p: GroupProgress) -> None:
    t = Table(title=f"{p.group}: {p.online} online"
              + (f" ({p.consume_type}, {p.message_model})" if p.online else ""))
    for col in ("#Topic", "#Broker Name", "#QID", "#Broker Offset", "#Consumer Offset", "#Diff",
                "#LastTime"):
        t.add_column(col, justify="right" if col in ("#QID", "#Broker Offset",
                                                     "#Consumer Offset", "#Diff") else "left")
    for q in p.queues:
        t.add_row(Text(q.topic), Text(q.broker_name), str(q.queue_id), str(q.broker_offset),
                  str(q.consumer_offset), str(q.diff), _time(q.last_timestamp))
    out = console()
    out.print(t)
    out.print(f"Consume TPS: {p.consume_tps:.2f} (as the brokers report it)", highlight=False)
    out.print(f"Diff Total: {p.diff_total}", highlight=False)


def consumer_progress_command(
    namesrv: Namesrv = None,
    group: Annotated[str | None, typer.Option(
        "-g", "--group", help="the consumer group (default: every group)")] = None,
    as_json: AsJson = False, debug: Debug = False,
) -> None:
    """A group's progress per queue (broker offset, consumer offset, lag, last consumed), or a
    line per group without -g."""
    groups = run(lambda s: consumer_progress(s, group), namesrv, debug)
    if as_json:
        print_json(groups)
        return
    if group is not None:
        _progress_table(groups[0])
        return
    if not groups:
        console().print("no consumer group is known to the brokers", highlight=False)
        return
    t = Table()
    for col in ("#Group", "#Count", "#Type", "#Model", "#TPS", "#Diff Total"):
        t.add_column(col, justify="right" if col in ("#Count", "#TPS", "#Diff Total") else "left")
    for p in groups:
        t.add_row(Text(p.group), str(p.online), p.consume_type or "", p.message_model or "",
                  f"{p.consume_tps:.2f}", str(p.diff_total))
    console().print(t)


def consumer_connection_command(group: Group, namesrv: Namesrv = None, as_json: AsJson = False,
                                debug: Debug = False) -> None:
    """A group's online members (client id, address, language, version by name, as mqadmin
    shows it) and subscriptions."""
    cc = run(lambda s: consumer_connection(s, group), namesrv, debug)
    if as_json:
        print_json(cc)
        return
    out = console()
    t = Table(title=f"{group}: members")
    for col in ("#", "#ClientId", "#ClientAddr", "#Language", "#Version"):
        t.add_column(col)
    for i, c in enumerate(sorted(cc.connectionSet), 1):
        t.add_row(str(i), Text(c.clientId), Text(c.clientAddr), c.language,
                  version_desc(c.version))
    out.print(t)
    subs = Table(title=f"{group}: subscriptions")
    subs.add_column("#Topic")
    subs.add_column("#SubExpression")
    for topic, sd in sorted(cc.subscriptionTable.items()):
        subs.add_row(Text(topic), Text(sd.subString or ""))
    out.print(subs)
    out.print(f"ConsumeType: {cc.consumeType.name if cc.consumeType else ''}\n"
              f"MessageModel: {cc.messageModel.name if cc.messageModel else ''}\n"
              f"ConsumeFromWhere: {cc.consumeFromWhere.name if cc.consumeFromWhere else ''}",
              highlight=False, markup=False)


def producer_connection_command(
    topic: Topic,
    group: Annotated[str, typer.Option("-g", "--producer-group", help="the producer group")],
    namesrv: Namesrv = None, as_json: AsJson = False, debug: Debug = False,
) -> None:
    """A producer group's connections to the brokers of a topic."""
    conns = run(lambda s: producer_connection(s, group, topic), namesrv, debug)
    if as_json:
        print_json(conns)
        return
    out = console()
    for i, c in enumerate(conns, 1):
        out.print(f"{i:04d}  {c.clientId:<40} {c.clientAddr:<22} {c.language:<8} "
                  f"{version_desc(c.version)}",
                  highlight=False, markup=False)


def update_sub_group_command(
    group: Group,
    namesrv: Namesrv = None, broker_addr: BrokerAddr = None, cluster: Cluster = None,
    consume_enable: Annotated[str | None, typer.Option("-s", "--consume-enable", metavar=TF)] = None,
    consume_from_min: Annotated[str | None, typer.Option(
        "-m", "--consume-from-min-enable", metavar=TF)] = None,
    broadcast: Annotated[str | None, typer.Option("-d", "--consume-broadcast-enable", metavar=TF)] = None,
    orderly: Annotated[str | None, typer.Option("-o", "--consume-message-orderly", metavar=TF)] = None,
    retry_queues: Annotated[int | None, typer.Option("-q", "--retry-queue-nums")] = None,
    retry_max: Annotated[int | None, typer.Option("-r", "--retry-max-times")] = None,
    broker_id: Annotated[int | None, typer.Option("-i", "--broker-id",
                                                  help="consume from this broker id")] = None,
    slowly: Annotated[int | None, typer.Option("-w", "--which-broker-when-consume-slowly")] = None,
    notify: Annotated[str | None, typer.Option(
        "-a", "--notify-consumer-ids-changed-enable", metavar=TF)] = None,
    as_json: AsJson = False, debug: Debug = False,
) -> None:
    """Create a subscription group or change the settings given (the others are kept)."""
    _one_target(broker_addr, cluster)
    changes: dict[str, Any] = {}
    for name, text, flag in (("consumeEnable", consume_enable, "-s"),
                             ("consumeFromMinEnable", consume_from_min, "-m"),
                             ("consumeBroadcastEnable", broadcast, "-d"),
                             ("consumeMessageOrderly", orderly, "-o"),
                             ("notifyConsumerIdsChangedEnable", notify, "-a")):
        if (value := true_false(text, flag)) is not None:
            changes[name] = value
    numbers = {"retryQueueNums": retry_queues, "retryMaxTimes": retry_max,
               "brokerId": broker_id, "whichBrokerWhenConsumeSlowly": slowly}
    changes.update({k: v for k, v in numbers.items() if v is not None})
    done = run(lambda s: update_sub_group(s, group, changes, broker_addr=broker_addr,
                                          cluster=cluster), namesrv, debug)
    if as_json:
        print_json(done)
        return
    out = console()
    for u in done:
        out.print(f"create subscription group to {u.address} success.", highlight=False,
                  markup=False)
        for k, v in u.config.to_obj().items():
            shown = v if isinstance(v, str) else json.dumps(v)  # Java's spelling: true, {}
            out.print(f"  {k:<32}{shown}", highlight=False, markup=False)


def delete_sub_group_command(
    group: Group,
    namesrv: Namesrv = None, broker_addr: BrokerAddr = None, cluster: Cluster = None,
    remove_offset: Annotated[str | None, typer.Option("-r", "--remove-offset",
                                                help="drop the group's offsets too", metavar=TF)] = None,
    as_json: AsJson = False, debug: Debug = False,
) -> None:
    """Delete a subscription group's settings (and, with -r true, its committed offsets)."""
    _one_target(broker_addr, cluster)
    clean = bool(true_false(remove_offset, "-r"))
    done = run(lambda s: delete_sub_group(s, group, broker_addr=broker_addr, cluster=cluster,
                                          clean_offset=clean), namesrv, debug)
    if as_json:
        print_json(done)
        return
    for addr in done:
        console().print(f"delete subscription group [{group}] from broker [{addr}] success"
                        + (" (offsets removed)" if clean else ""), highlight=False, markup=False)


def _ms(text: str) -> int:
    ms = timestamp(text)
    assert ms is not None
    return ms


def _show_reset(done: list[QueueReset], as_json: bool, title: str) -> None:
    if as_json:
        print_json(done)
        return
    t = Table(title=title)
    for col in ("#brokerName", "#queueId", "#offset"):
        t.add_column(col, justify="left" if col == "#brokerName" else "right")
    for r in done:
        t.add_row(Text(r.broker_name), str(r.queue_id), str(r.offset))
    console().print(t)


def reset_offset_by_time_command(
    group: Group, topic: Topic,
    begin: Annotated[str, typer.Option(
        "-s", "--timestamp",
        help="ms since the epoch, yyyy-MM-dd#HH:mm:ss:SSS (local time) or now")],
    namesrv: Namesrv = None,
    force: Annotated[str, typer.Option("-f", "--force", metavar="true|false",
                                       help="also move offsets forward (default true)")] = "true",
    as_json: AsJson = False, debug: Debug = False,
) -> None:
    """Move a group's offsets on a topic to the first message stored at or after a time; its
    online members resume from there."""
    forced = bool(true_false(force, "-f"))
    bar = ProgressBar(f"resetOffsetByTime {group} {topic}")
    with bar:
        done = run(lambda s: reset_offset_by_time(
            s, group, topic, _ms(begin), force=forced, on_total=bar.total,
            on_progress=bar.advance), namesrv, debug)
    _show_reset(done, as_json, f"{group} on {topic}: reset to {begin}")


def skip_accumulated_command(group: Group, topic: Topic, namesrv: Namesrv = None,
                             as_json: AsJson = False, debug: Debug = False) -> None:
    """Move a group's offsets on a topic to the end of each queue (skip what accumulated)."""
    bar = ProgressBar(f"skipAccumulatedMessage {group} {topic}")
    with bar:
        done = run(lambda s: skip_accumulated(s, group, topic, on_total=bar.total,
                                              on_progress=bar.advance), namesrv, debug)
    _show_reset(done, as_json, f"{group} on {topic}: skipped to the end")


def register(app: typer.Typer) -> None:
    app.command("consumerProgress")(consumer_progress_command)
    app.command("consumerConnection")(consumer_connection_command)
    app.command("producerConnection")(producer_connection_command)
    app.command("updateSubGroup")(update_sub_group_command)
    app.command("deleteSubGroup")(delete_sub_group_command)
    app.command("resetOffsetByTime")(reset_offset_by_time_command)
    app.command("skipAccumulatedMessage")(skip_accumulated_command)
