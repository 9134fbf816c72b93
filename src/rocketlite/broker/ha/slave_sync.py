"""The slave's copy of its master's metadata (Java's ``SlaveSynchronize``): at start and every
``SYNC_INTERVAL_S`` (10 s, Java's fixed period) a SLAVE asks its master for

- GET_ALL_TOPIC_CONFIG (21): the topic table, taken whole (topics created and removed) when its
  dataVersion differs from the slave's;
- GET_ALL_CONSUMER_OFFSET (43): each ``topic@group`` entry replaces the slave's (entries only the
  slave has are kept, as Java's ``putAll`` keeps them);
- GET_ALL_DELAY_OFFSET (45): written to the slave's ``delayOffset.json`` as is and loaded, so a
  slave promoted by hand resumes the delay levels where the master was;
- GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201): the group table, taken whole when it or its
  dataVersion differs;

and persists each table as the master does (the offsets with the broker's periodic offset persist).
The files are written on the event loop, as the managers write them after a change, so that no two
writes of one file (each through the same ``.tmp``) overlap. The four are independent: one that
fails (logged) does not keep the others from being applied.

The master's Remoting address: ``master_address`` when set, else the address of brokerId 0 under
this broker's name in the first NameServer's cluster info (GET_BROKER_CLUSTER_INFO) that has one.
Java learns the same address from the NameServer (REGISTER_BROKER's ``masterAddr``); the HA address
``haMasterAddress`` names the master's HA port, not its Remoting port, so it cannot serve. With no
master registered (it is down) a round does nothing: the slave's tables, and the offsets consumers
commit to it meanwhile, stay until the master is back.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from rocketlite.broker import config_file
from rocketlite.broker.subscriptions import SubscriptionGroupWrapper
from rocketlite.common.errors import RemotingError, RocketliteError
from rocketlite.protocol.bodies import (
    ClusterInfo,
    ConsumerOffsetSerializeWrapper,
    DataVersion,
    DelayOffsetSerializeWrapper,
    TopicConfigSerializeWrapper,
)
from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.command import RemotingCommand

if TYPE_CHECKING:
    from rocketlite.broker.broker import Broker

log = logging.getLogger(__name__)

SYNC_INTERVAL_S = 10.0
REQUEST_TIMEOUT_S = 3.0
MASTER_ID = 0

_ERRORS = (RemotingError, RocketliteError, OSError, TimeoutError)


class SyncError(RocketliteError):
    """The master refused a request of the sync."""


class SlaveSynchronize:
    def __init__(self, broker: Broker, interval_s: float = SYNC_INTERVAL_S) -> None:
        self.broker = broker
        self.interval_s = interval_s
        self.master_address: str | None = None  # set: used instead of asking the NameServers
        self.last_master: str | None = None  # the master of the last round that found one
        self.last_sync_ms = 0  # wall-clock ms of the last round that reached the master
        self.rounds = 0  # rounds that reached the master
        self._round = asyncio.Lock()  # one round at a time (the loop's and a caller's)

    # -- loop ------------------------------------------------------------------------------

    async def run(self) -> None:
        """Sync now, then every ``interval_s``, until cancelled."""
        while True:
            try:
                await self.sync_once()
            except Exception:  # one bad round must not end the sync for good
                log.exception("slave sync round failed")
            await asyncio.sleep(self.interval_s)

    async def sync_once(self) -> bool:
        """One round; True if the master was found and asked (each table applied or logged).
        A round started while another runs waits for it."""
        async with self._round:
            return await self._sync_once()

    async def _sync_once(self) -> bool:
        master = await self.find_master()
        if master is None:
            return False
        if master != self.last_master:
            log.info("slave sync: master of %s is %s", self.broker.config.broker_name, master)
            self.last_master = master
        steps: tuple[tuple[str, Callable[[str], Awaitable[None]]], ...] = (
            ("topic config", self.sync_topics),
            ("consumer offsets", self.sync_offsets),
            ("delay offsets", self.sync_delay_offsets),
            ("subscription groups", self.sync_groups),
        )
        reached = False
        for what, step in steps:
            try:
                await step(master)
                reached = True
            except _ERRORS as e:
                log.warning("slave sync of %s from %s failed: %s", what, master,
                            str(e) or type(e).__name__)
        if reached:
            self.rounds += 1
            self.last_sync_ms = time.time_ns() // 1_000_000
        return reached

    async def find_master(self) -> str | None:
        if self.master_address:
            return self.master_address
        b = self.broker
        for ns in b.config.namesrv_addrs:
            try:
                reply = await b.client.invoke(
                    ns, RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO),
                    REQUEST_TIMEOUT_S)
                if reply.code != ResponseCode.SUCCESS:
                    continue
                info = ClusterInfo.from_json(reply.body)
            except _ERRORS as e:
                log.debug("cluster info from %s: %s", ns, e)
                continue
            bd = info.brokerAddrTable.get(b.config.broker_name)
            addr = bd.brokerAddrs.get(MASTER_ID) if bd is not None else None
            if addr and addr != b.address:
                return addr
        return None

    async def _get(self, master: str, code: int) -> bytes:
        reply = await self.broker.client.invoke(master, RemotingCommand.request(code),
                                                REQUEST_TIMEOUT_S)
        if reply.code != ResponseCode.SUCCESS:
            raise SyncError(f"request {code}: {reply.code} {reply.remark}")
        return reply.body

    # -- the tables --------------------------------------------------------------------------

    async def sync_topics(self, master: str) -> None:
        wrapper = TopicConfigSerializeWrapper.from_json(
            await self._get(master, RequestCode.GET_ALL_TOPIC_CONFIG))
        topics = self.broker.topics
        if topics.data_version == wrapper.dataVersion:
            return
        new = wrapper.topicConfigTable
        for name, tc in new.items():
            tc.topicName = name
        with topics.lock:
            changed = [tc for name, tc in new.items() if topics.table.get(name) != tc]
            removed = [name for name in topics.table if name not in new]
            topics.table = dict(new)
            topics.data_version = _copy(wrapper.dataVersion)
        topics.persist()
        if changed or removed:
            log.info("slave sync: topics from %s: %d created or changed, %d removed", master,
                     len(changed), len(removed))
        for tc in changed:  # re-register with the NameServers (the broker's listener)
            for fn in topics.on_change:
                try:
                    fn(tc)
                except Exception:
                    log.exception("topic change listener failed for %s", tc.topicName)

    async def sync_offsets(self, master: str) -> None:
        wrapper = ConsumerOffsetSerializeWrapper.from_json(
            await self._get(master, RequestCode.GET_ALL_CONSUMER_OFFSET))
        offsets = self.broker.offsets
        offsets.put_all(wrapper.offsetTable)  # written by the broker's offset persist loop

    async def sync_delay_offsets(self, master: str) -> None:
        body = await self._get(master, RequestCode.GET_ALL_DELAY_OFFSET)
        DelayOffsetSerializeWrapper.from_json(body)  # refuse what the file could not hold
        schedule = self.broker.schedule
        config_file.save(schedule.path, body)
        schedule.load()

    async def sync_groups(self, master: str) -> None:
        wrapper = SubscriptionGroupWrapper.from_json(
            await self._get(master, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG))
        subs = self.broker.subscriptions
        for name, sgc in wrapper.subscriptionGroupTable.items():
            sgc.groupName = name
        # The tables are compared too: a group's deletion leaves the dataVersion as it was.
        if subs.data_version == wrapper.dataVersion and subs.table == wrapper.subscriptionGroupTable:
            return
        with subs.lock:
            subs.table = dict(wrapper.subscriptionGroupTable)
            subs.data_version = _copy(wrapper.dataVersion)
        subs.persist()


def _copy(dv: DataVersion) -> DataVersion:
    return DataVersion(stateVersion=dv.stateVersion, timestamp=dv.timestamp, counter=dv.counter)
