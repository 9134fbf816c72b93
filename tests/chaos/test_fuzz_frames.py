"""Frame fuzzing, the CI length (``framefuzz``: 20,000 generated and mutated frames at a
NameServer and a read-only broker, 10,000 more at a broker that takes sends;
``scripts/chaos_fuzz.py frames [--writable]`` runs a million)."""

from __future__ import annotations

from pathlib import Path

import pytest

import framefuzz
from killburst import env_seed

pytestmark = [pytest.mark.chaos, pytest.mark.timeout(240)]


def test_twenty_thousand_fuzzed_frames_crash_hang_or_change_nothing(tmp_path: Path) -> None:
    seed = env_seed()
    print(f"chaos fuzz frames: CHAOS_SEED={seed}")
    report = framefuzz.run(tmp_path, 20_000, seed=seed)
    print(report.line())
    assert report.frames >= 20_000
    # every kind of frame was sent: answered ones, rejected ones, and each stream-breaking tail
    assert report.replies > 0 and report.error_replies > 0 and report.closes_expected > 0
    assert set(report.tails) == {"too_large", "negative", "cut", "longer", "bad_json_open"}
    assert all(len(samples) > 1 for samples in report.rss.values())


def test_fuzzed_sends_store_only_what_was_sent_and_all_that_was_acknowledged(tmp_path: Path) -> None:
    seed = env_seed()
    print(f"chaos fuzz frames, writable: CHAOS_SEED={seed}")
    report = framefuzz.run(tmp_path, 10_000, seed=seed, writable=True)
    print(report.line())
    assert report.frames >= 10_000
    assert report.sends_ok > 0 and report.stored >= len(report.acked_bodies) > 0
