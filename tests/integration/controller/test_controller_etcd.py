"""The controller's operations against a real etcd: leases, elections by compare-and-swap, the
SyncStateSet rule, fencing by epoch, and the watcher electing when a master's lease ends."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

import pytest

from rocketlite.controller.etcd import EtcdController, Registration
from rocketlite.controller.state import (
    ControllerError,
    GroupState,
    NoCandidateError,
    Replica,
    StaleEpochError,
)
from rocketlite.controller.watcher import ElectionWatcher

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

C, G = "DefaultCluster", "broker-a"


def _replica(broker_id: int) -> Replica:
    return Replica(broker_id, f"127.0.0.1:{10911 + 10 * broker_id}", f"127.0.0.1:{10912 + 10 * broker_id}")


async def _register(ctl: EtcdController, ids: list[int], ttl: int = 10) -> dict[int, Registration]:
    return {b: await ctl.register_replica(C, G, _replica(b), ttl=ttl) for b in ids}


async def _close(regs: dict[int, Registration]) -> None:
    for r in regs.values():
        await r.close()


async def _until(pred: Callable[[], Awaitable[bool]], within: float) -> float:
    """Seconds until ``pred()`` is true; fails after ``within`` seconds."""
    start = time.monotonic()
    while not await pred():
        assert time.monotonic() - start < within, "condition not met in time"
        await asyncio.sleep(0.05)
    return time.monotonic() - start


async def test_registration_lives_as_long_as_its_lease(etcd_url: str) -> None:
    async with EtcdController(etcd_url) as ctl:
        regs = await _register(ctl, [0, 1], ttl=2)
        view = await ctl.get_group(C, G)
        assert view.replicas == {0: _replica(0), 1: _replica(1)}
        assert view.state == GroupState()  # no election yet
        with pytest.raises(ControllerError, match="held by another live process"):
            await ctl.register_replica(C, G, _replica(1))
        await asyncio.sleep(3)  # longer than the TTL: the keep-alive task holds the keys
        assert set((await ctl.get_group(C, G)).replicas) == {0, 1}
        await regs[0].close()  # revoked: gone at once
        assert set((await ctl.get_group(C, G)).replicas) == {1}
        await regs[1].abandon()  # no refresh: gone when the TTL lapses

        async def gone() -> bool:
            return not (await ctl.get_group(C, G)).replicas

        await _until(gone, 6)


async def test_first_election_then_only_sync_state_set_members(etcd_url: str) -> None:
    async with EtcdController(etcd_url) as ctl:
        regs = await _register(ctl, [0, 1, 2])
        first = await ctl.elect_master(C, G, offsets={1: 100, 2: 50})
        assert first is not None
        assert (first.master_id, first.master_epoch, first.state.sync_state_set) == (1, 1, (1,))
        assert await ctl.elect_master(C, G) is None  # a live master: nothing to do
        # the master takes broker 0 into its SyncStateSet; broker 2 stays out
        st = await ctl.alter_sync_state_set(C, G, 1, 1, {0, 1})
        assert st.sync_state_set == (0, 1) and st.sync_state_set_epoch == 2
        await regs[1].close()
        # broker 2 has the highest offset but is not in the SyncStateSet
        second = await ctl.elect_master(C, G, offsets={2: 10**9, 0: 5})
        assert second is not None
        assert (second.master_id, second.master_epoch, second.state.sync_state_set) == (0, 2, (0,))
        await regs[0].close()
        with pytest.raises(NoCandidateError, match="no live replica may be elected"):
            await ctl.elect_master(C, G)
        view = await ctl.get_group(C, G)
        assert view.state.master_id == 0 and view.master is None and set(view.replicas) == {2}
        await _close(regs)


async def test_stale_epoch_and_non_master_are_refused(etcd_url: str) -> None:
    async with EtcdController(etcd_url) as ctl:
        regs = await _register(ctl, [0, 1])
        await ctl.elect_master(C, G, offsets={0: 1})
        await ctl.alter_sync_state_set(C, G, 0, 1, {0, 1})
        await regs[0].close()
        elected = await ctl.elect_master(C, G)
        assert elected is not None and elected.master_id == 1 and elected.master_epoch == 2
        with pytest.raises(StaleEpochError, match="epoch 1 is not the master"):
            await ctl.alter_sync_state_set(C, G, 0, 1, {0, 1})  # the old master, its old epoch
        with pytest.raises(StaleEpochError):
            await ctl.alter_sync_state_set(C, G, 1, 1, {1})  # the new master, a stale epoch
        assert (await ctl.get_group(C, G)).state == GroupState(1, 2, (1,), 3)
        await _close(regs)


async def test_racing_controllers_move_the_epoch_once(etcd_url: str) -> None:
    ctls = [EtcdController(etcd_url) for _ in range(4)]
    try:
        regs = await _register(ctls[0], [0, 1, 2])
        await ctls[0].elect_master(C, G, offsets={0: 1})
        await ctls[0].alter_sync_state_set(C, G, 0, 1, {0, 1, 2})
        for _round in range(5):
            view = await ctls[0].get_group(C, G)
            master = view.state.master_id
            assert master is not None
            await regs.pop(master).close()
            results = await asyncio.gather(*(c.elect_master(C, G) for c in ctls))
            regs[master] = await ctls[0].register_replica(C, G, _replica(master))  # back, as a slave
            won = [r for r in results if r is not None]
            assert len(won) == 1, results
            after = (await ctls[0].get_group(C, G)).state
            assert after.master_epoch == view.state.master_epoch + 1
            assert after.master_id == won[0].master_id != master
            await ctls[0].alter_sync_state_set(C, G, after.master_id, after.master_epoch, {0, 1, 2})
        await _close(regs)
    finally:
        for c in ctls:
            await c.close()


async def test_watchers_elect_when_the_master_lease_ends(etcd_url: str) -> None:
    async with EtcdController(etcd_url) as a, EtcdController(etcd_url) as b:
        regs = await _register(a, [0, 1, 2], ttl=2)
        watchers = [ElectionWatcher(a, C, sweep_interval=30), ElectionWatcher(b, C, sweep_interval=30)]
        for w in watchers:
            w.start()
        try:

            async def has_master() -> bool:
                return (await a.get_group(C, G)).master is not None

            await _until(has_master, 5)  # the first election, by the start sweep
            st = (await a.get_group(C, G)).state
            assert st.master_id is not None
            other = next(x for x in (0, 1, 2) if x != st.master_id)
            await a.alter_sync_state_set(C, G, st.master_id, st.master_epoch, {st.master_id, other})

            async def elected() -> bool:
                s = (await a.get_group(C, G)).state
                return s.master_epoch == st.master_epoch + 1 and (await a.get_group(C, G)).master is not None

            await regs[st.master_id].close()  # revoked
            revoked_s = await _until(elected, 5)
            s2 = (await a.get_group(C, G)).state
            assert s2.master_id == other  # the SyncStateSet member, never the third replica
            await regs[other].abandon()  # "crashed": its lease lapses after 2 s
            # the only live replica left is outside the SyncStateSet {other}: no election
            lapse_start = time.monotonic()

            async def other_gone() -> bool:
                return other not in (await a.get_group(C, G)).replicas

            await _until(other_gone, 8)
            lapsed_s = time.monotonic() - lapse_start
            await asyncio.sleep(0.5)
            s3 = (await a.get_group(C, G)).state
            assert (s3.master_id, s3.master_epoch) == (other, s2.master_epoch)
            assert sum(len(w.elections) for w in watchers) == 2
            print(f"election after revoke: {revoked_s:.3f} s; lease lapse noticed after {lapsed_s:.2f} s")
        finally:
            for w in watchers:
                await w.stop()
            await _close(regs)
