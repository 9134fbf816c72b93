"""A real etcd (the Debian etcd-server package, ``.ci/run`` installs it) on loopback free ports,
its data in the test's tmp_path, stopped at the end of the test."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from brokerhelp import free_port


def _healthy(port: int) -> bool:
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=0.5) as r:
            return b'"true"' in r.read()
    except OSError:
        return False


@pytest.fixture
def etcd_url(tmp_path: Path) -> Iterator[str]:
    """``etcd://127.0.0.1:<port>`` of a one-member etcd started for this test."""
    binary = shutil.which("etcd")
    assert binary, "etcd is not installed: apt-get install etcd-server (see .ci/run)"
    client, peer = free_port(), free_port()
    log = (tmp_path / "etcd.log").open("wb")
    proc = subprocess.Popen(
        [
            binary,
            "--name", "t",
            "--data-dir", str(tmp_path / "etcd"),
            "--listen-client-urls", f"http://127.0.0.1:{client}",
            "--advertise-client-urls", f"http://127.0.0.1:{client}",
            "--listen-peer-urls", f"http://127.0.0.1:{peer}",
            "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
            "--initial-cluster", f"t=http://127.0.0.1:{peer}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 20
        while not _healthy(client):
            assert proc.poll() is None, (tmp_path / "etcd.log").read_text()[-2000:]
            assert time.monotonic() < deadline, "etcd not healthy within 20 s"
            time.sleep(0.1)
        yield f"etcd://127.0.0.1:{client}"
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        log.close()
