"""SYNC_MASTER under load across failovers (issue 20): kill -9 the master during a burst of
20,000 sends, ``ROCKETLITE_FAILOVER_BURST_ROUNDS`` times (default 4), the roles swapping each
round (the scenario: ``tests/failoverburst.py``). Four rounds kill each broker twice, each time
as a master that was restarted as a slave, cut back and caught up in an earlier round; the
default was 10 (75 s of a CI run that must stay under 30 minutes): ``bench/failover_bench.py``
still runs 10 by default, and ``ROCKETLITE_FAILOVER_BURST_ROUNDS=10`` runs them here.

Every round: every message acknowledged SEND_OK is read back from the new master at the queue
and offset its answer named; each queue's offsets are dense from 0 and no message is stored
twice; bodies, properties and CRCs are intact; the new master answers within 10 s of the kill.
At the end both brokers stop cleanly, ``rocketlite store verify`` finds nothing in either
store, and the slave's CommitLog is a prefix of the master's.

``ROCKETLITE_FAILOVER_BURST_SEED`` fixes the kill points (printed); ``bench/failover_bench.py``
runs the same rounds and prints the figures.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from failoverburst import open_group, summary
from failoverhelp import FAILOVER_LIMIT_S

ROUNDS = int(os.environ.get("ROCKETLITE_FAILOVER_BURST_ROUNDS", "4"))
pytestmark = [pytest.mark.integration, pytest.mark.chaos,  # the chaos suite's replication scenario
              pytest.mark.timeout(120 + 60 * ROUNDS)]

BURST = 20_000
WORKERS = 500


async def test_no_acknowledged_message_is_lost_when_the_master_dies_mid_burst(
    tmp_path: Path, etcd_url: str
) -> None:
    seed = int(os.environ.get("ROCKETLITE_FAILOVER_BURST_SEED", str(random.randrange(1 << 30))))
    print(f"seed {seed} (ROCKETLITE_FAILOVER_BURST_SEED={seed} repeats the kill points)")
    results = []
    async with open_group(tmp_path, etcd_url, ROUNDS, BURST, WORKERS, seed) as group:
        for rnd in range(ROUNDS):
            r = await group.round(rnd)
            print(r.line())
            results.append(r)
            assert not r.lost, f"round {rnd}: {len(r.lost)} acknowledged messages lost: {r.lost[:5]}"
            assert not r.problems, f"round {rnd}: {r.problems[:10]}"
            assert r.acked == BURST, r.line()
            assert r.failover_s <= FAILOVER_LIMIT_S, r.line()
        print(summary(results))
        assert await group.close_and_verify() == []
