"""ACL end to end: a NameServer and a broker with ``aclEnable`` over one plain_acl.yml, driven by
rocketlite's own clients and admin library with credentials (docs/security.md)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from clientconf import Cluster, eventually

from brokerhelp import pull_request, send_request
from rocketlite.acl.sign import Credentials
from rocketlite.admin import AdminSession
from rocketlite.admin.errors import AdminError
from rocketlite.admin.topics import update_topic
from rocketlite.client.errors import MQBrokerError
from rocketlite.client.lite_pull_consumer import LitePullConsumer
from rocketlite.client.message import Message
from rocketlite.client.producer import Producer
from rocketlite.namesrv.server import NameServer
from rocketlite.protocol.bodies import ConsumeFromWhere
from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.command import RemotingCommand
from rocketlite.remoting.acl_gate import request_signer
from rocketlite.remoting.client import RemotingClient

pytestmark = pytest.mark.integration

TOPIC = "AclTopic"
ADMIN = Credentials("admin-key", "admin-secret")
USER = Credentials("user-key", "user-secret")
PUB_ONLY = Credentials("pub-key", "pub-secret")
ACL = """
accounts:
  - accessKey: admin-key
    secretKey: admin-secret
    admin: true
  - accessKey: user-key
    secretKey: user-secret
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms: [AclTopic=PUB|SUB]
  - accessKey: pub-key
    secretKey: pub-secret
    topicPerms: [AclTopic={pub_perm}]
    groupPerms: [pubGroup=SUB]
