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
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from rocketlite.client.lite_pull_consumer import LitePullConsumer
from rocketlite.client.message import RESERVED_PROPERTIES, Message, MessageExt
from rocketlite.client.producer import Producer
from rocketlite.formats import properties as props
from rocketlite.protocol.bodies import ConsumeFromWhere, MessageQueue

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
