"""The processes of ``rocketlite cluster``: starting a node (a ``python -m rocketlite`` command,
or the etcd binary) in its own session with its output in its log, telling whether a recorded
PID is still that process (its start time in ``/proc``), and waiting for a node to be ready.

A rocketlite node is ready when its log has this run's ``rocketlite ready`` line; etcd when its
``/health`` endpoint answers healthy.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path

import rocketlite
from rocketlite.cli.cluster_etcd import etcd_command, etcd_healthy
from rocketlite.cli.cluster_plan import (
    DASHBOARD,
    ETCD,
    ClusterError,
    ClusterPlan,
    Node,
    NodeRecord,
    parse_proc_stat,
)

READY = "rocketlite ready"
# the dashboard first (it asks the brokers), etcd last: brokers revoke their leases
STOP_ORDER = {DASHBOARD: 0, "broker": 1, "namesrv": 2, ETCD: 3}


def proc_start_time(pid: int) -> int | None:
    """The start time of a live (not zombie) process ``pid``, None if there is none."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    state, start = parse_proc_stat(text)
    return None if state in ("Z", "X") else start


def is_running(rec: NodeRecord) -> bool:
    """Whether the recorded process still runs: its PID lives with the recorded start time."""
    return (rec.pid is not None and rec.start_time is not None
            and proc_start_time(rec.pid) == rec.start_time)


def reap(pid: int) -> None:
    """Collect ``pid``'s exit status if it is a child of this process (else it stays a zombie
    until this process exits); a PID that is not our child is not touched."""
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def _child_env() -> dict[str, str]:
    """The environment of a node: this one, with the directory holding the ``rocketlite``
    package this command runs first on PYTHONPATH (a node runs the same code as the command,
    installed or not), and unbuffered output so the ready line reaches the log at once."""
    src = str(Path(rocketlite.__file__).resolve().parent.parent)
    path = os.environ.get("PYTHONPATH")
    return dict(os.environ, PYTHONPATH=src if not path else os.pathsep.join([src, path]),
                PYTHONUNBUFFERED="1")


def port_free(port: int) -> bool:
    """Whether nothing listens on ``port`` (of any address) now."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("0.0.0.0", port))
        except OSError:
            return False
    return True


def _tail(path: Path, lines: int = 20) -> str:
    try:
        text = path.read_text(errors="replace")
    except FileNotFoundError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:])


class Launcher:
    """Starts nodes, waits for their ready lines, and stops them all again when ``up`` fails."""

    def __init__(self, cluster: ClusterPlan, ready_timeout: float,
                 etcd_binary: str | None = None) -> None:
        self.plan = cluster
        self.ready_timeout = ready_timeout
        self.etcd_binary = etcd_binary
        self.kinds: dict[str, str] = {}
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.records: dict[str, NodeRecord] = {}
        self.log_offsets: dict[str, int] = {}  # where this run's output starts in each log

    def start(self, node: Node) -> None:
        d = self.plan.node_dir(node)
        d.mkdir(parents=True, exist_ok=True)
        if node.kind == "broker":
            self.plan.conf_path(node).write_text(self.plan.conf_text(node), encoding="utf-8")
        if node.kind == ETCD:
            if self.etcd_binary is None:
                raise ClusterError("no etcd binary to start etcd with")
            assert node.peer_port is not None
            argv = etcd_command(self.etcd_binary, d / "data", node.port, node.peer_port)
        else:
            argv = [sys.executable, "-m", "rocketlite", *self.plan.command(node)]
        log_path = self.plan.log_path(node)
        self.log_offsets[node.name] = log_path.stat().st_size if log_path.exists() else 0
        with log_path.open("ab") as log, open(os.devnull, "rb") as null:
            log.write(f"--- rocketlite cluster up: {node.name} at {time.ctime()}\n".encode())
            log.flush()
            proc = subprocess.Popen(argv, stdin=null, stdout=log, stderr=subprocess.STDOUT,
                                    env=_child_env(), cwd=d, start_new_session=True)
        self.procs[node.name] = proc
        self.kinds[node.name] = node.kind
        start = proc_start_time(proc.pid)
        self.records[node.name] = NodeRecord.of(self.plan, node, proc.pid, start)

    def is_ready(self, node: Node) -> bool:
        """Whether the node's output of this run (not an earlier run's) has the ready line; for
        etcd whether it answers healthy."""
        if node.kind == ETCD:
            return etcd_healthy(f"etcd://{node.address}")
        with self.plan.log_path(node).open("rb") as f:
            f.seek(self.log_offsets[node.name])
            return READY.encode() in f.read()

    def wait_ready(self, nodes: Iterable[Node]) -> None:
        """Wait until every one of ``nodes`` printed its ready line; ClusterError with the log's
        last lines for the first that exited or missed the deadline."""
        pending = {n.name: n for n in nodes}
        deadline = time.monotonic() + self.ready_timeout
        while pending:
            for name, node in list(pending.items()):
                if self.is_ready(node):
                    del pending[name]
                    continue
                code = self.procs[name].poll()
                if code is not None:
                    raise ClusterError(f"{name} exited with code {code} before it was ready; "
                                       f"{self.plan.log_path(node)}:\n"
                                       f"{_tail(self.plan.log_path(node))}")
            if pending and time.monotonic() > deadline:
                name, node = next(iter(pending.items()))
                raise ClusterError(f"{name} was not ready within {self.ready_timeout:g} s; "
                                   f"{self.plan.log_path(node)}:\n"
                                   f"{_tail(self.plan.log_path(node))}")
            if pending:
                time.sleep(0.05)

    def stop_all(self, timeout: float = 10.0) -> None:
        """SIGTERM every started node (brokers, NameServers, etcd), then SIGKILL what outlives
        ``timeout``."""
        order = sorted(self.procs.items(), key=lambda kv: STOP_ORDER[self.kinds[kv[0]]])
        for _, p in order:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for _, p in order:
            try:
                p.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


