"""Fixtures of the conformance tier: real third-party clients against a real broker process.

* ``clients`` (session): runs ``scripts/conformance_setup.sh`` once (ali-ons and
  rocketmq-client-nodejs 1.0.8 via ``npm ci``, ``rocketmq==0.4.4`` in ``.conformance-venv``,
  ``rocketmq-python-client==5.1.2`` in ``.conformance-venv5``). If it fails, every test fails
  with its output: nothing is skipped.
* ``cx`` (per test): a broker on free loopback ports with a fresh store, a run id, and helpers
  that start scenario scripts; at the end every script still running is killed and the broker
  is stopped (SIGTERM, then SIGKILL after a timeout). A passing test's store is deleted (its
  preallocated CommitLog segments take 1 GiB each by default); a failing test's is kept, with the
  logs, under pytest's tmp_path. A test marked ``@pytest.mark.broker_conf({...})`` gets a broker
  started with those broker.conf keys (e.g. a short ``messageDelayLevel``); one marked
  ``@pytest.mark.orderly_groups("G", ...)`` gets the consumer groups ``cx.name("G")`` made
  orderly (FIFO) in the store before the broker starts, and ``@pytest.mark.group_conf({"G":
  {"retryMaxTimes": 1}})`` any SubscriptionGroupConfig fields; ``@pytest.mark.acl(YAML,
  admin=Credentials(...))`` a broker with ``aclEnable`` over that plain_acl.yml, whose topics
  ``cx.create_topic`` creates signed as ``admin``.

The tests are marked ``conformance`` and are part of the default run (``scripts/test``, so CI);
``pytest -m conformance`` runs them alone.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from harness import CPP_DIR, G5PY_DIR, NODE5_DIR, ONS_DIR, ROOT, Clients, Conformance

SETUP_SCRIPT = ROOT / "scripts" / "conformance_setup.sh"
SETUP_TIMEOUT_S = 240  # within pytest-timeout's 300 s for the first test, which runs it


@pytest.fixture(scope="session")
def clients() -> Clients:
    venv = Path(os.environ.get("CONFORMANCE_VENV", ROOT / ".conformance-venv"))
    venv5 = Path(os.environ.get("CONFORMANCE_VENV5", ROOT / ".conformance-venv5"))
    t0 = time.monotonic()
    try:
        r = subprocess.run(["bash", str(SETUP_SCRIPT)], cwd=ROOT, stdin=subprocess.DEVNULL,
                           capture_output=True, text=True, timeout=SETUP_TIMEOUT_S,
                           env={**os.environ, "CONFORMANCE_VENV": str(venv),
                                "CONFORMANCE_VENV5": str(venv5)})
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"{SETUP_SCRIPT} did not finish within {SETUP_TIMEOUT_S} s\n"
                    f"{e.stdout or ''}{e.stderr or ''}", pytrace=False)
    output = r.stdout + r.stderr
    if r.returncode != 0:
        pytest.fail(f"{SETUP_SCRIPT} failed (exit {r.returncode}); the conformance clients "
                    f"are not installed:\n{output}", pytrace=False)
    print(f"conformance setup: {time.monotonic() - t0:.1f} s\n{r.stdout}")
    return Clients(node="node", ons_dir=ONS_DIR, cpp_python=venv / "bin" / "python",
                   cpp_dir=CPP_DIR, setup_output=output, g5_python=venv5 / "bin" / "python",
                   g5_dir=G5PY_DIR, node5_dir=NODE5_DIR)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "broker_conf(props): broker.conf keys for the cx broker")
    config.addinivalue_line("markers", "orderly_groups(*kinds): orderly consumer groups for cx")
    config.addinivalue_line("markers", "group_conf({kind: fields}): consumer group configs for cx")
    config.addinivalue_line("markers", "acl(plain_acl_yml, admin=Credentials): an ACL broker for cx")


@pytest.fixture
def cx(clients: Clients, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Conformance]:
    marker = request.node.get_closest_marker("broker_conf")
    conf = dict(marker.args[0]) if marker else {}
    acl = request.node.get_closest_marker("acl")
    if acl is not None:
        acl_file = tmp_path / "plain_acl.yml"
        acl_file.write_text(acl.args[0])
        conf |= {"aclEnable": "true", "aclFile": str(acl_file)}
    world = Conformance(clients, tmp_path, conf or None)
    if acl is not None:
        world.admin_credentials = acl.kwargs.get("admin")
    groups: dict[str, dict[str, object]] = {}
    for m in request.node.iter_markers("group_conf"):
        groups |= m.args[0]
    for m in request.node.iter_markers("orderly_groups"):
        groups |= {kind: {**groups.get(kind, {}), "consumeMessageOrderly": True} for kind in m.args}
    if groups:
        world.configure_groups(groups)
    world.start_broker()
    try:
        yield world
    finally:
        report = getattr(request.node, "rep_call", None)
        passed = report is not None and report.passed
        if report is not None and report.failed:
            print(world.describe())
        world.close()
        if passed:  # a store preallocates its CommitLog segments (1 GiB each by default)
            shutil.rmtree(world.broker.store_dir, ignore_errors=True)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    """Keep each phase's report on the item, so the fixture can print diagnostics on failure."""
    rep = yield
    setattr(item, f"rep_{rep.when}", rep)
    return rep
