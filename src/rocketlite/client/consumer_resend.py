"""What a push consumer does with a failed message when the broker refuses to take it back
(CONSUMER_SEND_MSG_BACK), and with an orderly message past ``max_reconsume_times``: as Java, it
sends a copy itself, to the group's retry topic ``%RETRY%<group>`` at delay level 3 +
reconsume times, or to its dead-letter topic ``%DLQ%<group>`` once the retries are used up. The
copy keeps the message's properties except the delay, reconsume counts and UNIQ_KEY (a new one),
and records the original topic (RETRY_TOPIC) and message id (ORIGIN_MESSAGE_ID).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from rocketlite.client.consumer_base import dlq_topic, retry_topic
from rocketlite.client.errors import MQBrokerError, MQClientError
from rocketlite.client.instance import ClientInstance
from rocketlite.client.message import MAX_RECONSUME_TIMES, RECONSUME_TIME, MessageExt, UniqKeyGenerator
from rocketlite.common.errors import RemotingError
from rocketlite.formats import properties as props
from rocketlite.protocol.codes import RequestCode
from rocketlite.protocol.command import RemotingCommand
from rocketlite.protocol.headers import SendMessageRequestHeader

log = logging.getLogger(__name__)

_ERRORS = (MQClientError, MQBrokerError, RemotingError)
_RESEND_DROPPED = frozenset({props.DELAY, RECONSUME_TIME, MAX_RECONSUME_TIMES, props.UNIQ_KEY})


class Resender:
    """Re-sends the failed messages of ``group`` through the consumer's client instance."""

    def __init__(self, group: str, max_reconsume_times: int,
                 instance: Callable[[], ClientInstance]) -> None:
        self.group = group
        self.max_reconsume_times = max_reconsume_times
        self._inst = instance
        self._uniq = UniqKeyGenerator()

    async def resend(self, msg: MessageExt) -> bool:
        """Send ``msg``'s copy to the retry or dead-letter topic; whether a broker took it."""
        times = msg.reconsume_times + 1
        to_dlq = times > self.max_reconsume_times
        topic = dlq_topic(self.group) if to_dlq else retry_topic(self.group)
        properties = {k: v for k, v in msg.properties.items() if k not in _RESEND_DROPPED}
        properties[props.RETRY_TOPIC] = msg.properties.get(props.RETRY_TOPIC, msg.topic)
        properties[props.ORIGIN_MESSAGE_ID] = msg.properties.get(props.ORIGIN_MESSAGE_ID, msg.msg_id)
        properties[RECONSUME_TIME] = str(times)
        properties[MAX_RECONSUME_TIMES] = str(self.max_reconsume_times)
        try:
            delay = 0 if to_dlq else 3 + times - 1  # Java: delay level 3 + reconsumeTimes
            return await self._internal_send(topic, msg.body, properties, times, delay)
        except _ERRORS as e:
            log.warning("group %s: cannot re-send %s to %s: %s", self.group, msg.msg_id, topic, e)
            return False

    async def _internal_send(self, topic: str, body: bytes, properties: dict[str, str], reconsume: int,
                             delay_level: int) -> bool:
        inst = self._inst()
        route = inst.routes.get(topic) or await inst.update_route(topic)
        broker = (sorted(bd.brokerName for bd in route.brokerDatas)[0] if route is not None
                  else sorted(inst.broker_addrs)[0] if inst.broker_addrs else None)
        if broker is None:
            return False
        addr = inst.route_table.broker_addr(broker)
        if addr is None:
            return False
        properties.setdefault(props.UNIQ_KEY, self._uniq.next())
        if delay_level > 0:
            properties[props.DELAY] = str(delay_level)
        header = SendMessageRequestHeader(
            producerGroup="CLIENT_INNER_PRODUCER", topic=topic, defaultTopic="TBW102",
            defaultTopicQueueNums=1, queueId=0, sysFlag=0, bornTimestamp=0, flag=0,
            properties=props.encode_properties(properties), reconsumeTimes=reconsume,
            maxReconsumeTimes=self.max_reconsume_times)
        cmd = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, header.to_v2_ext(), body)
        await inst.invoke_ok(addr, cmd)
        return True
