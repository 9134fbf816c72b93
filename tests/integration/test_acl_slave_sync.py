"""A slave of an ACL master without a white-list entry (docs/security.md): with the broker's own
credentials (``innerClientAuthenticationCredentials``, RocketMQ 5's key) its synchronisation
requests are signed and the master serves them; with a wrong secret, or none, the master refuses
them and the slave keeps its own tables. Replication itself (the HA port) needs no ACL."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pytest

import hahelp
from hahelp import Pair
from rocketlite.acl.inner import INNER_CREDENTIALS_KEY, inner_credentials
from rocketlite.acl.sign import Credentials
from rocketlite.protocol.bodies import TopicConfig
from rocketlite.store.message import MessageToStore

pytestmark = pytest.mark.integration

ACL = """
accounts:
  - accessKey: broker-inner
    secretKey: inner-secret
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
  - accessKey: producer-key
    secretKey: producer-secret
    defaultTopicPerm: PUB
"""
TOPIC = "AclSyncTopic"


def acl_pair(tmp: Path) -> contextlib.AbstractAsyncContextManager[Pair]:
    """A master and a slave with ``aclEnable`` over one plain_acl.yml (no white list)."""
    path = tmp / "plain_acl.yml"
    path.write_text(ACL)
    return hahelp.pair(tmp, "broker-acl", broker={"aclEnable": "true", "aclFile": str(path)},
                       store={"brokerIP1": "127.0.0.1"}, topic=(TOPIC, 2))


def broker_conf_credentials(ak: str, sk: str) -> Credentials | None:
    """The broker's credentials as broker.conf spells them."""
    return inner_credentials({INNER_CREDENTIALS_KEY: json.dumps({"accessKey": ak, "secretKey": sk})})


def seed_master(pair: Pair) -> None:
    master = pair.master
    assert master is not None
    master.topics.update(TopicConfig(topicName="AclSyncA", readQueueNums=3, writeQueueNums=3))
    master.offsets.commit("G1", TOPIC, 1, 5)
    master.store.put_messages([MessageToStore(topic=TOPIC, body=b"m%d" % i, queue_id=i % 2,
                                              born_timestamp=1) for i in range(200)])


async def test_a_slave_with_the_brokers_credentials_syncs_and_replicates(tmp_path: Path) -> None:
    async with acl_pair(tmp_path) as p:
        master = await p.start_master()
        seed_master(p)
        slave = await p.start_slave(credentials=broker_conf_credentials("broker-inner", "inner-secret"))
        assert slave.slave_sync is not None and master.acl is not None
        assert await slave.slave_sync.sync_once()
        assert slave.topics.get("AclSyncA") == master.topics.get("AclSyncA")
        assert slave.offsets.offsets_of("G1", TOPIC) == {1: 5}
        await p.caught_up()
        p.assert_identical()
        assert master.acl.denied == 0


@pytest.mark.parametrize("credentials", [Credentials("broker-inner", "not-the-secret"), None],
                         ids=["wrong-secret", "unsigned"])
async def test_a_slave_without_valid_credentials_is_refused(tmp_path: Path,
                                                            credentials: Credentials | None) -> None:
    async with acl_pair(tmp_path) as p:
        master = await p.start_master()
        seed_master(p)
        slave = await p.start_slave(credentials=credentials)
        assert slave.slave_sync is not None and master.acl is not None
        assert not await slave.slave_sync.sync_once()
        assert slave.topics.get("AclSyncA") is None
        assert slave.offsets.offsets_of("G1", TOPIC) == {}
        assert master.acl.denied >= 4  # topics, consumer offsets, delay offsets, groups
