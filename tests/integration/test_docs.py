"""Every ```python block of docs/*.md runs, as a script, against a real broker, so the docs cannot
rot: ``rocketlite start`` on free ports, each block in document order in a fresh interpreter with
``NAMESRV_ADDR`` pointing at it, and each must exit 0 within ``BLOCK_TIMEOUT_S``.

A block that cannot run here (a fragment of a Spark job, a third-party client's example) says so in
its info string, ```python no-run; the few there are are counted, so a new one is a choice."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from brokerhelp import ServerProcess, free_port

pytestmark = pytest.mark.integration

DOCS = Path(__file__).resolve().parents[2] / "docs"
BLOCK = re.compile(r"^```python([^\n]*)\n(.*?)^```", re.MULTILINE | re.DOTALL)
BLOCK_TIMEOUT_S = 60.0
MAX_NO_RUN = 6  # docs/spark.md's Spark job fragments, docs/grpc.md's rocketmq-python-client one,
# docs/security.md's TLS client (certificate files and a TLS broker)


@dataclass(frozen=True)
class Block:
    doc: str
    line: int
    info: str
    code: str

    @property
    def runnable(self) -> bool:
        return "no-run" not in self.info.split()

    def __str__(self) -> str:
        return f"{self.doc}:{self.line}"


def blocks() -> list[Block]:
    out = []
    for doc in sorted(DOCS.glob("*.md")):
        text = doc.read_text(encoding="utf-8")
        out.extend(Block(doc.name, text.count("\n", 0, m.start()) + 1, m[1].strip(), m[2])
                   for m in BLOCK.finditer(text))
    return out


RUNNABLE = [b for b in blocks() if b.runnable]


@pytest.fixture(scope="module")
def namesrv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("docs")
    ns = free_port()
    args = ["start", "--store", str(tmp / "store"), "--namesrv-port", str(ns),
            "--broker-port", str(free_port()), "--grpc-port", "0"]
    with ServerProcess(args, tmp / "start.log") as server:
        server.wait_ready()
        yield f"127.0.0.1:{ns}"
        assert server.stop() == 0, server.log()


def test_the_docs_have_runnable_blocks_and_few_that_are_not() -> None:
    every = blocks()
    assert len(RUNNABLE) >= 8, [str(b) for b in RUNNABLE]
    assert {b.doc for b in RUNNABLE} >= {"client.md"}
    assert len(every) - len(RUNNABLE) <= MAX_NO_RUN, [str(b) for b in every if not b.runnable]


@pytest.mark.parametrize("block", RUNNABLE, ids=str)
def test_doc_block_runs(block: Block, namesrv: str, tmp_path: Path) -> None:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path), NAMESRV_ADDR=namesrv)
    r = subprocess.run([sys.executable, "-c", block.code], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=BLOCK_TIMEOUT_S)
    assert r.returncode == 0, f"{block} failed:\n{r.stdout[-2000:]}\n{r.stderr[-4000:]}"
    assert r.stdout.strip(), f"{block} printed nothing"