"""


def write_acl(path: Path, pub_perm: str = "PUB", bump: int = 0, extra: str = "") -> None:
    path.write_text(extra + ACL.format(pub_perm=pub_perm))
    st = path.stat()  # a new mtime even within the file system's time resolution
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + bump * 1_000_000_000))


@pytest.fixture
async def acl_cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    path = tmp_path / "plain_acl.yml"
    write_acl(path)
    ns = NameServer("127.0.0.1", 0, auto_create_route=False, acl_file=path)
    await ns.start()
    c = Cluster(tmp_path, ns)
    try:
        await c.start_broker("broker-a", aclEnable="true", aclFile=str(path))
        async with AdminSession(c.ns_addr, credentials=ADMIN) as admin:
            await update_topic(admin, TOPIC, broker_addr=c.addr(), read_queue_nums=2,
                               write_queue_nums=2)
        await eventually(lambda: TOPIC in ns.routes.topic_queues)
        yield c
    finally:
        await c.close()


async def pull_as(c: Cluster, creds: Credentials | None, group: str) -> RemotingCommand:
    client = RemotingClient(signer=None if creds is None else request_signer(creds))
    try:
        cmd = pull_request(TOPIC, 0, 0)
        cmd.ext_fields["consumerGroup"] = group
        return await client.invoke(c.addr(), cmd, 5.0)
    finally:
        await client.close()


async def test_right_credentials_send_and_consume(acl_cluster: Cluster) -> None:
    c = acl_cluster
    async with Producer("userProducer", namesrv_addr=c.ns_addr, credentials=("user-key", "user-secret")) as p:
        sent = [await p.send(Message(TOPIC, f"sync {i}".encode())) for i in range(3)]
        sent.append(await p.send_async(Message(TOPIC, b"async")))  # the template-frame path
    assert len({r.msg_id for r in sent}) == 4
    got: list[bytes] = []
    consumer = LitePullConsumer("userGroup", namesrv_addr=c.ns_addr, credentials=USER,
                                consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    consumer.subscribe(TOPIC)
    await consumer.start()
    try:
        while len(got) < 4:
            batch = await consumer.poll(5.0)
            assert batch, f"nothing more to consume after {got}"
            got += [m.body for m in batch]
    finally:
        await consumer.shutdown()
    assert sorted(got) == sorted([b"sync 0", b"sync 1", b"sync 2", b"async"])
    assert c.brokers["broker-a"].acl is not None and c.brokers["broker-a"].acl.denied == 0


async def test_wrong_secret_and_unsigned_are_refused(acl_cluster: Cluster) -> None:
    c = acl_cluster
    broker = c.brokers["broker-a"]
    before = broker.store.commitlog.max_offset
    async with Producer("badProducer", namesrv_addr=c.ns_addr,
                        credentials=("user-key", "not-the-secret")) as p:
        with pytest.raises(MQBrokerError) as info:
            await p.send(Message(TOPIC, b"never stored"))
    assert info.value.code == ResponseCode.NO_PERMISSION
    assert "Check signature failed for accessKey=user-key" in info.value.remark
    unsigned = await pull_as(c, None, "userGroup")
    assert unsigned.code == ResponseCode.NO_PERMISSION
    assert "No accessKey is configured" in (unsigned.remark or "")
    assert broker.store.commitlog.max_offset == before  # nothing written


async def test_a_run_of_sends_is_checked_one_by_one(acl_cluster: Cluster) -> None:
    """Sends written together reach the broker's batched send path as one run: the refused one
    is answered NO_PERMISSION, the others are stored."""
    c = acl_cluster
    broker = c.brokers["broker-a"]
    cmds = [send_request(TOPIC, b"run %d" % i, 0) for i in range(4)]
    for i, cmd in enumerate(cmds):
        (USER if i != 2 else Credentials("user-key", "wrong-secret")).sign(cmd.ext_fields, cmd.body)
    client = RemotingClient()  # no signer: the requests go as signed above
    try:
        conn = await client.connection(c.addr())
        replies = await asyncio.gather(*(conn.request_future(cmd, 5.0) for cmd in cmds))
    finally:
        await client.close()
    assert [r.code for r in replies] == [ResponseCode.SUCCESS] * 2 + [ResponseCode.NO_PERMISSION] + [
        ResponseCode.SUCCESS]
    assert replies[2].remark == "Check signature failed for accessKey=user-key"
    await eventually(lambda: broker.store.max_offset_in_queue(TOPIC, 0) == 3)


async def test_pub_only_account_cannot_pull_until_a_reload_grants_sub(acl_cluster: Cluster,
                                                                      tmp_path: Path) -> None:
    c = acl_cluster
    async with Producer("pubGroup", namesrv_addr=c.ns_addr, credentials=PUB_ONLY) as p:
        await p.send(Message(TOPIC, b"from the publisher"))
    refused = await pull_as(c, PUB_ONLY, "pubGroup")
    assert refused.code == ResponseCode.NO_PERMISSION
    assert refused.remark == "No permission: SUB on topic AclTopic for accessKey pub-key (it has PUB)"
    gate = c.brokers["broker-a"].acl
    assert gate is not None
    write_acl(tmp_path / "plain_acl.yml", pub_perm="PUB|SUB", bump=5)
    await eventually(lambda: gate.file.reloads == 1)  # the broker polls the file every second
    granted = await pull_as(c, PUB_ONLY, "pubGroup")
    assert granted.code in (ResponseCode.SUCCESS, ResponseCode.PULL_NOT_FOUND), granted
    # a broken file keeps what is in force
    (tmp_path / "plain_acl.yml").write_text("accounts: [ {broken")
    await eventually(lambda: "not YAML" in (gate.file.last_error or ""))
    assert (await pull_as(c, PUB_ONLY, "pubGroup")).code != ResponseCode.NO_PERMISSION
    # a global white list lets this host in unsigned
    assert (await pull_as(c, None, "anyGroup")).code == ResponseCode.NO_PERMISSION
    write_acl(tmp_path / "plain_acl.yml", bump=10,
              extra="globalWhiteRemoteAddresses: ['127.0.0.*']\n")
    await eventually(lambda: gate.file.last_error is None and gate.file.config.global_white)
    assert (await pull_as(c, None, "anyGroup")).code != ResponseCode.NO_PERMISSION


async def test_only_admin_creates_topics_and_writes_namesrv_kv(acl_cluster: Cluster) -> None:
    c = acl_cluster
    broker = c.brokers["broker-a"]
    async with AdminSession(c.ns_addr, credentials=USER) as user:
        with pytest.raises(AdminError, match="needs an admin account, accessKey user-key is not"):
            await update_topic(user, "UserMadeTopic", broker_addr=c.addr())
    assert broker.topics.get("UserMadeTopic") is None
    kv = RemotingCommand.request(RequestCode.PUT_KV_CONFIG,
                                 {"namespace": "ns", "key": "k", "value": "v"})
    for creds, code in ((USER, ResponseCode.NO_PERMISSION), (None, ResponseCode.NO_PERMISSION),
                        (ADMIN, ResponseCode.SUCCESS)):
        client = RemotingClient(signer=None if creds is None else request_signer(creds))
        try:
            reply = await client.invoke(c.ns_addr, RemotingCommand.request(
                kv.code, dict(kv.ext_fields)), 5.0)
            assert reply.code == code, (creds, reply)
            # lookups stay open on the NameServer
            route = await client.invoke(c.ns_addr, RemotingCommand.request(
                RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": TOPIC}), 5.0)
            assert route.code == ResponseCode.SUCCESS
        finally:
            await client.close()
    assert c.ns.kv == {"ns": {"k": "v"}}


