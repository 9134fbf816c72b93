"""``rocketlite admin``: operator commands that talk to a running cluster through the first-party
client (never to the store files directly).

``resend-dlq``: dead letters of a consumer group (``%DLQ%{group}``, readable in rocketlite, see
``broker/send_back.py``) are re-sent to their original topic (the ``RETRY_TOPIC`` property the
broker stamped on the first send-back, else ``--topic``) with the same body, tags, keys and user
properties (the retry, delay and DLQ bookkeeping stripped: a fresh message with a fresh id and
reconsumeTimes 0), so the group consumes them again once the cause is fixed. Progress is committed
under a tool consumer group (``RESEND_DLQ_GROUP``), so a second run does not re-send what the
first one did. Bounded by ``--max`` and by an idle timeout: it stops once the DLQ yields nothing
for ``--idle`` seconds. It also stops at the first dead letter it cannot re-send (no original
topic, a failed send), having committed only what went before it: nothing is skipped for good, a
re-run starts there.

``haStatus`` (mqadmin's name and options): the replication state of a broker (``-b``) or of
every master of a cluster (``-c``, masters from the NameServer's GET_BROKER_CLUSTER_INFO), from
GET_BROKER_HA_STATUS (907, ``HARuntimeInfo``, see ``broker/admin.py``). For a master, each
connected slave's address, acked offset (its CommitLog max offset as last reported), lag in bytes
(the master's max offset - acked: HAConnectionRuntimeInfo's ``diff``, mqadmin's ``#Diff``), lag
in seconds and whether it is in sync (lag below 256 MiB, RocketMQ's haMaxGapNotInSync). RocketMQ
has no lag in time; rocketlite's is the time since the slave was last known to hold everything
the master held (``lagMillis``, defined in ``broker/ha/server.py``): 0 once it caught up, growing
by the second while it applies nothing. For a slave: the HA address it replicates from and its
max offset. A broker that cannot be reached, or does not answer 907: exit 1 with one line.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import json
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from rocketlite.client.lite_pull_consumer import LitePullConsumer
from rocketlite.client.message import RESERVED_PROPERTIES, Message, MessageExt
from rocketlite.client.producer import Producer
from rocketlite.common.errors import RemotingError
from rocketlite.formats import properties as props
from rocketlite.protocol.bodies import ClusterInfo, ConsumeFromWhere, MessageQueue
from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.command import RemotingCommand
from rocketlite.remoting.client import RemotingClient

admin_app = typer.Typer(help="Operate a running cluster.", no_args_is_help=True)
console = Console()

RESEND_DLQ_GROUP = "rocketlite-resend-dlq"
DLQ_PREFIX = "%DLQ%"


@dataclasses.dataclass(slots=True)
class ResendCounts:
    read: int = 0
    resent: int = 0
    skipped: int = 0  # no RETRY_TOPIC and no --topic: the original topic is unknown
    failed: int = 0
    by_topic: dict[str, int] = dataclasses.field(default_factory=dict)  # re-sent per topic


def _copy(m: MessageExt, topic: str) -> Message:
    user = {k: v for k, v in m.properties.items() if k not in RESERVED_PROPERTIES}
    return Message(topic, m.body, tags=m.tags, keys=m.keys or None, properties=user, flag=m.flag)


async def resend_dlq(namesrv: str, group: str, max_messages: int | None = None,
                     idle_s: float = 3.0, topic: str | None = None) -> ResendCounts:
    """Re-send up to ``max_messages`` dead letters of ``group`` to their original topics
    (``topic`` for those without ``RETRY_TOPIC``, e.g. written to the DLQ by another tool)."""
    counts = ResendCounts()
    reader = LitePullConsumer(f"{RESEND_DLQ_GROUP}-{group}"[:120], namesrv_addr=namesrv,
                              consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
                              auto_commit=False)
    reader.subscribe(DLQ_PREFIX + group)
    async with Producer(f"{RESEND_DLQ_GROUP}-P"[:120], namesrv_addr=namesrv) as producer:
        await reader.start()
        try:
            stop = False
            while not stop and (max_messages is None or counts.read < max_messages):
                batch = await reader.poll(idle_s)
                if not batch:
                    break
                if max_messages is not None:
                    batch = batch[:max_messages - counts.read]
                done: dict[MessageQueue, int] = {}
                for m in batch:
                    counts.read += 1
                    target = m.properties.get(props.RETRY_TOPIC) or topic
                    if not target:
                        counts.skipped += 1
                        console.print(f"[red]{m.msg_id} has no RETRY_TOPIC: pass --topic[/]")
                        stop = True
                        break
                    try:
                        await producer.send(_copy(m, target))
                    except Exception as e:  # noqa: BLE001 - reported; the run stops before it
                        counts.failed += 1
                        console.print(f"[red]cannot re-send {m.msg_id} to {target}: {e}[/]")
                        stop = True
                        break
                    counts.resent += 1
                    counts.by_topic[target] = counts.by_topic.get(target, 0) + 1
                    mq = MessageQueue(m.topic, m.broker_name, m.queue_id)
                    done[mq] = max(done.get(mq, 0), m.queue_offset + 1)
                if done:
                    await reader.commit_sync(done)  # what was re-sent, not all that was polled
        finally:
            await reader.shutdown()
    return counts


@admin_app.command("resend-dlq")
def resend_dlq_command(
    namesrv: Annotated[str, typer.Option(help="NameServer address(es), host:port[;host:port]")],
    group: Annotated[str, typer.Option(help="the consumer group whose %DLQ% topic to drain")],
    topic: Annotated[str | None, typer.Option(
        help="original topic for dead letters without a RETRY_TOPIC property")] = None,
    max: Annotated[int | None, typer.Option(help="re-send at most this many messages")] = None,  # noqa: A002
    idle: Annotated[float, typer.Option(help="stop after this many seconds without a message")] = 3.0,
) -> None:
    """Re-send a group's dead letters to their original topics."""
    if max is not None and max < 1:
        raise typer.BadParameter("must be at least 1", param_hint="--max")
    counts = asyncio.run(resend_dlq(namesrv, group, max, idle, topic))
    if counts.by_topic:
        t = Table(title=f"%DLQ%{group} re-sent")
        t.add_column("topic")
        t.add_column("messages", justify="right")
        for name, n in sorted(counts.by_topic.items()):
            t.add_row(name, str(n))
        console.print(t)
    console.print(f"read {counts.read}, re-sent {counts.resent}, skipped {counts.skipped} "
                  f"(no RETRY_TOPIC and no --topic), failed {counts.failed}")
    if counts.failed:
        raise typer.Exit(1)


