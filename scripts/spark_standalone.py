#!/usr/bin/env python3
"""A Spark standalone cluster on this machine, from the installed pyspark: ``up`` starts a
master and N workers on 127.0.0.1, ``down`` stops exactly those processes.

    .venv/bin/python scripts/spark_standalone.py up --dir /tmp/spark-sa      # prints spark://...
    .venv/bin/python scripts/spark_standalone.py status --dir /tmp/spark-sa
    .venv/bin/python scripts/spark_standalone.py down --dir /tmp/spark-sa

pip's pyspark 4.x does not ship ``sbin/start-master.sh`` and ``sbin/start-worker.sh``, so each
daemon is started the way those scripts start it: ``$SPARK_HOME/bin/spark-class
org.apache.spark.deploy.master.Master`` (``...worker.Worker``), with SPARK_HOME the pyspark
package directory unless the environment sets it. ``spark-class`` execs the JVM, so the PID
recorded is the daemon's. Each daemon runs in a new session; the executors a worker launches,
and their Python workers, are in the worker's process group, and ``down`` signals exactly the
recorded groups whose leader still has the recorded start time (field 22 of /proc/PID/stat).

The directory holds ``spark-standalone.json`` (master URL, PIDs, start times), each daemon's
log of its last run (``master.log``, ``worker-1.log``, ...: a run waits for its own ready lines)
and the workers' work directories (executor stdout and stderr under ``worker-N/app-*/``).

Executors run Python with ``spark.pyspark.python`` / ``PYSPARK_PYTHON`` of the application, not
of the workers: a driver sets it to the interpreter that has rocketlite (``sys.executable`` of a
venv with ``rocketlite[spark]``), and ``spark.executorEnv.PYTHONPATH`` when rocketlite is a
source checkout rather than installed.

Only the standard library is used here: the script runs with any Python that can find pyspark
(``--spark-home`` or SPARK_HOME otherwise).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

STATE = "spark-standalone.json"
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
MASTER_READY = "I have been elected leader"
WORKER_READY = "Successfully registered with master"
# Where the master says what it bound: it picks its ports itself (port 0), since a port picked
# here and bound by the JVM seconds later may be taken meanwhile (any outgoing connection may get
# it), and Spark then binds the next port up, not the one the cluster was told.
MASTER_URL = re.compile(r"Starting Spark master at (spark://\S+)")
MASTER_UI = re.compile(r"'MasterUI' on port (\d+)")


# The Popen objects of the daemons this process started, by PID: kept so that they are not
# collected while their process runs, and so that ``down`` can reap them.
_children: dict[int, subprocess.Popen[bytes]] = {}


class StandaloneError(Exception):
    """A daemon did not come up (the message names it and ends with its log's tail)."""


@dataclass
class Daemon:
    name: str
    pid: int
    start_time: int | None
    log: str


@dataclass
class Cluster:
    master_url: str
    web_ui_port: int
    daemons: list[Daemon] = field(default_factory=list)

    def save(self, directory: Path) -> None:
        (directory / STATE).write_text(json.dumps(asdict(self), indent=2) + "\n", encoding="utf-8")

    @classmethod
    def load(cls, directory: Path) -> Cluster | None:
        path = directory / STATE
        if not path.exists():
            return None
        doc = json.loads(path.read_text(encoding="utf-8"))
        return cls(doc["master_url"], doc["web_ui_port"], [Daemon(**d) for d in doc["daemons"]])


def spark_home() -> Path:
    """SPARK_HOME if set, else the installed pyspark package (which holds bin/ and jars/)."""
    if os.environ.get("SPARK_HOME"):
        return Path(os.environ["SPARK_HOME"])
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def proc_start_time(pid: int) -> int | None:
    """Start time (clock ticks since boot) of a live, non-zombie process, None if none."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()  # after "pid (comm) "; comm may hold spaces
    return None if fields[0] in ("Z", "X") else int(fields[19])


def alive(d: Daemon) -> bool:
    return d.start_time is not None and proc_start_time(d.pid) == d.start_time


def _tail(path: Path, lines: int = 25) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except FileNotFoundError:
        return "(no log)"


def _env(directory: Path, home: Path, memory: str) -> dict[str, str]:
    env = dict(os.environ, SPARK_HOME=str(home), SPARK_LOCAL_IP="127.0.0.1",
               SPARK_LOG_DIR=str(directory), SPARK_PID_DIR=str(directory),
               SPARK_DAEMON_MEMORY=memory, SPARK_NO_DAEMONIZE="1")
    env.pop("SPARK_MASTER_HOST", None)
    return env


def _start(directory: Path, name: str, args: list[str],
           env: dict[str, str]) -> tuple[Daemon, subprocess.Popen[bytes]]:
    log = directory / f"{name}.log"
    with log.open("wb") as out, open(os.devnull, "rb") as null:
        proc = subprocess.Popen([str(Path(env["SPARK_HOME"]) / "bin" / "spark-class"), *args],
                                stdin=null, stdout=out, stderr=subprocess.STDOUT, env=env,
                                cwd=directory, start_new_session=True)
    _children[proc.pid] = proc
    # spark-class execs java; the start time recorded is the process's, whatever it runs.
    return Daemon(name, proc.pid, proc_start_time(proc.pid), str(log)), proc


def _wait_ready(d: Daemon, proc: subprocess.Popen[bytes], marker: str, deadline: float) -> None:
    log = Path(d.log)
    while time.monotonic() < deadline:
        if log.exists() and marker in log.read_text(errors="replace"):
            return
        if proc.poll() is not None:
            raise StandaloneError(f"{d.name} exited with {proc.returncode}:\n{_tail(log)}")
        time.sleep(0.2)
    raise StandaloneError(f"{d.name} not ready ({marker!r}) in time:\n{_tail(log)}")


def _bound(log: Path) -> tuple[str, int]:
    """The master's URL and web UI port, as its log (``log``) says it bound them."""
    text = log.read_text(errors="replace")
    url, ui = MASTER_URL.search(text), MASTER_UI.search(text)
    if url is None or ui is None:
        raise StandaloneError(f"master ready, but its log names no URL or UI port:\n{_tail(log)}")
    return url.group(1), int(ui.group(1))


def up(directory: Path, *, workers: int = 2, cores: int = 1, memory: str = "1g",
       daemon_memory: str = "256m", port: int = 0, timeout: float = 60.0) -> Cluster:
    """Start a master on 127.0.0.1 (``port``, 0: one it picks) and ``workers`` workers of
    ``cores`` cores and ``memory`` for executors each; wait until every worker registered.
    A daemon that fails stops all started so far."""
    directory = directory.resolve()
    directory.mkdir(parents=True, exist_ok=True)
    old = Cluster.load(directory)
    if old is not None and any(alive(d) for d in old.daemons):
        raise StandaloneError(f"{directory} runs a cluster already ({old.master_url}): down first")
    home = spark_home()
    if not (home / "bin" / "spark-class").exists():
        raise StandaloneError(f"no bin/spark-class under {home} (set SPARK_HOME)")
    env = _env(directory, home, daemon_memory)
    cluster = Cluster("", 0)
    procs: list[subprocess.Popen[bytes]] = []
    deadline = time.monotonic() + timeout
    try:
        master, proc = _start(directory, "master", [MASTER_CLASS, "--host", "127.0.0.1", "--port",
                                                    str(port), "--webui-port", "0"], env)
        cluster.daemons.append(master)
        procs.append(proc)
        cluster.save(directory)
        _wait_ready(master, proc, MASTER_READY, deadline)
        cluster.master_url, cluster.web_ui_port = _bound(Path(master.log))
        cluster.save(directory)
        started = []
        for i in range(1, workers + 1):
            work = directory / f"worker-{i}"
            work.mkdir(exist_ok=True)
            d, proc = _start(directory, f"worker-{i}", [
                WORKER_CLASS, "--host", "127.0.0.1", "--cores", str(cores), "--memory", memory,
                "--webui-port", "0", "--work-dir", str(work), cluster.master_url], env)
            cluster.daemons.append(d)
            procs.append(proc)
            started.append((d, proc))
            cluster.save(directory)
        for d, proc in started:
            _wait_ready(d, proc, WORKER_READY, deadline)
    except BaseException:
        down(directory)
        raise
    return cluster


def down(directory: Path, timeout: float = 15.0) -> list[str]:
    """SIGTERM each recorded daemon's process group (workers first, so they stop their
    executors), SIGKILL what is left after ``timeout``; the names of the daemons stopped.
    Clears the PIDs, so a second ``down`` does nothing."""
    directory = directory.resolve()
    cluster = Cluster.load(directory)
    if cluster is None:
        return []
    running = [d for d in reversed(cluster.daemons) if alive(d)]
    for d in running:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(d.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while any(alive(d) for d in running) and time.monotonic() < deadline:
        for d in running:  # collect our own children, else they stay zombies with a start time
            if d.pid in _children:
                _children[d.pid].poll()
        time.sleep(0.1)
    for d in running:
        if alive(d):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(d.pid, signal.SIGKILL)
    # executors of a worker killed hard, and their Python workers, are in the worker's group
    for d in running:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(d.pid, signal.SIGKILL)
    for d in cluster.daemons:
        child = _children.pop(d.pid, None)
        if child is not None:
            child.wait()
        d.start_time = None
    cluster.save(directory)
    return [d.name for d in running]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=("up", "down", "status"))
    parser.add_argument("--dir", type=Path, default=Path("spark-standalone"))
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--cores", type=int, default=1, help="cores per worker")
    parser.add_argument("--memory", default="1g",
                        help="memory for executors per worker (spark.executor.memory is 1g by default)")
    parser.add_argument("--port", type=int, default=0, help="master port (0: a free one)")
    parser.add_argument("--timeout", type=float, default=60.0)
    args = parser.parse_args()
    if args.command == "up":
        try:
            cluster = up(args.dir, workers=args.workers, cores=args.cores, memory=args.memory,
                         port=args.port, timeout=args.timeout)
        except StandaloneError as e:
            print(f"error: {e}", file=sys.stderr)
            sys.exit(1)
        print(cluster.master_url)
    elif args.command == "down":
        print("stopped: " + (", ".join(down(args.dir)) or "nothing"))
    else:
        loaded = Cluster.load(args.dir.resolve())
        if loaded is None:
            print("no cluster")
            sys.exit(1)
        print(loaded.master_url)
        for d in loaded.daemons:
            print(f"{d.name}\tpid {d.pid}\t{'running' if alive(d) else 'stopped'}\t{d.log}")


if __name__ == "__main__":
    main()
