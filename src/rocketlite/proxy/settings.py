"""The Settings the front answers a client's Telemetry settings with (the Java proxy's
``GrpcClientSettingsManager``): the client's own settings with the server's values merged in.

========================================  ==========================================================
field                                     value
========================================  ==========================================================
producer backoff_policy                   max_attempts 3, exponential 10 ms .. 1 s, multiplier 2
                                          (``grpcClientProducerMaxAttempts``/``BackoffInitialMillis``
                                          /``BackoffMaxMillis``/``BackoffMultiplier`` defaults)
publishing.max_body_size                  the broker's ``maxMessageSize``
publishing.validate_message_type          true (``enableTopicMessageTypeCheck``: SendMessage checks)
subscription.receive_batch_size           32 (``grpcClientConsumerLongPollingBatchSize``)
subscription.long_polling_timeout         20 s (``grpcClientConsumerMaxLongPollingTimeoutMillis``)
subscription.fifo                         the group's ``consumeMessageOrderly``
consumer backoff_policy.max_attempts      the group's ``retryMaxTimes`` + 1 (a PushConsumer's
                                          max delivery attempts before the DLQ)
consumer backoff_policy.customized        the group's customized retry policy: Java's default
                                          ``CustomizedRetryPolicy`` (1 s, 5 s, 10 s, 30 s, 1..10 min,
                                          20 min, 30 min, 1 h, 2 h)
metric                                    off (no collector)
========================================  ==========================================================

A group the broker does not know (``autoCreateSubscriptionGroup`` off) gets Java's defaults
(``new SubscriptionGroupConfig()``: not orderly, 16 retries).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from google.protobuf.duration_pb2 import Duration

from rocketlite.broker.subscriptions import SubscriptionGroupConfig
from rocketlite.proxy.pb import definition_pb2 as pb

if TYPE_CHECKING:
    from rocketlite.broker.broker import Broker

PRODUCER_MAX_ATTEMPTS = 3
PRODUCER_BACKOFF_INITIAL_MS = 10
PRODUCER_BACKOFF_MAX_MS = 1000
PRODUCER_BACKOFF_MULTIPLIER = 2.0
RECEIVE_BATCH_SIZE = 32
LONG_POLLING_TIMEOUT_MS = 20_000
RETRY_NEXT_MS = (1_000, 5_000, 10_000, 30_000, 60_000, 120_000, 180_000, 240_000, 300_000,
                 360_000, 420_000, 480_000, 540_000, 600_000, 1_200_000, 1_800_000, 3_600_000,
                 7_200_000)


def duration(ms: int) -> Duration:
    return Duration(seconds=ms // 1000, nanos=(ms % 1000) * 1_000_000)


def server_settings(broker: Broker, client: pb.Settings) -> pb.Settings:
    """``client`` with the server's values (module docstring)."""
    out = pb.Settings()
    out.CopyFrom(client)
    out.metric.CopyFrom(pb.Metric(on=False))
    if client.HasField("publishing"):
        out.backoff_policy.CopyFrom(pb.RetryPolicy(
            max_attempts=PRODUCER_MAX_ATTEMPTS,
            exponential_backoff=pb.ExponentialBackoff(
                initial=duration(PRODUCER_BACKOFF_INITIAL_MS),
                max=duration(PRODUCER_BACKOFF_MAX_MS), multiplier=PRODUCER_BACKOFF_MULTIPLIER)))
        out.publishing.max_body_size = broker.store_config.max_message_size
        out.publishing.validate_message_type = True
    elif client.HasField("subscription"):
        group = client.subscription.group.name
        sgc = (broker.subscriptions.get(group) if group else None) or SubscriptionGroupConfig(
            groupName=group or "")
        sub = out.subscription
        sub.receive_batch_size = RECEIVE_BATCH_SIZE
        sub.long_polling_timeout.CopyFrom(duration(LONG_POLLING_TIMEOUT_MS))
        sub.fifo = sgc.consumeMessageOrderly
        out.backoff_policy.CopyFrom(pb.RetryPolicy(
            max_attempts=sgc.retryMaxTimes + 1,
            customized_backoff=pb.CustomizedBackoff(next=[duration(ms) for ms in RETRY_NEXT_MS])))
    return out
