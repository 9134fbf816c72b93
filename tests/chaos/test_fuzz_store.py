"""Store-file fuzzing, the CI length (``storefuzz``: 1,000 rounds of mutated CommitLog,
ConsumeQueue, index, checkpoint and abort files opened by ``MessageStore``;
``scripts/chaos_fuzz.py store`` runs 10,000)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

import storefuzz
from killburst import env_seed

pytestmark = pytest.mark.chaos


@pytest.fixture
def work(tmp_path: Path) -> Iterator[Path]:
    """A scratch directory on /dev/shm when there is one: each round rewrites and fsyncs a few
    dozen small files, which on a disk costs ten times the checks."""
    shm = Path("/dev/shm")
    path = Path(tempfile.mkdtemp(dir=shm)) if shm.is_dir() else tmp_path
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def test_a_thousand_mutated_stores_recover_or_refuse_and_serve_nothing_wrong(work: Path) -> None:
    seed = env_seed()
    print(f"chaos fuzz store: CHAOS_SEED={seed}")
    tally = storefuzz.run(work, 1000, seed=seed)
    print(tally.line())
    assert tally.rounds == 1000 and tally.files_mutated >= 1000
    kinds = {k.split(":")[0] for k in tally.by_mutation}
    assert kinds >= {"commitlog", "consumequeue", "index", "checkpoint", "abort"}
    assert tally.served > 0 and sum(tally.refused.values()) > 0
