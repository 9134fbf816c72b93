"""Queue allocation for consumer rebalancing: which of a topic's queues this consumer reads.

Ports the strategies of Java's ``client/consumer/rebalance`` package by behaviour, so a group that
mixes these consumers with Java ones splits its queues the same way. The caller (the rebalancer)
passes ``mq_all`` and ``cid_all`` already sorted, as Java's ``RebalanceImpl`` does; every consumer of
the group computes its own share from the same two lists, so the shares partition the queues.

* ``AVG`` (:class:`AllocateMessageQueueAveragely`): contiguous blocks; the first
  ``len(mq_all) % len(cid_all)`` consumers get one queue more (8 queues, 3 consumers: 3, 3, 2).
* ``AVG_BY_CIRCLE`` (:class:`AllocateMessageQueueAveragelyByCircle`): consumer ``i`` of ``n`` gets
  queues ``i, i+n, i+2n, ...``.
* ``CONSISTENT_HASH`` (:class:`AllocateMessageQueueConsistentHash`): a ring of ``virtual_node_count``
  points per consumer (keys ``"<cid>-<i>"``); a queue goes to the first point at or after the hash
  of Java's ``MessageQueue.toString()``, wrapping around. The default hash is Java's ``MD5Hash``:
  the first 4 bytes of the MD5 of the UTF-8 key, big-endian, unsigned. Adding or removing a
  consumer moves only the queues that consumer gains or loses.
* ``CONFIG`` (:class:`AllocateMessageQueueByConfig`): always the configured list, whatever the
  arguments (Java does no checks at all here).
* ``MACHINE_ROOM`` (:class:`AllocateMessageQueueByMachineRoom`): only queues whose broker name is
  ``"<room>@<broker>"`` with ``<room>`` in ``consumeridcs``; each consumer gets a contiguous block
  of ``len // n`` of them plus, for the first ``len % n`` consumers, one of the leftovers at the tail.
  Queues of other rooms, or whose broker name Java's ``split("@")`` (which drops trailing empty
  parts) does not cut in exactly two, go to nobody.
* ``MACHINE_ROOM_NEARBY`` (:class:`AllocateMachineRoomNearby`): wraps another strategy. Queues in
  the consumer's own machine room are split among that room's consumers; queues of a room with no
  consumer at all are split among every consumer. Its ``name`` is Java's
  ``"MACHINE_ROOM_NEARBY-" + delegate.name``.

Checks, as Java's: an empty ``current_cid`` raises :class:`ValueError`; a ``current_cid`` not in
``cid_all`` gives ``[]`` (Java logs a ``[BUG]`` line). Where Java throws for an empty ``mq_all`` (or
``cid_all``) this returns ``[]``.
"""

from __future__ import annotations

import hashlib
import logging
from bisect import bisect_left
from collections.abc import Callable, Collection, Iterable, Sequence
from typing import Any, Protocol

from rocketlite.protocol.bodies import MessageQueue

__all__ = [
    "AllocateMachineRoomNearby",
    "AllocateMessageQueueAveragely",
    "AllocateMessageQueueAveragelyByCircle",
    "AllocateMessageQueueByConfig",
    "AllocateMessageQueueByMachineRoom",
    "AllocateMessageQueueConsistentHash",
    "AllocateStrategy",
    "ConsistentHashRouter",
    "HashFunction",
    "java_queue_string",
    "md5_hash",
    "strategy_by_name",
]

log = logging.getLogger(__name__)

HashFunction = Callable[[str], int]
"""Java's ``consistenthash.HashFunction``: a key to a (Java ``long``) ring position."""


class AllocateStrategy(Protocol):
    """Java's ``AllocateMessageQueueStrategy``."""

    name: str

    def allocate(
        self, group: str, current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
    ) -> list[MessageQueue]: ...


def _check(group: str, current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]) -> bool:
    """Java's ``AbstractAllocateMessageQueueStrategy.check``; ``False`` means allocate nothing."""
    if not current_cid:
        raise ValueError("currentCID is empty")
    if not mq_all:
        return False
    if current_cid not in cid_all:
        log.info("[BUG] ConsumerGroup: %s The consumerId: %s not in cidAll: %s", group, current_cid, cid_all)
        return False
    return True


class AllocateMessageQueueAveragely:
    """``AVG``: contiguous blocks, the remainder going one each to the first consumers."""

    name = "AVG"

    def allocate(
        self, group: str, current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
    ) -> list[MessageQueue]:
        if not _check(group, current_cid, mq_all, cid_all):
            return []
        index = cid_all.index(current_cid)
        n_mq, n_cid = len(mq_all), len(cid_all)
        mod = n_mq % n_cid
        size = 1 if n_mq <= n_cid else n_mq // n_cid + (1 if index < mod else 0)
        start = index * size if index < mod else index * size + mod
        return [mq_all[(start + i) % n_mq] for i in range(min(size, n_mq - start))]


