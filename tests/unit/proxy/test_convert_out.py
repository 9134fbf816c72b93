"""Stored records -> v2 Messages: the system properties a 5.x client reads, user properties
without the system ones, the body digest it verifies, compressed bodies inflated."""

from __future__ import annotations

import hashlib
import zlib
from dataclasses import dataclass

from rocketlite.formats.message_id import encode_message_id
from rocketlite.formats.message_record import SYSFLAG_COMPRESSED, MessageRecord
from rocketlite.formats.properties import encode_properties
from rocketlite.proxy.convert_out import (
    SYSTEM_PROPERTIES,
    ip_text,
    popped_messages,
    pulled_messages,
)
from rocketlite.proxy.pb import definition_pb2 as pb

STORE_IP = bytes([127, 0, 0, 1])


def record(props: dict[str, str] | None = None, body: bytes = b"hello", sys_flag: int = 0,
           reconsume: int = 0, topic: str = "T", queue_id: int = 2, queue_offset: int = 7,
           born_ip: bytes = bytes([10, 0, 0, 9])) -> MessageRecord:
    return MessageRecord(
        total_size=0, magic=0, body_crc=0, queue_id=queue_id, flag=0, queue_offset=queue_offset,
        commit_log_offset=4096, sys_flag=sys_flag, born_timestamp=1_700_000_000_123,
        born_host=born_ip, born_port=5555, store_timestamp=1_700_000_000_456,
        store_host=STORE_IP, store_port=10911, reconsume_times=reconsume,
        prepared_transaction_offset=0, body=body, topic=topic,
        properties_text=encode_properties(props or {}),
    )


@dataclass(frozen=True)
class Pop:
    record: MessageRecord
    topic: str
    queue_id: int
    queue_offset: int
    receipt_handle: str
    delivery_attempt: int


def test_a_pulled_record_carries_its_system_properties_and_only_user_properties() -> None:
    r = record({"TAGS": "TagA", "KEYS": "k1 k2", "UNIQ_KEY": "U1", "color": "red",
                "WAIT": "true", "TRACE_ON": "true", "REAL_TOPIC": "x", "TRACE_CONTEXT": "tc"},
               reconsume=2)
    [m] = pulled_messages([r], "T", "ns")
    sp = m.system_properties
    assert m.topic.name == "T" and m.topic.resource_namespace == "ns"
    assert sp.tag == "TagA"
    assert list(sp.keys) == ["k1", "k2"]
    assert sp.message_id == "U1"
    assert sp.message_type == pb.MessageType.NORMAL
    assert sp.body_encoding == pb.Encoding.IDENTITY
    assert sp.born_timestamp.seconds == 1_700_000_000 and sp.born_timestamp.nanos == 123_000_000
    assert sp.store_timestamp.ToMilliseconds() == 1_700_000_000_456
    assert sp.born_host == "10.0.0.9"
    assert sp.store_host == "127.0.0.1:10911"
    assert (sp.queue_id, sp.queue_offset, sp.delivery_attempt) == (2, 7, 3)
    assert sp.trace_context == "tc"
    assert not sp.HasField("receipt_handle")
    assert not sp.HasField("delivery_timestamp")
    assert dict(m.user_properties) == {"color": "red"}
    assert m.body == b"hello"


def test_the_body_digest_is_the_uppercase_md5_of_the_body() -> None:
    [m] = pulled_messages([record(body=b"\x00payload\xff")], "T")
    d = m.system_properties.body_digest
    assert d.type == pb.DigestType.MD5
    assert d.checksum == hashlib.md5(b"\x00payload\xff").hexdigest().upper()


def test_without_a_uniq_key_the_message_id_is_the_offset_id() -> None:
    [m] = pulled_messages([record()], "T")
    assert m.system_properties.message_id == encode_message_id(STORE_IP, 10911, 4096)


