"""The producer builds its send headers and reads its replies without the header dataclasses (a
per-message fast path): check both against the dataclasses that own the layout."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketlite.client.errors import MQClientError
from rocketlite.client.producer import Producer, SendStatus, _Lanes, _Prepared
from rocketlite.protocol.bodies import MessageQueue
from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.command import RemotingCommand
from rocketlite.protocol.headers import SendMessageRequestHeader, SendMessageResponseHeader

names = st.text(st.characters(codec="ascii", categories=["L", "N"]), min_size=1, max_size=20)


@given(group=names, topic=names, broker=names, queue_id=st.integers(0, 1023),
       sys_flag=st.integers(0, 0x7FFF), flag=st.integers(-(2**31), 2**31 - 1),
       props=st.text(max_size=50), batch=st.booleans(), nums=st.integers(1, 64))
def test_send_header_matches_the_v2_codec(group: str, topic: str, broker: str, queue_id: int,
                                          sys_flag: int, flag: int, props: str, batch: bool,
                                          nums: int) -> None:
    producer = Producer(group, default_topic_queue_nums=nums)
    p = _Prepared(topic, b"x", props, sys_flag, flag, "UNIQ", batch=batch)
    cmd = producer._command(p, MessageQueue(topic, broker, queue_id))
    assert cmd.code == (RequestCode.SEND_BATCH_MESSAGE if batch else RequestCode.SEND_MESSAGE_V2)
    ts = int(cmd.ext_fields["g"])
    expected = SendMessageRequestHeader(
        producerGroup=group, topic=topic, defaultTopic="TBW102", defaultTopicQueueNums=nums,
        queueId=queue_id, sysFlag=sys_flag, bornTimestamp=ts, flag=flag, properties=props,
        reconsumeTimes=0, unitMode=False, batch=batch, bname=broker).to_v2_ext()
    assert cmd.ext_fields == expected
    assert SendMessageRequestHeader.from_v2_ext(cmd.ext_fields).queueId == queue_id


def _reply(ext: dict[str, str], code: int = ResponseCode.SUCCESS) -> RemotingCommand:
    return RemotingCommand(code=code, opaque=1, flag=1, ext_fields=ext)


def test_send_reply_read_like_the_response_header() -> None:
    producer = Producer("g")
    p = _Prepared("T", b"x", "", 0, 0, "UNIQ")
    mq = MessageQueue("T", "broker-a", 2)
    header = SendMessageResponseHeader(msgId="7F00000100002A9F0000000000000010", queueId=3,
                                       queueOffset=41, transactionId="tx")
    r = producer._result(_reply({**header.to_ext(), "MSG_REGION": "DefaultRegion"}), p, mq, "addr")
    assert r.status is SendStatus.SEND_OK
    assert (r.msg_id, r.offset_msg_id, r.queue_offset, r.transaction_id, r.region_id) == (
        "UNIQ", header.msgId, 41, "tx", "DefaultRegion")
    assert r.queue == MessageQueue("T", "broker-a", 3)
    same = producer._result(_reply({"msgId": "x", "queueId": "2", "queueOffset": "0"}), p, mq, "a")
    assert same.queue is mq


@pytest.mark.parametrize("ext", [{"queueId": "1", "queueOffset": "2"},
                                 {"msgId": "x", "queueId": "one", "queueOffset": "2"}])
def test_a_malformed_send_reply_is_a_client_error(ext: dict[str, str]) -> None:
    producer = Producer("g")
    with pytest.raises(MQClientError, match="malformed"):
        producer._result(_reply(ext), _Prepared("T", b"x", "", 0, 0, "U"), MessageQueue("T", "b", 0), "addr")


@given(group=names, topic=names, broker=names, queue_id=st.integers(0, 1023),
       sys_flag=st.integers(0, 0x7FFF), flag=st.integers(-(2**31), 2**31 - 1),
       props=st.text(st.characters(blacklist_categories=("Cs",)), max_size=50), nums=st.integers(1, 64),
       opaque=st.integers(1, 2**31 - 1))
def test_async_frame_is_the_send_command_in_rocketmq_encoding(
        group: str, topic: str, broker: str, queue_id: int, sys_flag: int, flag: int, props: str,
        nums: int, opaque: int) -> None:
    producer = Producer(group, default_topic_queue_nums=nums)
    mq = MessageQueue(topic, broker, queue_id)
    p = _Prepared(topic, b"body", props, sys_flag, flag, "UNIQ", False, props.encode())
    frame = _Lanes(None, group, "TBW102", nums).frame(mq)
    cmd = producer._command(p, mq)
    cmd.opaque = opaque
    cmd.serialize_type = 1
    assert frame.frame(opaque, sys_flag, int(cmd.ext_fields["g"]), flag, p.wire, p.body) == cmd.encode()
