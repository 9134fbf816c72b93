"""Queue allocation strategies for rebalancing (Java client/consumer/rebalance)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketlite.client.allocate import (
    AllocateMachineRoomNearby,
    AllocateMessageQueueAveragely,
    AllocateMessageQueueAveragelyByCircle,
    AllocateMessageQueueByConfig,
    AllocateMessageQueueByMachineRoom,
    AllocateMessageQueueConsistentHash,
    AllocateStrategy,
    ConsistentHashRouter,
    java_queue_string,
    md5_hash,
    strategy_by_name,
)
from rocketlite.protocol.bodies import MessageQueue

ROOMS = ("room0", "room1", "room2")


def mqs(n: int, broker: str = "brokerName", topic: str = "topic_test") -> list[MessageQueue]:
    return [MessageQueue(topic=topic, brokerName=broker, queueId=i) for i in range(n)]


def cids(n: int, prefix: str = "CID-") -> list[str]:
    return [f"{prefix}{i}" for i in range(n)]


def room_of_queue(mq: MessageQueue) -> str:
    return mq.brokerName.split("@")[0]


def room_of_client(cid: str) -> str:
    return f"room{len(cid) % 4}"  # room3 has no queues; some queue rooms may have no consumer


def nearby(delegate: AllocateStrategy | None = None) -> AllocateMachineRoomNearby:
    delegate = delegate or AllocateMessageQueueAveragely()
    return AllocateMachineRoomNearby(delegate, room_of_queue, room_of_client)


def allocations(s: AllocateStrategy, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
                ) -> dict[str, list[MessageQueue]]:
    return {cid: s.allocate("G", cid, mq_all, cid_all) for cid in cid_all}


def owners(s: AllocateStrategy, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
           ) -> dict[MessageQueue, str]:
    return {mq: cid for cid, got in allocations(s, mq_all, cid_all).items() for mq in got}


# ------------------------------------------------------------------------------ every strategy

PARTITIONING = [
    AllocateMessageQueueAveragely(),
    AllocateMessageQueueAveragelyByCircle(),
    AllocateMessageQueueConsistentHash(),
    AllocateMessageQueueConsistentHash(virtual_node_count=3),
    AllocateMessageQueueByMachineRoom(consumeridcs=ROOMS),
    nearby(),
    nearby(AllocateMessageQueueAveragelyByCircle()),
    nearby(AllocateMessageQueueConsistentHash()),
]
IDS = ["avg", "circle", "hash", "hash3", "room", "nearby-avg", "nearby-circle", "nearby-hash"]


@st.composite
def queues_and_clients(draw: st.DrawFn) -> tuple[list[MessageQueue], list[str]]:
    n = draw(st.integers(0, 64))
    brokers = draw(st.lists(st.sampled_from([f"{r}@broker-{b}" for r in ROOMS for b in "ab"]),
                            min_size=1, max_size=4, unique=True))
    topic = draw(st.sampled_from(["T", "topic_test", "%RETRY%G"]))
    queues = sorted(MessageQueue(topic=topic, brokerName=brokers[i % len(brokers)], queueId=i // len(brokers))
                    for i in range(n))
    clients = sorted(draw(st.lists(st.text(min_size=1, max_size=12), min_size=1, max_size=10, unique=True)))
    return queues, clients


@pytest.mark.parametrize("strategy", PARTITIONING, ids=IDS)
@given(qc=queues_and_clients())
def test_every_queue_goes_to_exactly_one_consumer(strategy: AllocateStrategy,
                                                  qc: tuple[list[MessageQueue], list[str]]) -> None:
    mq_all, cid_all = qc
    got = allocations(strategy, mq_all, cid_all)
    counts = Counter(mq for share in got.values() for mq in share)
    assert all(c == 1 for c in counts.values())
    assert set(counts) == set(mq_all)
    for share in got.values():  # each share keeps mq_all's order within a room
        assert share == sorted(share) or isinstance(strategy, AllocateMachineRoomNearby)


@pytest.mark.parametrize("strategy", PARTITIONING, ids=IDS)
def test_checks_like_java(strategy: AllocateStrategy) -> None:
    queues, clients = mqs(6, "room1@broker-a"), cids(2)
    assert strategy.allocate("G", "2147483647", queues, clients) == []  # Java's testCurrentCIDNotExists
    assert strategy.allocate("G", "CID-0", [], clients) == []
    assert strategy.allocate("G", "CID-0", queues, []) == []
    with pytest.raises(ValueError, match="currentCID is empty"):
        strategy.allocate("G", "", queues, clients)


# ------------------------------------------------------------------------------ AVG, AVG_BY_CIRCLE


@pytest.mark.parametrize(("n_mq", "n_cid", "expected"), [
    (8, 3, [[0, 1, 2], [3, 4, 5], [6, 7]]),
    (10, 4, [[0, 1, 2], [3, 4, 5], [6, 7], [8, 9]]),  # Java's test: sizes 3, 3, 2, 2
    (6, 3, [[0, 1], [2, 3], [4, 5]]),
    (3, 3, [[0], [1], [2]]),
    (2, 4, [[0], [1], [], []]),
    (1, 1, [[0]]),
])
def test_averagely(n_mq: int, n_cid: int, expected: list[list[int]]) -> None:
    got = allocations(AllocateMessageQueueAveragely(), mqs(n_mq), cids(n_cid))
    assert [[mq.queueId for mq in share] for share in got.values()] == expected


@pytest.mark.parametrize(("n_mq", "n_cid", "expected"), [
    (8, 3, [[0, 3, 6], [1, 4, 7], [2, 5]]),
    (2, 4, [[0], [1], [], []]),
    (5, 1, [[0, 1, 2, 3, 4]]),
])
def test_averagely_by_circle(n_mq: int, n_cid: int, expected: list[list[int]]) -> None:
    got = allocations(AllocateMessageQueueAveragelyByCircle(), mqs(n_mq), cids(n_cid))
    assert [[mq.queueId for mq in share] for share in got.values()] == expected


# ------------------------------------------------------------------------------ CONSISTENT_HASH


def test_md5_hash_and_queue_key_are_javas() -> None:
    # Values printed by Java's ConsistentHashRouter.MD5Hash (JDK 17, UTF-8) for the same keys.
    key = "MessageQueue [topic=topic_test, brokerName=brokerName, queueId=0]"
    assert java_queue_string(mqs(1)[0]) == key
    assert md5_hash(key) == 2171879703
    assert md5_hash("CID-0-0") == 1900518137
    assert md5_hash("CID-1-9") == 3120155837
    assert md5_hash("été-0") == 2864432838
    assert md5_hash("消费者-3") == 3930683456


@pytest.mark.parametrize(("vnodes", "n_cid", "expected"), [
    # From the Java algorithm (MD5Hash + TreeMap ring, tailMap/firstKey) run on JDK 17.
    (10, 3, ["CID-2", "CID-0", "CID-1", "CID-2", "CID-2", "CID-2", "CID-0", "CID-0"]),
    (10, 4, ["CID-2", "CID-0", "CID-3", "CID-2", "CID-2", "CID-2", "CID-3", "CID-3"]),
    (3, 3, ["CID-0", "CID-1", "CID-1", "CID-0", "CID-2", "CID-0", "CID-0", "CID-0"]),
])
def test_consistent_hash_matches_java(vnodes: int, n_cid: int, expected: list[str]) -> None:
    got = owners(AllocateMessageQueueConsistentHash(vnodes), mqs(8), cids(n_cid))
    assert [got[mq] for mq in mqs(8)] == expected


@given(qc=queues_and_clients(), new=st.text(min_size=1, max_size=12))
def test_consistent_hash_moves_only_the_new_or_removed_consumers_queues(
        qc: tuple[list[MessageQueue], list[str]], new: str) -> None:
    mq_all, cid_all = qc
    strategy = AllocateMessageQueueConsistentHash()
    before = owners(strategy, mq_all, cid_all)
    if new not in cid_all:
        after = owners(strategy, mq_all, sorted([*cid_all, new]))
        assert all(after[mq] in (before[mq], new) for mq in mq_all)
    if len(cid_all) > 1:
        gone = cid_all[0]
        after = owners(strategy, mq_all, cid_all[1:])
        assert all(after[mq] == before[mq] for mq in mq_all if before[mq] != gone)


def test_consistent_hash_adding_a_consumer_moves_a_minority() -> None:
    strategy = AllocateMessageQueueConsistentHash()
    queues = mqs(64)
    before = owners(strategy, queues, cids(4))
    after = owners(strategy, queues, cids(5))
    moved = [mq for mq in queues if before[mq] != after[mq]]
    assert 0 < len(moved) < len(queues) // 2
    assert {after[mq] for mq in moved} == {"CID-4"}


def test_consistent_hash_custom_hash_and_no_virtual_nodes() -> None:
    ring = {"a-0": 10, "b-0": 20}
    queues = mqs(3)
    keys = {java_queue_string(q): k for q, k in zip(queues, (15, 25, 10), strict=True)}

    def h(key: str) -> int:
        return ring.get(key, keys.get(key, 0))

    strategy = AllocateMessageQueueConsistentHash(1, h)
    # 15 goes up to 20; 25 wraps around to 10; 10 is a node's own position, which that node takes
    assert owners(strategy, queues, ["a", "b"]) == {queues[0]: "b", queues[1]: "a", queues[2]: "a"}
    assert owners(AllocateMessageQueueConsistentHash(0), queues, ["a", "b"]) == {}
    with pytest.raises(ValueError, match="virtualNodeCnt"):
        AllocateMessageQueueConsistentHash(-1)


def test_router_like_javas() -> None:
    hashed: list[str] = []

    def h(key: str) -> int:
        hashed.append(key)
        return md5_hash(key)

    router = ConsistentHashRouter(["a", "b"], 2, h)
    assert router.existing_replicas("a") == 2
    router.add_node("a", 3)  # numbered after the replicas it has: a-2, a-3, a-4
    assert router.existing_replicas("a") == 5
    assert hashed == ["a-0", "a-1", "b-0", "b-1", "a-2", "a-3", "a-4"]
    with pytest.raises(ValueError, match="illegal virtual node counts"):
        router.add_node("c", -1)
    router.remove_node("a")
    assert router.existing_replicas("a") == 0
    assert router.route_node("anything") == "b"
    router.remove_node("b")
    assert router.route_node("anything") is None


# ------------------------------------------------------------------------------ CONFIG


def test_config_returns_exactly_its_list() -> None:
    mine = [MessageQueue(topic="T", brokerName="b", queueId=3),
            MessageQueue(topic="T", brokerName="a", queueId=1)]
    strategy = AllocateMessageQueueByConfig(mine)
    assert strategy.allocate("G", "CID-0", mqs(8), cids(2)) == mine
    assert strategy.allocate("G", "unknown", [], []) == mine  # no checks, as in Java
    strategy.allocate("G", "CID-0", mqs(8), cids(2)).clear()
    assert strategy.allocate("G", "CID-0", mqs(8), cids(2)) == mine
    assert AllocateMessageQueueByConfig().allocate("G", "CID-0", mqs(8), cids(2)) == []


# ------------------------------------------------------------------------------ MACHINE_ROOM


def test_machine_room_java_example() -> None:
    queues = [*mqs(5, "room1@broker-a", "topic"),
              *(MessageQueue(topic="topic", brokerName="room2@broker-b", queueId=i) for i in range(5, 10))]
    got = allocations(AllocateMessageQueueByMachineRoom({"room1"}), queues, cids(2, "CID_PREFIX"))
    assert {c: [mq.queueId for mq in share] for c, share in got.items()} == {
        "CID_PREFIX0": [0, 1, 4], "CID_PREFIX1": [2, 3]}


def test_machine_room_filters_by_room_and_java_split() -> None:
    names = ["room1@a", "room2@b", "room1", "room1@", "room1@a@b", "@c", "room1@@"]
    queues = sorted(MessageQueue(topic="T", brokerName=n, queueId=0) for n in names)
    taken = {mq.brokerName for share in allocations(
        AllocateMessageQueueByMachineRoom({"room1", ""}), queues, cids(3)).values() for mq in share}
    assert taken == {"room1@a", "@c"}  # Java's split drops trailing empty parts
    assert owners(AllocateMessageQueueByMachineRoom(), queues, cids(3)) == {}


# ------------------------------------------------------------------------------ MACHINE_ROOM_NEARBY


def test_nearby_prefers_own_room_and_shares_rooms_without_consumers() -> None:
    queues = sorted([*mqs(4, "room1@a"), *mqs(4, "room2@b"), *mqs(3, "room3@c"), *mqs(2, "room0@e")])
    clients = ["room1-x", "room1-y", "room2-z"]
    strategy = AllocateMachineRoomNearby(AllocateMessageQueueAveragely(), room_of_queue,
                                         lambda cid: cid.split("-")[0])
    assert strategy.name == "MACHINE_ROOM_NEARBY-AVG"
    got = {c: [(mq.brokerName, mq.queueId) for mq in share]
           for c, share in allocations(strategy, queues, clients).items()}
    assert got == {  # own room first, then the rooms without consumers in name order
        "room1-x": [("room1@a", 0), ("room1@a", 1), ("room0@e", 0), ("room3@c", 0)],
        "room1-y": [("room1@a", 2), ("room1@a", 3), ("room0@e", 1), ("room3@c", 1)],
        "room2-z": [("room2@b", i) for i in range(4)] + [("room3@c", 2)],
    }


def test_nearby_rejects_an_empty_machine_room() -> None:
    strategy = AllocateMachineRoomNearby(AllocateMessageQueueAveragely(), lambda mq: "", room_of_client)
    with pytest.raises(ValueError, match="Machine room is null for mq"):
        strategy.allocate("G", "CID-0", mqs(2), cids(2))
    strategy = AllocateMachineRoomNearby(AllocateMessageQueueAveragely(), room_of_queue, lambda cid: "")
    with pytest.raises(ValueError, match="Machine room is null for consumer id"):
        strategy.allocate("G", "CID-0", mqs(2), cids(2))


# ------------------------------------------------------------------------------ by name


@pytest.mark.parametrize(("name", "cls"), [
    ("AVG", AllocateMessageQueueAveragely),
    ("AVG_BY_CIRCLE", AllocateMessageQueueAveragelyByCircle),
    ("CONSISTENT_HASH", AllocateMessageQueueConsistentHash),
    ("CONFIG", AllocateMessageQueueByConfig),
    ("MACHINE_ROOM", AllocateMessageQueueByMachineRoom),
])
def test_strategy_by_name(name: str, cls: type) -> None:
    s = strategy_by_name(name)
    assert isinstance(s, cls)
    assert s.name == name


def test_strategy_by_name_passes_arguments() -> None:
    s = strategy_by_name("CONSISTENT_HASH", virtual_node_count=3)
    assert isinstance(s, AllocateMessageQueueConsistentHash)
    assert s.virtual_node_count == 3
    assert strategy_by_name("MACHINE_ROOM", consumeridcs={"r"}).allocate(
        "G", "c", [MessageQueue(topic="T", brokerName="r@b", queueId=0)], ["c"]) != []
    n = strategy_by_name("MACHINE_ROOM_NEARBY", delegate=AllocateMessageQueueAveragelyByCircle(),
                         machine_room_of_queue=room_of_queue, machine_room_of_client=room_of_client)
    assert n.name == "MACHINE_ROOM_NEARBY-AVG_BY_CIRCLE"
    again = strategy_by_name(n.name, machine_room_of_queue=room_of_queue,
                             machine_room_of_client=room_of_client)
    assert isinstance(again, AllocateMachineRoomNearby)
    assert isinstance(again.delegate, AllocateMessageQueueAveragelyByCircle)


def test_strategy_by_name_unknown() -> None:
    with pytest.raises(ValueError, match=r"unknown allocate strategy 'AVERAGE'.*AVG"):
        strategy_by_name("AVERAGE")
    with pytest.raises(ValueError, match="unknown allocate strategy 'NOPE'"):
        strategy_by_name("MACHINE_ROOM_NEARBY-NOPE")
