"""``rocketlite cluster up|status|down``: a cluster of separate processes on loopback.

``up`` writes each broker's ``broker.conf`` (``cluster_plan``), starts every node as its own
``python -m rocketlite namesrv|broker`` process in a new session (so it outlives the command and
a Ctrl-C in the terminal does not reach it), its output to ``DIR/<node>/<node>.log``, and waits
for each node's ``rocketlite ready`` line there: NameServers first, then the masters, then the
slaves. It records every PID with the process's start time in ``DIR/cluster.json``, creates the
``--topic`` topics on every master (UPDATE_AND_CREATE_TOPIC, as ``mqadmin updateTopic -c`` does:
slaves get topics from their master) and waits until the NameServers route each topic to every
group. If a node does not come up, ``up`` stops all it started and exits 1 with that node's log.

With ``--controller etcd`` it first starts etcd (``cluster_etcd``), then the NameServers (each
runs the election watcher), then the first replica of every group, then the others, and waits
until the controller has elected a master of every group, the route names it, and every replica
is in the group's SyncStateSet (``cluster_etcd.wait_elected``). Topics then go to every replica:
whichever the controller elects later has them. ``--controller etcd://host:port`` uses an
existing etcd and starts none.

Last it starts the cluster's web dashboard (``rocketlite dashboard`` over the NameServers, its
own process, so a broker's failover does not take it away); each broker serves Prometheus'
``/metrics`` on its own port (``cluster_plan``). ``up`` and ``status`` print both.

``down`` sends SIGTERM to exactly the recorded PIDs whose start time still matches (a PID the
kernel gave to another process since is left alone), the dashboard first, brokers before
NameServers so they unregister, etcd last, waits, and sends SIGKILL to what is left after
``--timeout``. Stores and logs stay; the PIDs are cleared from ``cluster.json``, so ``down`` is
idempotent and ``up`` can start the same directory again.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from rocketlite.admin import AdminError, AdminSession, TopicNotFoundError, update_topic
from rocketlite.cli import errors, term
from rocketlite.cli.cluster_etcd import (
    GroupStatus,
    etcd_healthy,
    find_etcd,
    group_views,
    wait_elected,
)
from rocketlite.cli.cluster_plan import (
    CLUSTER_NAME,
    DASHBOARD,
    ETCD,
    MAIN_PORT,
    STATE_FILE,
    ClusterError,
    ClusterPlan,
    ClusterState,
    Node,
    NodeRecord,
    PlanError,
    plan,
)
from rocketlite.cli.cluster_procs import (
    Launcher,
    is_running,
    port_free,
    proc_start_time,
    reap,
)

__all__ = ["ClusterError", "cluster_app", "proc_start_time"]

cluster_app = typer.Typer(help="Run a cluster of NameServers and broker groups as separate "
                               "processes on this machine.", no_args_is_help=True)
console = term.console()  # full width when piped



# ------------------------------------------------------------------------------ topics


async def create_topics(cluster: ClusterPlan, topics: list[str], queues: int,
                        route_wait_s: float) -> None:
    """Create each topic on every master (in controller mode on every replica: any of them may
    be elected), through ``rocketlite.admin.update_topic``, then wait until a NameServer routes
    it to every group (the brokers register after each topic change)."""
    targets = cluster.masters if cluster.controller is None else cluster.brokers
    groups = {m.broker_name for m in targets}
    ns = cluster.namesrvs[0].address
    try:
        async with AdminSession(ns) as session:
            for topic in topics:
                for m in targets:
                    await update_topic(session, topic, broker_addr=m.address,
                                       read_queue_nums=queues, write_queue_nums=queues)
            deadline = time.monotonic() + route_wait_s
            for topic in topics:
                while True:
                    routed: set[str | None] = set()
                    with contextlib.suppress(TopicNotFoundError):
                        route = await session.route(topic)
                        routed = {q.brokerName for q in route.queueDatas}
                    if groups <= routed:
                        break
                    if time.monotonic() > deadline:
                        raise ClusterError(
                            f"the NameServer at {ns} routes {topic} to "
                            f"{sorted(str(r) for r in routed)}, not to every group "
                            f"{sorted(str(g) for g in groups)} within {route_wait_s:g} s")
                    await asyncio.sleep(0.1)
    except AdminError as e:
        raise ClusterError(f"cannot create the topics: {e}") from e


# ------------------------------------------------------------------------------ output


def _rel(path: str, dir: Path) -> str:  # noqa: A002
    """``path`` relative to the cluster directory when it is inside it (shorter tables)."""
    try:
        return str(Path(path).relative_to(dir.resolve()))
    except ValueError:
        return path


def _table(state: ClusterState, title: str, dir: Path,  # noqa: A002
           alive: dict[str, bool] | None = None, now: dict[str, str] | None = None) -> Table:
    """The nodes; ``alive`` adds whether each runs, ``now`` (controller mode) the role the
    route gives each broker now."""
    t = Table(title=title)
    numbers = ("pid", "port", "ha", "grpc", "metrics")
    for col in ("node", "role", *(["now"] if now is not None else []), *numbers):
        t.add_column(col, justify="right" if col in numbers else "left")
    if alive is not None:
        t.add_column("state")
    t.add_column("log")
    for rec in state.nodes:
        main = MAIN_PORT.get(rec.kind, "remoting")
        row = [rec.name, rec.role, *([now.get(rec.name, "-")] if now is not None else []),
               str(rec.pid) if rec.pid is not None else "-",
               *(str(rec.ports[k]) if k in rec.ports else "-"
                 for k in (main, "ha", "grpc", "metrics"))]
        if alive is not None:
            row.append("[green]running[/]" if alive[rec.name] else "[red]stopped[/]")
        row.append(_rel(rec.log, dir))
        t.add_row(*row)
    return t


def _print_nodes(state: ClusterState, title: str, dir: Path,  # noqa: A002
                 alive: dict[str, bool] | None = None, now: dict[str, str] | None = None) -> None:
    """The table of nodes, and under it where the dashboard is and the brokers' ``/metrics``
    as the ``targets`` of a Prometheus scrape config."""
    console.print(_table(state, title, dir, alive, now))
    dash = next((r.url for r in state.nodes if r.kind == DASHBOARD), None)
    targets = [f"{r.address.rsplit(':', 1)[0]}:{r.ports['metrics']}" for r in state.nodes
               if "metrics" in r.ports]
    parts = [f"dashboard {dash}"] if dash else []
    if targets:
        parts.append(f"/metrics on {', '.join(targets)}")
    if parts:
        console.print("; ".join(parts))


# ------------------------------------------------------------------------------ commands

DirOpt = Annotated[Path, typer.Option("--dir", help="the cluster's directory (cluster.json, "
                                                    "one directory per node)")]


def _phases(cluster: ClusterPlan) -> list[tuple[Node, ...]]:
    """The nodes in the order ``up`` starts them, each phase ready before the next starts:
    etcd, the NameServers, then the masters and the slaves, or in controller mode the first
    replica of every group and then the others (the first one registered is usually elected),
    then the dashboard."""
    etcd = cluster.etcd
    phases: list[tuple[Node, ...]] = [(etcd,)] if etcd is not None else []
    phases.append(cluster.namesrvs)
    if cluster.controller is None:
        phases += [cluster.masters, cluster.slaves]
    else:
        firsts = tuple(nodes[0] for nodes in cluster.groups.values())
        phases += [firsts, tuple(n for n in cluster.brokers if n not in firsts)]
    if cluster.dashboard is not None:
        phases.append((cluster.dashboard,))
    return [p for p in phases if p]


def _check_controller(cluster: ClusterPlan) -> str | None:
    """The etcd binary ``up`` starts (None with an existing etcd, which must answer now)."""
    if cluster.controller is None:
        return None
    if cluster.etcd is not None:
        return find_etcd()
    if not etcd_healthy(cluster.controller, timeout=2.0):
        raise ClusterError(f"--controller {cluster.controller}: no healthy etcd answers there "
                           "(its /health endpoint); start it, or use --controller etcd")
    return None


@cluster_app.command()
def up(
    dir: DirOpt,  # noqa: A002
    namesrvs: Annotated[int, typer.Option(help="NameServers")] = 1,
    brokers: Annotated[int, typer.Option(help="broker groups (broker-a, broker-b, ...)")] = 2,
    replicas: Annotated[int, typer.Option(
        help="nodes per group: a master and replicas-1 slaves (with --controller: replicas "
             "the controller elects the master among)")] = 2,
    base_port: Annotated[int, typer.Option(
        help="first port: NameServers, then 3 per broker (listen, HA, gRPC), etcd's 2, the "
             "dashboard's, then one per broker for /metrics")]
    = 9876,
    flush: Annotated[str, typer.Option(help="flushDiskType: ASYNC_FLUSH or SYNC_FLUSH")]
    = "ASYNC_FLUSH",
    role: Annotated[str | None, typer.Option(
        help="the masters' brokerRole: ASYNC_MASTER or SYNC_MASTER [default: ASYNC_MASTER, "
             "with --controller SYNC_MASTER]")] = None,
    topic: Annotated[list[str] | None, typer.Option(
        help="create this topic on every master (repeatable)")] = None,
    queues: Annotated[int, typer.Option(help="read and write queues per master of each "
                                             "--topic")] = 4,
    no_grpc: Annotated[bool, typer.Option("--no-grpc", help="no gRPC front on the brokers")]
    = False,
    no_metrics: Annotated[bool, typer.Option(
        "--no-metrics", help="no /metrics on the brokers (metricsPort=0)")] = False,
    no_dashboard: Annotated[bool, typer.Option(
        "--no-dashboard", help="no web dashboard process")] = False,
    controller: Annotated[str | None, typer.Option(
        help="elect each group's master with a controller on etcd (automatic failover): "
             "'etcd' starts one (the etcd-server package's binary), etcd://host:port uses an "
             "existing one")] = None,
    ready_timeout: Annotated[float, typer.Option(
        help="seconds each phase (NameServers, masters, slaves; etcd, and the election with "
             "every replica in sync) may take to be ready")] = 30.0,
) -> None:
    """Start NameServers and broker groups (a master and its slaves each) as separate
    processes on 127.0.0.1, each with its own store and log under DIR, and the cluster's web
    dashboard; each broker serves /metrics on its own port. With --controller the controller
    elects each group's master and replaces it when it dies."""
    if queues < 1:
        raise typer.BadParameter("must be at least 1", param_hint="--queues")
    try:
        cluster = plan(dir.resolve(), namesrvs=namesrvs, brokers=brokers, replicas=replicas,
                       base_port=base_port, role=role, flush=flush, grpc=not no_grpc,
                       controller=controller, metrics=not no_metrics,
                       dashboard=not no_dashboard)
    except PlanError as e:
        raise typer.BadParameter(str(e)) from e
    try:
        etcd_binary = _check_controller(cluster)
    except ClusterError as e:
        errors.fail(str(e))
    dir.mkdir(parents=True, exist_ok=True)
    try:
        old = ClusterState.read(cluster.dir)
    except (ValueError, KeyError, TypeError) as e:
        errors.fail(f"{cluster.dir / STATE_FILE} is unreadable ({e}); move it away")
    if old is not None and (live := [r for r in old.nodes if is_running(r)]):
        names = ", ".join(f"{r.name} (pid {r.pid})" for r in live)
        errors.fail(f"{cluster.dir} has a running cluster: {names}; "
                    f"run `rocketlite cluster down --dir {dir}` first")
    busy = [p for p in cluster.all_ports() if not port_free(p)]
    if busy:
        errors.fail(f"ports in use: {', '.join(map(str, busy))}; pick another --base-port")

    began = time.monotonic()
    launcher = Launcher(cluster, ready_timeout, etcd_binary)
    state = ClusterState(cluster.namesrv_addr, [NodeRecord.of(cluster, n) for n in cluster.nodes],
                         list(topic or []), controller=cluster.controller)
    masters: dict[str, str] = {}
    try:
        for phase in _phases(cluster):
            for node in phase:
                launcher.start(node)
            state.nodes = [launcher.records.get(n.name) or NodeRecord.of(cluster, n)
                           for n in cluster.nodes]
            state.write(cluster.dir)  # every started PID on record before waiting on it
            launcher.wait_ready(phase)
        if cluster.controller is not None:
            masters = asyncio.run(wait_elected(cluster, ready_timeout))
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
    _print_nodes(state, f"cluster {cluster.cluster_name} in {cluster.dir}", cluster.dir)
    for group, master in masters.items():
        console.print(f"{group}: master {master} (elected by the controller at "
                      f"{cluster.controller}; every replica in sync)")
    console.print(f"{len(cluster.nodes)} processes ready in {took:.1f} s; namesrvAddr "
                  f"{cluster.namesrv_addr}" + (f"; topics {', '.join(topic)}" if topic else ""))


