"""Controller mode counts SYNC_MASTER acks from the SyncStateSet's connections only
(``HAServer.count_only``, set by ``broker/ha/role.py``): an append held by a slave outside the
set only is not acknowledged, since that slave may not be elected. Two stand-in slaves on
loopback report offsets to a real HA server over a real store."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from hahelp import FakeSlave
from rocketlite.broker.ha.server import HAServer
from rocketlite.store.message import MessageToStore
from rocketlite.store.message_store import MessageStore
from storehelp import small_config


async def acked(server: HAServer, conn: FakeSlave, offset: int) -> None:
    """Wait (bounded) until the server has ``conn``'s report of ``offset``."""
    deadline = time.monotonic() + 10
    while not any(s.address == conn.address and s.acked_offset == offset
                  for s in server.status().slaves):
        assert time.monotonic() < deadline, server.status()
        await asyncio.sleep(0.01)


async def test_only_the_counted_connections_acks_count(tmp_path: Path) -> None:
    conf = small_config(tmp_path, brokerRole="SYNC_MASTER", haListenPort="0")
    store = MessageStore(conf).start()
    server = HAServer(store, conf, host="127.0.0.1")
    conns: list[FakeSlave] = []
    try:
        store.put_messages([MessageToStore(topic="T", body=b"m%d" % i, queue_id=0)
                            for i in range(4)])
        top = store.commitlog.max_offset
        server.counted = frozenset()  # a new controller-mode master: no member yet
        await server.start()
        inside, outside = await FakeSlave.connect(f"127.0.0.1:{server.port}"), \
            await FakeSlave.connect(f"127.0.0.1:{server.port}")
        conns += [inside, outside]
        await outside.report(top)
        await inside.report(top // 2)
        await acked(server, outside, top)
        await acked(server, inside, top // 2)
        assert server.max_acked == -1  # neither is a member

        server.count_only(frozenset({inside.address}))
        assert server.max_acked == top // 2  # the member's last ack, taken at once
        late = server.wait_for_ack(top)
        await outside.report(top)  # the non-member holds it: not enough
        await acked(server, outside, top)
        assert not late.done() and server.max_acked == top // 2
        await inside.report(top)
        await asyncio.wrap_future(late)  # the member's ack is
        assert server.max_acked == top

        server.count_only(None)  # 4.x: every connection counts
        assert server.counted is None
    finally:
        for c in conns:
            await c.close()
        await server.close()
        store.shutdown()
