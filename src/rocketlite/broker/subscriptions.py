"""SubscriptionGroupManager: consumer groups' settings, persisted in ``config/subscriptionGroup.json``.

The file is ``SubscriptionGroupWrapper``'s JSON: ``{"dataVersion":..,"subscriptionGroupTable":
{"G":{"groupName":"G","consumeEnable":true,...}}}``. A group is created with defaults on its first
heartbeat or pull when ``autoCreateSubscriptionGroup`` is on (RocketMQ's default); otherwise pulls
of unknown groups are refused with SUBSCRIPTION_GROUP_NOT_EXIST. At most
``autoCreateGroupsPerMinute`` groups are created that way (``create_rate``); past it ``get``
answers None as with auto-creation off, and ``missing`` gives the remark that names the limit.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from rocketlite.broker import config_file
from rocketlite.broker.create_rate import CreateRate
from rocketlite.common.errors import BodyError, ConfigError
from rocketlite.protocol.admin_bodies import SubscriptionGroupConfig, SubscriptionGroupWrapper
from rocketlite.protocol.bodies import DataVersion

__all__ = ["MAX_GROUPS", "SubscriptionGroupConfig", "SubscriptionGroupManager",
           "SubscriptionGroupWrapper"]

log = logging.getLogger(__name__)

MAX_GROUPS = 100_000


class SubscriptionGroupManager:
    def __init__(self, path: Path, auto_create: bool = True) -> None:
        self.path = path
        self.auto_create = auto_create
        self.create_rate: CreateRate | None = None  # autoCreateGroupsPerMinute (the broker's)
        self.table: dict[str, SubscriptionGroupConfig] = {}
        self.data_version = DataVersion()
        self.lock = threading.Lock()

    def load(self) -> None:
        obj = config_file.load(self.path)
        if obj is None:
            return
        try:
            wrapper = SubscriptionGroupWrapper.from_obj(obj, str(self.path))
        except BodyError as e:
            raise ConfigError(f"{self.path}: {e}") from e
        with self.lock:
            self.table.update(wrapper.subscriptionGroupTable)
            self.data_version = wrapper.dataVersion

    def _encode(self) -> bytes:
        with self.lock:
            wrapper = SubscriptionGroupWrapper(subscriptionGroupTable=dict(self.table),
                                               dataVersion=self.data_version)
        return wrapper.to_json()

    def persist(self) -> None:
        config_file.save(self.path, self._encode())

    def _persist_change(self) -> None:
        config_file.save_or_log(self.path, self._encode())

    def get(self, group: str) -> SubscriptionGroupConfig | None:
        """The group's settings; created with defaults when missing and auto-creation is on."""
        sgc = self.table.get(group)
        if sgc is not None or not self.auto_create or not group:
            return sgc
        rate = self.create_rate
        if rate is not None and not rate.take():
            return None
        return self.update(SubscriptionGroupConfig(groupName=group))

    def missing(self, group: str, remark: str) -> str:
        """The remark for a group ``get`` did not give: ``remark``, or, when auto-creation is on
        (so only its rate limit refused it), one that names that limit."""
        rate = self.create_rate
        if self.auto_create and group and rate is not None:
            return rate.refusal(f"subscription group [{group}]")
        return remark

    def update(self, sgc: SubscriptionGroupConfig) -> SubscriptionGroupConfig:
        with self.lock:
            if sgc.groupName not in self.table and len(self.table) >= MAX_GROUPS:
                raise ValueError(f"the broker already has {MAX_GROUPS} subscription groups")
            self.table[sgc.groupName] = sgc
            dv = self.data_version
            self.data_version = DataVersion(stateVersion=dv.stateVersion, counter=dv.counter + 1)
        log.info("subscription group %s saved", sgc.groupName)
        self._persist_change()
        return sgc

    def delete(self, group: str) -> bool:
        with self.lock:
            removed = self.table.pop(group, None) is not None
        if removed:
            self._persist_change()
        return removed
