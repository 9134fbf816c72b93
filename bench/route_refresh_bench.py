"""How fast a producer with the default route poll (``pollNameServerInterval`` 30 s) sends to a
new master after its old one is SIGKILLed. Not a test: prints figures.

    python bench/route_refresh_bench.py                       # the broker replaced, 5 rounds
    python bench/route_refresh_bench.py --baseline            # without the refresh on failure
    python bench/route_refresh_bench.py --controller --rounds 3   # controller mode (etcd)
    python bench/route_refresh_bench.py --namesrv-only        # kill -> gone from the NameServer

Scenarios (processes on loopback):

* ``replace`` (default): a NameServer, a master of one group (its own process); each round the
  master is killed and another broker process registers the same brokerName as master
  (brokerId 0) at a new port, with the topic;
* ``--controller``: a real etcd, a NameServer with the election watcher and two controller-mode
  brokers of one group (``tests/failoverhelp.Node``); each round the master is killed, the other
  is elected, the killed one restarts as its slave.

A producer with the default config sends one message after another (0.05 s apart after a
failure) throughout. Figures per round: SIGKILL to the NameServer naming the new master
("route"), and SIGKILL to the first send the new master acknowledges ("ack"); the lag between
them is what the client adds. ``--baseline`` turns off ``ClientInstance.route_failed`` (the
client before this change: it learns the new master at its next 30 s poll).

``--namesrv-only``: a master and its slave (4.x manual roles); the master is SIGKILLed and the
time until the NameServer's cluster info no longer lists it is measured (before this change:
the 120 s broker timeout plus up to one 5 s scan).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests"))

from brokerhelp import ServerProcess, broker_process, create_topic, free_port, wait_port  # noqa: E402
from failoverhelp import Node, master_addr, run_etcd, send_ok, wait_in_sync, wait_master  # noqa: E402
from rocketlite.client.instance import ClientInstance  # noqa: E402
from rocketlite.client.message import Message  # noqa: E402
from rocketlite.client.producer import Producer  # noqa: E402
from rocketlite.controller.etcd import EtcdController  # noqa: E402
from rocketlite.protocol.bodies import ClusterInfo  # noqa: E402
from rocketlite.protocol.codes import RequestCode  # noqa: E402
from rocketlite.protocol.command import RemotingCommand  # noqa: E402
from rocketlite.remoting.client import RemotingClient  # noqa: E402

GROUP = "broker-rb"
TOPIC = "RouteBench"
GIVE_UP_S = 60.0


async def first_ack(producer: Producer, client: RemotingClient, ns: str, new: str,
                    killed: float) -> tuple[float, float]:
    """Seconds from ``killed`` to the route naming ``new`` as master, and to the first ack."""
    route_at = 0.0

    async def watch() -> None:
        nonlocal route_at
        await poll(lambda: master_addr(client, ns, GROUP), new)
        route_at = time.monotonic() - killed

    watcher = asyncio.create_task(watch())
    try:
        while True:
            try:
                await producer.send(Message(TOPIC, b"x"), timeout=2.0)
                break
            except Exception:  # the dead master, or no master yet
                if time.monotonic() - killed > GIVE_UP_S:
                    raise
                await asyncio.sleep(0.05)
        ack_at = time.monotonic() - killed
        await asyncio.wait_for(watcher, GIVE_UP_S)
        return route_at, ack_at
    finally:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher


@contextlib.asynccontextmanager
async def namesrv(tmp: Path, etcd: str | None) -> AsyncIterator[str]:
    port = free_port()
    proc = ServerProcess(["namesrv", "--port", str(port), *(["--controller", etcd] if etcd else [])],
                         tmp / "namesrv.log")
    try:
        await asyncio.to_thread(proc.wait_ready, 30)
        wait_port(port)
        yield f"127.0.0.1:{port}"
    finally:
        proc.kill()


async def replace_rounds(tmp: Path, rounds: int) -> list[tuple[float, float]]:
    out: list[tuple[float, float]] = []
    client = RemotingClient()
    procs: list[ServerProcess] = []

    async def start(ns: str) -> str:
        proc, addr = broker_process(tmp, ns, GROUP)
        procs.append(proc)
        await asyncio.to_thread(proc.wait_ready, 60)
        await create_topic(client, addr, TOPIC)
        return addr

    async with namesrv(tmp, None) as ns:
        try:
            addr = await start(ns)
            await wait_master(client, ns, GROUP, addr, 15)
            async with Producer("PG-rb", namesrv_addr=ns) as producer:
                await producer.send(Message(TOPIC, b"warm-up"))
                for rnd in range(rounds):
                    procs[-1].kill()
                    killed = time.monotonic()
                    new_addr = await start(ns)
                    r = await first_ack(producer, client, ns, new_addr, killed)
                    print(f"round {rnd}: route {r[0]:.2f} s, ack {r[1]:.2f} s", flush=True)
                    out.append(r)
        finally:
            await client.close()
            for p in procs:
                p.kill()
    return out


async def controller_rounds(tmp: Path, etcd: str, rounds: int) -> list[tuple[float, float]]:
    out: list[tuple[float, float]] = []
    client = RemotingClient()
    controller = EtcdController(etcd)
    async with namesrv(tmp, etcd) as ns:
        nodes = [Node(tmp, GROUP, 1, ns, etcd), Node(tmp, GROUP, 2, ns, etcd)]
        try:
            nodes[0].start()
            await wait_master(client, ns, GROUP, nodes[0].address, 15)
            await create_topic(client, nodes[0].address, TOPIC)  # before the slave copies configs
            nodes[1].start()
            master, slave = nodes
            async with Producer("PG-rb", namesrv_addr=ns, send_timeout=5.0) as producer:
                await send_ok(producer, TOPIC, b"warm-up", 30)
                for rnd in range(rounds):
                    # only a replica in the SyncStateSet may be elected
                    await wait_in_sync(controller, GROUP, {1, 2}, 30)
                    master.kill()
                    killed = time.monotonic()
                    r = await first_ack(producer, client, ns, slave.address, killed)
                    print(f"round {rnd}: route {r[0]:.2f} s, ack {r[1]:.2f} s", flush=True)
                    out.append(r)
                    await asyncio.to_thread(master.start)  # back as the new master's slave
                    await send_ok(producer, TOPIC, b"rejoined", 30)
                    master, slave = slave, master
        finally:
            await client.close()
            await controller.close()
            for n in nodes:
                with contextlib.suppress(Exception):
                    n.close()
    return out


async def namesrv_rounds(tmp: Path, rounds: int) -> list[float]:
    out: list[float] = []
    client = RemotingClient()

    async def group() -> dict[int, str]:
        r = await client.invoke(ns, RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO), 3)
        bd = ClusterInfo.from_json(r.body).brokerAddrTable.get(GROUP)
        return dict(bd.brokerAddrs) if bd is not None else {}

    async with namesrv(tmp, None) as ns:
        try:
            for rnd in range(rounds):
                ha = free_port()
                master, m_addr = broker_process(tmp, ns, GROUP, 0, ha_port=ha)
                slave, s_addr = broker_process(tmp, ns, GROUP, 1)
                try:
                    await asyncio.to_thread(master.wait_ready, 60)
                    await asyncio.to_thread(slave.wait_ready, 60)
                    await poll(group, {0: m_addr, 1: s_addr})
                    master.kill()
                    killed = time.monotonic()
                    await poll(group, {1: s_addr})
                    out.append(time.monotonic() - killed)
                    print(f"round {rnd}: master gone from the cluster info after "
                          f"{out[-1]:.2f} s", flush=True)
                finally:
                    master.kill()
                    slave.stop()
                    await poll(group, {})
        finally:
            await client.close()
    return out


async def poll(get: Callable[[], Awaitable[object]], expected: object) -> None:
    """Return once ``get()`` gives ``expected`` (asked every 20 ms, for at most 200 s)."""
    deadline = time.monotonic() + 200
    while await get() != expected:
        assert time.monotonic() < deadline, f"not {expected} within 200 s"
        await asyncio.sleep(0.02)


def report(name: str, values: list[float]) -> None:
    print(f"{name}: median {statistics.median(values):.2f} s, min {min(values):.2f}, "
          f"max {max(values):.2f} (n={len(values)})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--baseline", action="store_true",
                    help="no route refresh on a failed send (the client before this change)")
    ap.add_argument("--controller", action="store_true", help="controller mode (needs etcd)")
    ap.add_argument("--namesrv-only", action="store_true",
                    help="time for a SIGKILLed master to leave the NameServer's cluster info")
    args = ap.parse_args()
    if args.baseline:
        ClientInstance.route_failed = lambda self, topic: None  # type: ignore[method-assign]
    with tempfile.TemporaryDirectory(prefix="route-bench-") as d:
        tmp = Path(d)
        if args.namesrv_only:
            report("SIGKILL -> gone from the cluster info",
                   asyncio.run(namesrv_rounds(tmp, args.rounds)))
            return
        if args.controller:
            with run_etcd(tmp) as etcd:
                res = asyncio.run(controller_rounds(tmp, etcd, args.rounds))
        else:
            res = asyncio.run(replace_rounds(tmp, args.rounds))
    label = "baseline (no refresh on failure)" if args.baseline else "refresh on failure"
    print(f"{'controller' if args.controller else 'replace'}, {label}, default 30 s poll:")
    report("  SIGKILL -> new master in the route", [r[0] for r in res])
    report("  SIGKILL -> first ack", [r[1] for r in res])
    report("  route -> first ack (the client's lag)", [r[1] - r[0] for r in res])


if __name__ == "__main__":
    main()
