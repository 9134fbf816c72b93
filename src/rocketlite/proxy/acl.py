"""ACL on the gRPC front: with the broker's ``aclEnable`` every call is checked against the same
``plain_acl.yml`` (``broker.acl``, reloaded as the Remoting check's) before its area module runs.

5.x clients sign each call with ``authorization: MQv2-HMAC-SHA1 Credential=AK,
SignedHeaders=x-mq-date-time, Signature=HEX`` (``acl.validator.check_grpc``). A caller that is not
authenticated (no or unknown key, wrong signature) is answered ``UNAUTHORIZED``, one whose
permissions fall short ``FORBIDDEN``, in the method's own response (a stream's first and only
message) with the reason, and nothing of the call runs.

What a call needs: ``SendMessage``, ``EndTransaction``, ``RecallMessage`` PUB on the topic;
``QueryRoute`` ANY on it; the others SUB on the topic they name and on the group (held under its
retry topic, as the Remoting check does); ``Telemetry`` only a valid signature. Checked calls are
not batched (``batch_methods`` is empty): each is checked on its own.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from google.protobuf.message import Message

from rocketlite.acl.perm import ANY, PUB, SUB, retry_topic
from rocketlite.acl.validator import GrpcRefusal, check_grpc
from rocketlite.proxy.context import FrontContext, ServicerContext, metadata, peer_address
from rocketlite.proxy.h2.server import BatchHandler
from rocketlite.proxy.pb import service_pb2
from rocketlite.proxy.service import MessagingServicer
from rocketlite.proxy.status import Code, status
from rocketlite.remoting.limits import PeerLog

log = logging.getLogger(__name__)
_REFUSALS = PeerLog(log)  # at most 10 warnings a minute per peer host, as the Remoting gate's

AUTHORIZATION = "authorization"
DATE_TIME = "x-mq-date-time"
_PUB = frozenset(("SendMessage", "EndTransaction", "RecallMessage"))
_ANY = frozenset(("QueryRoute",))
_SERVICE = service_pb2.DESCRIPTOR.services_by_name["MessagingService"]
_OUTPUT = {m.name: getattr(service_pb2, m.output_type.name) for m in _SERVICE.methods}


def needs(method: str, request: Message) -> dict[str, int]:
    """The permissions a call of ``method`` with ``request`` needs, by resource (groups under
    their retry topic's name)."""
    perm = PUB if method in _PUB else ANY if method in _ANY else SUB
    fields = request.DESCRIPTOR.fields_by_name
    r: Any = request
    topics: list[str] = []
    if "messages" in fields:
        topics += [m.topic.name for m in r.messages]
    if "topic" in fields:
        topics.append(r.topic.name)
    if "message_queue" in fields:
        topics.append(r.message_queue.topic.name)
    need: dict[str, int] = {}
    for topic in topics:
        if topic:
            need[topic] = need.get(topic, 0) | perm
    if "group" in fields and r.group.name:
        key = retry_topic(r.group.name)
        need[key] = need.get(key, 0) | SUB
    return need


class AclServicer(MessagingServicer):
    """``MessagingServicer`` with every method checked first (module docstring)."""

    def __init__(self, ctx: FrontContext) -> None:
        super().__init__(ctx)
        for m in _SERVICE.methods:
            original = getattr(super(), m.name, None)
            if original is None:
                continue
            if m.client_streaming or m.server_streaming:
                wrapped: Callable[..., Any] = self._checked_stream(m.name, original,
                                                                   bidi=m.client_streaming)
            else:
                wrapped = self._checked_unary(m.name, original)
            setattr(self, m.name, wrapped)

    def batch_methods(self) -> dict[str, BatchHandler]:
        return {}

    def refusal(self, method: str, request: Message | None, context: ServicerContext
                ) -> Any | None:
        """None when the call may run, else the method's response that refuses it."""
        gate = self.ctx.broker.acl
        if gate is None:
            return None
        need = {} if request is None else needs(method, request)
        found: GrpcRefusal | None = check_grpc(
            gate.file.config, peer_address(context)[0], metadata(context, AUTHORIZATION),
            metadata(context, DATE_TIME), need)
        if found is None:
            return None
        gate.denied += 1
        peer = peer_address(context)[0]
        _REFUSALS.warning(peer, "ACL: refused gRPC %s from %s: %s", method, peer, found.reason)
        code = Code.FORBIDDEN if found.authenticated else Code.UNAUTHORIZED
        return _OUTPUT[method](status=status(code, found.reason))

    def _checked_unary(self, name: str, original: Callable[..., Awaitable[Any]]
                       ) -> Callable[..., Awaitable[Any]]:
        @functools.wraps(original)
        async def call(request: Message, context: ServicerContext) -> Any:
            refused = self.refusal(name, request, context)
            return refused if refused is not None else await original(request, context)
        return call

    def _checked_stream(self, name: str, original: Callable[..., AsyncIterator[Any]], *,
                        bidi: bool = False) -> Callable[..., AsyncIterator[Any]]:
        """A server-streaming method checked on its request, or (``bidi``: Telemetry) a
        bidirectional one checked on its metadata alone."""
        @functools.wraps(original)
        async def call(request: Any, context: ServicerContext) -> AsyncIterator[Any]:
            refused = self.refusal(name, None if bidi else request, context)
            if refused is not None:
                yield refused
                return
            async for response in original(request, context):
                yield response
        return call


def servicer(ctx: FrontContext) -> MessagingServicer:
    """The front's servicer: checked when the broker has an ACL."""
    return AclServicer(ctx) if ctx.broker.acl is not None else MessagingServicer(ctx)
