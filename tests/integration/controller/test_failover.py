"""Automatic failover (issue 20): a real etcd, a NameServer running the election watcher
(``rocketlite namesrv --controller``) and two brokers of one group as processes started with
``rocketlite broker -c conf --controller etcd://...``, all on loopback.

SYNC_MASTER sends go through rocketlite's Producer; the master is killed with SIGKILL; within
10 s the other broker is master in the NameServer's route and takes sends; every message
acknowledged before the kill is read back from it; the old master, restarted, comes back as its
slave, cuts the bytes only it held (a send stored while the slave was paused, never
acknowledged) at the common point of its epoch file and the group's epoch history, and
replicates (SYNC_MASTER sends are SEND_OK again: the new slave acked them). At the end the two
CommitLogs agree byte for byte.

``ROCKETLITE_FAILOVER_ROUNDS`` (default 1) repeats kill and restart, the roles swapping each
round; every round prints its failover time (SIGKILL to the first acknowledged send on the new
master).
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path

import pytest

from failoverhelp import (
    FAILOVER_LIMIT_S,
    commitlog_max,
    controller_group,
    master_addr,
    read_back,
    send_ok,
    wait_in_sync,
    wait_master,
)
from rocketlite.client.instance import ClientConfig
from rocketlite.client.message import Message
from rocketlite.client.producer import Producer
from rocketlite.client.send_types import SendStatus

ROUNDS = int(os.environ.get("ROCKETLITE_FAILOVER_ROUNDS", "1"))
pytestmark = [pytest.mark.integration, pytest.mark.timeout(120 + 60 * ROUNDS)]

GROUP = "broker-f"
TOPIC = "FailoverTopic"
# Sent to the master only, while the slave is paused: more than the socket buffers between them
# hold, and few enough that the pause stays well within the slave's lease (controllerLeaseTtl,
# 3 s): a slave paused longer is not live, leaves the SyncStateSet and may not be elected.
UNACKED_MIB = 16
MIB = 1 << 20
STORED_S = 10.0  # the master stores what it was sent while the slave is paused


async def test_the_slave_takes_over_when_the_master_dies(tmp_path: Path, etcd_url: str) -> None:
    async with controller_group(tmp_path, etcd_url, GROUP, [None, None]) as g:
        ns, client, etcd = g.ns, g.client, g.etcd
        master, slave = g.nodes
        producer = Producer("FailoverPG", config=ClientConfig(namesrv_addr=ns,
                                                              poll_name_server_interval=0.5),
                            send_timeout=5.0)
        try:
            await producer.start()
            acked: set[bytes] = set()
            await send_ok(producer, TOPIC, b"warm-up", 30)
            acked.add(b"warm-up")
            for rnd in range(ROUNDS):
                for i in range(50):
                    body = b"r%d-m%d" % (rnd, i)
                    r = await producer.send(Message(TOPIC, body))
                    assert r.status is SendStatus.SEND_OK, r.status
                    acked.add(body)
                await wait_in_sync(etcd, GROUP, {1, 2}, 10)

                # Bytes only the master holds: with the slave paused, one-way sends (never
                # acknowledged) are stored on the master, more than the paused slave's socket
                # buffers take, so the tail of them never reaches the slave.
                assert slave.proc is not None
                top = await commitlog_max(client, master.address)
                os.kill(slave.proc.proc.pid, signal.SIGSTOP)
                paused = time.monotonic()
                try:
                    for _ in range(UNACKED_MIB):
                        await producer.send_oneway(Message(TOPIC, os.urandom(MIB)))
                    deadline = time.monotonic() + STORED_S  # the master stores them
                    while await commitlog_max(client, master.address) < top + UNACKED_MIB * MIB:
                        assert time.monotonic() < deadline, "the master did not store them"
                        await asyncio.sleep(0.02)
                    killed = time.monotonic()
                    master.kill()
                finally:
                    os.kill(slave.proc.proc.pid, signal.SIGCONT)
                print(f"round {rnd}: slave paused {time.monotonic() - paused:.2f} s")
                await wait_master(client, ns, GROUP, slave.address, FAILOVER_LIMIT_S)
                while True:  # the first send the new master acknowledges
                    try:
                        r = await producer.send(Message(TOPIC, b"r%d-after" % rnd), timeout=2.0)
                    except Exception:  # noqa: BLE001 - the route still names the dead master
                        assert time.monotonic() - killed < FAILOVER_LIMIT_S, "no send acknowledged"
                        await asyncio.sleep(0.1)
                        continue
                    break
                failover = time.monotonic() - killed
                print(f"round {rnd}: failover {failover:.2f} s (SIGKILL to the first acknowledged "
                      f"send on broker {slave.broker_id}, status {r.status.name})")
                assert failover < FAILOVER_LIMIT_S
                acked.add(b"r%d-after" % rnd)
                await read_back(client, slave.address, TOPIC, acked)

                master.start()  # the old master returns as the new master's slave
                await send_ok(producer, TOPIC, b"r%d-rejoined" % rnd, 30)
                acked.add(b"r%d-rejoined" % rnd)
                assert await master_addr(client, ns, GROUP) == slave.address
                assert master.proc is not None
                assert "truncates its CommitLog" in master.proc.log(), "the unacked bytes stayed"
                master, slave = slave, master

            # the slave's log is the master's, byte for byte (its extra bytes were cut, not kept)
            await send_ok(producer, TOPIC, b"last", 30)
            await producer.shutdown()
            slave.stop()
            master.stop()
            logs = [n.commitlog() for n in (master, slave)]
            assert logs[1] and logs[0][:len(logs[1])] == logs[1]
        finally:
            await producer.shutdown()
