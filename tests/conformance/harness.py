"""The conformance harness: the broker as a subprocess, the third-party client scenarios as
subprocesses that print JSON lines, and the broker's files read back after it stopped (with
``store_state``).

Everything started here is stopped here: a process that overstays its timeout is killed and the
test fails saying so. Every network use is loopback.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import remoting_admin
from store_state import StoredMessage as StoredMessage  # the tests import it from here
from store_state import StoreState

from ports import free_port as free_port  # the tests import it from here
from rocketlite.acl.sign import Credentials
from rocketlite.formats.delay import parse_delay_levels

ROOT = Path(__file__).resolve().parents[2]
ONS_DIR = ROOT / "conformance" / "ali-ons"
CPP_DIR = ROOT / "conformance" / "cpp"
G5PY_DIR = ROOT / "conformance" / "grpc-python"  # run by rocketmq-python-client 5.1.2
NODE5_DIR = ROOT / "conformance" / "nodejs5"  # rocketmq-client-nodejs 1.0.8
READY_LINE = "rocketlite ready"
BROKER_READY_TIMEOUT_S = 30.0
BROKER_STOP_TIMEOUT_S = 20.0
# The broker command; ROCKETLITE_CONFORMANCE_BROKER_CMD overrides it (same placeholders), e.g. to
# run the suite against another RocketMQ-compatible broker that prints the ready line. Every
# broker gets its own gRPC port (the front's default, 8081, would clash between runs); the ready
# line names it (``, gRPC 127.0.0.1:P``), or else it is {grpc_port}. Likewise its own /metrics
# port and no dashboard (their defaults, 5557 and 8082, are one per machine).
BROKER_CMD = ("{python} -m rocketlite start --store-dir {store_dir} "
              "--namesrv-port {namesrv_port} --broker-port {broker_port} --grpc-port {grpc_port} "
              "--metrics-port {metrics_port} --dashboard-port 0")
READY_GRPC = re.compile(r"gRPC (\S+?:\d+)")

Event = dict[str, Any]

# What the clients log that is no complaint about the broker. The C++ client logs these two as
# errors on every run: it has no credentials to sign with, and it says so when it stops.
CPP_BENIGN = re.compile(r"didn't get the session_credentials|stopAllTcpTransportThread End")
# ali-ons reports QUERY_CONSUMER_OFFSET's QUERY_NOT_FOUND (22) for a new group as an 'error'
# event, then applies consumeFromWhere (PROTOCOL.md §2.2).
ONS_BENIGN_CODES = {22}
# rocketmq-python-client 5.1.2 logs these whatever the server does: a PushConsumer registers its
# cache gauges on a meter provider that only exists when Settings turn client metrics on (off by
# default, as Apache's proxy has them); and, once closing, the cancel of its own pending receive.
G5PY_BENIGN = re.compile(r"object has no attribute 'get_meter'")
G5PY_BENIGN_CLOSING = re.compile(r"process received message error, $")


def _lines(path: Path) -> list[str]:
    try:
        return path.read_text(errors="replace").splitlines()
    except FileNotFoundError:
        return []


def _tail(path: Path, chars: int = 4000) -> str:
    try:
        text = path.read_text(errors="replace")
    except FileNotFoundError:
        return "(no output file)"
    return text if len(text) <= chars else "…" + text[-chars:]


def _g5py_benign(e: Event) -> bool:
    message = str(e.get("message", ""))
    return bool(G5PY_BENIGN.search(message)
                or (e.get("closing") and G5PY_BENIGN_CLOSING.search(message)))


# -- client scenario processes -------------------------------------------------------------------


class ClientProcess:
    """One scenario script: its stdout JSON events collected by a reader thread, its stderr in a
    file, waits bounded."""

    def __init__(self, name: str, argv: Sequence[str], cwd: Path, env: dict[str, str],
                 log_dir: Path) -> None:
        self.name = name
        self.argv = list(argv)
        self.stderr_path = log_dir / f"{name}.stderr"
        self.stdout_path = log_dir / f"{name}.stdout"
        self.events: list[Event] = []
        self._cond = threading.Condition()
        self._stderr = self.stderr_path.open("wb")
        self.proc = subprocess.Popen(self.argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=self._stderr)
        self._reader = threading.Thread(target=self._read, name=f"read-{name}", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        with self.stdout_path.open("wb") as copy:
            for raw in self.proc.stdout:
                copy.write(raw)
                copy.flush()
                line = raw.decode("utf-8", errors="replace").rstrip("\n")
                try:
                    event = json.loads(line)
                    if not isinstance(event, dict) or "event" not in event:
                        raise ValueError(line)
                except ValueError:
                    event = {"event": "raw", "line": line}
                with self._cond:
                    self.events.append(event)
                    self._cond.notify_all()
        self.proc.stdout.close()
        with self._cond:
            self._cond.notify_all()

    # -- reading events

    def of(self, kind: str) -> list[Event]:
        with self._cond:
            return [e for e in self.events if e["event"] == kind]

    def wait_for(self, predicate: Callable[[list[Event]], Any], timeout: float, what: str) -> Any:
        """Wait until ``predicate(events)`` is truthy; fail if the process ends first or the
        timeout passes."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                result = predicate(self.events)
                if result:
                    return result
                if self.proc.poll() is not None and not self._reader.is_alive():
                    raise AssertionError(f"{self.name} ended (exit {self.proc.returncode}) before "
                                         f"{what}\n{self.describe()}")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"{self.name}: no {what} within {timeout} s\n"
                                         f"{self.describe()}")
                self._cond.wait(min(left, 0.5))

    def wait_event(self, kind: str, timeout: float, **match: Any) -> Event:
        def find(events: list[Event]) -> Event | None:
            for e in events:
                if e["event"] == kind and all(e.get(k) == v for k, v in match.items()):
                    return e
            return None

        found: Event = self.wait_for(find, timeout, f"{kind!r} event {match or ''}")
        return found

    # -- ending

    def wait(self, timeout: float) -> int:
        """Wait for the process to exit; kill it and fail if it overstays."""
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"{self.name} still running after {timeout} s: killed\n"
                                 f"{self.describe()}") from None
        self._release()
        return code

    def finish(self, timeout: float) -> list[Event]:
        """Wait for the scenario to exit 0 and end with a 'done' event; return its events."""
        code = self.wait(timeout)
        if code != 0 or not self.of("done"):
            raise AssertionError(f"{self.name} failed (exit {code}; 0 and a 'done' event "
                                 f"expected)\n{self.describe()}")
        return self.events

    def stop(self, timeout: float, sig: int = signal.SIGTERM) -> list[Event]:
        """Ask a running consumer to stop cleanly (it commits its offsets), then finish()."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return self.finish(timeout)

    def kill(self) -> None:
        """End the process if it still runs, and release its pipe and files."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self._release()

    def _release(self) -> None:
        self._reader.join(5)
        self._stderr.close()

    def describe(self) -> str:
        with self._cond:
            events = list(self.events)
        shown = [json.dumps(e, ensure_ascii=False)[:300] for e in events[-25:]]
        return (f"--- {self.name}: {shlex.join(self.argv)}\n"
                f"exit: {self.proc.poll()}; {len(events)} events, the last {len(shown)}:\n"
                + "\n".join(shown)
                + f"\n--- stderr ({self.stderr_path}):\n{_tail(self.stderr_path, 3000)}")


