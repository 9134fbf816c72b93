"""Frame fuzzing, the CI length (``framefuzz``: 20,000 generated and mutated frames at a
NameServer and a read-only broker; ``scripts/chaos_fuzz.py frames`` runs a million)."""

from __future__ import annotations

from pathlib import Path

import pytest

import framefuzz

pytestmark = [pytest.mark.chaos, pytest.mark.timeout(240)]


def test_twenty_thousand_fuzzed_frames_crash_hang_or_change_nothing(tmp_path: Path) -> None:
    report = framefuzz.run(tmp_path, 20_000, seed=22)
    print(report.line())
    assert report.frames >= 20_000
    # every kind of frame was sent: answered ones, rejected ones, and each stream-breaking tail
    assert report.replies > 0 and report.error_replies > 0 and report.closes_expected > 0
    assert set(report.tails) == {"too_large", "negative", "cut", "longer", "bad_json_open"}
    assert all(len(samples) > 1 for samples in report.rss.values())
