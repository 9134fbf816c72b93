"""Helpers for tests that run ``rocketlite start|namesrv|broker`` as processes and talk Remoting
to them (not a test module)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from ports import free_base as free_base  # the tests import them from here
from ports import free_port as free_port
from ports import side_ports as side_ports
from rocketlite.formats.message_record import MessageRecord, decode_record
from rocketlite.formats.properties import encode_properties
from rocketlite.protocol.codes import PullSysFlag, RequestCode
from rocketlite.protocol.command import RemotingCommand
from rocketlite.protocol.headers import (
    CreateTopicRequestHeader,
    PullMessageRequestHeader,
    SendMessageRequestHeader,
)
from rocketlite.remoting.client import RemotingClient

READY = "rocketlite ready"


class ServerProcess:
    """``python -m rocketlite ARGS`` (or another ``module``) with stdout read by a thread (for the
    ready line) and stderr (the log) in a file; killed at exit if still running."""

    def __init__(self, args: list[str], log_path: Path, module: str = "rocketlite") -> None:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path), PYTHONUNBUFFERED="1")
        self.log_path = log_path
        self._log = log_path.open("ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", module, *args],
            stdout=subprocess.PIPE, stderr=self._log, env=env, text=True,
        )
        self.lines: list[str] = []
        self._ready = threading.Event()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))
            if READY in line:
                self._ready.set()
        self._ready.set()  # EOF: the process ended

    def wait_ready(self, timeout: float = 30.0) -> str:
        if not self._ready.wait(timeout) or not any(READY in x for x in self.lines):
            self.kill()
            raise AssertionError(f"no ready line within {timeout} s; exit {self.proc.poll()}; "
                                 f"log:\n{self.log()}")
        return next(x for x in self.lines if READY in x)

    def log(self) -> str:
        if not self._log.closed:
            self._log.flush()
        return self.log_path.read_text(errors="replace")[-4000:]

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM and wait; the exit code."""
        self.proc.send_signal(signal.SIGTERM)
        return self.wait(timeout)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.wait(30.0)

    def wait(self, timeout: float) -> int:
        try:
            code = self.proc.wait(timeout)
        finally:
            self._reader.join(5)
            if self.proc.stdout is not None:
                self.proc.stdout.close()
            self._log.close()
        return code

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill()


@contextlib.contextmanager
def conf_broker(tmp_path: Path, **conf: str) -> Iterator[tuple[ServerProcess, str]]:
    """``started`` with the log in ``broker.log``: yields the process and the broker's address."""
    with started(tmp_path, "broker.log", **conf) as s:
        yield s.server, s.addr


