"""How often a controller-mode replica rewrites its record in etcd (``RoleController.
publish_once``): its HA connection's address at once on every change (the master matches
connections with it), its max offset and epoch only when changed and at most once per
``PUBLISH_S`` (under load they change with every append), nothing when nothing changed."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

from rocketlite.broker.broker import Broker
from rocketlite.broker.ha.role import RoleController
from rocketlite.controller.etcd import Registration
from rocketlite.controller.state import Replica


class FakeRegistration:
    """Records the rewrites a real ``Registration`` would put in etcd."""

    def __init__(self) -> None:
        self.writes: list[Replica] = []
        self.ok = True

    async def update(self, replica: Replica) -> bool:
        if self.ok:
            self.writes.append(replica)
        return self.ok


def controller(tmp_path: Path) -> tuple[RoleController, Any, FakeRegistration]:
    broker: Any = SimpleNamespace(
        config=SimpleNamespace(controller_addr="etcd://127.0.0.1:2379",
                               broker_cluster_name="C", broker_name="g", broker_id=2,
                               controller_lease_ttl=3),
        store_config=SimpleNamespace(store_path_root_dir=str(tmp_path)),
        address="127.0.0.1:10911", ha_address="127.0.0.1:10912",
        ha_client=SimpleNamespace(local_address=""),
        store=SimpleNamespace(commitlog=SimpleNamespace(max_offset=0)),
    )
    rc = RoleController(cast(Broker, broker))
    reg = FakeRegistration()
    rc.registration = cast(Registration, reg)
    rc.published = Replica(2, broker.address, broker.ha_address, "", 0, -1)
    return rc, broker, reg


async def test_nothing_changed_nothing_written(tmp_path: Path) -> None:
    rc, _, reg = controller(tmp_path)
    for _ in range(5):
        assert not await rc.publish_once()
    assert reg.writes == []


async def test_offsets_are_written_at_most_once_a_period(tmp_path: Path) -> None:
    rc, broker, reg = controller(tmp_path)
    broker.store.commitlog.max_offset = 100
    assert await rc.publish_once()
    assert reg.writes[-1].max_offset == 100
    for offset in range(200, 2000, 100):  # appends within the same period: no write
        broker.store.commitlog.max_offset = offset
        assert not await rc.publish_once()
    assert len(reg.writes) == 1
    rc._next_publish = 0.0  # the period is over: the latest offset goes out, once
    assert await rc.publish_once()
    assert not await rc.publish_once()
    assert [w.max_offset for w in reg.writes] == [100, 1900]
    assert rc.publications == 2


async def test_the_ha_address_is_written_at_once(tmp_path: Path) -> None:
    rc, broker, reg = controller(tmp_path)
    broker.store.commitlog.max_offset = 100
    assert await rc.publish_once()  # opens a period
    broker.ha_client.local_address = "127.0.0.1:40002"  # connected within the period
    assert await rc.publish_once()
    broker.ha_client.local_address = ""  # disconnected: written at once too
    assert await rc.publish_once()
    assert [w.ha_client_addr for w in reg.writes] == ["", "127.0.0.1:40002", ""]
    # a master publishes no HA connection, whatever its (closed) client had
    broker.ha_client.local_address = "127.0.0.1:40009"
    rc.is_master = True
    assert not await rc.publish_once()


async def test_a_refused_write_is_retried_a_period_later(tmp_path: Path) -> None:
    rc, broker, reg = controller(tmp_path)
    reg.ok = False  # etcd away or the lease gone
    broker.ha_client.local_address = "127.0.0.1:40002"
    assert not await rc.publish_once()
    reg.ok = True
    assert not await rc.publish_once()  # not at every check
    rc._retry_at = 0.0
    assert await rc.publish_once()
    assert rc.published is not None and rc.published.ha_client_addr == "127.0.0.1:40002"
