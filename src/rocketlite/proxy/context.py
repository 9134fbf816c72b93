"""What every RPC of the front may use (``FrontContext``) and the request metadata it reads.

The 5.x clients send ``x-mq-client-id`` (required for Telemetry, Heartbeat, receives and
transactions: the client a session belongs to), ``x-mq-language``, ``x-mq-client-version``,
``x-mq-protocol`` (``GRPC_V2``), ``x-mq-request-id``, ``x-mq-namespace`` and ``authorization``
on every call.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import grpc

from rocketlite.proxy.consume_checks import ConsumeLimits
from rocketlite.proxy.renew import HandleRenewer, RenewConfig
from rocketlite.proxy.sessions import Sessions
from rocketlite.proxy.status import Code, FrontError

if TYPE_CHECKING:
    from rocketlite.broker.broker import Broker
    from rocketlite.proxy.consumer import AckGroup
    from rocketlite.proxy.producer import SendGroup

ServicerContext = grpc.aio.ServicerContext[Any, Any]

CLIENT_ID = "x-mq-client-id"
LANGUAGE = "x-mq-language"
CLIENT_VERSION = "x-mq-client-version"
NAMESPACE = "x-mq-namespace"
REQUEST_ID = "x-mq-request-id"
MAX_METADATA_VALUE = 1024  # longer client ids / versions are cut (a client may not grow our tables)


@dataclass(slots=True)
class FrontContext:
    """The broker the front serves and the front's own state.

    ``host``/``port``: the endpoint this front advertises in routes (clients send and receive
    there). ``sessions``: the clients known by their Telemetry streams and heartbeats.
    ``limits``: the consumer limits (ProxyConfig's, from broker.conf); ``renew``: the receipt
    handle auto-renewal settings, and ``renewer`` the front's renewer (made on first use).
    ``send_group``/``ack_group``: the SendMessage and AckMessage calls of a loop iteration
    gathered for one store append (made by ``producer.send_group``/``consumer.ack_group``)."""

    broker: Broker
    host: str
    port: int
    sessions: Sessions
    limits: ConsumeLimits = field(default_factory=ConsumeLimits)
    renew: RenewConfig = field(default_factory=RenewConfig)
    _renewer: HandleRenewer | None = None
    send_group: SendGroup | None = None
    ack_group: AckGroup | None = None

    @property
    def renewer(self) -> HandleRenewer:
        if self._renewer is None:
            self._renewer = HandleRenewer(self.broker.pop, self.sessions, self.renew)
        return self._renewer


def metadata(context: ServicerContext, key: str) -> str | None:
    """One request metadata value (the first, cut to ``MAX_METADATA_VALUE``), or None."""
    for k, v in context.invocation_metadata() or ():
        if k == key:
            value = v if isinstance(v, str) else v.decode("utf-8", "replace")
            return value[:MAX_METADATA_VALUE]
    return None


def client_id(context: ServicerContext) -> str | None:
    return metadata(context, CLIENT_ID)


def require_client_id(context: ServicerContext) -> str:
    """``x-mq-client-id``, or ``FrontError(CLIENT_ID_REQUIRED)`` when it is missing or blank."""
    cid = metadata(context, CLIENT_ID)
    if cid is None or not cid.strip():
        raise FrontError(Code.CLIENT_ID_REQUIRED,
                         f"the request carries no {CLIENT_ID} metadata: the client is unknown")
    return cid


def peer_address(context: ServicerContext) -> tuple[str, int]:
    """The client's host and port from gRPC's peer string (``ipv4:1.2.3.4:5``,
    ``ipv6:[::1]:5``); ``("127.0.0.1", 0)`` when it names no TCP peer."""
    return _parse_peer(context.peer() or "")


@functools.lru_cache(maxsize=4096)
def _parse_peer(peer: str) -> tuple[str, int]:
    kind, _, rest = peer.partition(":")
    if kind not in ("ipv4", "ipv6") or ":" not in rest:
        return "127.0.0.1", 0
    host, _, port = rest.rpartition(":")
    host = host.strip("[]")
    try:
        return host, int(port)
    except ValueError:
        return host, 0
