"""A topic's route turned into the queues a producer sends to and a consumer reads from.

Follows Java's ``MQClientInstance.topicRouteData2TopicPublishInfo`` /
``topicRouteData2TopicSubscribeInfo``, ``TopicPublishInfo`` and ``PermName``:

* **Publishing** (:func:`publish_info`). A route whose ``orderTopicConf`` is non-empty
  (``"brokerA:4;brokerB:4"``) lists its queues in that order, ids ``0..n-1`` per broker, with no
  check of permissions or addresses; the info is then ``ordered``. Otherwise the route's queue datas,
  sorted by broker name (Java ``String.compareTo``: UTF-16 code units), give ids
  ``0..writeQueueNums-1`` for each writeable one whose broker has a master (``brokerAddrs`` key 0).
* **Round robin** (:meth:`TopicPublishInfo.select_one`). Each info keeps a counter that starts at a
  random 31-bit value (Java's ``ThreadLocalIndex``) and is incremented before use; the queue is
  ``queues[counter % len(queues)]``. Java masks the counter to 31 bits, which breaks the rotation
  once every 2**31 sends; this one keeps counting (a Python int that grows by one per send). With a
  ``last_broker`` (the broker the previous attempt failed on) up to ``len(queues)`` positions are
  tried for one on another broker; when every queue is on that broker the next position is taken.
* **Subscribing** (:func:`subscribe_queues`). Every readable queue data gives ids
  ``0..readQueueNums-1``, de-duplicated and sorted.

Static (logical-queue) topics, whose routes carry ``topicQueueMappingByBroker``, are not mapped:
their physical queues are used as for any other topic.
"""

from __future__ import annotations

import random
import re

from rocketlite.client.errors import MQClientError
from rocketlite.protocol.bodies import MessageQueue, QueueData, TopicRouteData

# ------------------------------------------------------------------------------ PermName (constant/)

PERM_PRIORITY = 0x1 << 3
PERM_READ = 0x1 << 2
PERM_WRITE = 0x1 << 1
PERM_INHERIT = 0x1 << 0

MASTER_ID = 0
"""``MixAll.MASTER_ID``: the broker id of a master in ``BrokerData.brokerAddrs``."""

MAX_QUEUES_PER_BROKER = 1 << 16
"""More queues than this on one broker is taken for a corrupt route rather than allocated."""

_ORDER_ENTRY = re.compile(r"([^:]+):([+-]?[0-9]+)", re.ASCII)


def is_readable(perm: int) -> bool:
    """``PermName.isReadable``: the read bit (4) is set."""
    return perm & PERM_READ == PERM_READ


def is_writeable(perm: int) -> bool:
    """``PermName.isWriteable``: the write bit (2) is set."""
    return perm & PERM_WRITE == PERM_WRITE


def is_inherited(perm: int) -> bool:
    """``PermName.isInherited``: the inherit bit (1) is set."""
    return perm & PERM_INHERIT == PERM_INHERIT


# ------------------------------------------------------------------------------------------ errors


class RouteError(MQClientError):
    """A route the client cannot use: a malformed ``orderTopicConf`` or an absurd queue count."""


class NoRouteError(RouteError):
    """A topic without a queue to send to (none writeable, or no broker with a master)."""


# ------------------------------------------------------------------------------------ publish info


def _java_order(name: str) -> bytes:
    """A sort key ordering strings as Java's ``String.compareTo`` does (by UTF-16 code unit)."""
    return name.encode("utf-16-be", "surrogatepass")


def _queue_count(broker_name: str, n: int) -> int:
    if n > MAX_QUEUES_PER_BROKER:
        raise RouteError(f"broker {broker_name!r} lists {n} queues (at most {MAX_QUEUES_PER_BROKER})")
    return max(n, 0)


class TopicPublishInfo:
    """The queues a producer sends a topic's messages to, and the round-robin position among them.

    ``queues`` is immutable; the only state is the counter, so an info is replaced, not updated, when
    the route changes. The counter is not locked: two threads racing on it at worst pick the same
    queue, as Java's per-thread counters can.
    """

    __slots__ = ("_index", "ordered", "queues", "route", "topic")

    def __init__(self, topic: str, queues: tuple[MessageQueue, ...], *, ordered: bool,
                 route: TopicRouteData, start: int | None = None) -> None:
        self.topic = topic
        self.queues = queues
        self.ordered = ordered
        self.route = route
        self._index = random.getrandbits(31) if start is None else start

    @property
    def ok(self) -> bool:
        """Java ``ok()``: there is at least one queue."""
        return bool(self.queues)

    def next_index(self) -> int:
        """Advance the counter and return it: Java ``sendWhichQueue.incrementAndGet()``."""
        self._index += 1
        return self._index

    def reset_index(self) -> None:
        """Move the counter to a new random position (Java ``resetIndex``)."""
        self._index = random.getrandbits(31)

    def broker_names(self) -> tuple[str, ...]:
        """The brokers the queues are on, in queue order, each once."""
        return tuple(dict.fromkeys(q.brokerName for q in self.queues))

    def broker_queues(self, broker_name: str) -> tuple[MessageQueue, ...]:
        """This info's queues on ``broker_name``, in queue order."""
        return tuple(q for q in self.queues if q.brokerName == broker_name)

    def select_one(self, last_broker: str | None = None) -> MessageQueue:
        """The next queue round robin, on a broker other than ``last_broker`` when there is one.

        Java ``TopicPublishInfo.selectOneMessageQueue(lastBrokerName)``. Raises
        :class:`NoRouteError` when the info has no queue.
        """
        queues = self.queues
        if not queues:
            raise NoRouteError(f"no queue to send to for topic {self.topic!r}")
        n = len(queues)
        if last_broker is not None:
            for _ in range(n):
                mq = queues[self.next_index() % n]
                if mq.brokerName != last_broker:
                    return mq
        return queues[self.next_index() % n]

    def __repr__(self) -> str:
        return (f"TopicPublishInfo(topic={self.topic!r}, ordered={self.ordered}, "
                f"queues={len(self.queues)}, brokers={list(self.broker_names())})")


