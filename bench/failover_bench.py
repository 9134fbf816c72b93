"""Failover time of a SYNC_MASTER group killed with SIGKILL mid-burst (issue 20). Not a test:
prints figures.

    python bench/failover_bench.py                        # 10 failovers, 20,000 sends a burst
    python bench/failover_bench.py --rounds 3 --seed 7 --json out.json

The scenario is the one ``tests/integration/controller/test_failover_burst.py`` asserts
(``tests/failoverburst.py``): a real etcd, a NameServer running the election watcher and two
controller-mode brokers of one group, each a process on loopback; each round a burst of
``--burst`` sends with ``--workers`` in flight, the slave paused 0-300 ms, the master killed
with SIGKILL at a random point, the old master restarted as the new master's slave.

Figures, per round and over the run:

* failover: SIGKILL to the first send the new master answers (the issue's target: <= 10 s;
  mostly the controller lease's TTL, 3 s here, then the election, the route refresh);
* SEND_OK again: SIGKILL to the new master's first SEND_OK (its old master restarted, truncated
  by epoch, caught up and acking);
* burst throughput: SEND_OK/s before the kill (SYNC_MASTER with the slave acking) and over the
  whole burst (failover and rejoin included);
* acknowledged messages lost: SEND_OK messages not read back from the new master (must be 0).

Exit status 1 if any acknowledged message was lost or any other check failed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import random
import shutil
import statistics
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests"))

from failoverburst import RoundResult, open_group, summary  # noqa: E402
from failoverhelp import run_etcd  # noqa: E402


async def run(tmp: Path, etcd_url: str, args: argparse.Namespace) -> tuple[list[RoundResult], list[str]]:
    results: list[RoundResult] = []
    async with open_group(tmp, etcd_url, args.rounds, args.burst, args.workers, args.seed,
                          args.spread) as group:
        for rnd in range(args.rounds):
            r = await group.round(rnd)
            print(r.line(), flush=True)
            results.append(r)
        print("final check: every round read again, brokers stopped, store verify...", flush=True)
        problems = await group.close_and_verify()
    return results, problems


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=10, help="failovers (default 10)")
    ap.add_argument("--burst", type=int, default=20_000, help="SEND_OK messages a round")
    ap.add_argument("--workers", type=int, default=500, help="sends in flight")
    ap.add_argument("--spread", type=int, default=0,
                    help="bodies of 64 + 0..SPREAD filler bytes (default 0: ~80-byte bodies)")
    ap.add_argument("--seed", type=int, default=None, help="the kill points (default: random)")
    ap.add_argument("--json", type=Path, default=None, help="write the figures there too")
    args = ap.parse_args()
    # the client's warnings about the killed broker (heartbeats, connects) are expected here
    logging.basicConfig(level=logging.ERROR)
    if args.seed is None:
        args.seed = random.randrange(1 << 30)
    print(f"{args.rounds} rounds of {args.burst} sends, {args.workers} in flight, seed {args.seed}; "
          "etcd, NameServer, master and slave processes on this machine", flush=True)
    tmp = Path(tempfile.mkdtemp(prefix="rocketlite-failover-bench-"))
    try:
        with run_etcd(tmp) as etcd_url:
            results, problems = asyncio.run(run(tmp, etcd_url, args))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    fo = [r.failover_s for r in results]
    rejoin = [r.rejoin_s for r in results]
    before = sum(r.seed_point for r in results) / sum(r.killed_s for r in results)
    lost = sum(len(r.lost) for r in results)
    bad = problems + [p for r in results for p in r.problems]
    print(summary(results))
    print(f"failover (SIGKILL to the new master's first answer): median {statistics.median(fo):.2f} s, "
          f"max {max(fo):.2f} s (target <= 10 s)")
    print(f"SEND_OK again (old master back as slave): median {statistics.median(rejoin):.2f} s, "
          f"max {max(rejoin):.2f} s")
    print(f"burst SEND_OK/s before the kills (SYNC_MASTER, the slave acking): {before:.0f}")
    print(f"acknowledged messages lost: {lost}; other problems: {len(bad)}")
    for p in bad[:20]:
        print(f"  {p}")
    if args.json is not None:
        args.json.write_text(json.dumps({
            "seed": args.seed, "rounds": [asdict(r) for r in results],
            "failover_median_s": statistics.median(fo), "failover_max_s": max(fo),
            "rejoin_median_s": statistics.median(rejoin),
            "sendok_per_s_before_kill": before,
            "acked_lost": lost, "problems": bad,
        }, indent=2))
    return 1 if lost or bad else 0


if __name__ == "__main__":
    sys.exit(main())
