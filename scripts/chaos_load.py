"""The chaos suite's load scenario, full size (issue 22): 1,000 client connections producing and
consuming for 5 minutes against one broker; prints what it did and found, exit status 1 on any
acknowledged message never consumed, a stuck group, or the broker's heap or file descriptors
unbounded. The scenario is ``tests/chaosload.py``; CI runs a small one (tests/chaos/test_load.py).

    python scripts/chaos_load.py                           # 1,000 clients, 300 s
    python scripts/chaos_load.py --clients 200 --seconds 60 --json out.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from chaosload import LoadPlan, run


def main() -> int:
    d = LoadPlan()
    a = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    a.add_argument("--clients", type=int, default=d.clients)
    a.add_argument("--seconds", type=float, default=d.seconds)
    a.add_argument("--workers", type=int, default=d.workers, help="client processes")
    a.add_argument("--rate", type=float, default=d.rate, help="msgs/s per producer")
    a.add_argument("--keep", action="store_true", help="keep the temporary folder (logs)")
    a.add_argument("--json", type=Path, help="write the report here")
    args = a.parse_args()
    plan = LoadPlan(clients=args.clients, seconds=args.seconds, workers=args.workers,
                    rate=args.rate)
    tmp = Path(tempfile.mkdtemp(prefix="chaos-load-"))
    report = run(plan, tmp)
    print("\n".join(report.lines()))
    if args.json:
        args.json.write_text(json.dumps(dataclasses.asdict(report), indent=1))
    if args.keep:
        print(f"logs in {tmp}")
    else:
        shutil.rmtree(tmp, ignore_errors=True)
    return 1 if report.failures else 0


if __name__ == "__main__":
    sys.exit(main())
