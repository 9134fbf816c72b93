"""``rocketlite.admin``: the operator's functions over the wire (mqadmin's commands), shared by
``rocketlite admin`` and, later, the dashboard's JSON API: no copy of the admin logic lives in a
typer callback or a web handler.

Each function is a coroutine taking an :class:`AdminSession` (a connection pool and the
NameServer list) and returning dataclasses that :func:`jsonable` turns into JSON; an expected
failure (a peer that cannot be reached, a topic or message that does not exist, a broker's
refusal) raises :class:`AdminError` whose message is the one-line reason. The package uses the
client, remoting and protocol layers, never the broker, NameServer or store.
"""

from rocketlite.admin.brokers import (
    BrokerConfigView,
    ConfigUpdate,
    clean_expired_cq,
    get_broker_config,
    update_broker_config,
)
from rocketlite.admin.cluster import (
    BrokerEntry,
    BrokerStatus,
    HaMasterView,
    HaSlave,
    HaSlaveView,
    broker_status,
    cluster_list,
    ha_status,
)
from rocketlite.admin.consumer_status import ClientStatus, GroupStatus, QueueInfo, consumer_status
from rocketlite.admin.dlq import ResendCounts, resend_dlq
from rocketlite.admin.errors import AdminError, TopicNotFoundError, UnreachableError
from rocketlite.admin.groups import (
    GroupProgress,
    QueueProgress,
    SubGroupUpdate,
    consumer_connection,
    consumer_progress,
    delete_sub_group,
    producer_connection,
    update_sub_group,
)
from rocketlite.admin.jsonview import jsonable
from rocketlite.admin.messages import (
    MessageView,
    query_msg_by_id,
    query_msg_by_key,
    query_msg_by_offset,
    query_msg_by_unique_key,
)
from rocketlite.admin.offsets import QueueReset, reset_offset_by_time, skip_accumulated
from rocketlite.admin.produce import SendView, send_message
from rocketlite.admin.ranges import QueueRange, consume_message, print_msg, queue_ranges
from rocketlite.admin.session import AdminSession
from rocketlite.admin.timeparse import format_timestamp, parse_timestamp
from rocketlite.admin.topic_stats import (
    GroupStats,
    QueueStatus,
    TopicDeletion,
    TopicStats,
    delete_topic,
    stats_all,
    topic_status,
)
from rocketlite.admin.topics import (
    BrokerTopicConfig,
    TopicUpdate,
    get_topic_config,
    topic_list,
    topic_route,
    update_topic,
)
from rocketlite.admin.trace import MessageTrace, PubTrace, SubTrace, query_msg_trace_by_id

__all__ = [
    "AdminError", "AdminSession", "BrokerConfigView", "BrokerEntry", "BrokerStatus",
    "BrokerTopicConfig", "ClientStatus",
    "ConfigUpdate", "GroupProgress", "GroupStats", "GroupStatus", "HaMasterView", "HaSlave", "HaSlaveView",
    "MessageTrace", "MessageView", "PubTrace", "QueueInfo", "QueueProgress", "QueueRange", "QueueReset",
    "QueueStatus", "ResendCounts",
    "SendView", "SubGroupUpdate", "SubTrace", "TopicDeletion", "TopicNotFoundError", "TopicStats",
    "TopicUpdate", "UnreachableError", "broker_status", "clean_expired_cq", "cluster_list",
    "consume_message", "consumer_connection", "consumer_progress", "consumer_status", "delete_sub_group",
    "delete_topic", "format_timestamp", "get_broker_config", "get_topic_config", "ha_status", "jsonable",
    "parse_timestamp", "print_msg", "producer_connection", "query_msg_by_id", "query_msg_by_key",
    "query_msg_by_offset", "query_msg_by_unique_key", "query_msg_trace_by_id", "queue_ranges", "resend_dlq",
    "reset_offset_by_time", "send_message", "skip_accumulated", "stats_all", "topic_list",
    "topic_route", "topic_status", "update_broker_config", "update_sub_group", "update_topic",
]