class AllocateMessageQueueAveragelyByCircle:
    """``AVG_BY_CIRCLE``: consumer ``i`` of ``n`` takes queues ``i, i+n, i+2n, ...``."""

    name = "AVG_BY_CIRCLE"

    def allocate(
        self, group: str, current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
    ) -> list[MessageQueue]:
        if not _check(group, current_cid, mq_all, cid_all):
            return []
        return list(mq_all[cid_all.index(current_cid) :: len(cid_all)])


def md5_hash(key: str) -> int:
    """Java's ``ConsistentHashRouter.MD5Hash``: the first 4 bytes of ``MD5(key.getBytes())``,
    big-endian, as an unsigned value in a ``long``. ``getBytes()`` is taken as UTF-8 (the default
    charset on Linux, and everywhere since Java 18), with Java's ``?`` for unpaired surrogates."""
    digest = hashlib.md5(key.encode("utf-8", "replace"), usedforsecurity=False).digest()
    return int.from_bytes(digest[:4], "big")


def java_queue_string(mq: MessageQueue) -> str:
    """Java's ``MessageQueue.toString()``, the key a queue is hashed by."""
    return f"MessageQueue [topic={mq.topic}, brokerName={mq.brokerName}, queueId={mq.queueId}]"


class ConsistentHashRouter:
    """Java's ``consistenthash.ConsistentHashRouter`` over node keys (client ids).

    Virtual node ``i`` of node ``k`` sits at ``hash(f"{k}-{i}")``; a later virtual node with the
    same position replaces the earlier one (Java's ``TreeMap.put``). Adding a node again numbers
    its new virtual nodes after the ones it still has on the ring, as Java does.
    """

    def __init__(self, nodes: Iterable[str], virtual_node_count: int, hash_function: HashFunction = md5_hash):
        self._hash = hash_function
        self._ring: dict[int, str] = {}
        self._positions: list[int] = []
        self._added: set[str] = set()
        for node in nodes:
            self.add_node(node, virtual_node_count)

    def add_node(self, node: str, virtual_node_count: int) -> None:
        if virtual_node_count < 0:
            raise ValueError(f"illegal virtual node counts :{virtual_node_count}")
        existing = self.existing_replicas(node) if node in self._added else 0
        self._added.add(node)
        for i in range(virtual_node_count):
            self._ring[self._hash(f"{node}-{i + existing}")] = node
        self._positions = sorted(self._ring)

    def remove_node(self, node: str) -> None:
        self._ring = {pos: owner for pos, owner in self._ring.items() if owner != node}
        self._positions = sorted(self._ring)
        self._added.discard(node)

    def existing_replicas(self, node: str) -> int:
        return sum(1 for owner in self._ring.values() if owner == node)

    def route_node(self, object_key: str) -> str | None:
        """The node owning the first ring position at or after ``hash(object_key)``, wrapping."""
        if not self._positions:
            return None
        i = bisect_left(self._positions, self._hash(object_key))
        return self._ring[self._positions[i if i < len(self._positions) else 0]]


class AllocateMessageQueueConsistentHash:
    """``CONSISTENT_HASH``: each queue to the consumer after it on a hash ring of the consumers."""

    name = "CONSISTENT_HASH"

    def __init__(self, virtual_node_count: int = 10, hash_function: HashFunction | None = None):
        if virtual_node_count < 0:
            raise ValueError(f"illegal virtualNodeCnt :{virtual_node_count}")
        self.virtual_node_count = virtual_node_count
        self.hash_function: HashFunction = md5_hash if hash_function is None else hash_function
        # The rebalancer asks once per topic with the same consumers: keep the last ring.
        self._last: tuple[tuple[str, ...], ConsistentHashRouter] | None = None

    def _router(self, cid_all: Sequence[str]) -> ConsistentHashRouter:
        key = tuple(cid_all)
        last = self._last
        if last is not None and last[0] == key:
            return last[1]
        router = ConsistentHashRouter(key, self.virtual_node_count, self.hash_function)
        self._last = (key, router)
        return router

    def allocate(
        self, group: str, current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
    ) -> list[MessageQueue]:
        if not _check(group, current_cid, mq_all, cid_all):
            return []
        router = self._router(cid_all)
        return [mq for mq in mq_all if router.route_node(java_queue_string(mq)) == current_cid]


class AllocateMessageQueueByConfig:
    """``CONFIG``: the configured queues, whatever the arguments (no checks, as in Java)."""

    name = "CONFIG"

    def __init__(self, message_queues: Iterable[MessageQueue] = ()):
        self.message_queues = list(message_queues)

    def allocate(
        self, group: str, current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
    ) -> list[MessageQueue]:
        return list(self.message_queues)


