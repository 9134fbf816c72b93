"""The controller's operations on etcd, each one etcd transaction (``aetcd``).

etcd is the consensus: any number of controllers (one in every NameServer) may run these at
once. A change compares what it read (the state key's revision, the replicas' keys) and etcd
applies it only if nothing changed meanwhile, so of two controllers electing at once exactly one
moves the epoch; the other re-reads and finds a live master.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import aetcd

from rocketlite.controller.state import (
    ControllerError,
    GroupState,
    GroupView,
    NoCandidateError,
    Replica,
    StaleEpochError,
    group_prefix,
    parse_key,
    replica_key,
    state_key,
)

log = logging.getLogger(__name__)

_CAS_RETRIES = 16  # re-reads after a lost compare-and-swap before giving up


def parse_url(url: str) -> tuple[str, int]:
    """``etcd://host:port`` → (host, port); the port defaults to 2379."""
    parts = urlsplit(url)
    if parts.scheme != "etcd" or not parts.hostname:
        raise ControllerError(f"controller address {url!r} is not etcd://host[:port]")
    try:
        port = parts.port or 2379
    except ValueError as e:
        raise ControllerError(f"controller address {url!r}: {e}") from None
    return parts.hostname, port


@dataclass(frozen=True, slots=True)
class Election:
    """An election etcd applied: the new master and the epoch it starts."""

    master_id: int
    master_epoch: int
    state: GroupState


class Registration:
    """A replica's registration: its key lives as long as ``lease``, which a task refreshes every
    third of its TTL. ``close`` revokes the lease (the key goes at once); ``abandon`` only stops
    refreshing (the key goes when the TTL lapses, as after a crash)."""

    def __init__(self, client: aetcd.Client, lease: Any, key: str) -> None:
        self.key = key
        self.lease_id: int = lease.id
        self.ttl: int = lease.ttl
        self._client = client
        self._lease = lease
        self._task = asyncio.create_task(self._keep_alive(), name=f"etcd-lease {key}")

    async def _keep_alive(self) -> None:
        period = max(self.ttl / 3, 0.2)
        while True:
            await asyncio.sleep(period)
            try:
                await self._lease.refresh()
            except aetcd.ClientError as e:  # etcd away: retry; the lease may lapse meanwhile
                log.warning("cannot refresh the lease of %s: %s", self.key, e)

    async def update(self, replica: Replica) -> bool:
        """Rewrite this key's record (the replica's published fields) under the same lease;
        False if etcd refused or is away (the lease lapsed: the key is gone and a put under a
        dead lease fails, so another process's record is never overwritten)."""
        try:
            await self._client.put(self.key.encode(), replica.to_json(), lease=self.lease_id)
        except aetcd.ClientError as e:
            log.warning("cannot update %s: %s", self.key, e)
            return False
        return True

    async def abandon(self) -> None:
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task

    async def close(self) -> None:
        await self.abandon()
        try:
            await self._lease.revoke()
        except aetcd.ClientError as e:
            log.warning("cannot revoke the lease of %s (it lapses by its TTL): %s", self.key, e)


