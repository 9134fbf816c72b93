"""rocketlite's own RocketMQ client: Remoting protocol, asyncio first, with a thin sync wrapper.

Works against rocketlite and, by the protocol, against Apache RocketMQ 4.x/5.x brokers. See
docs/client.md for a guide.
"""

from rocketlite.client.config import ClientConfig
from rocketlite.client.errors import MQBrokerError, MQClientError
from rocketlite.client.lite_pull_consumer import LitePullConsumer
from rocketlite.client.message import Message, MessageExt
from rocketlite.client.producer import Producer, SendResult, SendStatus, select_by_hash
from rocketlite.client.push_consumer import ConsumeStatus, OrderlyStatus, PushConsumer
from rocketlite.client.simple_consumer import PopMessage, SimpleConsumer
from rocketlite.client.transaction import (
    HalfProducer,
    HalfReceipt,
    LocalTransactionState,
    TransactionListener,
    TransactionProducer,
    TransactionSendResult,
)

__all__ = [
    "ClientConfig",
    "ConsumeStatus",
    "HalfProducer",
    "HalfReceipt",
    "LitePullConsumer",
    "LocalTransactionState",
    "MQBrokerError",
    "MQClientError",
    "Message",
    "MessageExt",
    "OrderlyStatus",
    "PopMessage",
    "Producer",
    "PushConsumer",
    "SendResult",
    "SendStatus",
    "SimpleConsumer",
    "TransactionListener",
    "TransactionProducer",
    "TransactionSendResult",
    "select_by_hash",
]