def _read_state(dir: Path) -> ClusterState:  # noqa: A002
    try:
        state = ClusterState.read(dir)
    except (ValueError, KeyError, TypeError) as e:
        errors.fail(f"{dir / STATE_FILE} is unreadable: {e}")
    if state is None:
        errors.fail(f"no {STATE_FILE} in {dir}: no cluster was started there")
    return state


def _groups_now(state: ClusterState) -> tuple[list[GroupStatus], dict[str, str]]:
    """Controller mode: each group's master now (route and controller), and each broker's role
    now by the route (``master``, ``slave``, or ``down`` when it does not run)."""
    assert state.controller is not None
    groups: dict[str, dict[str, str]] = {}
    for rec in state.nodes:
        if rec.kind == "broker" and rec.broker_name is not None:
            groups.setdefault(rec.broker_name, {})[rec.address] = rec.name
    ns = next((r.address for r in state.nodes if r.kind == "namesrv" and is_running(r)), None)
    etcd = [r for r in state.nodes if r.kind == ETCD]  # none: an existing etcd, always asked
    rows = asyncio.run(group_views(state.controller, CLUSTER_NAME, ns, groups,
                                   ask_etcd=not etcd or is_running(etcd[0])))
    masters = {r.route_master_node for r in rows}
    now = {rec.name: ("down" if not is_running(rec) else
                      "master" if rec.name in masters else "slave")
           for rec in state.nodes if rec.kind == "broker"}
    return rows, now


