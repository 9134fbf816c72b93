"""What the multi-broker conformance tests (``test_failover_clients``, ``test_slave_consume``)
ask a broker group over Remoting, as the admin tool would: a topic created on the master and
seen on its slave, a queue's max offset, a group's committed offsets; and the keys a scenario
reported.

Requests go through ``remoting_admin`` (the harness's own codec, not rocketlite's).
"""

from __future__ import annotations

import time

import remoting_admin
from harness import Event

GET_ALL_TOPIC_CONFIG, GET_MAX_OFFSET = 21, 30
QUEUES = 4  # every topic these tests create


def topic_on(addr: str, topic: str) -> bool:
    """Whether the broker at ``addr`` holds ``topic``'s config (GET_ALL_TOPIC_CONFIG)."""
    r = remoting_admin.request(addr, GET_ALL_TOPIC_CONFIG, {})
    assert r.code == remoting_admin.SUCCESS, f"GET_ALL_TOPIC_CONFIG at {addr}: {r.code} {r.remark}"
    return topic in remoting_admin.loads_lenient(r.body).get("topicConfigTable", {})


def create_replicated_topic(ns: str, master: str, slave: str, topic: str) -> None:
    """The topic on the master (as ``mqadmin updateTopic`` creates it) and, by the slave's
    10 s sync of the master's topic config, on the slave: with the master gone the slave is
    the one that routes it."""
    r = remoting_admin.create_topic(master, topic, QUEUES)
    assert r.code == remoting_admin.SUCCESS, f"UPDATE_AND_CREATE_TOPIC: {r.code} {r.remark}"
    remoting_admin.wait_for_route(ns, topic)
    deadline = time.monotonic() + 30
    while not topic_on(slave, topic):
        assert time.monotonic() < deadline, f"the slave has no config of {topic} after 30 s"
        time.sleep(0.5)


def max_offset(addr: str, topic: str, queue_id: int) -> int:
    r = remoting_admin.request(addr, GET_MAX_OFFSET, {"topic": topic, "queueId": str(queue_id)})
    assert r.code == remoting_admin.SUCCESS, f"GET_MAX_OFFSET {topic}:{queue_id}: {r.remark}"
    return int(r.ext["offset"])


def queue_ends(addr: str, topic: str) -> dict[int, int]:
    """The max offset of every queue of ``topic`` at ``addr``."""
    return {q: max_offset(addr, topic, q) for q in range(QUEUES)}


def committed(addr: str, group: str, topic: str) -> dict[int, int]:
    """The group's committed offset of every queue of ``topic`` at ``addr`` (-1: none)."""
    return {q: remoting_admin.query_consumer_offset(addr, group, topic, q) for q in range(QUEUES)}


def committed_and_ends(addr: str, group: str, topic: str) -> tuple[dict[int, int], dict[int, int]]:
    """The group's committed offset and the max offset of every queue of ``topic`` at ``addr``."""
    return committed(addr, group, topic), queue_ends(addr, topic)


def keys_of(events: list[Event], kind: str) -> list[str]:
    return [e["key"] for e in events if e["event"] == kind and e.get("key")]