def scrape_metrics(port: int) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """A broker's ``/metrics`` on ``port`` (loopback), parsed: (name, labels) -> value."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        assert r.status == 200
        assert r.headers["Content-Type"].startswith("text/plain")
        text = r.read().decode()
    return {(s.name, frozenset(s.labels.items())): s.value
            for f in text_string_to_metric_families(text) for s in f.samples}


def wait_port(port: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), 0.5):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def start_args(store: Path, conf: Path, flush: str | None = None) -> list[str]:
    """``rocketlite start`` on free ports with this store and broker.conf (and flush type)."""
    return ["start", "--grpc-port", "0", "--store", str(store), "-c", str(conf),
            *(["--flush", flush] if flush else []),
            "--namesrv-port", str(free_port()), "--broker-port", str(free_port())]


def broker_addr(args: list[str]) -> str:
    """The broker address of ``start_args``."""
    return f"127.0.0.1:{args[args.index('--broker-port') + 1]}"


def namesrv_addr(args: list[str]) -> str:
    """The NameServer address of ``start_args``."""
    return f"127.0.0.1:{args[args.index('--namesrv-port') + 1]}"


@dataclass(frozen=True)
class Started:
    server: ServerProcess
    ns: str
    addr: str


@contextlib.contextmanager
def started(tmp: Path, log: str = "start.log", **conf: str) -> Iterator[Started]:
    """``rocketlite start`` (NameServer and broker, no gRPC) with ``conf`` as its broker.conf and
    its store under ``tmp``, on free ports (``side_ports`` unless ``conf`` names them), ready;
    killed at exit if still running."""
    conf_file = tmp / "broker.conf"
    keys = side_ports() | conf
    conf_file.write_text("".join(f"{k}={v}\n" for k, v in keys.items()), encoding="utf-8")
    args = start_args(tmp / "store", conf_file)
    with ServerProcess(args, tmp / log) as server:
        server.wait_ready()
        yield Started(server, namesrv_addr(args), broker_addr(args))


def broker_process(tmp: Path, ns: str, name: str, broker_id: int = 0, *, ha_port: int = 0,
                   extra: dict[str, str] | None = None) -> tuple[ServerProcess, str]:
    """``rocketlite broker`` of group ``name`` as its own process (4.x manual roles: id 0 an
    ASYNC_MASTER, else a SLAVE, which finds its master's HA address in its registration reply),
    registering with ``ns``, on free ports (``ha_port``: the master's HA port), its store under
    ``tmp/<name>-b<id>-<port>``; not waited for (``wait_ready``). Returns it and its address."""
    port = free_port()
    root = tmp / f"{name}-b{broker_id}-{port}"
    root.mkdir()
    keys = {
        "brokerName": name, "brokerId": str(broker_id), "namesrvAddr": ns,
        "brokerRole": "ASYNC_MASTER" if broker_id == 0 else "SLAVE",
        "listenPort": str(port), "haListenPort": str(ha_port or free_port()),
        "storePathRootDir": str(root / "store"), "enableGrpcServer": "false",
        "mappedFileSizeCommitLog": "1048576",
    } | side_ports() | (extra or {})
    conf = root / "broker.conf"
    conf.write_text("".join(f"{k}={v}\n" for k, v in keys.items()))
    return ServerProcess(["broker", "-c", str(conf)], root / "broker.log"), f"127.0.0.1:{port}"


async def create_topic(client: RemotingClient, addr: str, topic: str, queues: int = 4) -> None:
    """UPDATE_AND_CREATE_TOPIC on the broker at ``addr`` (read-write, ``queues`` each way)."""
    h = CreateTopicRequestHeader(topic=topic, defaultTopic="TBW102", readQueueNums=queues,
                                 writeQueueNums=queues, perm=6, topicFilterType="SINGLE_TAG")
    r = await client.invoke(addr, RemotingCommand.request(
        RequestCode.UPDATE_AND_CREATE_TOPIC, h.to_ext()), 5.0)
    assert r.code == 0, r.remark


def send_request(topic: str, body: bytes, queue_id: int = -1, *,
                 properties: str | None = None) -> RemotingCommand:
    """SEND_MESSAGE_V2; ``properties`` an encoded property string (default: TAGS TagA)."""
    h = SendMessageRequestHeader(
        producerGroup="PG", topic=topic, defaultTopic="TBW102", defaultTopicQueueNums=4,
        queueId=queue_id, sysFlag=0, bornTimestamp=int(time.time() * 1000), flag=0,
        properties=encode_properties({"TAGS": "TagA"}) if properties is None else properties,
    )
    return RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, h.to_v2_ext(), body)


def pull_request(topic: str, queue_id: int, offset: int, max_nums: int = 32, *,
                 group: str = "CG") -> RemotingCommand:
    h = PullMessageRequestHeader(
        consumerGroup=group, topic=topic, queueId=queue_id, queueOffset=offset, maxMsgNums=max_nums,
        sysFlag=int(PullSysFlag.SUBSCRIPTION), commitOffset=0, suspendTimeoutMillis=0, subVersion=0,
        subscription="*", expressionType="TAG",
    )
    return RemotingCommand.request(RequestCode.PULL_MESSAGE, h.to_ext())


def decode_records(body: bytes) -> list[MessageRecord]:
    out: list[MessageRecord] = []
    pos = 0
    while pos < len(body):
        m = decode_record(body, pos)
        assert m is not None
        out.append(m)
        pos += m.total_size
    return out


async def pull_queue(client: RemotingClient, addr: str, topic: str, queue_id: int
                     ) -> list[MessageRecord]:
    """Every message of one queue, from offset 0 (records, in queue order)."""
    out: list[MessageRecord] = []
    offset = 0
    while True:
        r = await client.invoke(addr, pull_request(topic, queue_id, offset), 10.0)
        if r.code != 0:
            return out
        out += decode_records(r.body)
        offset = int(r.ext_fields["nextBeginOffset"])


async def eventually(check: Callable[[], object], timeout: float = 30.0,  # noqa: ASYNC109
                     every: float = 0.01) -> None:
    """Return once ``check()`` is true; AssertionError after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(every)


def wait_until(check: Callable[[], object], timeout: float = 30.0, every: float = 0.05,
               what: str = "condition") -> None:
    """``eventually`` for code without an event loop (a CliRunner test driving sync clients)."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not met in {timeout} s")
        time.sleep(every)


def store_verify(store: Path, hash_slot_num: int | None = None, delay_levels: str | None = None
                 ) -> str:
    """``rocketlite store verify`` of a stopped broker's store, as a subprocess (the CLI users
    run; ``hash_slot_num``: maxHashSlotNum, ``delay_levels``: messageDelayLevel, if not the
    defaults): "" when it finds the store consistent, else its output's tail."""
    extra = [] if hash_slot_num is None else ["--hash-slot-num", str(hash_slot_num)]
    extra += [] if delay_levels is None else ["--delay-levels", delay_levels]
    done = subprocess.run([sys.executable, "-m", "rocketlite", "store", "verify", str(store), *extra],
                          capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    return "" if done.returncode == 0 else (done.stdout + done.stderr)[-2000:]
