"""What every RPC of the front may use (``FrontContext``) and the request metadata it reads.

The 5.x clients send ``x-mq-client-id`` (required for Telemetry, Heartbeat, receives and
transactions: the client a session belongs to), ``x-mq-language``, ``x-mq-client-version``,
``x-mq-protocol`` (``GRPC_V2``), ``x-mq-request-id``, ``x-mq-namespace`` and ``authorization``
on every call.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import grpc

from rocketlite.proxy.sessions import Sessions

if TYPE_CHECKING:
    from rocketlite.broker.broker import Broker

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
    there). ``sessions``: the clients known by their Telemetry streams and heartbeats."""

    broker: Broker
    host: str
    port: int
    sessions: Sessions


def metadata(context: ServicerContext, key: str) -> str | None:
    """One request metadata value (the first, cut to ``MAX_METADATA_VALUE``), or None."""
    for k, v in context.invocation_metadata() or ():
        if k == key:
            value = v if isinstance(v, str) else v.decode("utf-8", "replace")
            return value[:MAX_METADATA_VALUE]
    return None


def client_id(context: ServicerContext) -> str | None:
    return metadata(context, CLIENT_ID)