# -- the broker -----------------------------------------------------------------------------------


class BrokerProcess:
    """``python -m rocketlite start`` (NameServer and broker in one process) on free loopback
    ports with its own store; ready when its console prints ``rocketlite ready``. ``conf``, if
    given, is written as a broker.conf (RocketMQ keys, e.g. ``messageDelayLevel``) next to the store
    and passed with ``-c``."""

    def __init__(self, store_dir: Path, log_path: Path,
                 conf: dict[str, str] | None = None) -> None:
        self.store_dir = store_dir
        self.log_path = log_path
        self.namesrv_port = free_port()
        self.broker_port = free_port()
        self.grpc_port = free_port()
        template = os.environ.get("ROCKETLITE_CONFORMANCE_BROKER_CMD", BROKER_CMD)
        self.argv = [part.format(python=sys.executable, store_dir=store_dir,
                                 namesrv_port=self.namesrv_port, broker_port=self.broker_port,
                                 grpc_port=self.grpc_port, metrics_port=free_port())
                     for part in shlex.split(template)]
        self.grpc_addr = f"127.0.0.1:{self.grpc_port}"
        if conf:
            conf_path = store_dir.parent / "broker.conf"
            conf_path.write_text("".join(f"{k}={v}\n" for k, v in conf.items()))
            self.argv += ["-c", str(conf_path)]
        self.conf = dict(conf or {})
        self.proc: subprocess.Popen[bytes] | None = None
        self.exit_code: int | None = None

    @property
    def namesrv_addr(self) -> str:
        return f"127.0.0.1:{self.namesrv_port}"

    @property
    def broker_addr(self) -> str:
        return f"127.0.0.1:{self.broker_port}"

    def start(self, timeout: float = BROKER_READY_TIMEOUT_S) -> None:
        self.store_dir.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        with self.log_path.open("wb") as log:
            self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + timeout
        while READY_LINE not in self.log_path.read_text(errors="replace"):
            if self.proc.poll() is not None:
                raise AssertionError(f"the broker exited with {self.proc.returncode} before "
                                     f"printing {READY_LINE!r}\n{self.describe()}")
            if time.monotonic() > deadline:
                self.kill()
                raise AssertionError(f"the broker did not print {READY_LINE!r} within {timeout} "
                                     f"s: killed\n{self.describe()}")
            time.sleep(0.05)
        ready = [line for line in _lines(self.log_path) if READY_LINE in line]
        named = READY_GRPC.search(ready[0]) if ready else None
        if named:  # the port the front bound, as the ready line names it
            self.grpc_addr = named.group(1).replace("0.0.0.0:", "127.0.0.1:")

    def stop(self, timeout: float = BROKER_STOP_TIMEOUT_S) -> int:
        """SIGTERM, then wait; SIGKILL and fail if it does not stop within ``timeout``."""
        if self.proc is None:
            raise AssertionError("the broker was never started")
        if self.exit_code is not None:
            return self.exit_code
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.exit_code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"the broker did not stop within {timeout} s of SIGTERM: "
                                 f"killed\n{self.describe()}") from None
        return self.exit_code

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.exit_code = self.proc.wait(10)

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def describe(self) -> str:
        return (f"--- broker: {shlex.join(self.argv)}\n--- console ({self.log_path}):\n"
                f"{_tail(self.log_path)}")


