"""proxy.convert_in: a v2 Message as the MessageToStore the broker stores, and its checks."""

from __future__ import annotations

import pytest
from google.protobuf.duration_pb2 import Duration
from google.protobuf.timestamp_pb2 import Timestamp

from rocketlite.formats.message_record import SYSFLAG_COMPRESSED, SYSFLAG_TRANSACTION_PREPARED
from rocketlite.formats.properties import decode_properties
from rocketlite.proxy.convert_in import Inbound, convert, delivery_ms, host_bytes
from rocketlite.proxy.pb import definition_pb2 as pb
from rocketlite.proxy.status import FrontError

MT = pb.MessageType
ALL = [MT.NORMAL, MT.FIFO, MT.DELAY, MT.TRANSACTION]
NOW = 1_700_000_000_000


def into(accepted: list[int] | None = None) -> Inbound:
    return Inbound("T", accepted or ALL, 1024, 86_400_000, b"\x0a\x00\x00\x01", 555, NOW)


def msg(**sp: object) -> pb.Message:
    props = pb.SystemProperties(message_id="ID1", **sp)  # type: ignore[arg-type]
    return pb.Message(topic=pb.Resource(name="T"), body=b"b", system_properties=props,
                      user_properties={"u": "v"})


def test_a_normal_message_keeps_its_fields() -> None:
    m, kind = convert(msg(tag="TA", keys=["a", "b"], born_timestamp=Timestamp(seconds=5)),
                      into(), 3)
    assert kind == MT.NORMAL and m.topic == "T" and m.queue_id == 3 and m.body == b"b"
    assert decode_properties(m.properties) == {"u": "v", "TAGS": "TA", "KEYS": "a b",
                                               "UNIQ_KEY": "ID1"}
    assert m.born_timestamp == 5000 and m.born_host == b"\x0a\x00\x00\x01" and m.born_port == 555
    assert m.sys_flag == 0


def test_a_transaction_is_prepared_with_the_topic_as_its_group() -> None:
    m, kind = convert(msg(message_type=MT.TRANSACTION, body_encoding=pb.Encoding.GZIP,
                          orphaned_transaction_recovery_duration=Duration(seconds=30)), into(), 0)
    assert kind == MT.TRANSACTION
    assert m.sys_flag == SYSFLAG_TRANSACTION_PREPARED | SYSFLAG_COMPRESSED
    p = decode_properties(m.properties)
    assert p["TRAN_MSG"] == "true" and p["PGROUP"] == "T"
    assert p["CHECK_IMMUNITY_TIME_IN_SECONDS"] == "30"
    assert m.born_timestamp == NOW  # none given: now


def test_fifo_and_delay_properties() -> None:
    m, kind = convert(msg(message_group="g"), into(), 0)
    assert kind == MT.FIFO and decode_properties(m.properties)["__SHARDINGKEY"] == "g"
    m, kind = convert(msg(delivery_timestamp=Timestamp(seconds=NOW // 1000 + 10)), into(), 0)
    assert kind == MT.DELAY
    assert decode_properties(m.properties)["TIMER_DELIVER_MS"] == str(NOW + 10_000)


def test_delivery_ms_reads_the_python_clients_milliseconds_in_seconds() -> None:
    assert delivery_ms(Timestamp(seconds=1_700_000_000, nanos=250_000_000)) == 1_700_000_000_250
    assert delivery_ms(Timestamp(seconds=1_700_000_000_123)) == 1_700_000_000_123


def test_a_type_the_topic_does_not_take_is_refused() -> None:
    with pytest.raises(FrontError, match="takes FIFO"):
        convert(msg(), into([MT.FIFO]), 0)


def test_host_bytes() -> None:
    assert host_bytes("127.0.0.1") == b"\x7f\x00\x00\x01"
    assert len(host_bytes("::1")) == 16
    assert host_bytes("not-an-ip") == b"\x7f\x00\x00\x01"
