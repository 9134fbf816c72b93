"""A real etcd (the Debian etcd-server package, ``.ci/run`` installs it) on loopback free ports,
its data in the test's tmp_path, stopped at the end of the test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from failoverhelp import run_etcd


@pytest.fixture
def etcd_url(tmp_path: Path) -> Iterator[str]:
    """``etcd://127.0.0.1:<port>`` of a one-member etcd started for this test."""
    with run_etcd(tmp_path) as url:
        yield url