# ------------------------------------------------------------------------------ haStatus

HA_CALL_TIMEOUT_S = 5.0
MASTER_ID = 0


class HAStatusError(Exception):
    """A broker or NameServer that could not be asked; the message is the one-line reason."""


async def _ask(client: RemotingClient, addr: str, code: RequestCode, what: str) -> bytes:
    try:
        reply = await client.invoke(addr, RemotingCommand.request(code), HA_CALL_TIMEOUT_S)
    except (RemotingError, OSError, TimeoutError) as e:
        raise HAStatusError(f"cannot reach {what} {addr}: {str(e) or type(e).__name__}") from e
    if reply.code != ResponseCode.SUCCESS:
        raise HAStatusError(f"{what} {addr} answered {code.name} with code {reply.code}: "
                            f"{reply.remark}")
    return reply.body or b""


def _view(addr: str, info: dict[str, Any]) -> dict[str, Any]:
    """One broker's figures from its ``HARuntimeInfo`` (what ``--json`` prints)."""
    if info.get("master"):
        return {"broker": addr, "master": True,
                "maxOffset": info.get("masterCommitLogMaxOffset", 0),
                "inSyncSlaves": info.get("inSyncSlaveNums", 0),
                "slaves": [{"address": c.get("addr"), "ackedOffset": c.get("slaveAckOffset"),
                            "lagBytes": c.get("diff"),
                            "lagSeconds": round(int(c.get("lagMillis", 0)) / 1000, 3),
                            "inSync": c.get("inSync"),
                            "transferFromWhere": c.get("transferFromWhere")}
                           for c in info.get("haConnectionInfo") or []]}
    client = info.get("haClientRuntimeInfo") or {}
    return {"broker": addr, "master": False, "masterHaAddress": client.get("masterAddr"),
            "maxOffset": client.get("maxOffset", 0),
            "lastReadTimestamp": client.get("lastReadTimestamp", 0)}


