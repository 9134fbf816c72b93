"""The chaos suite's kill -9 scenario, full run (issue 22): ``rocketlite start`` SIGKILLed at seeded
random points of a mixed send burst (single, batch, delay-level, transactional; a consumer group
committing), restarted on the same store and checked, ``--rounds`` rounds under SYNC_FLUSH and as
many under ASYNC_FLUSH. Not a test: prints one line a round and a summary table; exit status 1 if
any round lost or damaged anything (``tests/killburst.py`` says what a round checks).

    python scripts/chaos_kill.py                      # 50 rounds a mode, 2,000 sends a burst
    CHAOS_SEED=123 python scripts/chaos_kill.py       # repeat a run (or --seed 123)
    python scripts/chaos_kill.py --rounds 5 --modes SYNC_FLUSH --json out.json

CI runs a few rounds of the same scenario: ``tests/chaos/test_kill_burst.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import shutil
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests"))

from killburst import MODES, KillBurst, RoundResult, env_seed  # noqa: E402


async def run_mode(tmp: Path, mode: str, args: argparse.Namespace) -> list[RoundResult]:
    (tmp / mode).mkdir()
    kb = KillBurst(tmp / mode, mode, args.seed, burst=args.burst, workers=args.workers)
    results = []
    for rnd in range(args.rounds):
        r = await kb.round(rnd)
        print(r.line(), flush=True)
        results.append(r)
    return results


def table(results: list[RoundResult], seconds: dict[str, float]) -> str:
    """The summary: one row a mode (rounds, messages acked, kills, lost or damaged, ...)."""
    rows = [("mode", "rounds", "msgs acked", "SIGKILLs", "in flight at kill", "missing suffix",
             "delay redelivered", "consumed", "rounds failed", "time")]
    for mode, secs in seconds.items():
        rs = [r for r in results if r.mode == mode]
        rows.append((mode, str(len(rs)), str(sum(r.acked for r in rs)), str(len(rs)),
                     str(sum(r.in_flight for r in rs)), str(sum(r.missing for r in rs)),
                     str(sum(r.redelivered for r in rs)), str(sum(r.consumed for r in rs)),
                     str(sum(1 for r in rs if r.problems)), f"{secs / 60:.1f} min"))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("| " + " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) + " |"
                     for row in rows)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=50, help="rounds a flush mode")
    ap.add_argument("--burst", type=int, default=2000, help="sends a round (a batch counts once)")
    ap.add_argument("--workers", type=int, default=24, help="sends in flight")
    ap.add_argument("--seed", type=int, default=None, help="default: CHAOS_SEED, else random")
    ap.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES))
    ap.add_argument("--json", type=Path, help="write every round's figures here")
    args = ap.parse_args()
    logging.basicConfig(level=logging.ERROR)  # the clients' warnings about the dead server
    if args.seed is None:
        args.seed = env_seed()
    print(f"chaos kill: CHAOS_SEED={args.seed}, {args.rounds} rounds x {args.modes}, burst "
          f"{args.burst}, {args.workers} in flight", flush=True)
    tmp = Path(tempfile.mkdtemp(prefix="chaos-kill-"))
    results: list[RoundResult] = []
    seconds: dict[str, float] = {}
    try:
        for mode in args.modes:
            started = time.monotonic()
            results += asyncio.run(run_mode(tmp, mode, args))
            seconds[mode] = time.monotonic() - started
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print()
    print(table(results, seconds))
    failed = [r for r in results if r.problems]
    print(f"\nCHAOS_SEED={args.seed}: {len(results)} rounds, {len(failed)} failed, "
          f"{sum(seconds.values()) / 60:.1f} min")
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in results], indent=1))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
