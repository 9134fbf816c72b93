"""Controller mode's role logic (``broker/ha/role.py``) without etcd: which role a state asks of
a broker, the SyncStateSet a master reports, where a returning replica cuts its log; the keys
that turn it on (``check_role``) and the epoch history in the state's JSON."""

from __future__ import annotations

import pytest

from rocketlite.broker.config import BrokerConfig, check_role
from rocketlite.broker.ha.role import decide, in_sync, truncation_point
from rocketlite.broker.ha.server import MasterStatus, SlaveStatus
from rocketlite.common.errors import ConfigError
from rocketlite.controller.state import GroupState, GroupView, Replica
from rocketlite.formats.epoch_file import EpochEntry, with_ends
from rocketlite.store.config import StoreConfig

R1 = Replica(1, "10.0.0.1:10911", "10.0.0.1:10912")
R2 = Replica(2, "10.0.0.2:10911", "10.0.0.2:10912")
R3 = Replica(3, "10.0.0.3:10911", "10.0.0.3:10912")


def view(state: GroupState, *live: Replica) -> GroupView:
    return GroupView("C", "g", state, {r.broker_id: r for r in live}, 7)


def test_the_named_master_with_a_live_key_is_master() -> None:
    st = GroupState(1, 3, (1, 2), 5, ((1, 0), (3, 500)))
    t = decide(view(st, R1, R2), 1)
    assert t.master and t.epoch == 3
    assert t.history == ((1, 0), (3, 500))


def test_others_follow_the_live_master_once_its_epoch_is_recorded() -> None:
    st = GroupState(1, 3, (1, 2), 5, ((1, 0), (3, 500)))
    t = decide(view(st, R1, R2), 2)
    assert not t.master and t.leader == R1 and t.epoch == 3
    # elected, but epoch 3 not yet in the history: wait rather than compare with an old one
    early = GroupState(1, 3, (1,), 5, ((1, 0),))
    assert decide(view(early, R1, R2), 2).leader is None


def test_a_master_whose_key_is_gone_is_not_master() -> None:
    st = GroupState(1, 3, (1, 2), 5, ((3, 0),))
    t = decide(view(st, R2), 1)  # 1's lease lapsed; it must not take sends meanwhile
    assert not t.master and t.leader is None
    assert decide(view(st, R2), 2).leader is None  # no live master to follow either


def test_no_state_yet_is_slave_without_a_leader() -> None:
    t = decide(view(GroupState(), R1), 1)
    assert not t.master and t.leader is None


def test_in_sync_takes_hosts_within_the_gap() -> None:
    status = MasterStatus(10_000, [
        SlaveStatus("10.0.0.2:40001", 9_990, 10, 0),  # 10 bytes behind: in
        SlaveStatus("10.0.0.3:40002", 1_000, 9_000, 0),  # 9000 behind: out
    ])
    assert in_sync(status, {1: R1, 2: R2, 3: R3}, 1, max_gap=100) == {1, 2}
    assert in_sync(status, {1: R1, 2: R2, 3: R3}, 1, max_gap=10_000) == {1, 2, 3}
    # before its first report a slave is not in sync; the master always is
    fresh = MasterStatus(10, [SlaveStatus("10.0.0.2:40001", -1, 10, 0)])
    assert in_sync(fresh, {1: R1, 2: R2}, 1, max_gap=1 << 30) == {1}
    # a live replica without an HA connection is out
    assert in_sync(MasterStatus(0, []), {1: R1, 2: R2}, 1, max_gap=1 << 30) == {1}


def test_truncation_point() -> None:
    # this replica was master of epoch 2 from 500 and wrote up to 900; the group moved on to
    # epoch 3 at 700 (the new master had 700 bytes of epoch 2): cut at 700
    local = with_ends([EpochEntry(1, 0), EpochEntry(2, 500)], 900)
    assert truncation_point(local, ((1, 0), (2, 500), (3, 700)), 900) == 700
    # a replica behind the common point keeps everything
    local = with_ends([EpochEntry(1, 0), EpochEntry(2, 500)], 650)
    assert truncation_point(local, ((1, 0), (2, 500), (3, 700)), 650) is None
    # its last epoch is not the group's (never replicated): cut back to where epoch 1 ended
    local = with_ends([EpochEntry(1, 0), EpochEntry(2, 400)], 900)
    assert truncation_point(local, ((1, 0), (2, 500), (3, 700)), 900) == 400
    # no epoch in common: nothing here is known to be the group's
    local = with_ends([EpochEntry(5, 0)], 300)
    assert truncation_point(local, ((1, 0),), 300) == 0
    # no epoch file (a new or pre-controller store): the HA protocol aligns it
    assert truncation_point([], ((1, 0),), 300) is None


def test_state_json_keeps_the_epoch_history() -> None:
    st = GroupState(2, 4, (1, 2), 9, ((1, 0), (4, 1234)))
    assert GroupState.from_json(st.to_json(), "k") == st
    # a state written before the history existed reads as an empty one
    old = b'{"masterId":1,"masterEpoch":1,"syncStateSet":[1],"syncStateSetEpoch":1}'
    assert GroupState.from_json(old, "k").epochs == ()


def test_controller_mode_keys() -> None:
    store = StoreConfig(broker_role="SYNC_MASTER", listen_port=10911)
    on = BrokerConfig(broker_id=2, enable_controller_mode=True, controller_addr="etcd://h:2379")
    check_role(on, store)  # a SYNC_MASTER role with brokerId 2: the controller decides
    with pytest.raises(ConfigError, match="controllerAddr"):
        check_role(on.replace(controller_addr="h:2379"), store)
    with pytest.raises(ConfigError, match="brokerId=0"):
        check_role(on.replace(broker_id=0), store)
    with pytest.raises(ConfigError, match="fixed HA port"):
        check_role(on, StoreConfig(listen_port=0))
    off = BrokerConfig.from_properties({})
    assert not off.enable_controller_mode and off.controller_lease_ttl == 3
    with pytest.raises(ConfigError, match="brokerId=2"):
        check_role(off.replace(broker_id=2), store)
    assert StoreConfig().ha_max_gap_not_in_sync == 256 * 1024 * 1024
    assert StoreConfig.from_properties({"haMaxGapNotInSync": "1024"}).ha_max_gap_not_in_sync == 1024
