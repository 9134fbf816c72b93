"""Shared pieces of the ``rocketlite cluster`` tests: the command run as its own process (the
nodes ``up`` starts outlive it) and ``status --json`` read in-process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

from typer.testing import CliRunner

from rocketlite.cli.main import app

runner = CliRunner()


def cli(*args: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    """``python -m rocketlite ARGS`` as its own process (``up``'s nodes outlive it)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path), COLUMNS="200")
    return subprocess.run([sys.executable, "-m", "rocketlite", *args], capture_output=True,
                          text=True, timeout=timeout, env=env, check=False)


def status_json(dir: str) -> dict[str, Any]:  # noqa: A002
    """``rocketlite cluster status --dir DIR --json``, parsed."""
    r = runner.invoke(app, ["cluster", "status", "--dir", dir, "--json"])
    assert r.exit_code == 0, r.output
    out: dict[str, Any] = json.loads(r.output)
    return out
