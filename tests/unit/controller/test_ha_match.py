"""Which HA connection is which replica's (``broker/ha/role.py``: ``acked_by_replica``,
``in_sync``) when several replicas share a host, and the replica record's published fields in
etcd's JSON (``controller/state.py``), records without them included; the election's ranking by
published (epoch, max offset)."""

from __future__ import annotations

from rocketlite.broker.ha.role import acked_by_replica, in_sync
from rocketlite.broker.ha.server import MasterStatus, SlaveStatus
from rocketlite.controller.etcd import candidate_rank
from rocketlite.controller.state import GroupState, GroupView, Replica

HOST = "127.0.0.1"
M = Replica(1, f"{HOST}:10911", f"{HOST}:10912", "")
GAP = 64 * 1024


def slave(bid: int, client: str | None) -> Replica:
    return Replica(bid, f"{HOST}:{10911 + 10 * bid}", f"{HOST}:{10912 + 10 * bid}", client)


def conn(port: int, acked: int, top: int = 1_000_000) -> SlaveStatus:
    return SlaveStatus(f"{HOST}:{port}", acked, top - acked, 0)


def test_one_host_each_connection_counts_for_its_own_replica_only() -> None:
    top = 1_000_000
    # 2 is caught up, 3 is paused 500 KiB behind: on one host, only 2 is in sync
    status = MasterStatus(top, [conn(40002, top), conn(40003, top - 500 * 1024)])
    replicas = {1: M, 2: slave(2, f"{HOST}:40002"), 3: slave(3, f"{HOST}:40003")}
    assert acked_by_replica(status, replicas, 1) == {2: top, 3: top - 500 * 1024}
    assert in_sync(status, replicas, 1, GAP) == {1, 2}
    # the other way round: the lagging connection is 2's
    swapped = {1: M, 2: slave(2, f"{HOST}:40003"), 3: slave(3, f"{HOST}:40002")}
    assert in_sync(status, swapped, 1, GAP) == {1, 3}
    # both within the gap: both in
    close = MasterStatus(top, [conn(40002, top), conn(40003, top - 1024)])
    assert in_sync(close, replicas, 1, GAP) == {1, 2, 3}


def test_a_replica_without_a_live_connection_of_its_own_is_out() -> None:
    top = 1_000_000
    status = MasterStatus(top, [conn(40002, top)])
    # 3 published "" (not connected) or an address of a connection that is gone (it
    # reconnected and has not yet published the new one): the caught-up 2's connection
    # is not taken for 3's
    for client in ("", f"{HOST}:39999"):
        replicas = {1: M, 2: slave(2, f"{HOST}:40002"), 3: slave(3, client)}
        assert in_sync(status, replicas, 1, GAP) == {1, 2}
    # before its first report a connection is not in sync
    fresh = MasterStatus(top, [conn(40002, -1)])
    assert in_sync(fresh, {1: M, 2: slave(2, f"{HOST}:40002")}, 1, 1 << 40) == {1}


def test_a_record_without_the_field_is_matched_by_host_with_unclaimed_connections() -> None:
    top = 1_000_000
    # 3 runs a version that does not publish its HA address: by host, but not with the
    # connection 2 claims (caught up) -- only with the unclaimed lagging one
    status = MasterStatus(top, [conn(40002, top), conn(40003, top - 500 * 1024)])
    replicas = {1: M, 2: slave(2, f"{HOST}:40002"), 3: slave(3, None)}
    assert acked_by_replica(status, replicas, 1) == {2: top, 3: top - 500 * 1024}
    assert in_sync(status, replicas, 1, GAP) == {1, 2}
    # no unclaimed connection on its host: out
    alone = MasterStatus(top, [conn(40002, top)])
    assert in_sync(alone, replicas, 1, GAP) == {1, 2}


def test_the_record_codec_keeps_the_published_fields_and_reads_old_records() -> None:
    r = Replica(2, "h:1", "h:2", "127.0.0.1:40002", 123_456, 7)
    assert Replica.from_json(r.to_json(), "k") == r
    assert Replica.from_json(r.published("", 9, 8).to_json(), "k") == Replica(2, "h:1", "h:2", "", 9, 8)
    # a record written before the fields existed: no HA address known (None, not ""),
    # offset and epoch unknown
    old = Replica.from_json(b'{"brokerId":3,"address":"h:3","haAddress":"h:4"}', "k")
    assert old == Replica(3, "h:3", "h:4", None, -1, -1)
    assert old.identity == (3, "h:3", "h:4")
    # what a replica registered with is its identity; its published fields change it not
    assert r.published("x:1", 0, 0).identity == r.identity


def test_elections_rank_by_published_epoch_then_offset_then_id() -> None:
    live = {b: slave(b, "") for b in (2, 3, 4)}
    live[2] = live[2].published("", 900, 3)
    live[3] = live[3].published("", 1000, 3)  # same epoch, further: first
    live[4] = live[4].published("", 5000, 2)  # further, but of an older epoch
    view = GroupView("C", "g", GroupState(1, 3, (1, 2, 3, 4), 4), live, 9)
    assert min(live, key=lambda b: candidate_rank(view, b, None)) == 3
    unknown = GroupView("C", "g", view.state, {b: slave(b, None) for b in (3, 2)}, 9)
    assert min((3, 2), key=lambda b: candidate_rank(unknown, b, None)) == 2  # nothing known: lowest id
    # explicit offsets override what was published
    assert min(live, key=lambda b: candidate_rank(view, b, {2: 10, 3: 5})) == 2
