"""A few Remoting requests the conformance harness sends itself, as RocketMQ's admin tool would:
create a topic at the broker (UPDATE_AND_CREATE_TOPIC, 17) and read a topic's route from the
NameServer (GET_ROUTEINFO_BY_TOPIC, 105).

Deliberately independent of rocketlite's own codec (the code under test): blocking sockets, JSON
headers (serialize type 0), loopback only, every call bounded by a timeout. Frame layout
(PROTOCOL.md §1): int32 length (= 4 + header + body), int32 (type << 24 | header length), header
JSON, body.
"""

from __future__ import annotations

import itertools
import json
import re
import socket
import struct
import time
from dataclasses import dataclass, field
from typing import Any

from rocketlite.acl.sign import Credentials

UPDATE_AND_CREATE_TOPIC = 17
QUERY_CONSUMER_OFFSET = 14
LOCK_BATCH_MQ = 41
GET_ROUTEINFO_BY_TOPIC = 105
SUCCESS = 0
TOPIC_NOT_EXIST = 17
QUERY_NOT_FOUND = 22

_opaque = itertools.count(1)
_BARE_INT_KEY = re.compile(r'([{,]\s*)(-?\d+)\s*:')


def loads_lenient(text: str | bytes) -> Any:
    """Parse JSON as fastjson writes it: integer map keys may be bare (``{0:"a"}``)."""
    if isinstance(text, bytes):
        text = text.decode("utf-8")
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return json.loads(_BARE_INT_KEY.sub(r'\1"\2":', text))


@dataclass
class Response:
    code: int
    remark: str | None
    ext: dict[str, Any] = field(default_factory=dict)
    body: bytes = b""


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError(f"connection closed after {len(buf)} of {n} bytes")
        buf += chunk
    return bytes(buf)


def request(addr: str, code: int, ext: dict[str, str], body: bytes = b"",
            timeout: float = 5.0, credentials: Credentials | None = None) -> Response:
    """Send one request and read its response (skipping any server-initiated request); signed
    with ``credentials`` when given (for a broker with an ACL)."""
    if credentials is not None:
        ext = dict(ext)
        credentials.sign(ext, body)
    host, port = addr.rsplit(":", 1)
    if host not in ("127.0.0.1", "localhost", "::1"):
        raise ValueError(f"the conformance harness only talks to loopback, not {addr}")
    opaque = next(_opaque)
    header = json.dumps({
        "code": code, "extFields": ext, "flag": 0, "language": "JAVA", "opaque": opaque,
        "serializeTypeCurrentRPC": "JSON", "version": 479,
    }).encode()
    frame = struct.pack(">ii", 4 + len(header) + len(body), len(header)) + header + body
    deadline = time.monotonic() + timeout
    with socket.create_connection((host, int(port)), timeout=timeout) as sock:
        sock.sendall(frame)
        while True:
            sock.settimeout(max(0.01, deadline - time.monotonic()))
            (length,) = struct.unpack(">i", _recv_exactly(sock, 4))
            data = _recv_exactly(sock, length)
            (type_and_len,) = struct.unpack_from(">i", data, 0)
            serialize_type, header_len = (type_and_len >> 24) & 0xFF, type_and_len & 0xFFFFFF
            if serialize_type != 0:
                raise AssertionError(f"a JSON request got a reply of serialize type {serialize_type}"
                                     " (PROTOCOL.md §1: replies use the request's type)")
            head = loads_lenient(data[4 : 4 + header_len])
            if not head.get("flag", 0) & 1 or head.get("opaque") != opaque:
                continue  # a request from the server, or another reply: not ours
            return Response(code=head["code"], remark=head.get("remark"),
                            ext=head.get("extFields") or {}, body=data[4 + header_len :])


