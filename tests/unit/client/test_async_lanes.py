"""send_async's lanes (``send_types._Lane``): a round-robin send goes out on the connection its
lane keeps; a connection found closed sends through the slow path (as a broker without an open
connection always did) and the lane takes the new one; a broker's new address (a route learned
again) is followed on the next send."""

from __future__ import annotations

import asyncio

from rocketlite.client.instance import ClientInstance
from rocketlite.client.message import Message
from rocketlite.client.producer import Producer, SendResult
from rocketlite.protocol.bodies import BrokerData, QueueData, TopicRouteData
from rocketlite.protocol.command import RemotingCommand, decode_frame
from rocketlite.remoting.connection import Connection


class Transport:
    def __init__(self) -> None:
        self.out: list[bytes] = []
        self.closing = False

    def write(self, data: bytes) -> None:
        self.out.append(data)

    def is_closing(self) -> bool:
        return self.closing

    def get_extra_info(self, name: str, default: object = None) -> object:
        return default

    def set_write_buffer_limits(self, high: int, low: int) -> None:
        pass

    def close(self) -> None:
        self.closing = True


class Broker:
    """One fake connection: answers every SEND written to it with queue offset = its count."""

    def __init__(self, inst: ClientInstance, addr: str) -> None:
        self.transport = Transport()
        self.conn = Connection(None, limits=inst.remoting.limits)
        self.conn.connection_made(self.transport)  # type: ignore[arg-type]
        self.addr = addr
        self.sends = 0

    def answer(self) -> None:
        data = b"".join(self.transport.out)
        self.transport.out.clear()
        replies = []
        pos = 0
        while pos < len(data):
            length = int.from_bytes(data[pos:pos + 4], "big")
            req = decode_frame(data[pos + 4:pos + 4 + length])
            pos += 4 + length
            ext = {"msgId": "OFFSETID", "queueId": req.ext_fields["e"], "queueOffset": str(self.sends)}
            replies.append(RemotingCommand(0, opaque=req.opaque, flag=1, ext_fields=ext).encode())
            self.sends += 1
        self.conn.data_received(b"".join(replies))


def route(addr: str) -> TopicRouteData:
    return TopicRouteData(queueDatas=[QueueData(brokerName="b", readQueueNums=2, writeQueueNums=2, perm=6)],
                          brokerDatas=[BrokerData(brokerName="b", brokerAddrs={0: addr})])


async def settle(broker: Broker) -> None:
    for _ in range(3):
        await asyncio.sleep(0)
    broker.answer()
    for _ in range(3):
        await asyncio.sleep(0)


async def test_lanes_keep_the_connection_and_follow_a_close_and_a_new_address() -> None:
    p = Producer("G", namesrv_addr="127.0.0.1:2")
    inst = p.instance = ClientInstance(p.config)
    p._started = True
    first = Broker(inst, "127.0.0.1:1")
    inst.learn_brokers(route(first.addr))
    p.on_route("T", route(first.addr))
    inst.remoting._conns[first.addr] = first.conn
    futs = [p.send_async(Message("T", b"x")) for _ in range(4)]
    await settle(first)
    results = [f.result() for f in futs]
    assert all(isinstance(r, SendResult) for r in results) and first.sends == 4
    assert sorted(r.queue.queueId for r in results) == [0, 0, 1, 1]  # round robin over both queues
    lanes = p._lanes["T"].lanes
    assert all(lane.conn is first.conn for lane in lanes)

    # the connection closes; a new one to the same address is what inst.connection gives
    first.transport.closing = True
    second = Broker(inst, first.addr)
    connects: list[str] = []

    async def connection(addr: str) -> Connection:
        connects.append(addr)
        inst.remoting._conns[addr] = second.conn
        return second.conn

    inst.connection = connection  # type: ignore[method-assign]
    fut = p.send_async(Message("T", b"y"))
    await settle(second)
    assert fut.result().msg_id and set(connects) == {first.addr} and first.sends == 4 and second.sends == 1
    slow = len(connects)
    futs = [p.send_async(Message("T", b"z")) for _ in range(2)]
    await settle(second)
    assert all(f.result() for f in futs) and second.sends == 3 and len(connects) == slow  # no slow path

    # the broker moves: a route learned again replaces its address map
    third = Broker(inst, "127.0.0.1:3")
    inst.remoting._conns[third.addr] = third.conn
    inst.learn_brokers(route(third.addr))
    futs = [p.send_async(Message("T", b"w")) for _ in range(2)]
    await settle(third)
    assert all(f.result() for f in futs) and third.sends == 2 and second.sends == 3
    assert p._inflight == 0
