"""Shared plumbing of the scenarios run by the official 5.x Python client
(``rocketmq-python-client==5.1.2``, gRPC ``apache.rocketmq.v2.MessagingService``): arguments,
JSON-line events on stdout, a hard deadline, the message bodies, and one event shape for a
received message.

These scripts run in their own virtual environment (``.conformance-venv5``), not in the
project's: they import ``rocketmq`` (the 5.x client), never ``rocketlite``. The client logs to
``$HOME/logs/rocketmq_python/rocketmq_client.log`` (it creates the directory when imported), so
HOME must be writable; the tests give each test its own and read that log for ``[ERROR]`` lines.

The client's ERROR log records are also reported as ``client_error`` events.

Every event is one JSON object on one stdout line with an ``event`` field. Exit codes: 0 done,
1 the client failed, 2 the deadline passed, 64 usage.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_TIMEOUT = 2
EXIT_USAGE = 64

_out_lock = threading.Lock()


def emit(event: str, **fields: Any) -> None:
    line = json.dumps({"event": event, **fields}, ensure_ascii=False)
    with _out_lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def now_ms() -> int:
    return int(time.time() * 1000)


def parser(description: str) -> argparse.ArgumentParser:
    """Options every script takes; each defaults to CONFORMANCE_<NAME> from the environment.
    ``--endpoints`` is the gRPC front (``host:port``), not the NameServer: 5.x clients ask the
    front for routes (QueryRoute)."""
    env = os.environ.get
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--endpoints", default=env("CONFORMANCE_ENDPOINTS", "127.0.0.1:8081"))
    p.add_argument("--topic", default=env("CONFORMANCE_TOPIC"))
    p.add_argument("--group", default=env("CONFORMANCE_GROUP"))
    p.add_argument("--n", type=int, default=int(env("CONFORMANCE_N", "10")))
    p.add_argument("--run-id", default=env("CONFORMANCE_RUN_ID"))
    p.add_argument("--deadline-ms", type=int, default=int(env("CONFORMANCE_DEADLINE_MS", "60000")))
    p.add_argument("--request-timeout-s", type=int, default=5,
                   help="ClientConfiguration request_timeout, whole seconds (the client's "
                   "default is 3; it fails on a float)")
    return p


def parse(script: str, p: argparse.ArgumentParser,
          required: tuple[str, ...] = ("topic", "run_id", "group")) -> argparse.Namespace:
    try:
        args = p.parse_args()
    except SystemExit as e:  # argparse exits 2, which would read as a timeout
        emit("fatal", script=script, message="usage: bad arguments (see stderr)")
        os._exit(EXIT_USAGE if e.code else EXIT_OK)
    for name in required:
        if not getattr(args, name):
            flag = name.replace("_", "-")
            emit("fatal", script=script,
                 message=f"usage: --{flag} (or CONFORMANCE_{name.upper()}) is required")
            os._exit(EXIT_USAGE)
    if args.n < 0 or args.deadline_ms <= 0:
        emit("fatal", script=script, message="usage: --n must be >= 0 and --deadline-ms > 0")
        os._exit(EXIT_USAGE)
    return args


class Deadline:
    """A hard deadline: when it passes the process prints why and exits at once, whatever the
    client's gRPC threads are doing (``os._exit``: a hung ``shutdown()`` must not keep it alive)."""

    def __init__(self, script: str, ms: int, summary: Callable[[], dict[str, Any]] | None = None):
        self.script = script
        self.ms = ms
        self.phase = "starting"
        self._summary = summary
        self._timer = threading.Timer(ms / 1000, self._fire)
        self._timer.daemon = True
        self._timer.start()

    def _fire(self) -> None:
        extra = self._summary() if self._summary else {}
        emit("timeout", script=self.script, deadlineMs=self.ms, phase=self.phase,
             message=f"{self.script}: no result within {self.ms} ms while {self.phase}", **extra)
        os._exit(EXIT_TIMEOUT)


def check_home(script: str) -> str:
    """The client logs under $HOME/logs/rocketmq_python (made when ``rocketmq`` is imported):
    HOME must be writable."""
    home = os.environ.get("HOME", "")
    try:
        os.makedirs(os.path.join(home, "logs"), exist_ok=True)
        with tempfile.TemporaryFile(dir=home):
            pass
    except OSError as e:
        emit("fatal", script=script, message=f"HOME={home!r} is not writable ({e}); the client "
             "logs under $HOME/logs/rocketmq_python, so give it a writable HOME")
        os._exit(EXIT_FAILED)
    return home