# -- comparing what was sent with what was received -----------------------------------------------


FINISH_S = 100  # how long a test waits for a scenario script, whose own deadline is 90 s


def sent_of(events: list[Event]) -> list[Event]:
    return [e for e in events if e["event"] == "sent"]


def received_of(events: list[Event]) -> list[Event]:
    return [e for e in events if e["event"] == "received"]


def pairs(events: Iterable[Event], kind: str) -> list[tuple[str, str]]:
    """(key, body) of every event of ``kind`` ('sent' or 'received')."""
    return [(e["key"], e["body"]) for e in events if e["event"] == kind]


def assert_same_messages(sent: Sequence[tuple[str, str]], received: Sequence[tuple[str, str]],
                         label: str, duplicates_allowed: Iterable[tuple[str, str]] = ()) -> None:
    """``received`` holds each sent (key, body) exactly once: none missing, none unknown, and no
    duplicate except of the pairs in ``duplicates_allowed`` (at-least-once redelivery)."""
    want, got = Counter(sent), Counter(received)
    assert len(want) == len(sent), f"{label}: the producer sent duplicate keys (harness bug)"
    allowed = set(duplicates_allowed)
    missing = sorted(want - got)
    unknown = sorted(k for k in got if k not in want)
    dupes = sorted(k for k, n in got.items() if k in want and n > 1 and k not in allowed)
    problems = []
    if missing:
        problems.append(f"{len(missing)} of {len(want)} sent messages never received, e.g. "
                        f"{missing[:5]}")
    if unknown:
        problems.append(f"{len(unknown)} received messages were never sent, e.g. {unknown[:5]}")
    if dupes:
        problems.append(f"{len(dupes)} messages received more than once, e.g. "
                        f"{[(k, got[k]) for k in dupes[:5]]}")
    assert not problems, f"{label}: " + "; ".join(problems)


# -- one test's world ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Clients:
    node: str
    ons_dir: Path
    cpp_python: Path
    cpp_dir: Path
    setup_output: str
    g5_python: Path = Path("python3")  # .conformance-venv5/bin/python
    g5_dir: Path = G5PY_DIR
    node5_dir: Path = NODE5_DIR


