"""Shared plumbing of the C++ 4.x client scenarios (the ``rocketmq==0.4.4`` wheel, which bundles
librocketmq): arguments, JSON-line events on stdout, a hard deadline, a writable HOME.

These scripts run in their own virtual environment (``.conformance-venv``), not in the project's:
they import ``rocketmq`` (the wheel's ctypes wrapper), never ``rocketlite``.

Every event is one JSON object on one stdout line with an ``event`` field. Exit codes: 0 done,
1 the client failed, 2 the deadline passed, 64 usage.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
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


def parser(description: str) -> argparse.ArgumentParser:
    """Options every script takes; each defaults to CONFORMANCE_<NAME> from the environment."""
    env = os.environ.get
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--namesrv", default=env("CONFORMANCE_NAMESRV", "127.0.0.1:9876"))
    p.add_argument("--topic", default=env("CONFORMANCE_TOPIC"))
    p.add_argument("--group", default=env("CONFORMANCE_GROUP"))
    p.add_argument("--n", type=int, default=int(env("CONFORMANCE_N", "10")))
    p.add_argument("--run-id", default=env("CONFORMANCE_RUN_ID"))
    p.add_argument("--deadline-ms", type=int, default=int(env("CONFORMANCE_DEADLINE_MS", "60000")))
    return p


def parse(script: str, p: argparse.ArgumentParser) -> argparse.Namespace:
    try:
        args = p.parse_args()
    except SystemExit as e:  # argparse exits 2, which would read as a timeout
        emit("fatal", script=script, message="usage: bad arguments (see stderr)")
        os._exit(EXIT_USAGE if e.code else EXIT_OK)
    for name in ("topic", "run_id", "group"):
        if not getattr(args, name):
            flag = name.replace("_", "-")
            emit("fatal", script=script,
                 message=f"usage: --{flag} (or CONFORMANCE_{name.upper()}) is required")
            os._exit(EXIT_USAGE)
    return args


class Deadline:
    """A hard deadline: when it passes the process prints why and exits at once, whatever the C++
    client's threads are doing (``os._exit``: a hung ``shutdown()`` must not keep it alive)."""

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


def sign_with_env_credentials(client: Any) -> None:
    """ACL: with CONFORMANCE_ACCESS_KEY and CONFORMANCE_SECRET_KEY set, the client signs every
    request (``set_session_credentials``, channel ALIYUN as the C++ client's default)."""
    access_key = os.environ.get("CONFORMANCE_ACCESS_KEY")
    if access_key:
        client.set_session_credentials(access_key, os.environ.get("CONFORMANCE_SECRET_KEY", ""),
                                       "ALIYUN")


def check_home(script: str) -> str:
    """The C++ client writes its logs under $HOME/logs/rocketmq-cpp: HOME must be writable."""
    home = os.environ.get("HOME", "")
    try:
        os.makedirs(os.path.join(home, "logs"), exist_ok=True)
        with tempfile.TemporaryFile(dir=home):
            pass
    except OSError as e:
        emit("fatal", script=script, message=f"HOME={home!r} is not writable ({e}); the C++ client "
             "logs under $HOME/logs/rocketmq-cpp, so give it a writable HOME")
        os._exit(EXIT_FAILED)
    return home


def call_within(fn: Callable[[], object], seconds: float) -> str:
    """Run ``fn`` (a C++ shutdown, say) on a daemon thread; give up waiting after ``seconds``."""
    result: list[str] = []

    def run() -> None:
        try:
            fn()
            result.append("closed")
        except Exception as e:  # noqa: BLE001 - reported, whatever the wrapper raised
            result.append(f"error: {e}")

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(seconds)
    return result[0] if result else "timeout"


def run(script: str, main: Callable[[], int]) -> None:
    """Run a scenario's ``main`` and leave with its exit code through ``os._exit``: a normal exit
    would run the wrapper's ``__del__`` (a second shutdown) while C++ threads may still linger."""
    try:
        code = main()
    except Exception as e:  # noqa: BLE001 - anything unexpected is this scenario's failure
        emit("fatal", script=script, **error_fields(e))
        code = EXIT_FAILED
    sys.stdout.flush()
    os._exit(code)


def body_for(run_id: str, i: int) -> str:
    """The body of message ``i``: text with a non-ASCII part, so bytes must survive the trip.
    (The 0.4.4 wrapper passes bodies as NUL-terminated C strings: no NUL bytes in a body.)"""
    return f"rocketlite conformance {run_id} #{i} — 消息"


def text(value: bytes | str | None) -> str | None:
    if value is None:
        return None
    return value.decode("utf-8", errors="replace") if isinstance(value, bytes) else value


def error_fields(e: BaseException) -> dict[str, str]:
    return {"name": type(e).__name__, "message": str(e)[-400:]}
