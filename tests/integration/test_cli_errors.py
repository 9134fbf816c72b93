"""What a newcomer meets first: an expected failure of ``rocketlite`` (port in use, store held by a
running broker, bad broker.conf, unreachable NameServer, missing store) is one ``error:`` line and
exit code 1, the traceback only with ``--debug``; ``--version``; ``start --help``'s defaults."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from brokerhelp import ServerProcess, free_port

pytestmark = pytest.mark.integration


def cli(*args: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    """``python -m rocketlite ARGS`` to its end (the way the ``rocketlite`` script runs)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path), COLUMNS="100")
    return subprocess.run([sys.executable, "-m", "rocketlite", *args], capture_output=True,
                          text=True, timeout=timeout, env=env)


def one_error(r: subprocess.CompletedProcess[str]) -> str:
    """The single ``error:`` line of a failed run (its other stderr lines are the server's log)."""
    assert r.returncode == 1, (r.returncode, r.stderr[-3000:])
    assert "Traceback" not in r.stderr, r.stderr[-3000:]
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1, r.stderr[-3000:]
    return errors[0]


def debug_shows_traceback(*args: str) -> None:
    r = cli(*args)
    assert r.returncode == 1, r.stderr[-3000:]
    assert "Traceback" in r.stderr, r.stderr[-3000:]


@pytest.fixture
def busy_port() -> Iterator[int]:
    """A port another socket listens on (all interfaces, as the servers bind)."""
    with socket.socket() as s:
        s.bind(("0.0.0.0", 0))
        s.listen()
        yield int(s.getsockname()[1])


def start_args(store: Path, namesrv: int, broker: int, grpc: int = 0) -> list[str]:
    return ["start", "--store", str(store), "--namesrv-port", str(namesrv),
            "--broker-port", str(broker), "--grpc-port", str(grpc)]


@pytest.mark.parametrize("which", ["namesrv", "broker", "grpc"])
def test_a_port_in_use_is_one_line(tmp_path: Path, busy_port: int, which: str) -> None:
    ports = {"namesrv": free_port(), "broker": free_port(), "grpc": free_port(), which: busy_port}
    args = start_args(tmp_path / "store", ports["namesrv"], ports["broker"], ports["grpc"])
    line = one_error(cli(*args))
    assert f"port {busy_port} is already in use" in line
    debug_shows_traceback(*args, "--debug")


def test_namesrv_port_in_use(busy_port: int) -> None:
    assert f"port {busy_port} is already in use" in one_error(cli("namesrv", "--port",
                                                                  str(busy_port)))
    debug_shows_traceback("--debug", "namesrv", "--port", str(busy_port))


def test_a_store_held_by_a_running_broker_is_one_line(tmp_path: Path) -> None:
    store = tmp_path / "store"
    with ServerProcess(start_args(store, free_port(), free_port()), tmp_path / "first.log") as first:
        first.wait_ready()
        line = one_error(cli(*start_args(store, free_port(), free_port())))
        assert f"the store {store} is in use by another process (pid {first.proc.pid})" in line
        debug_shows_traceback(*start_args(store, free_port(), free_port()), "--debug")
        inspect = cli("store", "inspect", str(store))
        assert inspect.returncode == 0, inspect.stderr
        assert f"held by a running process (pid {first.proc.pid})" in inspect.stdout
        assert "did not stop cleanly" not in inspect.stdout
        first.stop()
    after = cli("store", "inspect", str(store))
    assert "abort file: absent" in after.stdout, after.stdout


def test_a_bad_broker_conf_value_names_the_file_and_key(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("brokerName=b\nlistenPort=abc\n")
    line = one_error(cli("broker", "-c", str(conf), "--store", str(tmp_path / "s")))
    assert line == f"error: {conf}: listenPort='abc': expected an integer"
    debug_shows_traceback("broker", "-c", str(conf), "--store", str(tmp_path / "s"), "--debug")


@pytest.mark.parametrize("key", ["tls.server.certPath", "tls.client.trustCertPath"])
def test_a_tls_file_that_does_not_load_is_one_line(tmp_path: Path, key: str) -> None:
    bad = tmp_path / "bad.pem"
    bad.write_text("not a certificate")
    conf = tmp_path / "broker.conf"
    conf.write_text(f"tlsServerMode=enforcing\ntls.server.certPath={bad}\n"
                    f"tls.server.keyPath={bad}\n" + (
                        f"tls.enable=true\n{key}={bad}\n" if "client" in key else ""))
    line = one_error(cli(*start_args(tmp_path / "s", free_port(), free_port()), "-c", str(conf)))
    assert key in line and "bad.pem" in line


@pytest.mark.parametrize("command", [["dashboard", "--port", "0"], ["admin", "--ca"]])
def test_a_tls_ca_that_does_not_load_is_one_line(tmp_path: Path, command: list[str]) -> None:
    bad = tmp_path / "bad.pem"
    bad.write_text("not a certificate")
    if command[-1] == "--ca":
        args = [*command, str(bad), "topicList", "-n", "127.0.0.1:1"]
    else:
        args = [*command, "-n", "127.0.0.1:1", "--ca", str(bad)]
    assert "bad.pem" in one_error(cli(*args))


def test_an_unreachable_namesrv_is_one_line() -> None:
    port = free_port()
    line = one_error(cli("admin", "topicList", "-n", f"127.0.0.1:{port}"))
    assert f"cannot reach NameServer 127.0.0.1:{port}" in line
    debug_shows_traceback("--debug", "admin", "topicList", "-n", f"127.0.0.1:{port}")


def test_a_missing_store_is_one_line(tmp_path: Path) -> None:
    line = one_error(cli("store", "inspect", str(tmp_path / "nothing")))
    assert str(tmp_path / "nothing") in line
    debug_shows_traceback("--debug", "store", "inspect", str(tmp_path / "nothing"))


def test_version_is_the_package_version() -> None:
    from importlib.metadata import version

    r = cli("--version")
    assert r.returncode == 0
    assert r.stdout.strip() == f"rocketlite {version('rocketlite')}"


def test_start_help_states_the_defaults_and_the_listen_address() -> None:
    r = cli("start", "--help")
    assert r.returncode == 0
    text = " ".join(r.stdout.replace("│", " ").split())
    for default in ("./store", "9876", "10911", "8081", "0.0.0.0", "brokerIP1"):
        assert default in text, default


def test_store_inspect_piped_is_full_width(tmp_path: Path) -> None:
    """Piped (``store inspect | less``), no column is cut to fit 80 (or $COLUMNS) columns."""
    from rocketlite.store.message_store import MessageStore
    from storehelp import msg, small_config, wait_dispatched

    with MessageStore(small_config(tmp_path)) as s:
        s.put_messages_sync([msg(keys=f"key-{i}", body=b"a fairly long body %d" % i)
                             for i in range(3)])
        wait_dispatched(s)
    r = cli("store", "inspect", str(tmp_path))
    assert r.returncode == 0, r.stderr
    header = next(ln for ln in r.stdout.splitlines() if "storeTime" in ln)
    for col in ("offset", "queueOffset", "sysFlag", "storeTime", "msgId", "properties", "body"):
        assert col in header, header
    assert "…" not in r.stdout
    assert "KEYS=key-2" in r.stdout and "a fairly long body 2" in r.stdout
    assert "\x1b[" not in r.stdout  # no colour codes in a pipe
