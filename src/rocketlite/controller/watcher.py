"""Elections when a master's lease ends: watch a cluster's keys in etcd and elect.

Any number of watchers (one a NameServer) may run for one cluster: each one that sees a master's
replica key go runs ``elect_master``, and etcd's compare-and-swap lets exactly one of them move
the epoch. A sweep over every group at start and every ``sweep_interval`` seconds covers events
missed while the watch was being re-created (etcd restarted, network). ``elect_master`` is called
without offsets: it weighs the ``(epoch, max_offset)`` each replica publishes in its record, read
in the same etcd revision as the candidates (offsets read here first would be older).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

import aetcd

from rocketlite.controller.etcd import Election, EtcdController
from rocketlite.controller.state import ControllerError, NoCandidateError, cluster_prefix, parse_key

log = logging.getLogger(__name__)

OnElection = Callable[[str, Election], Awaitable[None] | None]


class ElectionWatcher:
    """Keeps every group of ``cluster`` with a live master while a candidate exists."""

    def __init__(
        self,
        controller: EtcdController,
        cluster: str,
        sweep_interval: float = 5.0,
        on_election: OnElection | None = None,
    ) -> None:
        self.controller = controller
        self.cluster = cluster
        self.sweep_interval = sweep_interval
        self.on_election = on_election
        self.elections: list[tuple[str, Election]] = []  # the ones this watcher won
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        self._tasks = [
            asyncio.create_task(self._watch_loop(), name=f"controller-watch {self.cluster}"),
            asyncio.create_task(self._sweep_loop(), name=f"controller-sweep {self.cluster}"),
        ]

    async def stop(self) -> None:
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await t
        self._tasks = []

    async def check_group(self, broker_name: str) -> Election | None:
        """Elect in ``broker_name`` if it has no live master; errors are logged, not raised."""
        try:
            election = await self.controller.elect_master(self.cluster, broker_name)
        except NoCandidateError as e:
            log.warning("%s", e)
            return None
        except ControllerError as e:
            log.error("election in %s/%s failed: %s", self.cluster, broker_name, e)
            return None
        if election is not None:
            self.elections.append((broker_name, election))
            if self.on_election is not None:
                result = self.on_election(broker_name, election)
                if result is not None:
                    await result
        return election

    async def _sweep_loop(self) -> None:
        while True:
            try:
                for name in await self.controller.list_groups(self.cluster):
                    await self.check_group(name)
            except (ControllerError, aetcd.ClientError) as e:
                log.warning("controller sweep of %s: %s", self.cluster, e)
            await asyncio.sleep(self.sweep_interval)

    async def _watch_loop(self) -> None:
        prefix = cluster_prefix(self.cluster).encode()
        while True:
            try:
                watch = await self.controller.client.watch_prefix(prefix)
                try:
                    async for event in watch:
                        parsed = parse_key(self.cluster, event.kv.key.decode())
                        if parsed is not None and parsed[1] == "replica" and _membership(event):
                            await self.check_group(parsed[0])
                finally:
                    with contextlib.suppress(aetcd.ClientError):
                        await watch.cancel()
            except aetcd.ClientError as e:
                log.warning("controller watch of %s broke (%s); watching again in 1 s", self.cluster, e)
            await asyncio.sleep(1.0)


def _membership(event: aetcd.Event) -> bool:
    """A replica key deleted (maybe a master gone) or created (maybe the end of a group's wait
    for a candidate); not a live replica rewriting its published offsets (every second under
    load), which changes no one's candidacy: the election reads the offsets itself."""
    return bool(event.kind == "DELETE" or event.kv.version == 1)