def _order_conf_queues(topic: str, conf: str) -> list[MessageQueue]:
    queues: list[MessageQueue] = []
    for entry in conf.split(";"):
        if not entry:
            continue  # Java's split drops trailing empty entries; empty ones elsewhere are skipped too
        m = _ORDER_ENTRY.fullmatch(entry)
        if m is None:
            raise RouteError(f"orderTopicConf entry {entry!r} of topic {topic!r} is not brokerName:queueNums")
        broker, nums = m.group(1), _queue_count(m.group(1), int(m.group(2)))
        queues.extend(MessageQueue(topic, broker, i) for i in range(nums))
    return queues


def publish_info(topic: str, route: TopicRouteData, *, start: int | None = None) -> TopicPublishInfo:
    """Java ``topicRouteData2TopicPublishInfo``: the queues ``topic`` is sent to, see the module doc.

    ``start`` fixes the round-robin counter (tests); by default it is random. Raises
    :class:`RouteError` for a malformed ``orderTopicConf``; a route without usable queues gives an info
    whose ``ok`` is false (its :meth:`~TopicPublishInfo.select_one` raises :class:`NoRouteError`).
    The route itself is not modified.
    """
    if route.orderTopicConf:
        queues = _order_conf_queues(topic, route.orderTopicConf)
        return TopicPublishInfo(topic, tuple(queues), ordered=True, route=route, start=start)
    brokers: dict[str, dict[int, str]] = {}
    for bd in route.brokerDatas:
        brokers.setdefault(bd.brokerName, bd.brokerAddrs)  # Java takes the first broker data of a name
    out: list[MessageQueue] = []
    qds: list[QueueData] = sorted(route.queueDatas, key=lambda qd: _java_order(qd.brokerName))
    for qd in qds:
        if not is_writeable(qd.perm):
            continue
        addrs = brokers.get(qd.brokerName)
        if addrs is None or MASTER_ID not in addrs:
            continue
        nums = _queue_count(qd.brokerName, qd.writeQueueNums)
        out.extend(MessageQueue(topic, qd.brokerName, i) for i in range(nums))
    return TopicPublishInfo(topic, tuple(out), ordered=False, route=route, start=start)


# --------------------------------------------------------------------------------- subscribe, addrs


def subscribe_queues(topic: str, route: TopicRouteData) -> list[MessageQueue]:
    """Java ``topicRouteData2TopicSubscribeInfo``: ids ``0..readQueueNums-1`` of each readable queue
    data, de-duplicated (Java returns a set) and sorted by broker name, then queue id.

    Unlike publishing, brokers without a master count (consumers may read from slaves), and
    ``orderTopicConf`` is ignored.
    """
    found: set[MessageQueue] = set()
    for qd in route.queueDatas:
        if is_readable(qd.perm):
            nums = _queue_count(qd.brokerName, qd.readQueueNums)
            found.update(MessageQueue(topic, qd.brokerName, i) for i in range(nums))
    return sorted(found)


def broker_addresses(route: TopicRouteData) -> dict[str, dict[int, str]]:
    """Broker name → {broker id → ``ip:port``} (id 0 is the master), copied from the route.

    When a name appears twice the last broker data wins, as in Java's ``brokerAddrTable``, which
    ``updateTopicRouteInfoFromNameServer`` fills with ``put``.
    """
    return {bd.brokerName: dict(bd.brokerAddrs) for bd in route.brokerDatas}


def master_address(route: TopicRouteData, broker_name: str) -> str | None:
    """The master's address of ``broker_name`` (``findBrokerAddressInPublish``), or None when the
    route does not list the broker or the broker has no master."""
    for bd in reversed(route.brokerDatas):
        if bd.brokerName == broker_name:
            return bd.brokerAddrs.get(MASTER_ID)
    return None
