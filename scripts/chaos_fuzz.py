"""The chaos suite's fuzzers at full length (issue 22; the CI tier runs them short:
``pytest -m chaos tests/chaos/test_fuzz_*.py``).

    .venv/bin/python scripts/chaos_fuzz.py frames --frames 1000000 --seed 1 [--writable]
    .venv/bin/python scripts/chaos_fuzz.py store --rounds 10000 --seed 1

``frames``: generated and mutated Remoting frames at a NameServer and a read-only broker, each a
``rocketlite`` process on loopback (``tests/chaos/framefuzz.py``). ``store``: mutated store files
opened by ``MessageStore`` in-process, every message it then serves checked against what was
written (``tests/chaos/storefuzz.py``; its scratch directory on /dev/shm when there is one, where
fsync costs nothing). Either prints its progress and a summary line, and exits 1 with the
finding (and what reproduces it) on the first crash, hang, unanswered frame, unbounded memory,
changed store or wrong message.
"""

from __future__ import annotations

import argparse
import logging
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tests" / "chaos")]

import framefuzz  # noqa: E402
import storefuzz  # noqa: E402


def _scratch(prefix: str) -> Path:
    shm = Path("/dev/shm")
    return Path(tempfile.mkdtemp(prefix=prefix, dir=shm if shm.is_dir() else None))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="what", required=True)
    f = sub.add_parser("frames", help="frames at a NameServer and a broker")
    f.add_argument("--frames", type=int, default=1_000_000)
    f.add_argument("--seed", type=int, default=1)
    f.add_argument("--writable", action="store_true",
                   help="the broker takes sends: every stored record must come from a send frame, "
                        "every acknowledged send must be stored")
    s = sub.add_parser("store", help="mutated store files at recovery")
    s.add_argument("--rounds", type=int, default=10_000)
    s.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    logging.disable(logging.CRITICAL)  # the store's own warnings about the damage it meets
    t0 = time.monotonic()
    if args.what == "frames":
        tmp = Path(tempfile.mkdtemp(prefix="chaos-frames-"))
        try:
            report = framefuzz.run(tmp, args.frames, args.seed,
                                   progress=lambda r: print(r.line(), flush=True),
                                   writable=args.writable)
        except AssertionError as e:
            print(f"FINDING (seed {args.seed}; logs in {tmp}): {e}", flush=True)
            return 1
        shutil.rmtree(tmp, ignore_errors=True)
        print(f"frames: {report.line()}")
        return 0
    work = _scratch("chaos-store-")
    try:
        tally = storefuzz.run(work, args.rounds, args.seed,
                              progress=lambda t: print(f"{t.line()} ({time.monotonic() - t0:.0f} s)",
                                                       flush=True))
    except AssertionError as e:
        print(f"FINDING: {e}", flush=True)
        return 1
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"store: {tally.line()}; {time.monotonic() - t0:.1f} s")
    print(f"mutations: {dict(sorted(tally.by_mutation.items()))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
