"""A broker with traffic and two ``rocketlite dashboard`` processes over it (one with a login,
one read-only), for the dashboard's API and browser tests (not a test module: the fixture is in
``tests/integration/dashboard/conftest.py``).

Traffic: ``TOPIC`` (4 queues, made with the admin ``update_topic``) gets ``N`` messages from
rocketlite's Producer, each with a key and a text body; group ``GROUP`` fails ``DEAD`` messages
of ``DLQ_TOPIC`` once (maxReconsumeTimes 0: all in ``%DLQ%GROUP``) and then, offline, has ``LAG``
more to consume there. Group ``RESEND_GROUP`` fails ``resend_body(i)`` (``RESEND_DEAD`` of them)
of ``RESEND_TOPIC`` the same way and has nothing else to consume: a resend of one of its dead
letters is the only message a consumer of it gets next. ``RATE_TOPIC`` gets one message
(``send_more`` adds to it later).
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Awaitable, Callable

from dlqhelp import make_dead_letters
from rocketlite.admin import AdminError, AdminSession, query_msg_by_key, update_topic
from rocketlite.client.message import Message
from rocketlite.client.producer import Producer

TOPIC = "DashT"
QUEUES = 4
N = 20
DLQ_TOPIC = "DashDLQT"
GROUP = "DashG"
DEAD = 3
LAG = 5
RESEND_TOPIC = "DashResendT"
RESEND_GROUP = "DashResendG"
RESEND_DEAD = 2
RATE_TOPIC = "DashRateT"
USER, PASSWORD = "admin", "s3cret"


def key(i: int) -> str:
    return f"order-{i}"


def body(i: int) -> str:
    return f"hello dashboard {i} \u00e9t\u00e9"


def resend_body(i: int) -> str:
    return f"dead again {i}"


@dataclasses.dataclass
class DashEnv:
    ns: str
    addr: str
    url: str  # the dashboard with a login
    readonly_url: str  # the one without
    msg_ids: dict[str, str]  # key -> the producer's msgId (UNIQ_KEY)


async def _until(check: Callable[[], Awaitable[bool]], what: str,
                 timeout: float = 30.0) -> None:  # noqa: ASYNC109
    deadline = time.monotonic() + timeout
    while not await check():
        assert time.monotonic() < deadline, f"no {what} within {timeout} s"
        await asyncio.sleep(0.1)


async def traffic(ns: str, addr: str) -> dict[str, str]:
    async with AdminSession(ns) as session:
        await update_topic(session, TOPIC, broker_addr=addr, read_queue_nums=QUEUES,
                           write_queue_nums=QUEUES)

        async def routed() -> bool:
            try:
                return bool(await session.route(TOPIC))
            except AdminError:
                return False

        await _until(routed, f"route of {TOPIC}")
        ids = {}
        async with Producer("DashP", namesrv_addr=ns) as p:
            for i in range(N):
                r = await p.send(Message(TOPIC, body(i).encode(), tags="tagA", keys=key(i)))
                ids[key(i)] = r.msg_id

        async def indexed() -> bool:
            return len(await query_msg_by_key(session, TOPIC, key(N - 1))) == 1

        await _until(indexed, "index entry of the last key")
    await make_dead_letters(ns, DLQ_TOPIC, GROUP, [b"dead %d" % i for i in range(DEAD)])
    async with Producer("DashP2", namesrv_addr=ns) as p:
        for i in range(LAG):
            await p.send(Message(DLQ_TOPIC, b"late %d" % i, tags="T"))
    await make_dead_letters(ns, RESEND_TOPIC, RESEND_GROUP,
                            [resend_body(i).encode() for i in range(RESEND_DEAD)])
    await send_more(ns, 1)
    return ids


async def send_more(ns: str, count: int) -> None:
    """``count`` more messages to ``RATE_TOPIC``."""
    async with Producer("DashP3", namesrv_addr=ns) as p:
        for i in range(count):
            await p.send(Message(RATE_TOPIC, b"rate %d" % i))


