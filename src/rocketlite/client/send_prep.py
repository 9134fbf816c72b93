"""The producer's message preparation (``Producer``'s base class): a message checked and encoded
once for every attempt (``_Prepared``; for ``send_async`` an ``_AsyncSend``, whose plain messages
``send_codec.PlainPrep`` prepares in one call), a batch's body, the generic SEND command of a
oneway send, and a send reply's ``SendResult``. The attributes below are set by ``Producer``."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TypeVar, overload

from rocketlite.client.errors import MQBrokerError, MQClientError
from rocketlite.client.message import Message, check_topic, check_uniq_key, compress, compression_flag
from rocketlite.client.send_codec import PlainPrepPy, UniqKeysPy
from rocketlite.client.send_types import _READER, _STATUS_BY_CODE, SendResult, _Prepared
from rocketlite.formats import properties as props
from rocketlite.formats.message_record import SYSFLAG_COMPRESSED
from rocketlite.protocol.bodies import MessageQueue
from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.command import RemotingCommand
from rocketlite.protocol.message_batch import encode_message

__all__ = ["SendPreparation"]

_P = TypeVar("_P", bound=_Prepared)
_UNIQ_KEY_NAME = props.UNIQ_KEY + props.NAME_VALUE_SEPARATOR


class SendPreparation:
    group: str
    create_topic_key: str
    default_topic_queue_nums: int
    max_message_size: int
    compress_over: int
    compression: str
    compress_level: int
    _valid_topics: set[str]  # names check_topic passed (bounded)
    _uniq: UniqKeysPy
    _plain_prepared: PlainPrepPy  # the fast path of _prepare for plain messages (send_codec.PlainPrep)

    @overload
    def _prepare(self, msg: Message) -> _Prepared: ...
    @overload
    def _prepare(self, msg: Message, cls: type[_P]) -> _P: ...

    def _prepare(self, msg: Message, cls: type[_Prepared] = _Prepared) -> _Prepared:
        """``msg`` checked and encoded once for every attempt, as a ``cls`` (an ``_AsyncSend``
        for ``send_async``)."""
        topic = msg.topic
        if topic not in self._valid_topics:
            check_topic(topic)
            if len(self._valid_topics) >= 4096:
                self._valid_topics.clear()
            self._valid_topics.add(topic)
        body = msg.body
        if body.__class__ is not bytes:
            if not isinstance(body, bytes | bytearray | memoryview):
                raise MQClientError(f"message body must be bytes, not {type(body).__name__}")
            body = bytes(body)
        size = len(body)
        if not size:
            raise MQClientError("message body is empty")
        if size > self.max_message_size:
            raise MQClientError(f"message body is {size} bytes; "
                                f"max_message_size is {self.max_message_size}")
        wire = msg.wire_properties()
        uniq = msg.uniq_key
        if uniq is None:
            uniq = self._uniq.next()
        else:
            check_uniq_key(uniq)
        sys_flag = 0
        if size >= self.compress_over:
            packed = compress(body, self.compression, self.compress_level)
            if len(packed) < size:  # incompressible data grows: it goes as it is (and still fits)
                body = packed
                sys_flag |= compression_flag(self.compression)
        # UNIQ_KEY last, after the message's own (which never hold it: it is reserved)
        text = f"{props.encode_properties(wire) if wire else ''}{_UNIQ_KEY_NAME}{uniq}\x02"
        try:
            utf8 = text.encode()
        except UnicodeEncodeError as e:
            raise MQClientError(f"message properties are not encodable as UTF-8: {e}") from None
        if not -0x80000000 <= msg.flag <= 0x7FFFFFFF:
            raise MQClientError(f"message flag {msg.flag} does not fit Java's int")
        return cls(msg.topic, body, text, sys_flag, msg.flag, uniq, False, utf8)

    def _prepare_batch(self, msgs: Sequence[Message]) -> _Prepared:
        if not msgs:
            raise MQClientError("a batch needs at least one message")
        topic = msgs[0].topic
        parts, uniqs = [], []
        for m in msgs:
            if m.topic != topic:
                raise MQClientError(f"a batch goes to one topic: {m.topic!r} is not {topic!r}")
            if m.delay_level > 0 or m.deliver_time_ms is not None:
                raise MQClientError("delayed messages cannot be sent in a batch")
            if m.topic.startswith("%RETRY%"):
                raise MQClientError("retry-topic messages cannot be sent in a batch")
            p = self._plain_prepared.prepare(m, self.max_message_size, self.compress_over)
            if p is None:
                p = self._prepare(m)
            if p.sys_flag:  # Java never compresses inside a batch: the broker stores entries as sent
                p = _Prepared(p.topic, bytes(m.body), p.properties, 0, p.flag, p.uniq_key)
            parts.append(encode_message(p.body, p.properties, p.flag))
            uniqs.append(p.uniq_key)
        body = b"".join(parts)
        if len(body) > self.max_message_size:
            raise MQClientError(f"the batch is {len(body)} bytes; "
                                f"max_message_size is {self.max_message_size}")
        return _Prepared(topic, body, "", 0, 0, ",".join(uniqs), batch=True)

    def _explained(self, e: MQBrokerError, p: _Prepared, msg: Message | None) -> MQBrokerError:
        """A broker's MESSAGE_ILLEGAL refusal of a body this client compressed, saying so: the
        sizes in the broker's remark are the compressed body's, not the one the caller gave."""
        if e.code != ResponseCode.MESSAGE_ILLEGAL or not p.sys_flag & SYSFLAG_COMPRESSED \
                or msg is None:
            return e
        return MQBrokerError(e.code, f"{e.remark} (the body was compressed with "
                             f"{self.compression}: {len(msg.body)} bytes before, {len(p.body)} "
                             "after)", e.addr)

    def _command(self, p: _Prepared, mq: MessageQueue) -> RemotingCommand:
        """SEND_MESSAGE_V2 (or SEND_BATCH_MESSAGE) with SendMessageRequestHeaderV2's one-letter
        fields, built straight into the ext map (the same map ``SendMessageRequestHeader
        .to_v2_ext`` makes; checked by a test) since this runs once per message."""
        ext = {
            "a": self.group, "b": p.topic, "c": self.create_topic_key,
            "d": str(self.default_topic_queue_nums), "e": str(mq.queueId), "f": str(p.sys_flag),
            "g": str(time.time_ns() // 1_000_000),
            "h": str(p.flag), "i": p.properties, "j": "0", "k": "false",
            "m": "true" if p.batch else "false", "n": mq.brokerName,
        }
        code = RequestCode.SEND_BATCH_MESSAGE if p.batch else RequestCode.SEND_MESSAGE_V2
        return RemotingCommand.request(code, ext, p.body)

    def _result(self, reply: RemotingCommand, p: _Prepared, mq: MessageQueue, addr: str) -> SendResult:
        status = _STATUS_BY_CODE.get(reply.code)  # type: ignore[call-overload]
        if status is None:
            raise MQBrokerError(reply.code, reply.remark, addr)
        result: SendResult | None = _READER.read(reply.ext_fields, status, p.uniq_key, mq)
        if result is None:
            raise MQClientError(f"the send reply from {addr} is malformed: {reply.ext_fields}")
        return result