async def ha_status(broker_addr: str | None, cluster: str | None,
                    namesrv: str | None) -> list[dict[str, Any]]:
    """The figures of ``broker_addr``, or of each master of ``cluster`` (``namesrv`` lists its
    brokers); ``HAStatusError`` when one cannot be asked."""
    client = RemotingClient()
    try:
        if broker_addr is not None:
            addrs = [broker_addr]
        else:
            assert cluster is not None and namesrv is not None
            ns = namesrv.split(";")[0].strip()
            body = await _ask(client, ns, RequestCode.GET_BROKER_CLUSTER_INFO, "NameServer")
            ci = ClusterInfo.from_json(body)
            names = ci.clusterAddrTable.get(cluster)
            if not names:
                raise HAStatusError(f"the NameServer {ns} knows no cluster {cluster!r}")
            addrs = sorted(addr for name in names
                           if (bd := ci.brokerAddrTable.get(name)) is not None
                           and (addr := bd.brokerAddrs.get(MASTER_ID)) is not None)
            if not addrs:
                raise HAStatusError(f"cluster {cluster!r} has no master registered at {ns}")
        out = []
        for addr in addrs:
            body = await _ask(client, addr, RequestCode.GET_BROKER_HA_STATUS, "broker")
            try:
                info = json.loads(body)
            except ValueError as e:
                raise HAStatusError(f"broker {addr} answered GET_BROKER_HA_STATUS with a body "
                                    f"that is not JSON: {e}") from e
            out.append(_view(addr, info))
        return out
    finally:
        await client.close()


def _print_ha(view: dict[str, Any]) -> None:
    if not view["master"]:
        ms = int(view["lastReadTimestamp"])
        last = (datetime.datetime.fromtimestamp(ms / 1000).isoformat(sep=" ", timespec="milliseconds")
                if ms > 0 else "never")
        console.print(f"slave {view['broker']} of HA address "
                      f"{view['masterHaAddress'] or '(unknown yet)'}: CommitLog max offset "
                      f"{view['maxOffset']}, last frame from the master {last}",
                      soft_wrap=True, highlight=False)
        return
    slaves = view["slaves"]
    console.print(f"master {view['broker']}: CommitLog max offset {view['maxOffset']}, "
                  f"{len(slaves)} slave(s), {view['inSyncSlaves']} in sync",
                  soft_wrap=True, highlight=False)
    if not slaves:
        return
    t = Table()
    for col in ("slave", "acked offset", "lag (bytes)", "lag (s)", "in sync", "from"):
        t.add_column(col, justify="left" if col == "slave" else "right")
    for sl in slaves:
        t.add_row(str(sl["address"]), str(sl["ackedOffset"]), str(sl["lagBytes"]),
                  f"{sl['lagSeconds']:.3f}", "OK" if sl["inSync"] else "Fall Behind",
                  str(sl["transferFromWhere"]))
    console.print(t)


@admin_app.command("haStatus")
def ha_status_command(
    namesrv: Annotated[str | None, typer.Option(
        "-n", "--namesrv", help="NameServer address(es), host:port[;host:port] (with -c)")] = None,
    broker_addr: Annotated[str | None, typer.Option(
        "-b", "--broker-addr", help="the broker to ask, host:port")] = None,
    cluster: Annotated[str | None, typer.Option(
        "-c", "--cluster", help="ask every master of this cluster (needs -n)")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
) -> None:
    """Replication state: each master's slaves, their acked offsets and lag."""
    if (broker_addr is None) == (cluster is None):
        raise typer.BadParameter("give exactly one of -b/--broker-addr and -c/--cluster",
                                 param_hint="-b/-c")
    if cluster is not None and not namesrv:
        raise typer.BadParameter("-c/--cluster needs -n/--namesrv", param_hint="-n")
    try:
        views = asyncio.run(ha_status(broker_addr, cluster, namesrv))
    except HAStatusError as e:
        typer.echo(f"haStatus: {e}", err=True)
        raise typer.Exit(1) from e
    if as_json:
        print(json.dumps(views, indent=2))
        return
    for view in views:
        _print_ha(view)
