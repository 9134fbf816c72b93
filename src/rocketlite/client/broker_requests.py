"""The requests brokers send a client, each handed to the producer or consumer of its group:
NOTIFY_CONSUMER_IDS_CHANGED (rebalance now), CHECK_TRANSACTION_STATE (the producer's check-back),
RESET_CONSUMER_CLIENT_OFFSET (the consumer resumes from the new offsets) and
GET_CONSUMER_RUNNING_INFO (``mqadmin consumerStatus``); any other code is answered
REQUEST_CODE_NOT_SUPPORTED. A request for a group this client does not run is dropped."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping

from rocketlite.client import running_info
from rocketlite.client.errors import MQClientError
from rocketlite.client.peers import ConsumerPeer, ProducerPeer
from rocketlite.common.errors import FormatError
from rocketlite.protocol.admin_bodies import ResetOffsetBody
from rocketlite.protocol.admin_headers import ResetOffsetRequestHeader
from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.command import RemotingCommand
from rocketlite.protocol.headers import NotifyConsumerIdsChangedRequestHeader
from rocketlite.remoting.connection import Connection

log = logging.getLogger(__name__)


class BrokerRequests:
    """Answers brokers' requests for the groups in ``producers`` and ``consumers`` (the client
    instance's registries); ``rebalance_soon`` wakes its rebalance. Offset resets run as tasks,
    cancelled by ``take_tasks``' owner at close."""

    def __init__(self, producers: Mapping[str, ProducerPeer], consumers: Mapping[str, ConsumerPeer],
                 namesrv_addrs: list[str], rebalance_soon: Callable[[], None]) -> None:
        self.producers = producers
        self.consumers = consumers
        self.namesrv_addrs = namesrv_addrs
        self.rebalance_soon = rebalance_soon
        self._resets: set[asyncio.Task[None]] = set()

    def take_tasks(self) -> list[asyncio.Task[None]]:
        """The offset resets still running, forgotten here (the caller cancels them)."""
        tasks = [*self._resets]
        self._resets.clear()
        return tasks

    def on_request(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand | None:
        """The answer to a broker's ``cmd`` on ``conn``; None for the one-way ones."""
        if cmd.code == RequestCode.NOTIFY_CONSUMER_IDS_CHANGED:
            try:
                group = NotifyConsumerIdsChangedRequestHeader.from_ext(cmd.ext_fields).consumerGroup
            except FormatError:
                group = "?"
            log.info("consumer ids of %s changed: rebalancing now", group)
            self.rebalance_soon()
            return None
        if cmd.code == RequestCode.CHECK_TRANSACTION_STATE:
            group = cmd.ext_fields.get("PGROUP") or _property_group(cmd) or ""
            producer = self.producers.get(group)
            if producer is not None:
                producer.on_check_transaction(conn.peer, cmd)
            else:  # as Java: another group's listener must not answer for this one
                log.debug("CHECK_TRANSACTION_STATE from %s for group %r, not ours: dropped",
                          conn.peer, group)
            return None
        if cmd.code == RequestCode.RESET_CONSUMER_CLIENT_OFFSET:
            self._on_reset_offset(conn, cmd)
            return None
        if cmd.code == RequestCode.GET_CONSUMER_RUNNING_INFO:  # mqadmin consumerStatus
            return running_info.answer(cmd, self.consumers, self.namesrv_addrs)
        return cmd.response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                            f"request code {cmd.code} is not supported by this client")

    def _on_reset_offset(self, conn: Connection, cmd: RemotingCommand) -> None:
        """RESET_CONSUMER_CLIENT_OFFSET (one-way, from a broker that reset a group's offsets):
        the consumer of that group, if this client runs one, resumes from the new offsets."""
        try:
            h = ResetOffsetRequestHeader.from_ext(cmd.ext_fields)
            offsets = ResetOffsetBody.from_json(cmd.body or b"{}").offsetTable
        except FormatError as e:
            log.warning("malformed RESET_CONSUMER_CLIENT_OFFSET from %s: %s", conn.peer, e)
            return
        consumer = self.consumers.get(h.group)
        if consumer is None:
            log.debug("RESET_CONSUMER_CLIENT_OFFSET from %s for group %r, not ours: dropped",
                      conn.peer, h.group)
            return
        log.info("broker %s reset the offsets of %s on %s (timestamp %d)", conn.peer, h.group,
                 h.topic, h.timestamp)
        task = asyncio.get_running_loop().create_task(
            consumer.reset_offset(h.topic, offsets), name=f"reset-offset {h.group}")
        self._resets.add(task)
        task.add_done_callback(self._reset_done)

    def _reset_done(self, task: asyncio.Task[None]) -> None:
        self._resets.discard(task)
        if not task.cancelled() and (e := task.exception()) is not None:
            log.error("offset reset failed: %s", e, exc_info=e)


def _property_group(cmd: RemotingCommand) -> str | None:
    """The producer group of a CHECK_TRANSACTION_STATE: the PGROUP property of its message."""
    from rocketlite.client.message import decode_messages

    try:
        msgs = decode_messages(cmd.body, verify_crc=False)
    except MQClientError:
        return None
    return msgs[0].properties.get("PGROUP") if msgs else None