def create_topic(broker_addr: str, topic: str, queues: int = 4, timeout: float = 5.0,
                 credentials: Credentials | None = None) -> Response:
    """UPDATE_AND_CREATE_TOPIC as ``mqadmin updateTopic -b ADDR -t TOPIC -r Q -w Q`` sends it."""
    return request(broker_addr, UPDATE_AND_CREATE_TOPIC, {
        "topic": topic, "defaultTopic": "TBW102", "readQueueNums": str(queues),
        "writeQueueNums": str(queues), "perm": "6", "topicFilterType": "SINGLE_TAG",
        "topicSysFlag": "0", "order": "false",
    }, timeout=timeout, credentials=credentials)


def query_consumer_offset(broker_addr: str, group: str, topic: str, queue_id: int,
                          timeout: float = 5.0) -> int:
    """The group's committed offset of one queue (QUERY_CONSUMER_OFFSET), -1 if none is stored
    (QUERY_NOT_FOUND). ``setZeroIfNotFound`` false: Apache's rule answers 0 for an uncommitted
    queue that still starts at 0, which would hide a missing commit."""
    r = request(broker_addr, QUERY_CONSUMER_OFFSET, {
        "consumerGroup": group, "topic": topic, "queueId": str(queue_id),
        "setZeroIfNotFound": "false",
    }, timeout=timeout)
    if r.code == QUERY_NOT_FOUND:
        return -1
    assert r.code == SUCCESS, f"QUERY_CONSUMER_OFFSET {topic}@{group}:{queue_id}: {r.code} {r.remark}"
    return int(r.ext["offset"])


def lock_batch(broker_addr: str, broker_name: str, group: str, client_id: str, topic: str,
               queue_ids: list[int], timeout: float = 5.0) -> set[int]:
    """LOCK_BATCH_MQ as an orderly consumer sends it; the queue ids the broker locked for it."""
    body = json.dumps({
        "clientId": client_id, "consumerGroup": group, "onlyThisBroker": False,
        "mqSet": [{"brokerName": broker_name, "queueId": q, "topic": topic} for q in queue_ids],
    }).encode()
    r = request(broker_addr, LOCK_BATCH_MQ, {}, body, timeout=timeout)
    assert r.code == SUCCESS, f"LOCK_BATCH_MQ {topic}@{group}: {r.code} {r.remark}"
    locked = (loads_lenient(r.body) if r.body else {}).get("lockOKMQSet", [])
    return {int(mq["queueId"]) for mq in locked if mq.get("topic") == topic}


def route(namesrv_addr: str, topic: str, timeout: float = 5.0) -> tuple[int, Any]:
    """(response code, parsed TopicRouteData or None)."""
    r = request(namesrv_addr, GET_ROUTEINFO_BY_TOPIC, {"topic": topic}, timeout=timeout)
    return r.code, (loads_lenient(r.body) if r.code == SUCCESS and r.body else None)


PERM_READ, PERM_WRITE = 0x4, 0x2


def write_queue_count(route_data: Any) -> int:
    """Queues a producer may send to (PermName.isWriteable, as every client checks)."""
    return sum(int(q.get("writeQueueNums", 0)) for q in (route_data or {}).get("queueDatas", [])
               if int(q.get("perm", 0)) & PERM_WRITE)


def read_queue_count(route_data: Any) -> int:
    """Queues a consumer may pull from (PermName.isReadable)."""
    return sum(int(q.get("readQueueNums", 0)) for q in (route_data or {}).get("queueDatas", [])
               if int(q.get("perm", 0)) & PERM_READ)


def wait_for_route(namesrv_addr: str, topic: str, timeout: float = 15.0) -> Any:
    """Poll the NameServer until it routes ``topic`` to at least one writable and one readable
    queue (a route with no readable queue is no more than a template to send with)."""
    deadline = time.monotonic() + timeout
    last: tuple[int, Any] = (-1, None)
    while time.monotonic() < deadline:
        last = route(namesrv_addr, topic)
        if last[0] == SUCCESS and write_queue_count(last[1]) > 0 \
                and read_queue_count(last[1]) > 0:
            return last[1]
        time.sleep(0.1)
    raise AssertionError(f"the NameServer at {namesrv_addr} has no route for {topic} after "
                         f"{timeout} s (last answer: code {last[0]}, body {last[1]})")
