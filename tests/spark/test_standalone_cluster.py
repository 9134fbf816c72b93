"""Spark on a real standalone cluster over a two-group rocketlite cluster (issue 20).

``rocketlite cluster up`` starts a NameServer and two broker groups (one master each) as
processes; scripts/spark_standalone.py starts a Spark master and two workers (1 core each) from
the installed pyspark. A topic spread over both groups is read by the example pipeline and by an
exactly-once copy (tests/spark/standalone_job.py, a driver process on ``spark://``), each with its
last batch replayed; ``rocketlite spark export`` (run by that driver, in its session) reads each
group's store.
Everything runs on 127.0.0.1 and is stopped in ``finally``.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import random
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from types import ModuleType
from typing import Any

import pyarrow.parquet as pq

from clusterhelp import cluster_base
from rocketlite.client import Message, Producer

ROOT = Path(__file__).resolve().parents[2]
SRC = str(ROOT / "src")
EVENTS = "pipeline-events"
STATS = "pipeline-window-stats"
COPY = "pipeline-events-copy"
N = 2000
BATCH = 500
MINUTE = 60_000
GROUPS = ("broker-a", "broker-b")


def load(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


standalone = load(ROOT / "scripts" / "spark_standalone.py", "spark_standalone")



def env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=os.pathsep.join([SRC, *sys.path]), COLUMNS="200",
                SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable)


def run(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True,
                          timeout=timeout, env=env(), check=False)


async def produce(ns: str, start: int) -> tuple[dict[str, str], list[dict[str, Any]]]:
    """N events in the example's format, ``ts`` spread over 8 minutes from ``start``, sent
    through the route (round robin over both groups' queues): msg_id -> broker group, and the
    events."""
    rnd = random.Random(11)
    sent: dict[str, str] = {}
    events: list[dict[str, Any]] = []
    async with Producer("standalone-test", namesrv_addr=ns) as p:
        for lo in range(0, N, 100):
            msgs = []
            for i in range(lo, lo + 100):
                action = ("view", "click", "buy")[rnd.randrange(3)]
                user = f"u{rnd.randrange(50)}"
                event: dict[str, Any] = {"user": user, "action": action,
                         "amount": rnd.randrange(1, 100), "ts": start + i * 8 * MINUTE // N}
                events.append(event)
                msgs.append(Message(EVENTS, json.dumps(event).encode(), tags=action,
                                    keys=[user]))
            for r in await asyncio.gather(*(p.send(m) for m in msgs)):
                sent[r.msg_id] = r.queue.brokerName
    return sent, events


def test_pipeline_and_export_on_standalone_cluster(tmp_path: Path) -> None:
    cluster_dir, spark_dir, out = tmp_path / "cluster", tmp_path / "spark", tmp_path / "out"
    base = cluster_base(brokers=2, replicas=1, dashboard=False)
    ns = f"127.0.0.1:{base}"
    began = time.monotonic()
    daemons: list[int] = []
    try:
        r = run("-m", "rocketlite", "cluster", "up", "--dir", str(cluster_dir), "--brokers", "2",
                "--replicas", "1", "--no-dashboard", "--base-port", str(base), "--topic", EVENTS,
                "--topic", STATS, "--topic", COPY, "--queues", "4", timeout=90)
        assert r.returncode == 0, r.stdout + r.stderr
        print(f"cluster up: {time.monotonic() - began:.1f} s")
        began_spark = time.monotonic()
        spark = standalone.up(spark_dir, workers=2, cores=1, memory="512m", timeout=90)
        daemons = [d.pid for d in spark.daemons]
        print(f"spark standalone up: {time.monotonic() - began_spark:.1f} s")
        assert len(daemons) == 3 and all(standalone.proc_start_time(p) for p in daemons)

        start = 1_700_000_040_000 - 1_700_000_040_000 % MINUTE
        sent, events = asyncio.run(produce(ns, start))
        per_group = Counter(sent.values())
        assert len(sent) == N and set(per_group) == set(GROUPS), per_group

        job = run(str(ROOT / "tests" / "spark" / "standalone_job.py"), "--master",
                  spark.master_url, "--namesrv", ns, "--out", str(out), "--batch", str(BATCH),
                  *(f"--store={g}={cluster_dir / f'{g}-0' / 'store'}" for g in GROUPS),
                  timeout=240)
        assert job.returncode == 0, job.stdout[-3000:] + job.stderr[-6000:]
        res: dict[str, Any] = json.loads((out / "result.json").read_text())
        print("timings (s):", {k: round(v, 1) for k, v in res["timings"].items()})

        # the source read every message of both groups
        print("pipeline batches:", res["pipeline_batches"])
        assert Counter(e["broker"] for e in res["events"]) == per_group
        assert {e["msg_id"] for e in res["events"]} == set(sent)
        # both streams ended at the end of every queue of both groups (queue offsets start at 0)
        for key in ("pipeline_end_offsets", "copy_end_offsets"):
            ends = res[key][EVENTS]
            assert {g: sum(ends.get(g, {}).values()) for g in GROUPS} == per_group, (key, ends)
            assert all(len(ends[g]) == 4 for g in GROUPS)
        check_pipeline(res, events, start)
        check_copy(res, sent)

        for group in GROUPS:
            ids = pq.read_table(out / "export" / group).to_pydict()["msg_id"]
            assert len(ids) == len(set(ids)) == per_group[group]
            assert set(ids) == {m for m, g in sent.items() if g == group}
        print(f"whole test: {time.monotonic() - began:.1f} s")
    finally:
        stopped = standalone.down(spark_dir)
        down = run("-m", "rocketlite", "cluster", "down", "--dir", str(cluster_dir), timeout=60)
    assert set(stopped) == {"master", "worker-1", "worker-2"}
    assert not any(standalone.proc_start_time(p) for p in daemons)
    assert down.returncode == 0, down.stdout + down.stderr


def check_pipeline(res: dict[str, Any], events: list[dict[str, Any]], start: int) -> None:
    """The windows in Parquet and in the stats topic: each window once, with the counts and sums
    the events hold, after the last batch was replayed."""
    want: dict[tuple[int, str], list[int]] = {}
    for e in events:
        w = want.setdefault((e["ts"] - e["ts"] % MINUTE, e["action"]), [0, 0])
        w[0] += 1
        w[1] += e["amount"]
    windows = res["windows"]
    got = {(w["window_start"], w["action"]): [w["events"], w["amount"]] for w in windows}
    assert len(windows) == len(got) == res["pipeline_windows_first_run"]  # the replay rewrote
    assert all(got[k] == want[k] for k in got), {k: (got[k], want[k]) for k in got}
    # append mode emits a window once the watermark (max event time of earlier batches - 30 s)
    # passed its end: four batches of 500 cover about 2 minutes of event time each, so the
    # windows of the first 4 minutes are closed by the last batch
    closed = {k for k in want if k[0] + MINUTE <= start + 4 * MINUTE}
    assert len(closed) == 12 and closed <= set(got)
    # stats topic: one message per window by msg_id (a replayed batch re-sends its windows with
    # the same UNIQ_KEYs: at-least-once, consumers drop copies by msg_id)
    stats = res["stats"]
    by_id = {s["msg_id"]: json.loads(s["body"]) for s in stats}
    # a replayed batch re-sent its windows under the same UNIQ_KEYs, with the same bodies
    assert len({(s["msg_id"], s["body"]) for s in stats}) == len(by_id) <= len(stats)
    assert len(by_id) == len(windows)
    print(f"stats topic: {len(stats)} messages, {len(by_id)} distinct msg_ids, "
          f"{len(windows)} windows; replayed batch {res['pipeline_replayed']}")
    assert sorted((_ms(d["window_start"]), d["action"], d["events"]) for d in by_id.values()) == \
        sorted((w["window_start"], w["action"], w["events"]) for w in windows)


def check_copy(res: dict[str, Any], sent: dict[str, str]) -> None:
    """The exactly-once copy holds every event once, from the group it was stored in, although
    its last batch ran twice."""
    copy = res["copy"]
    assert len(copy) == N, f"{len(copy)} copies of {N} events"
    assert len({c["msg_id"] for c in copy}) == N
    assert {c["src_msg_id"]: c["src_broker"] for c in copy} == sent


def _ms(text: str) -> int:
    from datetime import datetime

    return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)
