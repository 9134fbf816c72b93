"""``jsonable``: the admin results as the JSON ``--json`` prints (camelCase keys, bytes in the
format asked, protocol bodies as their wire JSON)."""

from __future__ import annotations

import dataclasses
import json

import pytest

from rocketlite.admin.jsonview import camel, jsonable
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
