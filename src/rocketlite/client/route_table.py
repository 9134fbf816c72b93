"""A client instance's topic routes and broker addresses: the routes it follows (at most
``MAX_TOPICS``), each broker name's address by broker id as the latest route gave it, the lookups
requests are addressed by (a master, any replica, where to pull), and when a failed request may
refresh its topic's route again (at most once per ``gap``). Bookkeeping only: fetching routes and
telling producers and consumers is the instance's."""

from __future__ import annotations

from rocketlite.client.errors import MQClientError
from rocketlite.client.route import MASTER_ID
from rocketlite.protocol.bodies import TopicRouteData

MAX_TOPICS = 10_000


class RouteTable:
    """``routes``: topic -> its route. ``broker_addrs``: broker name -> {broker id: address}; a
    broker's map is replaced (not updated) whenever a route changes it, so holding a map and
    checking its identity tells whether the broker's addresses are still those."""

    __slots__ = ("_refresh_at", "broker_addrs", "routes")

    def __init__(self) -> None:
        self.routes: dict[str, TopicRouteData] = {}
        self.broker_addrs: dict[str, dict[int, str]] = {}
        self._refresh_at: dict[str, float] = {}  # topic -> earliest next failure refresh

    def put(self, topic: str, route: TopicRouteData) -> bool:
        """Follow ``route`` for ``topic`` and learn its brokers; True when a broker's addresses
        changed (``learn_brokers``). A new topic past ``MAX_TOPICS`` raises ``MQClientError``."""
        if topic not in self.routes and len(self.routes) >= MAX_TOPICS:
            raise MQClientError(f"this client already follows {MAX_TOPICS} topics")
        self.routes[topic] = route
        return self.learn_brokers(route)

    def learn_brokers(self, route: TopicRouteData) -> bool:
        """Record the route's broker addresses; True when any broker's differ from those known."""
        learned = False
        for bd in route.brokerDatas:
            addrs = dict(bd.brokerAddrs)
            learned = learned or self.broker_addrs.get(bd.brokerName) != addrs
            self.broker_addrs[bd.brokerName] = addrs
        return learned

    def forget_unused_brokers(self) -> None:
        """Drop the addresses of brokers no followed route names any more."""
        in_use = {bd.brokerName for r in self.routes.values() for bd in r.brokerDatas}
        for name in [n for n in self.broker_addrs if n not in in_use]:
            del self.broker_addrs[name]

    def broker_addr(self, broker_name: str, *, master: bool = True) -> str | None:
        """The master's address, or (``master=False``) any replica's, preferring the master."""
        addrs = self.broker_addrs.get(broker_name)
        if not addrs:
            return None
        if MASTER_ID in addrs:
            return addrs[MASTER_ID]
        if master:
            return None
        return addrs[min(addrs)]

    def broker_addr_in_subscribe(self, broker_name: str, broker_id: int) -> tuple[str, bool] | None:
        """Where to read from (Java's ``findBrokerAddressInSubscribe`` without
        ``onlyThisBroker``): ``broker_id``'s address, else for a slave id the next id's, else
        the master's, else the lowest id's; with whether it is a slave. None: no address known."""
        addrs = self.broker_addrs.get(broker_name)
        if not addrs:
            return None
        for bid in (broker_id, broker_id + 1) if broker_id != MASTER_ID else (broker_id,):
            if bid in addrs:
                return addrs[bid], bid != MASTER_ID
        bid = MASTER_ID if MASTER_ID in addrs else min(addrs)
        return addrs[bid], bid != MASTER_ID

    def all_broker_addrs(self) -> list[str]:
        """Every known address of every broker, sorted."""
        return sorted({a for addrs in self.broker_addrs.values() for a in addrs.values()})

    def refresh_due(self, topic: str, now: float, gap: float) -> bool:
        """Whether a failed request may refresh ``topic``'s route at ``now``: not if one did less
        than ``gap`` seconds ago; if so, the next may at ``now + gap``."""
        refresh_at = self._refresh_at
        if refresh_at.get(topic, 0.0) > now:
            return False
        if len(refresh_at) >= MAX_TOPICS:
            refresh_at.clear()
        refresh_at[topic] = now + gap
        return True
