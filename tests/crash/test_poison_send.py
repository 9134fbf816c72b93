"""Issue 17, part 1: one accepted message must never make recovery throw away the messages
acknowledged after it.

The probe: a SEND_MESSAGE whose properties held a NUL byte was answered SEND_OK; after SIGKILL
and a restart, recovery took the NUL for a torn write, cut the log there and dropped every record
behind it (50 of 101 acknowledged messages survived) while ``store verify`` called the store
clean. Here a poison message sits between two runs of good ones, with the NUL in each place a
client controls: a user property, a key, a tag, the topic and the body. The store refuses what
it cannot round-trip (a NUL in the topic or the properties: MESSAGE_ILLEGAL naming the byte) and
keeps a body byte for byte; after SIGKILL and a restart every acknowledged message is pulled back
exactly as sent and ``rocketlite store verify`` finds nothing wrong."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from brokerhelp import (
    ServerProcess,
    broker_addr,
    pull_queue,
    send_request,
    start_args,
    store_verify,
)
from rocketlite.formats.message_record import MessageRecord
from rocketlite.formats.properties import decode_properties, encode_properties
from rocketlite.protocol.codes import ResponseCode
from rocketlite.protocol.command import RemotingCommand
from rocketlite.remoting.client import RemotingClient

pytestmark = pytest.mark.crash

TOPIC = "PoisonTopic"
GOOD = 50  # good messages before the poison, and as many after it

# Where the NUL goes: (topic, properties, body) of the poison message, and what the reply's
# remark must say when it is refused (None: kept; a body is covered by its CRC and returned
# byte for byte).
POISONS: dict[str, tuple[str, str, bytes, str | None]] = {
    "property": (TOPIC, "UNIQ_KEY\x01P\x02nul\x01a\x00b\x02", b"poison",
                 "NUL byte at byte 16, in the value of property 'nul'"),
    "key": (TOPIC, encode_properties({"KEYS": "k\x00ey", "TAGS": "T"}), b"poison",
            "NUL byte at byte 6, in the value of property 'KEYS'"),
    "tag": (TOPIC, encode_properties({"TAGS": "t\x00ag"}), b"poison",
            "NUL byte at byte 6, in the value of property 'TAGS'"),
    "topic": ("Poison\x00Topic", encode_properties({"TAGS": "T"}), b"poison",
              "contains characters other than letters, digits"),
    "body": (TOPIC, encode_properties({"TAGS": "T", "KEYS": "bodykey"}), b"a\x00b\x00\x00", None),
}


async def send_all(addr: str, poison: tuple[str, str, bytes, str | None]
                   ) -> tuple[list[tuple[int, str, bytes]], RemotingCommand]:
    """GOOD messages, the poison, GOOD more; (queue offset, properties, body) of each
    acknowledged message and the poison's reply."""
    acked: list[tuple[int, str, bytes]] = []
    topic, props, body, _ = poison
    client = RemotingClient()
    try:
        async def one(t: str, p: str, b: bytes) -> RemotingCommand:
            r = await client.invoke(addr, send_request(t, b, 0, properties=p), 10.0)
            if r.code == ResponseCode.SUCCESS:
                acked.append((int(r.ext_fields["queueOffset"]), p, b))
            return r

        for i in range(GOOD):
            good = await one(TOPIC, encode_properties({"KEYS": f"before{i}"}), b"before-%03d" % i)
            assert good.code == ResponseCode.SUCCESS, good.remark
        reply = await one(topic, props, body)
        for i in range(GOOD):
            good = await one(TOPIC, encode_properties({"KEYS": f"after{i}"}), b"after-%03d" % i)
            assert good.code == ResponseCode.SUCCESS, good.remark
    finally:
        await client.close()
    return acked, reply


async def pull_all(addr: str) -> list[MessageRecord]:
    client = RemotingClient()
    try:
        return await pull_queue(client, addr, TOPIC, 0)
    finally:
        await client.close()


@pytest.mark.parametrize("where", sorted(POISONS))
def test_a_poison_message_never_costs_acknowledged_ones(tmp_path: Path, where: str) -> None:
    poison = POISONS[where]
    store = tmp_path / "store"
    conf = tmp_path / "broker.conf"
    conf.write_text("mappedFileSizeCommitLog=1048576\nmappedFileSizeConsumeQueue=6000\n"
                    "maxHashSlotNum=1000\nmaxIndexNum=10000\ndefaultTopicQueueNums=1\n",
                    encoding="utf-8")
    args = start_args(store, conf)
    with ServerProcess(args, tmp_path / "first.log") as first:
        first.wait_ready()
        acked, reply = asyncio.run(send_all(broker_addr(args), poison))
        first.kill()
    assert (store / "abort").exists(), "SIGKILL should leave the abort marker"
    refusal = poison[3]
    if refusal is None:
        assert reply.code == ResponseCode.SUCCESS, reply.remark
    else:
        assert reply.code == ResponseCode.MESSAGE_ILLEGAL, (reply.code, reply.remark)
        assert refusal in (reply.remark or ""), reply.remark
    assert len(acked) == 2 * GOOD + (refusal is None)
    before = store_verify(store)  # the killed store as it lies, before recovery
    assert not before, before

    args = start_args(store, conf)
    with ServerProcess(args, tmp_path / "second.log") as second:
        second.wait_ready()
        pulled = asyncio.run(pull_all(broker_addr(args)))
        assert second.stop() == 0, second.log()
    assert "cutting the log" not in second.log()
    assert [m.queue_offset for m in pulled] == list(range(len(acked)))
    for queue_offset, props, body in acked:
        m = pulled[queue_offset]
        assert m.body == body
        assert decode_properties(m.properties_text).items() >= decode_properties(props).items()
    verify = store_verify(store)
    assert not verify, verify
