"""Controller mode (issue 20): the broker takes the role its group's controller state names.

With ``enableControllerMode=true`` and ``controllerAddr=etcd://host:port`` the broker starts as a
slave, registers its replica (brokerId, Remoting address, HA address) under a lease of
``controllerLeaseTtl`` seconds, and reads the group's state every ``POLL_S``:

* the state names it master (and its replica key is alive): it becomes master. Its store takes
  sends again, it appends ``(masterEpoch, CommitLog max offset)`` to its epoch file and to the
  state's epoch history, starts its HA server (SYNC_MASTER waits as configured), the timer
  wheel, the delay levels, POP revive and the transaction check-back, and registers with the
  NameServers as brokerId 0 (RocketMQ 5's controller mode registers its master under MASTER_ID).
  Every ``SYNC_SET_S`` it reports its SyncStateSet: itself and each live replica whose HA
  connection has acked within ``haMaxGapNotInSync`` bytes of its max offset.
* otherwise it is a slave of the named master: it stops the master's services, registers
  under its own brokerId, and, once the master has recorded its epoch in the state, compares
  its epoch file with the state's history (``find_common_point``), truncates its CommitLog
  there, and replicates from the master's HA address.

A watcher (``controller.watcher``, in the NameServer) elects a new master when the master's
lease lapses. A broker whose replica key is gone (its lease lapsed: etcd unreachable, a long
pause) is not master whatever the state says: another one may be elected meanwhile.

The 4.x HA protocol does not carry the slave's brokerId, so each replica publishes in its
replica record (``controller.state.Replica``) its HA connection's local address, on every
(re)connect and disconnect, and the master matches its connections' peer addresses with them:
exact, with any number of replicas a host (a record without the field, from a broker that does
not publish it, is matched by host with the connections no record claims). A NAT between slave
and master hides the match: that slave stays out of the SyncStateSet. Each replica also
publishes its CommitLog max offset and its epoch, at most every ``PUBLISH_S`` and only when
changed, and elections prefer the live SyncStateSet member with the highest ``(epoch, max
offset)`` (RocketMQ 5's elect policy). Only SyncStateSet members are candidates, so SYNC_MASTER
counts acks from the members' connections only (``HAServer.count_only``), a master alone in its
set acknowledges alone (``GroupTransfer.set_alone``), and a replica joins the set only once its
own connection holds every append acknowledged that way.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rocketlite.broker.ha.client import HAClient
from rocketlite.broker.ha.server import HAServer, MasterStatus, SlaveStatus
from rocketlite.formats.epoch_file import NO_END, EpochEntry, with_ends
from rocketlite.store.epoch_file import EpochFile

if TYPE_CHECKING:
    from rocketlite.broker.broker import Broker
    from rocketlite.controller.etcd import EtcdController, Registration
    from rocketlite.controller.state import GroupView, Replica

log = logging.getLogger(__name__)

POLL_S = 0.3  # how often the broker reads its group's state
PUBLISH_S = 1.0  # at most how often a replica rewrites its max offset and epoch in its record
PUBLISH_CHECK_S = 0.1  # how often it looks for a change (its HA address is written at once)
SYNC_SET_S = 1.0  # how often a master checks its SyncStateSet (it writes it only on a change)
REGISTER_WAIT_S = 30.0  # how long a restarted broker waits for its old lease to lapse
MASTER_ID = 0  # the brokerId a master registers under with the NameServers


@dataclass(frozen=True, slots=True)
class Target:
    """The role the state asks of one broker: master of ``epoch``, or slave of ``master`` (None:
    no live master yet, or its epoch not yet recorded)."""

    master: bool
    epoch: int
    leader: Replica | None = None
    history: tuple[tuple[int, int], ...] = ()


def decide(view: GroupView, my_id: int) -> Target:
    """The role of broker ``my_id`` in ``view``. Master only when the state names it and its
    own key is alive; a slave follows a live master once that master's epoch is in the history
    (before that the history lacks the entry the slave must compare with)."""
    st = view.state
    if st.master_id == my_id and my_id in view.replicas:
        return Target(True, st.master_epoch, view.replicas[my_id], st.epochs)
    leader = view.master
    if leader is None or not st.epochs or st.epochs[-1][0] != st.master_epoch:
        return Target(False, st.master_epoch, None, st.epochs)
    return Target(False, st.master_epoch, leader, st.epochs)


def connections(status: MasterStatus, replicas: dict[int, Replica],
                master_id: int) -> dict[int, list[SlaveStatus]]:
    """brokerId → the HA connections that are that replica's, for each other live replica with
    one. A connection is a replica's when its peer address is the ``ha_client_addr`` the
    replica published (exact, whatever the host); a replica whose record has no such field (a
    broker that does not publish it) takes, by host, the connections no replica claims; one
    that published "" (not connected) or an address no connection has, none."""
    by_peer = {s.address: s for s in status.slaves}
    claimed = {r.ha_client_addr for r in replicas.values() if r.ha_client_addr}
    by_host: dict[str, list[SlaveStatus]] = {}
    for s in status.slaves:
        if s.address not in claimed:
            by_host.setdefault(_host(s.address), []).append(s)
    out: dict[int, list[SlaveStatus]] = {}
    for bid, r in replicas.items():
        if bid == master_id:
            continue
        if r.ha_client_addr is None:
            mine = by_host.get(_host(r.ha_address), [])
        else:
            one = by_peer.get(r.ha_client_addr) if r.ha_client_addr else None
            mine = [one] if one is not None else []
        if mine:
            out[bid] = mine
    return out


def acked_by_replica(status: MasterStatus, replicas: dict[int, Replica],
                     master_id: int) -> dict[int, int]:
    """brokerId → the best acked offset of its HA connections (``connections``; -1 before
    the first report)."""
    return {bid: max(s.acked_offset for s in conns)
            for bid, conns in connections(status, replicas, master_id).items()}


def in_sync(status: MasterStatus, replicas: dict[int, Replica], master_id: int,
            max_gap: int) -> set[int]:
    """The SyncStateSet a master reports: itself, and each other live replica whose HA
    connection (``acked_by_replica``) has acked within ``max_gap`` bytes of its max offset."""
    return {master_id} | {
        bid for bid, acked in acked_by_replica(status, replicas, master_id).items()
        if acked >= 0 and status.max_offset - acked <= max_gap}


def truncation_point(local: list[EpochEntry], history: tuple[tuple[int, int], ...],
                     max_offset: int) -> int | None:
    """Where a slave with epoch entries ``local`` (with ends, the last at ``max_offset``) must
    cut its log to agree with the group's ``history``; None when nothing is to cut (no local
    entries: an empty or pre-controller store, which the HA protocol aligns)."""
    if not local:
        return None
    theirs = with_ends([EpochEntry(e, o) for e, o in history], NO_END)
    by_epoch = {e.epoch: e for e in theirs}
    point = -1
    for mine in reversed(local):
        other = by_epoch.get(mine.epoch)
        if other is not None and other.start_offset == mine.start_offset:
            point = min(mine.end_offset, other.end_offset)
            break
    if point < 0:
        point = 0  # no common epoch: nothing of this log is known to be the group's
    return point if point < max_offset else None


def _host(address: str) -> str:
    return address.rpartition(":")[0].strip("[]")


class RoleController:
    """Keeps ``broker`` in the role its group's controller state names (see the module doc)."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        cfg = broker.config
        self.url = cfg.controller_addr
        self.cluster = cfg.broker_cluster_name
        self.group = cfg.broker_name
        self.my_id = cfg.broker_id
        self.ttl = cfg.controller_lease_ttl
        self.is_master = False
        self.epoch = -1  # the epoch this broker is master of, or follows
        self.leader: Replica | None = None  # the master a slave follows
        self.epoch_file = EpochFile(Path(broker.store_config.store_path_root_dir))
        self.switches: list[tuple[float, str]] = []  # (monotonic time, "master" | "slave")
        self.truncations: list[tuple[int, int]] = []  # (from max offset, to offset)
        self.controller: EtcdController | None = None
        self.registration: Registration | None = None
        self._task: asyncio.Task[None] | None = None
        self._publish_task: asyncio.Task[None] | None = None
        self.published: Replica | None = None  # the record as last written to etcd
        self._next_publish = 0.0
        self._retry_at = 0.0
        self.publications = 0  # record rewrites (each one etcd put)
        self._slave_sync_task: asyncio.Task[None] | None = None
        self._last_sync_set: frozenset[int] = frozenset()
        self._next_sync_set = 0.0

    @property
    def route_id(self) -> int:
        """The brokerId to register with the NameServers: 0 as master, else its own."""
        return MASTER_ID if self.is_master else self.my_id

    # -- lifecycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        """Register the replica (waiting for an old lease of this brokerId to lapse), take the
        role the state names now, and follow it from then on."""
        from rocketlite.controller.etcd import EtcdController  # aetcd: controller mode only
        from rocketlite.controller.state import ControllerError

        self.controller = EtcdController(self.url)
        deadline = time.monotonic() + REGISTER_WAIT_S
        while True:
            me = self._record()
            try:
                self.registration = await self.controller.register_replica(
                    self.cluster, self.group, me, ttl=self.ttl)
                self.published = me
                break
            except ControllerError as e:
                if time.monotonic() > deadline:
                    raise
                log.info("controller: %s; retrying", e)
                await asyncio.sleep(min(1.0, self.ttl / 3))
        log.info("controller: registered %s/%s broker %d at %s (HA %s), lease %d s",
                 self.cluster, self.group, self.my_id, me.address, me.ha_address, self.ttl)
        self._start_slave_sync()
        with contextlib.suppress(ControllerError):
            await self.follow_once()
        self._task = asyncio.create_task(self._loop(), name="controller-role")
        self._publish_task = asyncio.create_task(self._publish_loop(), name="controller-publish")

    async def close(self) -> None:
        """Stop following; a master stops taking appends, then the lease is revoked so a new
        master is elected at once."""
        for task in (self._task, self._publish_task):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self._task = self._publish_task = None
        await self._stop_slave_sync()
        if self.is_master:
            # No append once the lease is revoked: another replica is elected at once, and a
            # send acknowledged here by a slave still connected would be cut from that slave
            # when it follows the new master.
            self.broker.store.set_slave(True)
        if self.registration is not None:
            await self.registration.close()
            self.registration = None
        if self.controller is not None:
            await self.controller.close()
            self.controller = None

    async def _loop(self) -> None:
        from rocketlite.controller.state import ControllerError

        while True:
            await asyncio.sleep(POLL_S)
            try:
                await self.follow_once()
            except ControllerError as e:
                log.warning("controller: %s", e)
            except Exception:  # one bad round must not end following the state
                log.exception("controller: following the group state failed")

    # -- one round ----------------------------------------------------------------------------

    async def follow_once(self) -> Target:
        assert self.controller is not None
        view = await self.controller.get_group(self.cluster, self.group)
        target = decide(view, self.my_id)
        if self.my_id not in view.replicas:
            await self._register_again()  # the lease lapsed: be a candidate again
        if target.master:
            if not self.is_master or target.epoch != self.epoch:
                await self._to_master(target.epoch)
            await self._report_sync_state_set(view)
        else:
            if self.is_master:
                await self._to_slave()
            if target.leader is not None and (
                    self.leader is None or target.leader.identity != self.leader.identity
                    or target.epoch != self.epoch):
                await self._follow(target)
        return target

    async def _register_again(self) -> None:
        """Register under a new lease after the old one lapsed (etcd unreachable for longer
        than the TTL, a long pause): without a key this broker can be neither elected nor in
        a SyncStateSet."""
        from rocketlite.controller.state import ControllerError

        assert self.controller is not None
        if self.registration is not None:
            await self.registration.abandon()
            self.registration = None
        me = self._record()
        try:
            self.registration = await self.controller.register_replica(
                self.cluster, self.group, me, ttl=self.ttl)
        except ControllerError as e:
            log.warning("controller: cannot register broker %d again: %s", self.my_id, e)
        else:
            self.published = me
            log.warning("controller: broker %d's lease had lapsed; registered again", self.my_id)

    async def _to_master(self, epoch: int) -> None:
        assert self.controller is not None
        b = self.broker
        await self._stop_slave_sync()
        if b.ha_client is not None:
            await b.ha_client.close()
        b.store.set_slave(False)
        try:
            start = b.store.commitlog.max_offset
            if epoch > self.epoch_file.last_epoch:
                self.epoch_file.begin_epoch(epoch, start)
            else:  # master again within its epoch (restarted before anyone else was elected)
                start = self.epoch_file.entries()[-1].start_offset
            await self.controller.record_epoch(self.cluster, self.group, self.my_id, epoch, start)
        except BaseException:
            if not self.is_master:  # not master after all (a newer epoch, etcd away): no sends
                b.store.set_slave(True)
            raise
        was_master = self.is_master
        self.is_master, self.epoch, self.leader = True, epoch, None
        b.slave = False
        b.master_addr = ""
        self._last_sync_set = frozenset()
        if not was_master:
            if adopted := b.topics.adopt_queues(list(b.store.queues)):
                log.warning("controller: broker %d adopts topics it holds messages of but had no "
                            "config for yet (created on the old master since the last slave "
                            "sync): %s", self.my_id, ", ".join(adopted[:20]))
            ha = HAServer(b.store, b.store_config)
            ha.counted = frozenset()  # no member's acks until the set is read (next step)
            await ha.start()
            b.ha_server = ha
            b.send.transfer = ha.transfer
            await asyncio.to_thread(b.timer.start)
            await asyncio.to_thread(b.schedule.start)
            b.pop.revive.start()
            b.transactions.check.start()
            await b.reregister(old_id=self.my_id)
            self.switches.append((time.monotonic(), "master"))
        log.info("controller: broker %d is master of %s/%s, epoch %d, from offset %d",
                 self.my_id, self.cluster, self.group, epoch, start)

    async def _to_slave(self) -> None:
        b = self.broker
        log.info("controller: broker %d of %s/%s steps down to slave", self.my_id, self.cluster,
                 self.group)
        self.is_master = False
        b.slave = True
        b.store.set_slave(True)
        b.send.transfer = None
        if b.ha_server is not None:
            await b.ha_server.close()
            b.ha_server = None
        await b.transactions.check.stop()
        await b.pop.revive.stop()
        await asyncio.to_thread(b.schedule.shutdown)
        await asyncio.to_thread(b.timer.shutdown)
        await b.reregister(old_id=MASTER_ID)
        self._start_slave_sync()
        self.switches.append((time.monotonic(), "slave"))

    async def _follow(self, target: Target) -> None:
        """Replicate from ``target.leader``: cut the log where it parts from the group's epoch
        history, take that history as this store's, and point the HA client there."""
        assert target.leader is not None
        b = self.broker
        if b.ha_client is None:
            b.ha_client = HAClient(b.store, b.store_config, "")
        await b.ha_client.close()
        max_offset = b.store.commitlog.max_offset
        point = truncation_point(self.epoch_file.entries(max_offset), target.history, max_offset)
        if point is not None:
            log.warning("controller: broker %d truncates its CommitLog from %d to %d (the common "
                        "point with epoch %d's history)", self.my_id, max_offset, point,
                        target.epoch)
            await asyncio.to_thread(b.store.truncate_commitlog, point)
            self.truncations.append((max_offset, point))
        self.epoch_file.replace([EpochEntry(e, o) for e, o in target.history])
        self.epoch, self.leader = target.epoch, target.leader
        b.master_addr = target.leader.address
        if b.slave_sync is not None:
            b.slave_sync.master_address = target.leader.address
        await b.ha_client.update_master_address(target.leader.ha_address)
        await b.ha_client.start()
        log.info("controller: broker %d follows master %d (%s, HA %s), epoch %d", self.my_id,
                 target.leader.broker_id, target.leader.address, target.leader.ha_address,
                 target.epoch)

    async def _report_sync_state_set(self, view: GroupView) -> None:
        b = self.broker
        now = time.monotonic()
        if b.ha_server is None or now < self._next_sync_set:
            return
        self._next_sync_set = now + SYNC_SET_S
        transfer = b.ha_server.transfer
        have = frozenset(view.state.sync_state_set)
        status = b.ha_server.status()
        want = frozenset(in_sync(status, view.replicas, self.my_id,
                                 b.store_config.ha_max_gap_not_in_sync))
        if transfer is not None and want - have:
            # A slave joins only once it holds every append acknowledged while the master was
            # alone (RocketMQ 5 expands at the confirm offset): stop acking alone first, so
            # nothing past what the slave holds is acknowledged before the larger set is written.
            transfer.set_alone(False)
            acked = acked_by_replica(status, view.replicas, self.my_id)
            want -= {bid for bid in want - have - {self.my_id}
                     if acked.get(bid, -1) < transfer.alone_acked}
        if want != have:
            assert self.controller is not None
            try:
                await self.controller.alter_sync_state_set(self.cluster, self.group, self.my_id,
                                                           self.epoch, want)
            except BaseException:
                if transfer is not None:  # the set is still ``have``
                    transfer.set_alone(have <= {self.my_id})
                raise
            self._last_sync_set = want
            have = want
            log.info("controller: SyncStateSet of %s/%s is %s", self.cluster, self.group,
                     sorted(want))
        # Acks count from the set's members only: a replica's once the set naming it is
        # written (what one leaving the set acked before stays counted).
        conns = connections(status, view.replicas, self.my_id)
        b.ha_server.count_only(frozenset(s.address for bid in have if bid in conns
                                         for s in conns[bid]))
        if transfer is not None:
            transfer.set_alone(have <= {self.my_id})

    # -- the replica's published record -------------------------------------------------------

    def _record(self) -> Replica:
        """This replica's record as it stands now: registration and published fields."""
        from rocketlite.controller.state import Replica

        b = self.broker
        client = b.ha_client.local_address if b.ha_client is not None and not self.is_master else ""
        return Replica(self.my_id, b.address, b.ha_address, client, b.store.commitlog.max_offset,
                       self.epoch_file.last_epoch)

    async def publish_once(self) -> bool:
        """Rewrite the record if it changed: at once for the HA connection's address (the
        master matches connections with it), at most every ``PUBLISH_S`` for the max offset
        and epoch (under load they change with every append). True if it wrote."""
        reg, old = self.registration, self.published
        if reg is None or old is None:
            return False
        now = time.monotonic()
        new = self._record()
        if new == old or now < self._retry_at or (new.ha_client_addr == old.ha_client_addr
                                                  and now < self._next_publish):
            return False
        if not await reg.update(new):
            self._retry_at = now + PUBLISH_S  # etcd away or the lease gone: not every check
            return False
        self.published = new
        self._next_publish = now + PUBLISH_S
        self.publications += 1
        if new.ha_client_addr != old.ha_client_addr:
            log.info("controller: broker %d's HA connection is %s", self.my_id,
                     new.ha_client_addr or "closed")
        return True

    async def _publish_loop(self) -> None:
        while True:
            await asyncio.sleep(PUBLISH_CHECK_S)
            try:
                await self.publish_once()
            except Exception:  # one bad round must not end publishing
                log.exception("controller: publishing broker %d's record failed", self.my_id)

    # -- the slave's metadata sync ------------------------------------------------------------

    def _start_slave_sync(self) -> None:
        sync = self.broker.slave_sync
        if sync is not None and self._slave_sync_task is None:
            self._slave_sync_task = asyncio.create_task(sync.run(), name="slave-sync")

    async def _stop_slave_sync(self) -> None:
        if self._slave_sync_task is not None:
            self._slave_sync_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._slave_sync_task
            self._slave_sync_task = None
