"""WriteGate: refusals per source, retries, and the races between the retention thread's retry
and the threads that refuse and clear."""

from __future__ import annotations

import threading

from rocketlite.common.errors import DiskFullError
from rocketlite.store.write_gate import WriteGate


def test_a_retry_that_succeeds_clears_its_source_and_one_that_fails_keeps_it() -> None:
    gate = WriteGate()
    space = False

    def retry() -> None:
        if not space:
            raise DiskFullError("still full")

    gate.refuse("commitlog", "full", retry)
    gate.retry()
    assert gate.reason == "still full" and gate.retry_pending
    space = True
    gate.retry()
    assert gate.reason is None and not gate.retry_pending


def test_a_source_refused_again_while_its_retry_runs_stays_refused() -> None:
    """The retry succeeded, but meanwhile its source failed again (another thread): the new
    refusal stands."""
    gate = WriteGate()

    def retry() -> None:
        gate.refuse("dispatch-ahead", "full again", retry)  # what another thread did meanwhile

    gate.refuse("dispatch-ahead", "full", retry)
    gate.retry()
    assert gate.refused("dispatch-ahead") and gate.reason == "full again"


def test_retry_pending_while_other_threads_refuse_and_clear() -> None:
    gate = WriteGate()
    stop = threading.Event()
    errors: list[BaseException] = []

    def churn(n: int) -> None:
        while not stop.is_set():
            for i in range(50):
                gate.refuse(f"s{n}-{i}", "full", lambda: None)
            for i in range(50):
                gate.clear(f"s{n}-{i}")

    threads = [threading.Thread(target=churn, args=(n,)) for n in range(2)]
    for t in threads:
        t.start()
    try:
        for _ in range(20_000):
            try:
                _ = gate.retry_pending
            except RuntimeError as e:  # dictionary changed size during iteration
                errors.append(e)
                break
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert errors == []
