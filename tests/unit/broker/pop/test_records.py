"""The POP records: CK/ack JSON in RocketMQ's short keys and the refusals of malformed input;
a bad receipt handle is the broker's ``InvalidReceiptHandle`` (a ``PopError``). The handle,
offset-info and batch-ack codecs are tested with ``protocol.pop_info``."""

from __future__ import annotations

import json

import pytest

from rocketlite.broker.pop.acks import parse_handle
from rocketlite.broker.pop.errors import InvalidReceiptHandle, PopError
from rocketlite.broker.pop.records import AckMsg, PopCheckPoint, RecordError, revive_topic
from rocketlite.protocol import pop_info


def ck() -> PopCheckPoint:
    return PopCheckPoint(start_offset=10, pop_time=1700000000000, invisible_time=30000, num=3,
                         queue_id=2, topic="T", cid="G", broker_name="broker-a",
                         queue_offset_diff=[0, 2, 5], revive_offset=7)


def test_ck_json_uses_rocketmq_short_keys_and_round_trips() -> None:
    c = ck()
    obj = json.loads(c.to_json())
    assert obj == {"so": 10, "pt": 1700000000000, "it": 30000, "bm": 0, "n": 3, "q": 2, "t": "T",
                   "c": "G", "ro": 7, "d": [0, 2, 5], "bn": "broker-a", "rp": 0}
    assert PopCheckPoint.from_json(c.to_json()) == c
    assert c.offsets == [10, 12, 15]
    assert c.revive_time == 1700000030000
    assert c.unique_id() == "T@2@10@G@1700000000000@broker-a@ck"


def test_ck_bits_and_contiguous_form() -> None:
    c = ck()
    assert c.index_of(12) == 1 and c.index_of(11) == -1
    c.set_acked(0)
    c.set_acked(2)
    assert c.acked(0) and not c.acked(1) and not c.all_acked
    c.set_acked(1)
    assert c.all_acked
    plain = PopCheckPoint.from_json(b'{"so":5,"pt":1,"it":2,"n":2,"q":0,"t":"T","c":"G"}')
    assert plain.offsets == [5, 6] and plain.index_of(6) == 1 and plain.index_of(7) == -1


def test_ack_json_single_and_batch() -> None:
    a = AckMsg(ack_offset=12, start_offset=10, cid="G", topic="T", queue_id=2, pop_time=99,
               broker_name="b")
    assert json.loads(a.to_json()) == {"ao": 12, "so": 10, "c": "G", "t": "T", "q": 2, "pt": 99,
                                       "bn": "b"}
    assert AckMsg.from_json(a.to_json()) == a
    assert a.unique_id() == "T@2@12@G@99@b@ack" and a.tag == "ack"
    assert a.key == (*ck().key[:3], 10, 99, "b")
    b = AckMsg(ack_offset=10, start_offset=10, cid="G", topic="T", queue_id=2, pop_time=99,
               broker_name="b", ack_offsets=(10, 15))
    assert json.loads(b.to_json())["aol"] == [10, 15] and b.tag == "bAck"
    assert AckMsg.from_json(b.to_json()).offsets == (10, 15)


@pytest.mark.parametrize("data, why", [
    (b"not json", "not JSON"),
    (b"[1]", "not a JSON object"),
    (b'{"so":1,"pt":1,"it":1,"n":1,"q":0,"t":"T"}', "lacks 'c'"),
    (b'{"so":"1","pt":1,"it":1,"n":1,"q":0,"t":"T","c":"G"}', "'so' is not an integer"),
    (b'{"so":1,"pt":1,"it":1,"n":40,"q":0,"t":"T","c":"G"}', "must be 1..32"),
    (b'{"so":1,"pt":1,"it":1,"n":2,"q":0,"t":"T","c":"G","d":[0]}', "n=2 but 1 offsets"),
    (b'{"so":1,"pt":1,"it":1,"n":1,"q":0,"t":"T","c":"G","d":"x"}', "not a list"),
    (b"{" + b" " * 20000 + b"}", "more than"),
])
def test_bad_ck_records_are_refused_with_a_reason(data: bytes, why: str) -> None:
    with pytest.raises(RecordError, match=why):
        PopCheckPoint.from_json(data)


def test_revive_topic() -> None:
    assert revive_topic("C") == "rmq_sys_REVIVE_LOG_C"


def test_a_bad_handle_is_the_broker_s_pop_error() -> None:
    assert parse_handle("10 1 2 3 0 b 4 5") == pop_info.ReceiptHandle(10, 1, 2, 3, 0, "b", 4, 5)
    with pytest.raises(InvalidReceiptHandle, match="popTime is not a number") as e:
        parse_handle("1 x 3 4 0 b 5 6")
    assert isinstance(e.value, PopError) and isinstance(e.value, pop_info.InvalidReceiptHandle)
    assert isinstance(e.value.__cause__, pop_info.InvalidReceiptHandle)