class Conformance:
    """One test's world: its broker, its run id, the scenario processes it started."""

    CLIENT_DEADLINE_MS = 90_000  # every scenario script's own hard deadline

    def __init__(self, clients: Clients, tmp: Path,
                 broker_conf: dict[str, str] | None = None) -> None:
        self.clients = clients
        self.tmp = tmp
        self.run_id = uuid.uuid4().hex[:8]
        self.logs = tmp / "logs"
        self.logs.mkdir()
        self.home = tmp / "home"  # the C++ client logs under $HOME/logs/rocketmq-cpp
        self.home.mkdir()
        self.broker = BrokerProcess(tmp / "store", self.logs / "broker.log", broker_conf)
        # The NameServer the scenario scripts are given: this broker's, unless a test runs its
        # own cluster (the failover tests) and points the scripts at that one instead.
        self.namesrv_addr = self.broker.namesrv_addr
        self.processes: list[ClientProcess] = []
        self._count = 0
        # ACL (the ``acl`` marker): what ``create_topic`` signs with, and the environment of the
        # ali-ons, C++ and 5.x Python scripts (CONFORMANCE_ACCESS_KEY/CONFORMANCE_SECRET_KEY make
        # them sign)
        self.admin_credentials: Credentials | None = None
        self.client_env: dict[str, str] = {}

    def name(self, kind: str) -> str:
        """A topic or group name unique to this test run."""
        return f"{kind}_{self.run_id}"

    # -- the broker

    def start_broker(self) -> None:
        self.broker.start()

    def kill_and_restart_broker(self) -> None:
        """SIGKILL the broker (no shutdown: what a crash leaves), then start it again on the same
        ports and store; its console goes on in broker-restarted.log (the first one is kept)."""
        self.broker.kill()
        self.broker.exit_code = None
        self.broker.log_path = self.logs / "broker-restarted.log"
        self.broker.start()

    def configure_groups(self, groups: dict[str, dict[str, Any]]) -> None:
        """Before the broker starts: consumer groups ``name(kind)`` with these
        SubscriptionGroupConfig fields (e.g. ``consumeMessageOrderly``, what ``mqadmin
        updateSubGroup -o true`` sets, or ``retryMaxTimes``) in the store's
        ``config/subscriptionGroup.json``, which the broker loads when it starts."""
        table = {self.name(k): {"groupName": self.name(k), **fields} for k, fields in groups.items()}
        path = self.broker.store_dir / "config" / "subscriptionGroup.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"subscriptionGroupTable": table}))

    def create_topic(self, topic: str, queues: int = 4, message_type: str | None = None) -> None:
        """Create ``topic`` as the admin tool does, and wait until the NameServer routes it.
        ``message_type`` (NORMAL, FIFO, DELAY, TRANSACTION) is the 5.x topic attribute, sent as
        ``mqadmin updateTopic -a +message.type=FIFO`` sends it."""
        if message_type is None:
            r = remoting_admin.create_topic(self.broker.broker_addr, topic, queues,
                                            credentials=self.admin_credentials)
        else:
            r = remoting_admin.request(self.broker.broker_addr, remoting_admin.UPDATE_AND_CREATE_TOPIC, {
                "topic": topic, "defaultTopic": "TBW102", "readQueueNums": str(queues),
                "writeQueueNums": str(queues), "perm": "6", "topicFilterType": "SINGLE_TAG",
                "topicSysFlag": "0", "order": "false", "attributes": f"+message.type={message_type}",
            })
        assert r.code == remoting_admin.SUCCESS, (
            f"UPDATE_AND_CREATE_TOPIC {topic} answered {r.code} ({r.remark})\n"
            + self.broker.describe())
        remoting_admin.wait_for_route(self.broker.namesrv_addr, topic)

    def stop_broker(self) -> StoreState:
        """Stop every client left, stop the broker (it must exit 0 on SIGTERM), read its store."""
        for p in self.processes:
            p.kill()
        code = self.broker.stop()
        assert code == 0, f"the broker exited with {code} on SIGTERM\n{self.broker.describe()}"
        levels = self.broker.conf.get("messageDelayLevel")
        state = StoreState.read(self.broker.store_dir,
                                parse_delay_levels(levels) if levels else None)
        assert not state.abort_present, "the store's abort file is left after a clean stop"
        assert not state.problems, ("the stopped store is inconsistent: "
                                    + "; ".join(state.problems[:10]))
        complaints = self.client_complaints()
        assert not complaints, (f"the clients logged {len(complaints)} errors, e.g.\n"
                                + "\n".join(complaints[:10]))
        errors = [line for line in _lines(self.broker.log_path)
                  if re.search(r"\b(ERROR|CRITICAL)\b|^Traceback", line)]
        assert not errors, "the broker logged errors:\n" + self.broker.describe()
        return state

    def client_complaints(self) -> list[str]:
        """What the clients said went wrong: ali-ons's 'error' events and logged errors, the C++
        client's logged errors and pull exceptions (it re-pulls at once after each, so a broker
        answering a pull with an error is hammered), less the benign ones above."""
        out = []
        for p in self.processes:
            out += [f"{p.name}: {json.dumps(e, ensure_ascii=False)[:300]}"
                    for e in p.of("client_error") if e.get("code") not in ONS_BENIGN_CODES
                    and not ("-g5py-" in p.name and _g5py_benign(e))]
            if "-ons-" in p.name:
                out += [f"{p.name}: {line[:300]}" for line in _lines(p.stderr_path)
                        if re.match(r"\[\w+\] error ", line)]
        for log in sorted((self.home / "logs" / "rocketmq-cpp").glob("*")):
            out += [f"{log.name}: {line[:300]}" for line in _lines(log)
                    if ("(error)" in line and not CPP_BENIGN.search(line))
                    or ("(warning)" in line and "exception" in line)]
        return out

    # -- scenario scripts

    def _spawn(self, label: str, argv: list[str], cwd: Path, env: dict[str, str]) -> ClientProcess:
        self._count += 1
        p = ClientProcess(f"{self._count:02d}-{label}", argv, cwd, env, self.logs)
        self.processes.append(p)
        return p

    def _common_args(self, topic: str, group: str) -> list[str]:
        return ["--namesrv", self.namesrv_addr, "--topic", topic, "--group", group,
                "--run-id", self.run_id, "--deadline-ms", str(self.CLIENT_DEADLINE_MS)]

    def ons(self, script: str, topic: str, group: str, *args: str) -> ClientProcess:
        """Start ``conformance/ali-ons/<script>.js``."""
        argv = [self.clients.node, str(self.clients.ons_dir / f"{script}.js"),
                *self._common_args(topic, group), *args]
        env = {**os.environ, "NODE_NO_WARNINGS": "1", **self.client_env}
        return self._spawn(f"ons-{script}", argv, self.clients.ons_dir, env)

    def g5py(self, script: str, topic: str, group: str, *args: str) -> ClientProcess:
        """Start ``conformance/grpc-python/<script>.py`` with rocketmq-python-client 5.1.2 (its
        venv), on the broker's gRPC front; HOME in tmp (the client logs there)."""
        argv = [str(self.clients.g5_python), str(self.clients.g5_dir / f"{script}.py"),
                *self._grpc_args(topic, group), *args]
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
        env |= {"HOME": str(self.home), "PYTHONUNBUFFERED": "1", "PYTHONDONTWRITEBYTECODE": "1",
                **self.client_env}
        return self._spawn(f"g5py-{script}", argv, self.clients.g5_dir, env)

    def node5(self, script: str, topic: str, group: str, *args: str) -> ClientProcess:
        """Start ``conformance/nodejs5/<script>.js`` (rocketmq-client-nodejs 1.0.8) on the
        broker's gRPC front; HOME in tmp (the client's default log file is under it)."""
        argv = [self.clients.node, str(self.clients.node5_dir / f"{script}.js"),
                *self._grpc_args(topic, group), *args]
        env = {**os.environ, "NODE_NO_WARNINGS": "1", "HOME": str(self.home)}
        return self._spawn(f"node5-{script}", argv, self.clients.node5_dir, env)

    def _grpc_args(self, topic: str, group: str) -> list[str]:
        return ["--endpoints", self.broker.grpc_addr, "--topic", topic, "--group", group,
                "--run-id", self.run_id, "--deadline-ms", str(self.CLIENT_DEADLINE_MS)]

    def cpp(self, script: str, topic: str, group: str, *args: str) -> ClientProcess:
        """Start ``conformance/cpp/<script>.py`` in the rocketmq==0.4.4 venv, HOME in tmp."""
        argv = [str(self.clients.cpp_python), str(self.clients.cpp_dir / f"{script}.py"),
                *self._common_args(topic, group), *args]
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
        env |= {"HOME": str(self.home), "PYTHONUNBUFFERED": "1", "PYTHONDONTWRITEBYTECODE": "1",
                **self.client_env}
        return self._spawn(f"cpp-{script}", argv, self.clients.cpp_dir, env)

    def describe(self) -> str:
        broker = [self.broker.describe()] if self.broker.proc is not None else []
        return "\n".join([*(p.describe() for p in self.processes), *broker])

    def close(self) -> None:
        """Kill the scripts left; stop the broker if the test did not (SIGTERM, then SIGKILL)."""
        for p in self.processes:
            p.kill()
        if self.broker.running:
            try:
                self.broker.stop()
            except AssertionError as e:  # it overstayed SIGTERM and was killed: say so
                print(e)


@contextmanager
def world_on(clients: Clients, tmp: Path, ns: str) -> Iterator[Conformance]:
    """A test's world whose scenario scripts are pointed at the NameServer ``ns`` (a cluster the
    test runs itself; the world's own broker is not started); closed at the end."""
    w = Conformance(clients, tmp)
    w.namesrv_addr = ns
    try:
        yield w
    finally:
        w.close()