class EtcdController:
    """The controller's operations for the groups of any cluster, over one etcd client."""

    def __init__(self, url: str, timeout: float = 5.0) -> None:
        self.url = url
        host, port = parse_url(url)
        self.client = aetcd.Client(host=host, port=port, timeout=timeout)

    async def __aenter__(self) -> EtcdController:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self.client.close()

    # -- reads ------------------------------------------------------------------------------------

    async def get_group(self, cluster: str, broker_name: str) -> GroupView:
        """The group's state and live replicas, read in one range request (one revision)."""
        prefix = group_prefix(cluster, broker_name)
        try:
            got = await self.client.get_prefix(prefix.encode())
        except aetcd.ClientError as e:
            raise ControllerError(f"etcd at {self.url}: cannot read {prefix}: {e}") from e
        state, revision = GroupState(), 0
        replicas: dict[int, Replica] = {}
        for kv in got:
            key = kv.key.decode()
            parsed = parse_key(cluster, key)
            if parsed is None or parsed[0] != broker_name:
                continue
            if parsed[1] == "state":
                state, revision = GroupState.from_json(kv.value, key), kv.mod_revision
            elif parsed[2] is not None:
                replicas[parsed[2]] = Replica.from_json(kv.value, key)
        return GroupView(cluster, broker_name, state, replicas, revision)

    async def list_groups(self, cluster: str) -> list[str]:
        """The brokerNames with any key under the cluster's prefix."""
        prefix = group_prefix(cluster, "x")[: -len("x/")]
        got = await self.client.get_prefix(prefix.encode(), keys_only=True)
        names = {p[0] for kv in got if (p := parse_key(cluster, kv.key.decode())) is not None}
        return sorted(names)

    # -- writes -----------------------------------------------------------------------------------

    async def register_replica(
        self, cluster: str, broker_name: str, replica: Replica, ttl: int = 10
    ) -> Registration:
        """Register ``replica`` under a new lease of ``ttl`` seconds, kept alive by the returned
        ``Registration`` (in this process). A brokerId another live process holds is refused."""
        key = replica_key(cluster, broker_name, replica.broker_id)
        tx = self.client.transactions
        try:
            lease = await self.client.lease(ttl)
            ok, _ = await self.client.transaction(
                compare=[tx.version(key.encode()) == 0],
                success=[tx.put(key.encode(), replica.to_json(), lease=lease.id)],
                failure=[],
            )
        except aetcd.ClientError as e:
            raise ControllerError(f"etcd at {self.url}: cannot register {key}: {e}") from e
        if not ok:
            with contextlib.suppress(aetcd.ClientError):
                await lease.revoke()
            raise ControllerError(f"{key} is held by another live process (its lease is alive)")
        return Registration(self.client, lease, key)

    async def alter_sync_state_set(
        self,
        cluster: str,
        broker_name: str,
        master_id: int,
        master_epoch: int,
        sync_state_set: set[int] | frozenset[int],
    ) -> GroupState:
        """The master ``master_id`` of ``master_epoch`` sets the SyncStateSet (itself included);
        ``StaleEpochError`` if it is not the master of that epoch, or no longer."""
        if master_id not in sync_state_set:
            raise ControllerError(f"the SyncStateSet {sorted(sync_state_set)} lacks the master {master_id}")
        members = tuple(sorted(sync_state_set))
        return await self._as_master(
            cluster, broker_name, master_id, master_epoch, "SyncStateSet not set",
            lambda st: GroupState(master_id, master_epoch, members, st.sync_state_set_epoch + 1,
                                  st.epochs))

    async def record_epoch(
        self, cluster: str, broker_name: str, master_id: int, master_epoch: int, start_offset: int
    ) -> GroupState:
        """The master ``master_id`` of ``master_epoch`` appends ``(master_epoch, start_offset)``
        (its CommitLog max offset when it took over) to the group's epoch history, unless the
        history ends with that epoch already; entries of a later epoch, or starting at or after
        ``start_offset``, are dropped first (epochs in which the log got no bytes).
        ``StaleEpochError`` if it is not that epoch's master."""

        def change(st: GroupState) -> GroupState | None:
            if st.epochs and st.epochs[-1][0] == master_epoch:
                return None  # recorded already (a master restarted within its epoch keeps it)
            kept = tuple(e for e in st.epochs if e[0] < master_epoch and e[1] < start_offset)
            return GroupState(st.master_id, st.master_epoch, st.sync_state_set,
                              st.sync_state_set_epoch, (*kept, (master_epoch, start_offset)))

        return await self._as_master(cluster, broker_name, master_id, master_epoch,
                                     "epoch not recorded", change)

    async def _as_master(
        self, cluster: str, broker_name: str, master_id: int, master_epoch: int, failed: str,
        change: Callable[[GroupState], GroupState | None],
    ) -> GroupState:
        """Apply ``change`` (None: nothing to change) to the group's state as the master
        ``master_id`` of ``master_epoch``, swapped only if the state is still as read (retried
        a few times); ``StaleEpochError`` if it is not that epoch's master, or no longer."""
        for _ in range(_CAS_RETRIES):
            view = await self.get_group(cluster, broker_name)
            st = view.state
            if st.master_id != master_id or st.master_epoch != master_epoch:
                raise StaleEpochError(
                    f"{cluster}/{broker_name}: broker {master_id} at epoch {master_epoch} is not the "
                    f"master (master {st.master_id}, epoch {st.master_epoch})"
                )
            new = change(st)
            if new is None:
                return st
            if await self._swap_state(view, new, compare_live=()):
                return new
        raise ControllerError(f"{cluster}/{broker_name}: the state kept changing; {failed}")

    async def elect_master(
        self, cluster: str, broker_name: str, offsets: Mapping[int, int] | None = None
    ) -> Election | None:
        """Elect a master if the group has none alive; None if it has one (nothing done).

        The candidates are the live members of the SyncStateSet (before the first election, every
        live replica); of them the highest offset in ``offsets`` (brokerId → acked CommitLog
        offset) wins, then the lowest brokerId. Without ``offsets``, the highest ``(epoch,
        max_offset)`` the replicas published in their records (RocketMQ 5's elect policy: the
        brokers' heartbeats carry them), read in the same revision as the candidates; unknown
        counts lowest. One transaction, applied only if the
        state is as read, the old master's key is still gone and the winner's still there: it
        sets masterId, masterEpoch + 1, SyncStateSet = {winner}. ``NoCandidateError`` if no one
        may be elected; a lost race re-reads (and usually finds the winner's master alive)."""
        for _ in range(_CAS_RETRIES):
            view = await self.get_group(cluster, broker_name)
            if view.master is not None:
                return None
            st = view.state
            pool = set(view.replicas) if st.master_id is None else set(st.sync_state_set) & set(view.replicas)
            if not pool:
                raise NoCandidateError(
                    f"{cluster}/{broker_name}: no live replica may be elected (SyncStateSet "
                    f"{list(st.sync_state_set)}, live {sorted(view.replicas)})"
                )
            winner = min(pool, key=lambda b: candidate_rank(view, b, offsets))
            new = GroupState(
                winner, st.master_epoch + 1, (winner,), st.sync_state_set_epoch + 1, st.epochs
            )
            if await self._swap_state(view, new, compare_live=(winner,)):
                log.info("%s/%s: broker %d elected, epoch %d", cluster, broker_name, winner, new.master_epoch)
                return Election(winner, new.master_epoch, new)
        raise ControllerError(f"{cluster}/{broker_name}: the state kept changing; no election done")

    async def _swap_state(self, view: GroupView, new: GroupState, compare_live: tuple[int, ...]) -> bool:
        """Put ``new`` if the state key is still at the revision ``view`` read (absent if 0), the
        old master's replica key still absent when the view had none, and ``compare_live``'s keys
        still present. False when etcd refused (someone else changed something first)."""
        tx = self.client.transactions
        skey = state_key(view.cluster, view.broker_name).encode()
        compare = [tx.mod(skey) == view.state_revision]
        old = view.state.master_id
        if old is not None and old not in view.replicas:
            compare.append(tx.version(replica_key(view.cluster, view.broker_name, old).encode()) == 0)
        compare.extend(
            tx.version(replica_key(view.cluster, view.broker_name, b).encode()) > 0 for b in compare_live
        )
        try:
            ok, _ = await self.client.transaction(
                compare=compare, success=[tx.put(skey, new.to_json())], failure=[]
            )
        except aetcd.ClientError as e:
            raise ControllerError(f"etcd at {self.url}: cannot write {skey.decode()}: {e}") from e
        return bool(ok)


def candidate_rank(view: GroupView, broker_id: int, offsets: Mapping[int, int] | None) -> tuple[int, ...]:
    """A candidate's sort key, the best lowest: see ``elect_master``."""
    if offsets is not None:
        return -offsets.get(broker_id, -1), broker_id
    r = view.replicas[broker_id]
    return -r.epoch, -r.max_offset, broker_id
