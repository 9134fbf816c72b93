"""proxy.channels.TelemetryChannel: a 5.x client as a broker channel; its outbox is bounded and a
transaction check becomes RecoverOrphanedTransactionCommand."""

from __future__ import annotations

import asyncio

from rocketlite.formats.message_record import decode_record, encode_record
from rocketlite.formats.properties import encode_properties
from rocketlite.protocol.codes import RequestCode
from rocketlite.protocol.command import RemotingCommand
from rocketlite.proxy.channels import TelemetryChannel
from rocketlite.proxy.pb import definition_pb2 as pb
from rocketlite.proxy.pb import service_pb2 as spb


async def test_the_outbox_is_bounded_and_close_ends_it() -> None:
    ch = TelemetryChannel("c1", "127.0.0.1:1", limit=2)
    assert not ch.is_open and not ch.write(spb.TelemetryCommand())
    out = ch.attach()
    assert ch.is_open
    assert ch.write(spb.TelemetryCommand()) and ch.write(spb.TelemetryCommand())
    assert not ch.write(spb.TelemetryCommand())  # full: dropped, counted
    assert ch.dropped == 2
    ch.close()
    assert not ch.is_open
    items = [out.get_nowait() for _ in range(out.qsize())]
    assert items[-1] is None


async def test_a_second_stream_replaces_the_first() -> None:
    ch = TelemetryChannel("c1", "p")
    first = ch.attach()
    second = ch.attach()
    assert first.get_nowait() is None  # ended
    ch.detach(first)  # the old stream's cleanup leaves the new one attached
    assert ch.is_open
    ch.detach(second)
    assert not ch.is_open


async def test_a_transaction_check_becomes_a_recover_command() -> None:
    ch = TelemetryChannel("c1", "p")
    out = ch.attach()
    props = encode_properties({"UNIQ_KEY": "U1", "TAGS": "T", "KEYS": "a b", "REAL_TOPIC": "X",
                               "PGROUP": "X", "TRAN_MSG": "true", "mine": "1"})
    raw = encode_record(topic=b"X", body=b"half", properties=props.encode(), queue_id=1, flag=0,
                        queue_offset=3, commit_log_offset=0, sys_flag=0,
                        born_timestamp=1000, born_host=b"\x7f\x00\x00\x01", born_port=5,
                        store_host=b"\x7f\x00\x00\x01", store_port=6, store_timestamp=2000)
    assert decode_record(raw) is not None
    ch.send_oneway(RemotingCommand.request(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, {}))
    assert out.empty()  # nothing a 5.x client understands
    ch.send_oneway(RemotingCommand.request(RequestCode.CHECK_TRANSACTION_STATE,
                                           {"offsetMsgId": "TID1"}, raw))
    cmd = await asyncio.wait_for(out.get(), 1)
    assert cmd is not None
    rc = cmd.recover_orphaned_transaction_command
    assert rc.transaction_id == "TID1"
    m = rc.message
    assert m.topic.name == "X" and m.body == b"half"
    assert m.system_properties.message_id == "U1" and m.system_properties.tag == "T"
    assert list(m.system_properties.keys) == ["a", "b"]
    assert m.system_properties.message_type == pb.MessageType.TRANSACTION
    assert dict(m.user_properties) == {"mine": "1"}
    assert m.system_properties.body_digest.type == pb.DigestType.MD5
    assert m.system_properties.queue_offset == 3 and m.system_properties.delivery_attempt == 1
    assert m.system_properties.born_host == "127.0.0.1"
    assert m.system_properties.store_host == "127.0.0.1:6"
