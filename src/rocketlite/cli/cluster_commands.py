"""``rocketlite cluster up|status|down``: a cluster of separate processes on loopback.

``up`` writes each broker's ``broker.conf`` (``cluster_plan``), starts every node as its own
``python -m rocketlite namesrv|broker`` process in a new session (so it outlives the command and
a Ctrl-C in the terminal does not reach it), its output to ``DIR/<node>/<node>.log``, and waits
for each node's ``rocketlite ready`` line there: NameServers first, then the masters, then the
slaves. It records every PID with the process's start time in ``DIR/cluster.json``, creates the
``--topic`` topics on every master (UPDATE_AND_CREATE_TOPIC, as ``mqadmin updateTopic -c`` does:
slaves get topics from their master) and waits until the NameServers route each topic to every
group. If a node does not come up, ``up`` stops all it started and exits 1 with that node's log.

``down`` sends SIGTERM to exactly the recorded PIDs whose start time still matches (a PID the
kernel gave to another process since is left alone), brokers before NameServers so they
unregister, waits, and sends SIGKILL to what is left after ``--timeout``. Stores and logs stay;
the PIDs are cleared from ``cluster.json``, so ``down`` is idempotent and ``up`` can start the
same directory again.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

import rocketlite
from rocketlite.cli.cluster_plan import (
    STATE_FILE,
    ClusterPlan,
    ClusterState,
    Node,
    NodeRecord,
    PlanError,
    parse_proc_stat,
    plan,
)
from rocketlite.protocol.bodies import TopicRouteData
from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.command import RemotingCommand
from rocketlite.protocol.headers import CreateTopicRequestHeader, GetRouteInfoRequestHeader
from rocketlite.remoting.client import RemotingClient

cluster_app = typer.Typer(help="Run a cluster of NameServers and broker groups as separate "
                               "processes on this machine.", no_args_is_help=True)
console = Console()

READY = "rocketlite ready"
PERM_READ_WRITE = 6


class ClusterError(Exception):
    """``up`` could not bring the cluster up (the message says which node and why)."""


# ------------------------------------------------------------------------------ processes


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


def _reap(pid: int) -> None:
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


def _port_free(port: int) -> bool:
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

    def __init__(self, cluster: ClusterPlan, ready_timeout: float) -> None:
        self.plan = cluster
        self.ready_timeout = ready_timeout
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.records: dict[str, NodeRecord] = {}
        self.log_offsets: dict[str, int] = {}  # where this run's output starts in each log

    def start(self, node: Node) -> None:
        d = self.plan.node_dir(node)
        d.mkdir(parents=True, exist_ok=True)
        if node.kind == "broker":
            self.plan.conf_path(node).write_text(self.plan.conf_text(node), encoding="utf-8")
        log_path = self.plan.log_path(node)
        self.log_offsets[node.name] = log_path.stat().st_size if log_path.exists() else 0
        with log_path.open("ab") as log, open(os.devnull, "rb") as null:
            log.write(f"--- rocketlite cluster up: {node.name} at {time.ctime()}\n".encode())
            log.flush()
            proc = subprocess.Popen(
                [sys.executable, "-m", "rocketlite", *self.plan.command(node)],
                stdin=null, stdout=log, stderr=subprocess.STDOUT, env=_child_env(),
                cwd=d, start_new_session=True,
            )
        self.procs[node.name] = proc
        start = proc_start_time(proc.pid)
        self.records[node.name] = NodeRecord.of(self.plan, node, proc.pid, start)

    def is_ready(self, node: Node) -> bool:
        """Whether the node's output of this run (not an earlier run's) has the ready line."""
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
        """SIGTERM every started node (brokers first), then SIGKILL what outlives ``timeout``."""
        order = sorted(self.procs.items(), key=lambda kv: kv[0].startswith("namesrv"))
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


# ------------------------------------------------------------------------------ topics


async def _call(client: RemotingClient, addr: str, cmd: RemotingCommand) -> RemotingCommand:
    return await client.invoke(addr, cmd, timeout=5.0)


async def create_topics(cluster: ClusterPlan, topics: list[str], queues: int,
                        route_wait_s: float) -> None:
    """Create each topic on every master, then wait until a NameServer routes it to every
    group (the brokers register after each topic change)."""
    client = RemotingClient()
    try:
        for topic in topics:
            header = CreateTopicRequestHeader(
                topic=topic, defaultTopic="TBW102", readQueueNums=queues, writeQueueNums=queues,
                perm=PERM_READ_WRITE, topicFilterType="SINGLE_TAG")
            for m in cluster.masters:
                reply = await _call(client, m.address, RemotingCommand.request(
                    RequestCode.UPDATE_AND_CREATE_TOPIC, header.to_ext()))
                if reply.code != ResponseCode.SUCCESS:
                    raise ClusterError(f"{m.name} refused topic {topic}: {reply.remark}")
        groups = {m.broker_name for m in cluster.masters}
        ns = cluster.namesrvs[0].address
        deadline = time.monotonic() + route_wait_s
        for topic in topics:
            while True:
                reply = await _call(client, ns, RemotingCommand.request(
                    RequestCode.GET_ROUTEINFO_BY_TOPIC,
                    GetRouteInfoRequestHeader(topic=topic).to_ext()))
                routed: set[str | None] = set()
                if reply.code == ResponseCode.SUCCESS:
                    route = TopicRouteData.from_json(reply.body)
                    routed = {q.brokerName for q in route.queueDatas}
                if groups <= routed:
                    break
                if time.monotonic() > deadline:
                    raise ClusterError(f"the NameServer at {ns} routes {topic} to "
                                       f"{sorted(str(g) for g in routed)}, not to every group "
                                       f"{sorted(str(g) for g in groups)} within {route_wait_s:g} s")
                await asyncio.sleep(0.1)
    finally:
        await client.close()


# ------------------------------------------------------------------------------ output


def _rel(path: str, dir: Path) -> str:  # noqa: A002
    """``path`` relative to the cluster directory when it is inside it (shorter tables)."""
    try:
        return str(Path(path).relative_to(dir.resolve()))
    except ValueError:
        return path


def _table(state: ClusterState, title: str, dir: Path,  # noqa: A002
           alive: dict[str, bool] | None = None) -> Table:
    t = Table(title=title)
    for col in ("node", "role", "pid", "port", "ha", "grpc"):
        t.add_column(col, justify="right" if col in ("pid", "port", "ha", "grpc") else "left")
    if alive is not None:
        t.add_column("state")
    t.add_column("log")
    for rec in state.nodes:
        row = [rec.name, rec.role, str(rec.pid) if rec.pid is not None else "-",
               *(str(rec.ports[k]) if k in rec.ports else "-" for k in ("remoting", "ha", "grpc"))]
        if alive is not None:
            row.append("[green]running[/]" if alive[rec.name] else "[red]stopped[/]")
        row.append(_rel(rec.log, dir))
        t.add_row(*row)
    return t


# ------------------------------------------------------------------------------ commands

DirOpt = Annotated[Path, typer.Option("--dir", help="the cluster's directory (cluster.json, "
                                                    "one directory per node)")]


@cluster_app.command()
def up(
    dir: DirOpt,  # noqa: A002
    namesrvs: Annotated[int, typer.Option(help="NameServers")] = 1,
    brokers: Annotated[int, typer.Option(help="broker groups (broker-a, broker-b, ...)")] = 2,
    replicas: Annotated[int, typer.Option(
        help="nodes per group: a master and replicas-1 slaves")] = 2,
    base_port: Annotated[int, typer.Option(
        help="first port: NameServers, then 3 per broker (listen, HA, gRPC)")] = 9876,
    flush: Annotated[str, typer.Option(help="flushDiskType: ASYNC_FLUSH or SYNC_FLUSH")]
    = "ASYNC_FLUSH",
    role: Annotated[str, typer.Option(help="the masters' brokerRole: ASYNC_MASTER or "
                                           "SYNC_MASTER")] = "ASYNC_MASTER",
    topic: Annotated[list[str] | None, typer.Option(
        help="create this topic on every master (repeatable)")] = None,
    queues: Annotated[int, typer.Option(help="read and write queues per master of each "
                                             "--topic")] = 4,
    no_grpc: Annotated[bool, typer.Option("--no-grpc", help="no gRPC front on the brokers")]
    = False,
    controller: Annotated[str | None, typer.Option(
        help="a controller for master election (etcd): not yet available")] = None,
    ready_timeout: Annotated[float, typer.Option(
        help="seconds each phase (NameServers, masters, slaves) may take to be ready")] = 30.0,
) -> None:
    """Start NameServers and broker groups (a master and its slaves each) as separate
    processes on 127.0.0.1, each with its own store and log under DIR."""
    if controller is not None:
        console.print(f"[red]--controller {controller}: not yet: issue 20 controller (master "
                      "election is not implemented; run without --controller)[/]")
        raise typer.Exit(2)
    if queues < 1:
        raise typer.BadParameter("must be at least 1", param_hint="--queues")
    try:
        cluster = plan(dir.resolve(), namesrvs=namesrvs, brokers=brokers, replicas=replicas,
                       base_port=base_port, role=role, flush=flush, grpc=not no_grpc)
    except PlanError as e:
        raise typer.BadParameter(str(e)) from e
    dir.mkdir(parents=True, exist_ok=True)
    try:
        old = ClusterState.read(cluster.dir)
    except (ValueError, KeyError, TypeError) as e:
        console.print(f"[red]{cluster.dir / STATE_FILE} is unreadable ({e}); move it away[/]")
        raise typer.Exit(1) from e
    if old is not None and (live := [r for r in old.nodes if is_running(r)]):
        names = ", ".join(f"{r.name} (pid {r.pid})" for r in live)
        console.print(f"[red]{cluster.dir} has a running cluster: {names}; "
                      f"run `rocketlite cluster down --dir {dir}` first[/]")
        raise typer.Exit(1)
    busy = [p for p in cluster.all_ports() if not _port_free(p)]
    if busy:
        console.print(f"[red]ports in use: {', '.join(map(str, busy))}; pick another "
                      "--base-port[/]")
        raise typer.Exit(1)

    began = time.monotonic()
    launcher = Launcher(cluster, ready_timeout)
    state = ClusterState(cluster.namesrv_addr, [NodeRecord.of(cluster, n) for n in cluster.nodes],
                         list(topic or []))
    try:
        for phase in (cluster.namesrvs, cluster.masters, cluster.slaves):
            for node in phase:
                launcher.start(node)
            state.nodes = [launcher.records.get(n.name) or NodeRecord.of(cluster, n)
                           for n in cluster.nodes]
            state.write(cluster.dir)  # every started PID on record before waiting on it
            launcher.wait_ready(phase)
        if topic:
            asyncio.run(create_topics(cluster, list(topic), queues, ready_timeout))
    except BaseException as e:  # Ctrl-C too: nothing started is left running
        why = str(e) if isinstance(e, ClusterError) else repr(e)
        console.print(f"[red]cluster up failed:[/] {escape(why)}")
        console.print("stopping the nodes already started")
        launcher.stop_all()
        for rec in state.nodes:
            rec.pid = rec.start_time = None
        state.write(cluster.dir)
        if isinstance(e, Exception):
            raise typer.Exit(1) from e
        raise
    took = time.monotonic() - began
    console.print(_table(state, f"cluster {cluster.cluster_name} in {cluster.dir}", cluster.dir))
    console.print(f"{len(cluster.nodes)} processes ready in {took:.1f} s; namesrvAddr "
                  f"{cluster.namesrv_addr}" + (f"; topics {', '.join(topic)}" if topic else ""))


def _read_state(dir: Path) -> ClusterState:  # noqa: A002
    try:
        state = ClusterState.read(dir)
    except (ValueError, KeyError, TypeError) as e:
        console.print(f"[red]{dir / STATE_FILE} is unreadable: {e}[/]")
        raise typer.Exit(1) from e
    if state is None:
        console.print(f"[red]no {STATE_FILE} in {dir}: no cluster was started there[/]")
        raise typer.Exit(1)
    return state


@cluster_app.command()
def status(
    dir: DirOpt,  # noqa: A002
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
) -> None:
    """Each node of the cluster in DIR: its PID, whether it runs, its ports."""
    state = _read_state(dir)
    alive = {r.name: is_running(r) for r in state.nodes}
    if as_json:
        out = {"namesrv_addr": state.namesrv_addr, "topics": state.topics,
               "nodes": [{"name": r.name, "kind": r.kind, "role": r.role, "pid": r.pid,
                          "running": alive[r.name], "address": r.address, "ports": r.ports,
                          "log": r.log} for r in state.nodes]}
        print(json.dumps(out, indent=2))
        return
    console.print(_table(state, f"cluster in {dir}", dir, alive))
    console.print(f"{sum(alive.values())} of {len(alive)} running; namesrvAddr "
                  f"{state.namesrv_addr}")


def _signal(rec: NodeRecord, sig: signal.Signals) -> bool:
    """Send ``sig`` to the recorded process if it is still that process; whether it was."""
    if rec.pid is None or not is_running(rec):
        return False
    try:
        os.kill(rec.pid, sig)
    except ProcessLookupError:
        return False
    return True


def _wait_gone(recs: list[NodeRecord], deadline: float) -> list[NodeRecord]:
    """Wait until every one of ``recs`` has exited or ``deadline``; those still running."""
    left = list(recs)
    while left:
        for rec in left:
            if rec.pid is not None:
                _reap(rec.pid)
        left = [r for r in left if is_running(r)]
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    return left


@cluster_app.command()
def down(
    dir: DirOpt,  # noqa: A002
    timeout: Annotated[float, typer.Option(
        help="seconds to wait after SIGTERM before SIGKILL")] = 10.0,
) -> None:
    """Stop exactly the processes `cluster up` started in DIR (SIGTERM, SIGKILL after
    --timeout); stores and logs stay."""
    state = _read_state(dir)
    outcome: dict[str, str] = {}
    brokers = [r for r in state.nodes if r.kind != "namesrv"]
    namesrvs = [r for r in state.nodes if r.kind == "namesrv"]
    stuck = False
    for group in (brokers, namesrvs):  # brokers first: they unregister from the NameServers
        signalled = []
        for rec in group:
            if rec.pid is None:
                outcome[rec.name] = "not running"
            elif _signal(rec, signal.SIGTERM):
                signalled.append(rec)
            elif proc_start_time(rec.pid) is not None:
                outcome[rec.name] = (f"pid {rec.pid} is another process now (start time "
                                     "differs): left alone")
            else:
                outcome[rec.name] = "already gone"
        left = _wait_gone(signalled, time.monotonic() + timeout)
        for rec in signalled:
            outcome[rec.name] = f"stopped (pid {rec.pid})"
        for rec in left:
            _signal(rec, signal.SIGKILL)
        for rec in _wait_gone(left, time.monotonic() + 5.0):
            outcome[rec.name] = f"[red]still running (pid {rec.pid}) after SIGKILL[/]"
            stuck = True
        for rec in left:
            if not is_running(rec):
                outcome[rec.name] = f"killed after {timeout:g} s (pid {rec.pid})"
    still = {r.name for r in state.nodes if is_running(r)}
    for rec in state.nodes:
        if rec.name not in still:
            rec.pid = rec.start_time = None
    state.write(dir)
    t = Table(title=f"cluster in {dir}: down")
    t.add_column("node")
    t.add_column("outcome")
    for rec in state.nodes:
        t.add_row(rec.name, outcome[rec.name])
    console.print(t)
    if stuck:
        raise typer.Exit(1)
