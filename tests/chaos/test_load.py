"""The chaos suite's load scenario, CI-sized (``tests/chaosload.py``): 100 client connections
producing and consuming for 20 s against one broker process. Every acknowledged message must be
consumed, no group may be left behind, and the broker's heap and file descriptors must stay
bounded. The full run (1,000 connections for 5 minutes) is ``python scripts/chaos_load.py``."""

from __future__ import annotations

from pathlib import Path

import pytest

from chaosload import LoadPlan, run

pytestmark = [pytest.mark.chaos, pytest.mark.timeout(240)]


def test_many_clients_produce_and_consume_with_nothing_lost_and_the_broker_bounded(
        tmp_path: Path) -> None:
    plan = LoadPlan(clients=100, seconds=20.0, workers=2, rate=4.0, drain_s=60.0,
                    rss_cap_mb=512.0)
    report = run(plan, tmp_path)
    print("\n".join(report.lines()))
    assert report.failures == [], "\n".join(report.lines())
    assert report.acked >= plan.producers * plan.seconds * plan.rate * 0.5  # the load happened
    assert report.consumed >= report.acked
    assert max(s.fds for s in report.samples) >= plan.clients  # the connections were all open
