"""The broker's configuration as mqadmin ``getBrokerConfig`` / ``updateBrokerConfig`` see it
(GET_BROKER_CONFIG 26, UPDATE_BROKER_CONFIG 25; the Remoting adapter is ``admin_remoting``).

Reading: every key of ``BrokerConfig`` and ``StoreConfig`` with its current value, as Java's
``Configuration.getAllConfigsFormatString`` (``key=value`` lines; sorted here), and a
``DataVersion`` whose counter grows with each update (the reply header's ``version``).

Updating: the keys below take effect at once; any other key is refused and the update applies
nothing (the remark names the key and why), unlike Java, which stores every known key and leaves
most to take effect at the next start. Values are checked as in ``broker.conf`` (a bad one is
refused the same way). Updates are not written back to ``broker.conf``: a restart reads the file.
A key's alias (``metricsPromExporterPort`` for ``metricsPort``) is taken for the key.

========================================  ========================================================
hot key                                   takes effect
========================================  ========================================================
brokerPermission                          next send/pull/pop; routes re-registered at once
autoCreateTopicEnable                     next send to an unknown topic
autoCreateSubscriptionGroup               next heartbeat/pull of an unknown group
defaultTopicQueueNums                     next auto-created topic
longPollingEnable, shortPollingTimeMills  next suspended pull
maxTransferCountOnMessageInMemory         next pull / pop
maxTransferBytesOnMessageInMemory         next pull / pop
rejectTransactionMessage                  next prepared send
channelExpiredTimeout                     next expiry scan of silent clients
popFromRetryProbability                   next pop
========================================  ========================================================

Everything else is fixed for the process's life: names, ids and addresses (registered routes,
message ids), the store's file sizes, paths, flush and HA settings (read by threads and files
opened at start), the Remoting limits (set on each connection as it opens), the timer wheel's
geometry and the intervals of loops already running.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

from rocketlite.broker.config import BrokerConfig
from rocketlite.common.errors import ConfigError
from rocketlite.protocol.bodies import DataVersion
from rocketlite.store.config import key_aliases, load_properties

if TYPE_CHECKING:
    from rocketlite.broker.broker import Broker

log = logging.getLogger(__name__)

HOT_KEYS = frozenset({
    "brokerPermission", "autoCreateTopicEnable", "autoCreateSubscriptionGroup",
    "defaultTopicQueueNums", "longPollingEnable", "shortPollingTimeMills",
    "maxTransferCountOnMessageInMemory", "maxTransferBytesOnMessageInMemory",
    "rejectTransactionMessage", "channelExpiredTimeout", "popFromRetryProbability",
})


class ConfigRefused(ValueError):
    """An update that cannot be applied (an unknown key, a bad value); the message names the key
    and why."""


class KeyNotLive(ConfigRefused):
    """A key that cannot change while the broker runs."""


class BrokerConfigAdmin:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.data_version = DataVersion()

    def properties(self) -> dict[str, str]:
        """Every configuration key and its current value (broker and store)."""
        props = self.broker.store_config.to_properties()
        props.update(self.broker.config.to_properties())
        return props

    def text(self) -> str:
        """``key=value`` lines, sorted by key."""
        return "".join(f"{k}={v}\n" for k, v in sorted(self.properties().items()))

    def update_text(self, text: str) -> dict[str, str]:
        """Apply Java properties text (see :meth:`update`)."""
        return self.update(load_properties(text))

    def update(self, props: Mapping[str, str]) -> dict[str, str]:
        """Apply ``props`` (RocketMQ key -> value) all at once or not at all; the keys whose value
        changed, with their new values. ConfigRefused names the first key that cannot change."""
        b = self.broker
        known = self.properties()
        aliases = key_aliases(BrokerConfig)  # RocketMQ 5's metricsPromExporterPort: metricsPort
        props = {aliases.get(k, k): v for k, v in props.items()}
        for key in props:
            if key not in known:
                raise ConfigRefused(f"{key}: not a configuration key of this broker")
            if key not in HOT_KEYS:
                raise KeyNotLive(
                    f"{key}: cannot change while the broker runs (fixed at start; set it in "
                    f"broker.conf and restart); live keys: {', '.join(sorted(HOT_KEYS))}")
        merged = b.config.to_properties()
        merged.update({k: v.strip() for k, v in props.items()})
        try:
            new = BrokerConfig.from_properties(merged)
        except ConfigError as e:
            raise ConfigRefused(str(e)) from None
        old = b.config
        changed = {k: merged[k] for k in props if old.to_properties()[k] != new.to_properties()[k]}
        if not changed:
            return {}
        self._apply(old, new)
        dv = self.data_version
        self.data_version = DataVersion(stateVersion=dv.stateVersion, counter=dv.counter + 1)
        log.info("broker config updated: %s", changed)
        return changed

    def _apply(self, old: BrokerConfig, new: BrokerConfig) -> None:
        b = self.broker
        # Every holder of the config object reads the hot keys from it at use time.
        b.config = new
        b.topics.config = new
        b.pull.config = new
        b.pop.config = new
        b.subscriptions.auto_create = new.auto_create_subscription_group
        b.consumers.channel_expired_ms = new.channel_expired_timeout
        b.producers.channel_expired_ms = new.channel_expired_timeout
        if new.broker_permission != old.broker_permission:
            b.topics.touch()  # as Java: a new topic data version, registered at once
            b.register_soon()
