"""A broker group's controller state as plain dataclasses, and their JSON values in etcd.

Keys, under ``/rocketlite/<cluster>/<brokerName>/``:

* ``replicas/<brokerId>``: a ``Replica`` (JSON), attached to the lease its process keeps alive;
  the key disappears when the process stops refreshing it (crash, partition) or revokes it.
  Besides what it registered with, the replica publishes there what the master and the
  elections need: its HA connection's local address (the 4.x HA protocol carries
  no brokerId, so the master knows its slaves' connections by their peer address only), its
  CommitLog max offset and its epoch; records written before these fields read as "unknown".
* ``state``: a ``GroupState`` (JSON): ``masterId``, ``masterEpoch``, ``syncStateSet``,
  ``syncStateSetEpoch``. One key, so each operation changes it with one compare-and-swap on its
  revision: a writer that read an older epoch finds the key changed and is refused.
  ``epochs`` (absent = empty) is the group's epoch history, ``[[masterEpoch, startOffset], ...]``:
  each master appends its epoch and its CommitLog max offset when it takes over, so a replica
  that returns compares its epoch file with it and truncates where they part.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from rocketlite.common.errors import RocketliteError

ROOT = "/rocketlite"


class ControllerError(RocketliteError):
    """A controller operation that cannot be done (bad state in etcd, etcd unreachable)."""


class StaleEpochError(ControllerError):
    """A request made under a master epoch (or by a master) that is no longer the group's."""


class NoCandidateError(ControllerError):
    """No live replica may be elected (none registered, or none of the SyncStateSet alive)."""


@dataclass(frozen=True, slots=True)
class Replica:
    """One broker of a group: its id, Remoting address and HA address (what it registered with),
    and what it publishes while alive (rewritten under the same lease when it changes):

    * ``ha_client_addr``: the local ``host:port`` of its HA connection to the master, "" while it
      has none (a master, or not connected); None in a record of a broker that does not publish
      it (written before the field existed): the master matches that one by host only.
    * ``max_offset``: its CommitLog max offset, ``epoch``: the last epoch of its epoch file
      (-1: unknown); elections prefer the highest ``(epoch, max_offset)``.
    """

    broker_id: int
    address: str
    ha_address: str
    ha_client_addr: str | None = None
    max_offset: int = -1
    epoch: int = -1

    @property
    def identity(self) -> tuple[int, str, str]:
        """What the replica registered with (not what it publishes): who it is, where."""
        return self.broker_id, self.address, self.ha_address

    def published(self, ha_client_addr: str, max_offset: int, epoch: int) -> Replica:
        """This replica with new published fields."""
        return Replica(self.broker_id, self.address, self.ha_address, ha_client_addr,
                       max_offset, epoch)

    def to_json(self) -> bytes:
        obj: dict[str, Any] = {"brokerId": self.broker_id, "address": self.address,
                               "haAddress": self.ha_address}
        if self.ha_client_addr is not None:
            obj["haClientAddr"] = self.ha_client_addr
        obj["maxOffset"] = self.max_offset
        obj["epoch"] = self.epoch
        return orjson.dumps(obj)

    @classmethod
    def from_json(cls, data: bytes, where: str) -> Replica:
        obj = _object(data, where)
        try:
            client = obj.get("haClientAddr")
            return cls(int(obj["brokerId"]), str(obj["address"]), str(obj["haAddress"]),
                       None if client is None else str(client),
                       int(obj.get("maxOffset", -1)), int(obj.get("epoch", -1)))
        except (KeyError, TypeError, ValueError) as e:
            raise ControllerError(f"{where}: not a replica record ({e!r}): {data!r}") from None


@dataclass(frozen=True, slots=True)
class GroupState:
    """Who is master and who may become it. ``master_id`` is None before the first election;
    ``master_epoch`` grows by one on every election, ``sync_state_set_epoch`` on every change of
    ``sync_state_set`` (the brokerIds caught up with the master, the master included)."""

    master_id: int | None = None
    master_epoch: int = 0
    sync_state_set: tuple[int, ...] = ()
    sync_state_set_epoch: int = 0
    epochs: tuple[tuple[int, int], ...] = ()  # (masterEpoch, startOffset), oldest first

    def to_json(self) -> bytes:
        return orjson.dumps(
            {
                "masterId": self.master_id,
                "masterEpoch": self.master_epoch,
                "syncStateSet": list(self.sync_state_set),
                "syncStateSetEpoch": self.sync_state_set_epoch,
                "epochs": [list(e) for e in self.epochs],
            }
        )

    @classmethod
    def from_json(cls, data: bytes, where: str) -> GroupState:
        obj = _object(data, where)
        try:
            master = obj["masterId"]
            return cls(
                None if master is None else int(master),
                int(obj["masterEpoch"]),
                tuple(int(b) for b in obj["syncStateSet"]),
                int(obj["syncStateSetEpoch"]),
                tuple((int(e), int(o)) for e, o in obj.get("epochs", ())),
            )
        except (KeyError, TypeError, ValueError) as e:
            raise ControllerError(f"{where}: not a group state ({e!r}): {data!r}") from None


@dataclass(frozen=True, slots=True)
class GroupView:
    """A group as read at one etcd revision: its state and its live replicas by brokerId."""

    cluster: str
    broker_name: str
    state: GroupState
    replicas: dict[int, Replica] = field(default_factory=dict)
    state_revision: int = 0  # the state key's mod revision, 0 = no state key yet

    @property
    def master(self) -> Replica | None:
        """The master's registration, None if there is no master or its lease is gone."""
        m = self.state.master_id
        return None if m is None else self.replicas.get(m)


def _object(data: bytes, where: str) -> dict[str, Any]:
    try:
        obj = orjson.loads(data)
    except orjson.JSONDecodeError as e:
        raise ControllerError(f"{where}: not JSON ({e}): {data!r}") from None
    if not isinstance(obj, dict):
        raise ControllerError(f"{where}: not a JSON object: {data!r}")
    return obj


def _check_name(kind: str, name: str) -> str:
    if not name or "/" in name:
        raise ControllerError(f"{kind} {name!r} cannot be part of an etcd key (empty or has '/')")
    return name


def cluster_prefix(cluster: str) -> str:
    return f"{ROOT}/{_check_name('cluster', cluster)}/"


def group_prefix(cluster: str, broker_name: str) -> str:
    return f"{cluster_prefix(cluster)}{_check_name('brokerName', broker_name)}/"


def replica_key(cluster: str, broker_name: str, broker_id: int) -> str:
    return f"{group_prefix(cluster, broker_name)}replicas/{broker_id}"


def state_key(cluster: str, broker_name: str) -> str:
    return f"{group_prefix(cluster, broker_name)}state"


def parse_key(cluster: str, key: str) -> tuple[str, str, int | None] | None:
    """``(brokerName, kind, brokerId)`` for a key under the cluster's prefix (kind "replica" or
    "state"; brokerId only for replicas), None for any other key."""
    prefix = cluster_prefix(cluster)
    if not key.startswith(prefix):
        return None
    parts = key[len(prefix):].split("/")
    if len(parts) == 2 and parts[1] == "state":
        return parts[0], "state", None
    if len(parts) == 3 and parts[1] == "replicas" and parts[2].isdigit():
        return parts[0], "replica", int(parts[2])
    return None