def test_the_message_type_follows_the_properties_in_javas_order() -> None:
    cases = [
        ({"TRAN_MSG": "true", "DELAY": "3"}, pb.MessageType.TRANSACTION),
        ({"DELAY": "3"}, pb.MessageType.DELAY),
        ({"TIMER_DELIVER_MS": "1700000009000"}, pb.MessageType.DELAY),
        ({"TIMER_DELAY_SEC": "5", "__SHARDINGKEY": "g"}, pb.MessageType.DELAY),
        ({"__SHARDINGKEY": "g"}, pb.MessageType.FIFO),
        ({"TRAN_MSG": "false"}, pb.MessageType.NORMAL),
    ]
    ms = pulled_messages([record(p) for p, _ in cases], "T")
    assert [m.system_properties.message_type for m in ms] == [t for _, t in cases]
    assert ms[2].system_properties.delivery_timestamp.ToMilliseconds() == 1_700_000_009_000
    assert ms[4].system_properties.message_group == "g"
    assert "__SHARDINGKEY" not in ms[4].user_properties


def test_a_bad_timer_property_does_not_fail_the_batch() -> None:
    [m] = pulled_messages([record({"TIMER_DELIVER_MS": "soon"})], "T")
    assert not m.system_properties.HasField("delivery_timestamp")
    assert m.system_properties.message_type == pb.MessageType.DELAY


def test_a_born_host_property_wins_over_the_record_and_ipv6_is_written_as_text() -> None:
    v6 = bytes(15) + b"\x01"
    ms = pulled_messages([record({"__BORNHOST": "1.2.3.4:99"}), record(born_ip=v6)], "T")
    assert ms[0].system_properties.born_host == "1.2.3.4:99"
    assert ms[1].system_properties.born_host == "::1"
    assert ip_text(v6) == "::1"


def test_a_compressed_body_is_inflated_and_digested_as_delivered() -> None:
    body = b"x" * 5000
    [m] = pulled_messages([record(body=zlib.compress(body), sys_flag=SYSFLAG_COMPRESSED)], "T")
    assert m.body == body
    assert m.system_properties.body_encoding == pb.Encoding.IDENTITY
    assert m.system_properties.body_digest.checksum == hashlib.md5(body).hexdigest().upper()


def test_a_body_that_does_not_inflate_is_sent_as_stored_with_its_digest() -> None:
    [m] = pulled_messages([record(body=b"not zlib", sys_flag=SYSFLAG_COMPRESSED)], "T")
    assert m.body == b"not zlib"
    assert m.system_properties.body_digest.checksum == hashlib.md5(b"not zlib").hexdigest().upper()


def test_a_dead_letter_carries_its_origin() -> None:
    [m] = pulled_messages([record({"DLQ_ORIGIN_TOPIC": "T", "DLQ_ORIGIN_MESSAGE_ID": "M1"})],
                          "%DLQ%g")
    assert m.system_properties.dead_letter_queue.topic == "T"
    assert m.system_properties.dead_letter_queue.message_id == "M1"
    assert not m.user_properties


def test_popped_messages_carry_handle_attempt_invisible_time_and_the_original_topic() -> None:
    retry = record({"UNIQ_KEY": "U2", "RETRY_TOPIC": "T"}, topic="%RETRY%g_T", reconsume=1)
    pops = [Pop(record({"UNIQ_KEY": "U1"}), "T", 2, 7, "h1", 1),
            Pop(retry, "T", 0, 3, "h2", 2)]
    ms = popped_messages(pops, 15_500)
    assert [m.topic.name for m in ms] == ["T", "T"]
    sp0, sp1 = ms[0].system_properties, ms[1].system_properties
    assert (sp0.receipt_handle, sp0.delivery_attempt, sp0.queue_id, sp0.queue_offset) == \
        ("h1", 1, 2, 7)
    assert (sp1.receipt_handle, sp1.delivery_attempt, sp1.queue_id, sp1.queue_offset) == \
        ("h2", 2, 0, 3)
    assert sp0.invisible_duration.ToMilliseconds() == 15_500
    assert "RETRY_TOPIC" not in ms[1].user_properties


def test_system_properties_hold_javas_reserved_names() -> None:
    for name in ("UNIQ_KEY", "TAGS", "KEYS", "POP_CK", "1ST_POP_TIME", "__BORNHOST",
                 "DLQ_ORIGIN_TOPIC", "TIMER_DELIVER_MS", "__CRC32#"):
        assert name in SYSTEM_PROPERTIES
    assert "color" not in SYSTEM_PROPERTIES
