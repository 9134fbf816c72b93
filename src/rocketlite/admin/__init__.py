"""``rocketlite.admin``: the operator's functions over the wire (mqadmin's commands), shared by
``rocketlite admin`` and, later, the dashboard's JSON API: no copy of the admin logic lives in a
typer callback or a web handler.

Each function is a coroutine taking an :class:`AdminSession` (a connection pool and the
NameServer list) and returning dataclasses that :func:`jsonable` turns into JSON; an expected
failure (a peer that cannot be reached, a topic or message that does not exist, a broker's
refusal) raises :class:`AdminError` whose message is the one-line reason. The package uses the
client, remoting and protocol layers, never the broker, NameServer or store.
"""

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
from rocketlite.admin.dlq import ResendCounts, resend_dlq
from rocketlite.admin.errors import AdminError, TopicNotFoundError, UnreachableError
from rocketlite.admin.jsonview import jsonable
from rocketlite.admin.messages import (
    MessageView,
    query_msg_by_id,
    query_msg_by_key,
    query_msg_by_offset,
    query_msg_by_unique_key,
)
from rocketlite.admin.produce import SendView, send_message
from rocketlite.admin.ranges import QueueRange, consume_message, print_msg, queue_ranges
from rocketlite.admin.session import AdminSession
from rocketlite.admin.timeparse import format_timestamp, parse_timestamp
from rocketlite.admin.topics import TopicUpdate, topic_list, topic_route, update_topic

__all__ = [
    "AdminError", "AdminSession", "BrokerEntry", "BrokerStatus", "HaMasterView", "HaSlave",
    "HaSlaveView", "MessageView", "QueueRange", "ResendCounts", "SendView", "TopicNotFoundError",
    "TopicUpdate", "UnreachableError", "broker_status", "cluster_list", "consume_message",
    "format_timestamp", "ha_status", "jsonable", "parse_timestamp", "print_msg",
    "query_msg_by_id", "query_msg_by_key", "query_msg_by_offset", "query_msg_by_unique_key",
    "queue_ranges", "resend_dlq", "send_message", "topic_list", "topic_route", "update_topic",
]