@cluster_app.command()
def status(
    dir: DirOpt,  # noqa: A002
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
) -> None:
    """Each node of the cluster in DIR: its PID, whether it runs, its ports (a broker's /metrics
    too), the dashboard's address; with a controller also who is master of each group now (the
    NameServer's route, the controller's state)."""
    state = _read_state(dir)
    alive = {r.name: is_running(r) for r in state.nodes}
    rows, now = _groups_now(state) if state.controller is not None else ([], None)
    if as_json:
        out: dict[str, object] = {
            "namesrv_addr": state.namesrv_addr, "topics": state.topics,
            "nodes": [{"name": r.name, "kind": r.kind, "role": r.role, "pid": r.pid,
                       "running": alive[r.name], "address": r.address, "ports": r.ports,
                       "log": r.log, **({"url": r.url} if r.url is not None else {}),
                       **({"now": now.get(r.name)} if now is not None else {})}
                      for r in state.nodes]}
        if state.controller is not None:
            out["controller"] = state.controller
            out["groups"] = {r.group: {
                "master": r.route_master_node, "masterAddr": r.route_master,
                "controllerMasterId": r.master_id, "epoch": r.epoch,
                "syncStateSet": r.sync_state_set, "live": r.live, "error": r.error}
                for r in rows}
        print(json.dumps(out, indent=2))
        return
    _print_nodes(state, f"cluster in {dir}", dir, alive, now)
    for row in rows:
        console.print(escape(row.describe()))
    console.print(f"{sum(alive.values())} of {len(alive)} running; namesrvAddr "
                  f"{state.namesrv_addr}"
                  + (f"; controller {state.controller}" if state.controller else ""))


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
                reap(rec.pid)
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
    stuck = False
    # the dashboard first (it asks the brokers), brokers next (they unregister from the
    # NameServers and revoke their leases in etcd), etcd last
    for kind in (DASHBOARD, "broker", "namesrv", ETCD):
        signalled = []
        for rec in (r for r in state.nodes if r.kind == kind):
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
