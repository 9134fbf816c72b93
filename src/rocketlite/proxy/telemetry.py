"""Telemetry (the settings exchange and the server's commands), Heartbeat, NotifyClientTermination
(the Java proxy's ``ClientActivity``). Sessions and broker membership: ``sessions``.

Telemetry (bidirectional): every command the client sends is answered on the stream, in order,
and server commands (``TelemetryChannel.write``: orphaned transaction checks) are interleaved.

- ``settings``: the client's Settings. Publishing names the topics (each validated: ILLEGAL_TOPIC),
  subscription the group (ILLEGAL_CONSUMER_GROUP) and its filters; a client type that does not
  match (a subscription from a producer...) is UNRECOGNIZED_CLIENT_TYPE, neither publishing nor
  subscription BAD_REQUEST. Stored in the session (settings sent again later replace them, and the
  client's groups with them), the client joins its groups, and the answer is
  ``TelemetryCommand{status OK, settings}`` with the server's values (``settings``).
- ``thread_stack_trace``, ``verify_message_result``: answers to commands this server never sends,
  so their nonce is unknown: answered BAD_REQUEST saying so (the Java proxy drops them silently).
- anything else: BAD_REQUEST naming the command.

Without ``x-mq-client-id`` the stream gets one CLIENT_ID_REQUIRED status and ends. When a stream
ends the channel closes (no check goes to it) and the client leaves its groups until its next
heartbeat or stream; a client that opens a second stream moves to it.

Heartbeat: refreshes the session and the broker membership (the settings' client type, else the
request's; a consumer's group from the request). CLIENT_ID_REQUIRED without the client id,
UNRECOGNIZED_CLIENT_TYPE for a type that is not a producer, push or simple consumer.
NotifyClientTermination: the client leaves every group and its session ends (UNRECOGNIZED_CLIENT_TYPE
for a client the front does not know, as the Java proxy answers).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator

from rocketlite.protocol.bodies import SubscriptionData
from rocketlite.proxy import validate
from rocketlite.proxy.context import (
    LANGUAGE,
    FrontContext,
    ServicerContext,
    metadata,
    peer_address,
    require_client_id,
)
from rocketlite.proxy.pb import definition_pb2 as pb
from rocketlite.proxy.pb import service_pb2 as spb
from rocketlite.proxy.sessions import (
    CONSUMER_TYPES,
    MAX_GROUPS_PER_CLIENT,
    PRODUCER,
    ClientSession,
)
from rocketlite.proxy.settings import server_settings
from rocketlite.proxy.status import Code, FrontError, error_status, ok, status

log = logging.getLogger(__name__)

MAX_SUBSCRIPTIONS = 1_000
_FILTER_TYPES = {pb.FilterType.TAG: "TAG", pb.FilterType.SQL: "SQL92",
                 pb.FilterType.FILTER_TYPE_UNSPECIFIED: "TAG"}


def _session(ctx: FrontContext, context: ServicerContext) -> ClientSession:
    cid = require_client_id(context)
    host, port = peer_address(context)
    try:
        s = ctx.sessions.touch(cid, f"{host}:{port}")
    except OverflowError as e:
        raise FrontError(Code.TOO_MANY_REQUESTS, str(e)) from None
    s.language = metadata(context, LANGUAGE) or s.language
    return s


def _type_name(client_type: int) -> str:
    try:
        return pb.ClientType.Name(client_type)  # type: ignore[arg-type]
    except ValueError:
        return str(client_type)


def _rejoin(ctx: FrontContext, session: ClientSession, left: list[str] | None = None) -> None:
    """Join the session's groups; tell Remoting members of each group whose membership changed."""
    changed = set(left or ()) | set(session.join(ctx.broker))
    for group in changed:
        ctx.broker.notify_consumer_ids_changed(group)


def _leave(ctx: FrontContext, session: ClientSession) -> None:
    for group in session.leave(ctx.broker):
        ctx.broker.notify_consumer_ids_changed(group)


async def heartbeat(
    ctx: FrontContext, request: spb.HeartbeatRequest, context: ServicerContext,
) -> spb.HeartbeatResponse:
    try:
        session = _session(ctx, context)
        client_type = (session.settings.client_type if session.settings is not None
                       and session.settings.client_type else request.client_type)
        if client_type == PRODUCER:
            session.client_type = client_type
        elif client_type in CONSUMER_TYPES:
            group = validate.group_name(request.group)
            left = []
            if session.consumer_group not in (None, group):
                left = session.leave(ctx.broker)
            session.client_type, session.consumer_group = client_type, group
            _rejoin(ctx, session, left)
            return spb.HeartbeatResponse(status=ok())
        else:
            raise FrontError(Code.UNRECOGNIZED_CLIENT_TYPE,
                             f"client type {_type_name(client_type)} is not a producer, push "
                             "consumer or simple consumer")
        _rejoin(ctx, session)
        return spb.HeartbeatResponse(status=ok())
    except Exception as e:  # noqa: BLE001 - every failure is answered with its status
        return spb.HeartbeatResponse(status=error_status(e))