def _java_split(s: str, sep: str) -> list[str]:
    """Java's ``String.split`` by a literal one-character separator: trailing empty parts are dropped
    (``"room1@"`` is one part, ``"@broker"`` two). Java gives ``[""]`` for ``""``, this ``[]``."""
    parts = s.split(sep)
    while parts and not parts[-1]:
        parts.pop()
    return parts


class AllocateMessageQueueByMachineRoom:
    """``MACHINE_ROOM``: only queues of brokers named ``"<room>@<broker>"`` with ``<room>`` in
    ``consumeridcs``, split in blocks with the leftovers dealt from the tail."""

    name = "MACHINE_ROOM"

    def __init__(self, consumeridcs: Collection[str] = ()):
        self.consumeridcs = frozenset(consumeridcs)

    def allocate(
        self, group: str, current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
    ) -> list[MessageQueue]:
        if not _check(group, current_cid, mq_all, cid_all):
            return []
        index = cid_all.index(current_cid)
        pre: list[MessageQueue] = []
        for mq in mq_all:
            parts = _java_split(mq.brokerName, "@")
            if len(parts) == 2 and parts[0] in self.consumeridcs:
                pre.append(mq)
        n = len(cid_all)
        per, rem = divmod(len(pre), n)
        result = pre[per * index : per * index + per]
        if rem > index:
            result.append(pre[index + per * n])
        return result


class AllocateMachineRoomNearby:
    """``MACHINE_ROOM_NEARBY``: a consumer takes (through ``delegate``) its share of its own machine
    room's queues among that room's consumers, and of every consumer-less room's queues among all
    consumers. Java's ``MachineRoomResolver`` is the pair of callables; neither may return ``""``."""

    NAME = "MACHINE_ROOM_NEARBY"

    def __init__(
        self,
        delegate: AllocateStrategy,
        machine_room_of_queue: Callable[[MessageQueue], str],
        machine_room_of_client: Callable[[str], str],
    ):
        self.delegate = delegate
        self.machine_room_of_queue = machine_room_of_queue
        self.machine_room_of_client = machine_room_of_client
        self.name = f"{self.NAME}-{delegate.name}"

    def allocate(
        self, group: str, current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
    ) -> list[MessageQueue]:
        if not _check(group, current_cid, mq_all, cid_all):
            return []
        room_queues: dict[str, list[MessageQueue]] = {}
        for mq in mq_all:
            room = self.machine_room_of_queue(mq)
            if not room:
                raise ValueError(f"Machine room is null for mq {java_queue_string(mq)}")
            room_queues.setdefault(room, []).append(mq)
        room_clients: dict[str, list[str]] = {}
        for cid in cid_all:
            room = self.machine_room_of_client(cid)
            if not room:
                raise ValueError(f"Machine room is null for consumer id {cid}")
            room_clients.setdefault(room, []).append(cid)

        result: list[MessageQueue] = []
        current_room = self.machine_room_of_client(current_cid)
        own = room_queues.pop(current_room, None)
        if own:
            result.extend(self.delegate.allocate(group, current_cid, own, room_clients[current_room]))
        for room in sorted(room_queues):  # Java's TreeMap order
            if room not in room_clients:
                result.extend(self.delegate.allocate(group, current_cid, room_queues[room], cid_all))
        return result


_BY_NAME: dict[str, Callable[..., AllocateStrategy]] = {
    AllocateMessageQueueAveragely.name: AllocateMessageQueueAveragely,
    AllocateMessageQueueAveragelyByCircle.name: AllocateMessageQueueAveragelyByCircle,
    AllocateMessageQueueConsistentHash.name: AllocateMessageQueueConsistentHash,
    AllocateMessageQueueByConfig.name: AllocateMessageQueueByConfig,
    AllocateMessageQueueByMachineRoom.name: AllocateMessageQueueByMachineRoom,
    AllocateMachineRoomNearby.NAME: AllocateMachineRoomNearby,
}


def strategy_by_name(name: str, **kwargs: Any) -> AllocateStrategy:
    """The strategy Java calls ``name``, built with ``kwargs`` (its constructor's arguments).

    ``"MACHINE_ROOM_NEARBY-<DELEGATE>"`` (a nearby strategy's own ``name``) builds the delegate by
    name, without arguments, unless ``delegate=`` is given.
    """
    prefix = AllocateMachineRoomNearby.NAME + "-"
    if name.startswith(prefix) and name != prefix:
        kwargs.setdefault("delegate", strategy_by_name(name[len(prefix) :]))
        name = AllocateMachineRoomNearby.NAME
    factory = _BY_NAME.get(name)
    if factory is None:
        raise ValueError(f"unknown allocate strategy {name!r}; known: {', '.join(_BY_NAME)}")
    return factory(**kwargs)