_closing = threading.Event()  # set once the scenario shuts its client down


def shutdown(client: Any, seconds: float) -> str:
    """``client.shutdown()`` within ``seconds``; the client's errors logged from now on are
    reported with ``closing: true`` (5.1.2 logs the cancel of its own pending receive then)."""
    _closing.set()
    return call_within(client.shutdown, seconds)


def call_within(fn: Callable[[], object], seconds: float) -> str:
    """Run ``fn`` (a client's shutdown, say) on a daemon thread; stop waiting after ``seconds``."""
    result: list[str] = []

    def run() -> None:
        try:
            fn()
            result.append("closed")
        except Exception as e:  # noqa: BLE001 - reported, whatever the client raised
            result.append(f"error: {type(e).__name__}: {e}"[:300])

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(seconds)
    return result[0] if result else "timeout"


def run(script: str, main: Callable[[], int]) -> None:
    """Run a scenario's ``main`` and leave with its exit code through ``os._exit`` (the client's
    non-daemon threads must not keep a finished scenario alive)."""
    try:
        code = main()
    except Exception as e:  # noqa: BLE001 - anything unexpected is this scenario's failure
        emit("fatal", script=script, **error_fields(e))
        code = EXIT_FAILED
    sys.stdout.flush()
    os._exit(code)


def body_for(run_id: str, i: int) -> str:
    """The body of message ``i``: text with a non-ASCII part, so bytes must survive the trip."""
    return f"rocketlite grpc conformance {run_id} #{i} — 消息"


def key_for(run_id: str, i: int) -> str:
    return f"{run_id}-{i}"


def error_fields(e: BaseException) -> dict[str, Any]:
    fields: dict[str, Any] = {"name": type(e).__name__, "message": str(e)[-400:]}
    code = getattr(e, "code", None)
    if isinstance(code, int):
        fields["code"] = code
    return fields


class _ErrorEvents(logging.Handler):
    """The client's own ERROR log lines, also as ``client_error`` events (the tests count them)."""

    limit = 30  # a dead front makes one a second: report the first ones

    def __init__(self, level: int) -> None:
        super().__init__(level)
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        self.count += 1
        if self.count <= self.limit:
            emit("client_error", level=record.levelname, message=record.getMessage()[:400],
                 closing=_closing.is_set())


def config(args: argparse.Namespace) -> Any:
    """The ClientConfiguration: plaintext gRPC to ``--endpoints``, empty credentials (or, for an
    ACL broker, CONFORMANCE_ACCESS_KEY and CONFORMANCE_SECRET_KEY from the environment). Also
    hooks the client's logger (``rocketmq-python-client``, file only) so its errors become
    events."""
    from rocketmq import ClientConfiguration, Credentials

    logging.getLogger("rocketmq-python-client").addHandler(_ErrorEvents(logging.ERROR))
    credentials = Credentials(os.environ.get("CONFORMANCE_ACCESS_KEY", ""),
                              os.environ.get("CONFORMANCE_SECRET_KEY", ""))
    return ClientConfiguration(args.endpoints, credentials,
                               request_timeout=args.request_timeout_s)


def message_fields(m: Any) -> dict[str, Any]:
    """A received ``rocketmq.Message`` as event fields. ``key`` is the first key that looks like
    ours (``<run-id>-<i>``), the message's keys sorted otherwise."""
    keys = sorted(m.keys or ())
    body = m.body.decode("utf-8", errors="replace") if m.body is not None else None
    return {
        "key": keys[0] if keys else None,
        "keys": keys,
        "body": body,
        "msgId": m.message_id,
        "topic": m.topic,
        "tag": m.tag,
        "properties": dict(m.properties or {}),
        "messageGroup": m.message_group,
        "deliveryAttempt": m.delivery_attempt,
        "deliveryTimestamp": m.delivery_timestamp,
        "bornTimestamp": m.born_timestamp,
        "corrupted": bool(m.corrupted),
        "recvMs": now_ms(),
    }
