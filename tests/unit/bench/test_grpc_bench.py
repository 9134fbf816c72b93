"""The gRPC benches' own logic, without a broker: grpc_bench.py's token bucket pacing and its
gRPC / Remoting summary, grpc_floor.py's ratio lines."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))

import grpc_bench as gb
import grpc_floor as gf


def test_token_bucket_paces_to_its_rate() -> None:
    async def run() -> float:
        bucket = gb.TokenBucket(2000.0, 32)
        t0 = time.perf_counter()
        for _ in range(400):
            await bucket.take()
        return time.perf_counter() - t0

    seconds = asyncio.run(run())
    assert 0.18 <= seconds < 0.6  # 400 tokens at 2,000 a second: 0.2 s, plus scheduling slack


def test_token_bucket_takes_many_tokens_at_once() -> None:
    async def run() -> float:
        bucket = gb.TokenBucket(1000.0, 32)
        t0 = time.perf_counter()
        for _ in range(4):
            await bucket.take(32)  # more than the burst: the debt is slept off
        return time.perf_counter() - t0

    assert 0.12 <= asyncio.run(run()) < 0.5  # 128 tokens at 1,000 a second


def test_summary_gives_both_ratios_per_direction_and_records_them() -> None:
    results = {
        "grpc send": {"msgs_per_s": 2000.0, "broker_us_per_msg": 60.0},
        "grpc receive": {"msgs_per_s": 2500.0, "broker_us_per_msg": 100.0},
        "remoting send": {"msgs_per_s": 50000.0, "broker_us_per_msg": 10.0},
        "remoting send @grpc rate": {"msgs_per_s": 1990.0, "broker_us_per_msg": 40.0,
                                     "target_msgs_per_s": 2000.0},
        "remoting pull": {"msgs_per_s": 200000.0, "broker_us_per_msg": 2.0},
        "remoting pop": {"msgs_per_s": 9000.0, "broker_us_per_msg": 80.0},
    }
    lines = gb.summary(results)
    assert len(lines) == 2
    assert lines[0].startswith("send: ") and "unpaced 6.00x" in lines[0]
    assert "at the gRPC rate 1.50x" in lines[0] and "1,990 of 2,000 msgs/s" in lines[0]
    assert lines[1].startswith("receive: ") and "unpaced 1.25x" in lines[1]
    assert "at the gRPC rate" not in lines[1]  # no paced pop row: no matched ratio
    assert results["grpc send"]["broker_ratio_unpaced"] == pytest.approx(6.0)
    assert results["grpc send"]["broker_ratio_matched"] == pytest.approx(1.5)
    assert results["grpc receive"]["broker_ratio_unpaced"] == pytest.approx(1.25)
    assert "broker_ratio_matched" not in results["grpc receive"]


def test_summary_without_remoting_rows_is_empty() -> None:
    assert gb.summary({"grpc send": {"msgs_per_s": 1.0, "broker_us_per_msg": 5.0}}) == []


def test_floor_ratios_per_in_flight_value() -> None:
    cpu = {("broker-native", 32): 30.0, ("broker-native", 1): 150.0,
           ("broker-remoting", 32): 10.0, ("broker-remoting", 1): 50.0,
           ("broker-grpcio", 32): 300.0}
    assert gf.ratios(cpu, "in flight", "call") == [
        "broker CPU per call, broker-native / broker-remoting: in flight 32: 3.00x, "
        "in flight 1: 3.00x",
        "broker CPU per call, broker-grpcio / broker-remoting: in flight 32: 30.00x",
    ]
    assert gf.ratios({("broker-native", 32): 30.0}, "in flight", "call") == []
