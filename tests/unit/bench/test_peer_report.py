"""The peer benchmark's figures (bench/peer_report.py, bench/peers.py's report): medians, ratios,
targets and tables from made-up run records; no peer server or client library needed."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))

import peer_report as rep
import peers


def run(row: str, size: int, pub: float, con: float, *, completed: bool = True) -> dict[str, object]:
    return {
        "row": row, "size": size, "repeat": 0,
        "latency": {"p50_us": 100.0, "p99_us": 300.0, "messages": 10, "seconds": 0.01},
        "publish": {"msgs_per_s": pub, "messages": 1000, "seconds": 1000 / pub, "completed": completed,
                    "cpu_server_s": 0.5 * 1000 / pub, "cpu_client_s": 0.95 * 1000 / pub,
                    "cpu_machine_s": 1.5 * 1000 / pub},
        "consume": {"msgs_per_s": con, "messages": 1000, "seconds": 1000 / con,
                    "cpu_server_s": 0.0, "cpu_client_s": 0.0, "cpu_machine_s": 0.0},
    }


RUNS = [
    run("rocketlite-async", 128, 30_000, 60_000), run("rocketlite-async", 128, 20_000, 70_000),
    run("rocketlite-async", 128, 40_000, 80_000),
    run("redis-everysec", 128, 150_000, 600_000), run("redis-everysec", 128, 100_000, 500_000),
    run("redis-everysec", 128, 1, 1, completed=False),  # left out of the publish median
    run("nats-default", 128, 10_000, 40_000),
    run("rocketlite-sync", 128, 25_000, 50_000), run("rabbitmq-classic", 128, 5_000, 10_000),
]


def test_summary_is_median_min_max_over_completed_runs() -> None:
    s = rep.summarize(RUNS)
    assert s[("rocketlite-async", 128)]["publish"] == rep.Stat(30_000, 20_000, 40_000, 3)
    assert s[("redis-everysec", 128)]["publish"] == rep.Stat(125_000, 100_000, 150_000, 2)
    assert s[("redis-everysec", 128)]["consume"].n == 3  # its consume phase did complete


def test_ratios_and_targets() -> None:
    s = rep.summarize(RUNS)
    assert rep.ratio(s, "rocketlite-async", "redis-everysec", 128, "publish") == pytest.approx(0.24)
    assert rep.ratio(s, "rocketlite-async", "redis-always", 128, "publish") is None
    rows = rep.target_rows(s, [128, 1024], peers.LABELS)
    got = {(r[0], r[1]): (r[3], r[5]) for r in rows}
    assert got[("rocketlite ASYNC_FLUSH (client) publish", "NATS JetStream default")] == ("3.00x", "no")
    assert got[("rocketlite SYNC_FLUSH (client) publish", "RabbitMQ classic + confirms")] == ("5.00x", "no")
    # consume: Redis's median is of 600k, 500k and 1 (the run whose publish timed out consumed)
    assert got[("rocketlite ASYNC_FLUSH (client) consume", "Redis AOF everysec")] == ("0.14x", "no")
    assert all(r[2] == "128 B" for r in rows)  # nothing measured at 1 KiB


def test_table_cells() -> None:
    s = rep.summarize(RUNS)
    [row] = rep.table_rows(s, ["rocketlite-async"], 128, peers.LABELS)
    assert row[0] == "rocketlite ASYNC_FLUSH (client)"
    assert row[2] == "30,000 (20,000–40,000)"
    assert row[4] == "100 / 300"
    assert row[6].startswith("0.00 (0%) / 0.00 (0%)")
    assert row[7] == "client (others 5%)"  # client at 95% of a core
    assert "Redis AOF everysec: pub 0.24x, con 0.14x" in row[8]
    md = rep.markdown_table(rep.HEADERS, [row])
    assert md.count("\n") == 2 and md.startswith("| system |")
    assert rep.fmt_size(1024) == "1 KiB" and rep.fmt_size(128) == "128 B"


def test_bound_by_reads_the_cpu_shares() -> None:
    def m(srv: float, cli: float, every: float) -> dict[str, rep.Stat]:
        return {k: rep.Stat(v, v, v, 1) for k, v in
                {"pub_s": 1.0, "pub_srv_s": srv, "pub_cli_s": cli, "pub_all_s": every}.items()}

    assert rep.bound_by(m(0.3, 0.2, 0.5)).startswith("waits")
    assert rep.bound_by(m(0.95, 0.4, 1.4)).startswith("server")
    assert rep.bound_by(m(0.6, 0.6, 1.9)) == "cores full (others 70%)"


def test_select_rows() -> None:
    assert [r.key for r in peers.select_rows("redis")] == ["redis-everysec", "redis-always"]
    assert len(peers.select_rows(None)) == len(peers.ROWS)
    assert [r.key for r in peers.select_rows("rocketlite-sync,nats-always")] == [
        "rocketlite-sync", "nats-always"]
    with pytest.raises(SystemExit):
        peers.select_rows("kafka")


def test_report_writes_every_size_and_the_failed_runs() -> None:
    meta = {"date": "d", "machine": "m", "count": 1000, "window": 1000, "repeats": 3,
            "lat_count": 10, "load_start": "1", "load_end": "2", "wall_min": 1.0, "command": "c"}
    failed = {"row": "nats-always", "size": 128, "repeat": 0, "error": "TimeoutError: bound"}
    text, md = peers.report(meta, [*RUNS, failed], list(peers.ROWS), [128])
    assert "## 128 B bodies" in md and "## Targets" in md and "TimeoutError: bound" in md
    assert "rocketlite ASYNC_FLUSH (client)" in text