async def notify_client_termination(
    ctx: FrontContext, request: spb.NotifyClientTerminationRequest, context: ServicerContext,
) -> spb.NotifyClientTerminationResponse:
    try:
        cid = require_client_id(context)
        session = ctx.sessions.remove(cid)
        if session is None:
            raise FrontError(Code.UNRECOGNIZED_CLIENT_TYPE,
                             f"client {cid} is unknown here (no heartbeat or settings)")
        _leave(ctx, session)
        session.channel.close()
        return spb.NotifyClientTerminationResponse(status=ok())
    except Exception as e:  # noqa: BLE001 - every failure is answered with its status
        return spb.NotifyClientTerminationResponse(status=error_status(e))


def apply_settings(ctx: FrontContext, session: ClientSession, settings: pb.Settings) -> pb.Settings:
    """Take a client's settings into its session and its groups; the answer's settings."""
    client_type = settings.client_type
    producers: set[str] = set()
    group: str | None = None
    subs: list[SubscriptionData] = []
    if settings.HasField("publishing"):
        if client_type != PRODUCER:
            raise FrontError(Code.UNRECOGNIZED_CLIENT_TYPE,
                             f"publishing settings from a {_type_name(client_type)} client")
        topics = settings.publishing.topics
        if len(topics) > MAX_GROUPS_PER_CLIENT:
            raise FrontError(Code.BAD_REQUEST, f"a producer may publish to at most "
                             f"{MAX_GROUPS_PER_CLIENT} topics, not {len(topics)}")
        producers = {validate.topic_name(t, ctx.broker.config) for t in topics}
    elif settings.HasField("subscription"):
        if client_type not in CONSUMER_TYPES:
            raise FrontError(Code.UNRECOGNIZED_CLIENT_TYPE,
                             f"subscription settings from a {_type_name(client_type)} client")
        group = validate.group_name(settings.subscription.group)
        entries = settings.subscription.subscriptions
        if len(entries) > MAX_SUBSCRIPTIONS:
            raise FrontError(Code.BAD_REQUEST, f"a consumer may subscribe to at most "
                             f"{MAX_SUBSCRIPTIONS} topics, not {len(entries)}")
        for e in entries:
            ftype = _FILTER_TYPES.get(e.expression.type)
            if ftype is None:
                raise FrontError(Code.ILLEGAL_FILTER_EXPRESSION,
                                 f"unknown filter type {e.expression.type}")
            subs.append(SubscriptionData.from_expression(
                validate.topic_name(e.topic, ctx.broker.config), e.expression.expression, ftype))
    else:
        raise FrontError(Code.BAD_REQUEST, "there is no publishing or subscription data in "
                         "the settings")
    left = session.leave(ctx.broker)
    session.settings = settings
    session.client_type = client_type
    session.producer_groups = producers
    session.consumer_group = group
    session.subscriptions = subs
    _rejoin(ctx, session, left)
    return server_settings(ctx.broker, settings)


def _answer(ctx: FrontContext, session: ClientSession, cmd: spb.TelemetryCommand
            ) -> spb.TelemetryCommand:
    kind = cmd.WhichOneof("command")
    try:
        if kind == "settings":
            return spb.TelemetryCommand(status=ok(),
                                        settings=apply_settings(ctx, session, cmd.settings))
        if kind in ("thread_stack_trace", "verify_message_result"):
            nonce = getattr(cmd, kind).nonce
            return spb.TelemetryCommand(status=status(
                Code.BAD_REQUEST, f"{kind} with nonce {nonce[:80]!r}: the server asked this "
                "client for nothing with that nonce"))
        return spb.TelemetryCommand(status=status(
            Code.BAD_REQUEST, f"the server takes settings, thread_stack_trace and "
            f"verify_message_result commands, not {kind or 'an empty command'}"))
    except Exception as e:
        if not isinstance(e, FrontError):
            log.exception("telemetry command from client %s failed", session.client_id)
        return spb.TelemetryCommand(status=error_status(e))


async def telemetry(
    ctx: FrontContext, requests: AsyncIterator[spb.TelemetryCommand], context: ServicerContext,
) -> AsyncIterator[spb.TelemetryCommand]:
    try:
        session = _session(ctx, context)
    except Exception as e:  # noqa: BLE001 - answered with its status
        yield spb.TelemetryCommand(status=error_status(e))
        return
    channel = session.channel
    outbox = channel.attach()

    async def read() -> None:
        try:
            async for cmd in requests:
                session.last_seen = time.monotonic()
                answer = _answer(ctx, session, cmd)
                if channel.is_open and not channel.write(answer):
                    break
        except Exception as e:  # noqa: BLE001 - the client's side broke: end the stream
            log.info("telemetry stream of client %s ended: %s", session.client_id, e)
        finally:
            channel.detach(outbox)
            with contextlib.suppress(asyncio.QueueFull):
                outbox.put_nowait(None)

    reader = asyncio.create_task(read(), name=f"telemetry-{session.client_id}")
    try:
        while True:
            command = await outbox.get()
            if command is None:
                break
            yield command
    finally:
        reader.cancel()
        channel.detach(outbox)
        if not channel.is_open and ctx.sessions.get(session.client_id) is session:
            _leave(ctx, session)
