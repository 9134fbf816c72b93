"""Receipt handles the front renews for its clients: a receive with ``auto_renew`` (what the 5.x
PushConsumers send, with no invisible time) gets ``defaultInvisibleTimeMills`` and the front keeps
each message invisible while its client works on it, as the Java proxy's
``ReceiptHandleProcessor`` does.

A renewed message's handle changes with each renewal; the client still holds the first one. So
Ack, ChangeInvisibleDuration and ForwardMessageToDeadLetterQueue first ``take`` the entry the
client's (client id, group, message id, first handle) names and use its current handle.

Every ``renewSchedulePeriodMillis`` (a loop timer, armed while something is held), each message
whose invisible time ends within ``renewAheadTimeMillis`` gets ``renewSliceTimeMillis`` more,
unless:
- its client is gone (no session: NotifyClientTermination, or silent past the session idle
  time): it is made visible ``invisibleTimeMillisWhenClear`` later and forgotten, so another
  consumer gets it soon;
- it has been held ``renewMaxTimeMillis``: it is forgotten and comes back when its time ends;
- its handle is refused (expired meanwhile, or acked by another way): it is forgotten;
- renewing failed otherwise ``maxRenewRetryTimes`` times in a row: it is forgotten.
At most ``limit`` messages are held; past that a receive's messages are not renewed (they come
back after the default invisible time, as without auto renew). The settings are the front's
``FrontContext.renew`` (``RenewConfig.from_properties(broker_conf)`` when the CLI starts it), and
its renewer ``FrontContext.renewer``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field, fields

from rocketlite.broker.pop.errors import PopError
from rocketlite.broker.pop.service import PopService
from rocketlite.common.errors import ConfigError
from rocketlite.proxy.sessions import Sessions
from rocketlite.store.config import kwargs_from_properties

log = logging.getLogger(__name__)

Key = tuple[str, str, str]  # client id, group, message id


def _key(name: str) -> dict[str, str]:
    return {"key": name}


@dataclass(frozen=True, slots=True)
class RenewConfig:
    """ProxyConfig's renewal settings (Java names and defaults; ``from_properties`` reads them
    from broker.conf). ``limit`` (messages held at once) is rocketlite's bound."""

    enable: bool = field(default=True, metadata=_key("enableProxyAutoRenew"))
    default_invisible_ms: int = field(default=60_000, metadata=_key("defaultInvisibleTimeMills"))
    ahead_ms: int = field(default=10_000, metadata=_key("renewAheadTimeMillis"))
    slice_ms: int = field(default=60_000, metadata=_key("renewSliceTimeMillis"))
    max_ms: int = field(default=3 * 3600_000, metadata=_key("renewMaxTimeMillis"))
    period_ms: int = field(default=5_000, metadata=_key("renewSchedulePeriodMillis"))
    max_retries: int = field(default=3, metadata=_key("maxRenewRetryTimes"))
    clear_ms: int = field(default=1_000, metadata=_key("invisibleTimeMillisWhenClear"))
    limit: int = field(default=100_000, metadata=_key("maxRenewedMessages"))

    def __post_init__(self) -> None:
        for name in ("default_invisible_ms", "slice_ms", "period_ms", "clear_ms", "limit"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{self.key_of(name)}={getattr(self, name)} must be positive")
        for name in ("ahead_ms", "max_ms", "max_retries"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{self.key_of(name)}={getattr(self, name)} is negative")

    @classmethod
    def key_of(cls, name: str) -> str:
        return str(next(f.metadata["key"] for f in fields(cls) if f.name == name))

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> RenewConfig:
        return cls(**kwargs_from_properties(cls, props))




@dataclass(slots=True)
class Held:
    group: str
    topic: str
    first: str  # the handle the client holds
    current: str  # the handle the broker knows now
    visible_at: int  # when the message becomes visible again (the POP's clock)
    since: int
    retries: int = field(default=0)


class HandleRenewer:
    def __init__(self, pops: PopService, sessions: Sessions, config: RenewConfig) -> None:
        self.pops = pops
        self.sessions = sessions
        self.config = config
        self.held: dict[Key, Held] = {}
        self._timer: asyncio.TimerHandle | None = None
        self._full_logged = False

    def __len__(self) -> int:
        return len(self.held)

    def add(self, client_id: str, group: str, topic: str, message_id: str, handle: str,
            visible_at: int) -> bool:
        """Renew this message until it is taken; False when ``limit`` are held already."""
        if len(self.held) >= self.config.limit:
            if not self._full_logged:
                log.warning("%d received messages are renewed already; more are not",
                            self.config.limit)
                self._full_logged = True
            return False
        now = self.pops.clock()
        self.held[(client_id, group, message_id)] = Held(group, topic, handle, handle,
                                                         visible_at, now)
        self._arm()
        return True

    def take(self, client_id: str, group: str, message_id: str, handle: str) -> str:
        """The handle to use for the client's ``handle`` (its current one if it was renewed),
        no longer renewed."""
        key = (client_id, group, message_id)
        h = self.held.get(key)
        if h is None or h.first != handle:
            return handle
        del self.held[key]
        return h.current

    def _arm(self) -> None:
        if self._timer is None and self.held:
            loop = asyncio.get_running_loop()
            self._timer = loop.call_later(self.config.period_ms / 1000, self._tick)

    def _tick(self) -> None:
        self._timer = None
        try:
            self.renew_due()
        finally:
            self._arm()

    def renew_due(self) -> int:
        """One round: renew what is due, release what must be. Returns the renewals made."""
        cfg, pops = self.config, self.pops
        now = pops.clock()
        renewed = 0
        for key, h in list(self.held.items()):
            if h.visible_at - now > cfg.ahead_ms:
                continue
            client_id = key[0]
            try:
                if self.sessions.get(client_id) is None:  # the client is gone: let go soon
                    del self.held[key]
                    pops.change_invisible(h.group, h.topic, h.current, cfg.clear_ms)
                    continue
                if now - h.since >= cfg.max_ms:
                    del self.held[key]  # held too long: it comes back when its time ends
                    continue
                h.current = pops.change_invisible(h.group, h.topic, h.current, cfg.slice_ms)
                h.visible_at, h.retries = now + cfg.slice_ms, 0
                renewed += 1
            except PopError as e:  # expired or acked meanwhile: nothing left to renew
                self.held.pop(key, None)
                log.debug("stopped renewing %s: %s", key, e)
            except Exception:  # a store error: retried next round
                h.retries += 1
                if h.retries >= cfg.max_retries:
                    self.held.pop(key, None)
                    log.warning("gave up renewing %s after %d failures", key, h.retries,
                                exc_info=True)
        return renewed

