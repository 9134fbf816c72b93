"""The dashboard's JSON API over a real broker with traffic (``conftest``), asked with aiohttp's
client as the pages ask it: each answer is the admin function's result (the same figures
``rocketlite admin --json`` prints) and the pages and static files are served; writes are refused
without the login and done with it."""

from __future__ import annotations

import base64
from typing import Any

import aiohttp
import pytest

from dashhelp import DEAD, DLQ_TOPIC, GROUP, LAG, PASSWORD, QUEUES, TOPIC, USER, DashEnv, N, body, key
from rocketlite.client.message import Message
from rocketlite.client.producer import Producer

pytestmark = pytest.mark.integration
AUTH = {"Authorization": "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()}


async def get(url: str, status: int = 200) -> Any:
    async with aiohttp.ClientSession() as s, s.get(url) as r:
        data = await r.json()
        assert r.status == status, (url, r.status, data)
        return data


async def post(url: str, payload: Any, headers: dict[str, str] | None = None,
               status: int = 200) -> Any:
    async with aiohttp.ClientSession() as s, s.post(url, json=payload, headers=headers) as r:
        data = await r.json()
        assert r.status == status, (url, r.status, data)
        return data


async def test_cluster_lists_the_broker_with_its_figures(dash: DashEnv) -> None:
    (b,) = (await get(dash.url + "/api/cluster"))["brokers"]
    assert b["address"] == dash.addr and b["brokerId"] == 0 and b["error"] is None
    assert b["role"] == "ASYNC_MASTER" and b["version"].startswith("rocketlite ")
    assert b["msgPutToday"] >= N + DEAD + LAG and b["commitLogMaxOffset"] > 0
    assert 0.0 < b["diskRatio"] < 1.0


async def test_topics_and_their_queues(dash: DashEnv) -> None:
    topics = {t["topic"]: t for t in (await get(dash.url + "/api/topics"))["topics"]}
    assert topics[TOPIC]["queues"] == QUEUES and topics[TOPIC]["putTotal"] == N
    assert topics[TOPIC]["messages"] == N
    assert not any(t.startswith("%") for t in topics)  # retry and DLQ topics are not listed
    queues = (await get(dash.url + f"/api/topics/{TOPIC}"))["queues"]
    assert [q["queueId"] for q in queues] == list(range(QUEUES))
    assert sum(q["maxOffset"] for q in queues) == N and all(q["minOffset"] == 0 for q in queues)
    (cfg,) = (await get(dash.url + f"/api/topics/{TOPIC}"))["configs"]  # GET_TOPIC_CONFIG
    assert cfg["config"]["topicName"] == TOPIC and cfg["config"]["perm"] == 6
    assert cfg["config"]["readQueueNums"] == cfg["config"]["writeQueueNums"] == QUEUES
    missing = await get(dash.url + "/api/topics/NoSuchTopic", status=404)
    assert "does not exist" in missing["error"]


async def test_message_by_key_and_by_id(dash: DashEnv) -> None:
    (m,) = (await get(dash.url + f"/api/messages?topic={TOPIC}&key={key(7)}"))["messages"]
    assert m["bodyText"] == body(7) and m["keys"] == [key(7)] and m["tags"] == "tagA"
    assert base64.b64decode(m["body"]) == body(7).encode() and m["bodySize"] == len(body(7).encode())
    assert m["msgId"] == dash.msg_ids[key(7)] and m["properties"]["KEYS"] == key(7)
    by_offset_id = (await get(dash.url + f"/api/messages?id={m['offsetMsgId']}"))["messages"]
    assert [x["msgId"] for x in by_offset_id] == [m["msgId"]]
    by_uniq = (await get(dash.url + f"/api/messages?topic={TOPIC}&id={m['msgId']}"))["messages"]
    assert [x["queueOffset"] for x in by_uniq] == [m["queueOffset"]]
    assert (await get(dash.url + f"/api/messages?topic={TOPIC}&key=nokey"))["messages"] == []
    assert "give a topic" in (await get(dash.url + "/api/messages?key=x", status=400))["error"]
    assert "not a message id" in (await get(dash.url + "/api/messages?id=zz", status=400))["error"]


async def test_messages_by_store_time(dash: DashEnv) -> None:
    found = (await get(dash.url + f"/api/messages?topic={TOPIC}&begin=0"))["messages"]
    assert sorted(m["bodyText"] for m in found) == sorted(body(i) for i in range(N))
    assert (await get(dash.url + f"/api/messages?topic={TOPIC}&begin=now"))["messages"] == []
    bad = await get(dash.url + f"/api/messages?topic={TOPIC}&begin=soon", status=400)
    assert "neither milliseconds" in bad["error"]


async def test_consumption_state_of_a_message(dash: DashEnv) -> None:
    found = (await get(dash.url + f"/api/messages?topic={DLQ_TOPIC}&begin=0"))["messages"]
    assert len(found) == DEAD + LAG
    for m in found:
        q = (f"/api/messages/consumed?topic={DLQ_TOPIC}&broker={m['brokerName']}"
             f"&queue={m['queueId']}&offset={m['queueOffset']}")
        (state,) = [g for g in (await get(dash.url + q))["groups"] if g["group"] == GROUP]
        # the group took (and failed into its DLQ) the dead ones; the late ones came after it left
        assert state["consumed"] is m["bodyText"].startswith("dead"), (m["bodyText"], state)
    m = found[0]
    q = f"/api/messages/consumed?topic={TOPIC}&broker={m['brokerName']}&queue=0&offset=0"
    assert (await get(dash.url + q))["groups"] == []  # nobody consumes TOPIC
    assert "queue is not" in (await get(dash.url + q.replace("queue=0", "queue=x"), status=400))["error"]


async def test_groups_show_lag_per_queue(dash: DashEnv) -> None:
    groups = {g["group"]: g for g in (await get(dash.url + "/api/groups"))["groups"]}
    g = groups[GROUP]
    on_topic = [q for q in g["queues"] if q["topic"] == DLQ_TOPIC]
    assert sum(q["diff"] for q in on_topic) == LAG and g["online"] == 0
    one = await get(dash.url + f"/api/groups/{GROUP}")
    assert one["progress"]["group"] == GROUP and one["connection"] is None


async def test_dlq_list_and_resend(dash: DashEnv) -> None:
    (d,) = [x for x in (await get(dash.url + "/api/dlq"))["dlq"] if x["group"] == GROUP]
    assert d["topic"] == f"%DLQ%{GROUP}" and d["messages"] == DEAD
    dead = (await get(dash.url + f"/api/dlq/{GROUP}"))["messages"]
    assert sorted(m["bodyText"] for m in dead) == [f"dead {i}" for i in range(DEAD)]
    assert {m["properties"]["RETRY_TOPIC"] for m in dead} == {DLQ_TOPIC}
    url = f"/api/dlq/{GROUP}/resend"
    refused = await post(dash.readonly_url + url, {"max": 1}, AUTH, status=403)
    assert "writes are disabled" in refused["error"]
    assert "log in" in (await post(dash.url + url, {"max": 1}, status=401))["error"]
    wrong = {"Authorization": "Basic " + base64.b64encode(b"admin:nope").decode()}
    await post(dash.url + url, {"max": 1}, wrong, status=401)
    await post(dash.url + url, {"max": 0}, AUTH, status=400)
    one = await post(dash.url + url, {"max": 1}, AUTH)
    assert (one["read"], one["resent"], one["byTopic"]) == (1, 1, {DLQ_TOPIC: 1})
    rest = await post(dash.url + url, {"max": None}, AUTH)
    assert (rest["resent"], rest["stopped"]) == (DEAD - 1, None)
    # the re-sent letters are back on their topic: the offline group has them to consume too
    g = (await get(dash.url + f"/api/groups/{GROUP}"))["progress"]
    assert sum(q["diff"] for q in g["queues"] if q["topic"] == DLQ_TOPIC) == LAG + DEAD


async def test_pages_and_static_files_are_served(dash: DashEnv) -> None:
    async with aiohttp.ClientSession() as s:
        async with s.get(dash.url + "/", allow_redirects=False) as r:
            assert r.status == 302 and r.headers["Location"] == "/cluster"
        for page in ("cluster", "topics", "groups", "messages", "dlq", "producers"):
            async with s.get(f"{dash.url}/{page}") as r:
                text = await r.text()
                assert r.status == 200 and f'src="/static/{page}.js"' in text
            async with s.get(f"{dash.url}/static/{page}.js") as r:
                assert r.status == 200 and "Dash." in await r.text()
        async with s.get(dash.url + "/static/vendor/uPlot.iife.min.js") as r:
            assert r.status == 200 and (await r.text()).startswith("/*! https://github.com/leeoniya/uPlot")
        async with s.get(dash.url + "/nosuchpage") as r:
            assert r.status == 404


async def test_reset_offsets_moves_the_lag(dash: DashEnv) -> None:
    url = f"/api/groups/{GROUP}/reset"
    await post(dash.readonly_url + url, {"topic": DLQ_TOPIC, "timestamp": "end"}, AUTH, status=403)
    await post(dash.url + url, {"topic": DLQ_TOPIC, "timestamp": "end"}, status=401)
    bad = await post(dash.url + url, {"topic": DLQ_TOPIC, "timestamp": "yesterday"}, AUTH, status=400)
    assert "neither milliseconds" in bad["error"]
    assert "give the topic" in (await post(dash.url + url, {"timestamp": 0}, AUTH, status=400))["error"]
    queues = (await get(dash.url + f"/api/topics/{DLQ_TOPIC}"))["queues"]
    ends = {q["queueId"]: q["maxOffset"] for q in queues}

    async def lag() -> int:
        g = (await get(dash.url + f"/api/groups/{GROUP}"))["progress"]
        return sum(q["diff"] for q in g["queues"] if q["topic"] == DLQ_TOPIC)

    done = await post(dash.url + url, {"topic": DLQ_TOPIC, "timestamp": "end"}, AUTH)
    assert {q["queueId"]: q["offset"] for q in done["queues"]} == ends
    assert await lag() == 0
    done = await post(dash.url + url, {"topic": DLQ_TOPIC, "timestamp": 0}, AUTH)
    assert {q["queueId"]: q["offset"] for q in done["queues"]} == dict.fromkeys(ends, 0)
    assert await lag() == sum(ends.values())


async def test_producers_of_a_group(dash: DashEnv) -> None:
    q = f"/api/producers?group=DashLiveP&topic={TOPIC}"
    assert "no connection" in (await get(dash.url + q, status=400))["error"]
    async with Producer("DashLiveP", namesrv_addr=dash.ns) as p:
        await p.send(Message(TOPIC, b"one more", keys="live"))  # registered with the broker now
        assert p.instance is not None
        (c,) = (await get(dash.url + q))["connections"]
        assert c["clientId"] == p.instance.client_id and c["language"] == "PYTHON"
        assert (c["version"], c["versionDesc"]) == (479, "V5_3_3")
    assert "give a producer group" in (await get(dash.url + "/api/producers?group=x", status=400))["error"]


async def test_a_write_whose_body_is_not_json(dash: DashEnv) -> None:
    async with aiohttp.ClientSession() as s, s.post(
            dash.url + f"/api/groups/{GROUP}/reset", data=b"{not json", headers=AUTH) as r:
        assert r.status == 400 and "not JSON" in (await r.json())["error"]
