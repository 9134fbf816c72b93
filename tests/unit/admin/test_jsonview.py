"""``jsonable``: the admin results as the JSON ``--json`` prints (camelCase keys, bytes in the
format asked, protocol bodies as their wire JSON)."""

from __future__ import annotations

import dataclasses
import json

import pytest

from rocketlite.admin.jsonview import camel, jsonable
from rocketlite.protocol.admin_bodies import ClientConnection, ConsumerConnection, ProducerConnection
from rocketlite.protocol.bodies import QueueData, TopicRouteData


@dataclasses.dataclass
class Inner:
    queue_id: int
    body: bytes


@dataclasses.dataclass
class Outer:
    broker_name: str
    items: list[Inner]
    table: dict[str, int]
    maybe: str | None = None


def test_dataclasses_become_camel_case_objects() -> None:
    obj = Outer("b", [Inner(1, b"\x00hi")], {"k_1": 2})
    assert jsonable(obj) == {"brokerName": "b", "items": [{"queueId": 1, "body": "AGhp"}],
                             "table": {"k_1": 2}, "maybe": None}
    assert jsonable(obj, bytes.hex)["items"][0]["body"] == "006869"
    json.dumps(jsonable(obj))  # plain JSON values only


def test_protocol_bodies_keep_their_wire_json() -> None:
    route = TopicRouteData(queueDatas=[QueueData(brokerName="a", readQueueNums=2,
                                                 writeQueueNums=2, perm=6)])
    assert jsonable(route) == route.to_obj()


def test_camel() -> None:
    assert [camel(n) for n in ("x", "max_offset", "in_sync_slaves")] == \
        ["x", "maxOffset", "inSyncSlaves"]


def test_other_objects_are_refused() -> None:
    with pytest.raises(TypeError):
        jsonable(object())


def test_connections_name_the_client_version() -> None:
    ons = ClientConnection(clientId="192.0.2.2@77", clientAddr="127.0.0.1:1", language="JAVA",
                           version=121)
    cpp = ClientConnection(clientId="78-127.0.0.1@DEFAULT", clientAddr="127.0.0.1:2",
                           language="CPP", version=63)
    assert jsonable([ons]) == [{**ons.to_obj(), "versionDesc": "V3_4_9"}]
    cc = jsonable(ConsumerConnection(connectionSet={ons, cpp}))
    assert sorted((c["clientId"], c["version"], c["versionDesc"]) for c in cc["connectionSet"]) \
        == [("192.0.2.2@77", 121, "V3_4_9"), ("78-127.0.0.1@DEFAULT", 63, "V3_1_8")]
    pc = jsonable(ProducerConnection(connectionSet={cpp}))
    assert pc["connectionSet"] == [{**cpp.to_obj(), "versionDesc": "V3_1_8"}]
    assert "versionDesc" not in ons.to_obj()  # the wire body stays Java's Connection
