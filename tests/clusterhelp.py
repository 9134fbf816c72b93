"""Shared pieces of the ``rocketlite cluster`` tests: the command run as its own process (the
nodes ``up`` starts outlive it), a base port with room for a whole cluster, and ``status --json``
read in-process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from brokerhelp import free_base
from rocketlite.cli.cluster_plan import plan
from rocketlite.cli.main import app

runner = CliRunner()


def cli(*args: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    """``python -m rocketlite ARGS`` as its own process (``up``'s nodes outlive it)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path), COLUMNS="200")
    return subprocess.run([sys.executable, "-m", "rocketlite", *args], capture_output=True,
                          text=True, timeout=timeout, env=env, check=False)


def cluster_base(**kwargs: Any) -> int:
    """A ``--base-port`` whose every port ``cluster up`` plans with these ``plan`` arguments
    (``brokers``, ``replicas``, ``controller``, ...) is free now: the span is the plan's, so a
    test does not count ports by hand."""
    ports = plan(Path("/nonexistent"), base_port=20000, **kwargs).all_ports()
    return free_base(max(ports) - 20000 + 1)


def status_json(dir: str) -> dict[str, Any]:  # noqa: A002
    """``rocketlite cluster status --dir DIR --json``, parsed."""
    r = runner.invoke(app, ["cluster", "status", "--dir", dir, "--json"])
    assert r.exit_code == 0, r.output
    out: dict[str, Any] = json.loads(r.output)
    return out
