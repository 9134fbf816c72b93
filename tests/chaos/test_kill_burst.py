"""Chaos: ``rocketlite start`` SIGKILLed at seeded random points of a mixed send burst (single,
batch, delay-level and transactional messages, a consumer group committing), restarted on the
same store and checked, under SYNC_FLUSH and ASYNC_FLUSH (``tests/killburst.py`` has the scenario
and what a round must find). CI runs ``CHAOS_ROUNDS`` rounds a mode (default 2);
``scripts/chaos_kill.py`` runs the full 50. A failure names its seed: ``CHAOS_SEED=<seed>``
repeats it."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from killburst import MODES, KillBurst, env_seed

pytestmark = pytest.mark.chaos

ROUNDS = int(os.environ.get("CHAOS_ROUNDS", "2"))
BURST = 800  # sends a round (a batch counts once): the kill within about 0.1-1.5 s


@pytest.mark.parametrize("mode", MODES)
def test_nothing_acknowledged_is_lost_across_sigkill(tmp_path: Path, mode: str) -> None:
    seed = env_seed()
    print(f"chaos kill {mode}: CHAOS_SEED={seed}")

    async def run() -> list[str]:
        kb = KillBurst(tmp_path, mode, seed, burst=BURST)
        failed = []
        for rnd in range(ROUNDS):
            r = await kb.round(rnd)
            print(r.line())
            if r.problems:
                failed.append(r.line())
        return failed

    failed = asyncio.run(run())
    assert not failed, f"CHAOS_SEED={seed} {mode}:\n" + "\n".join(failed)
