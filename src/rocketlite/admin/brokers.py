"""A broker's configuration and housekeeping: ``getBrokerConfig``, ``updateBrokerConfig`` and
``cleanExpiredCQ``.

``update_broker_config`` sends one ``key=value`` (UPDATE_BROKER_CONFIG, 25). A rocketlite broker
changes a listed set of keys live and refuses any other, naming the key and why; that refusal is
the AdminError's message. Nothing is written back to ``broker.conf``.

``clean_expired_cq``: CLEAN_EXPIRED_CONSUMEQUEUE (306) on a broker, each master of a cluster, or
(neither given, as mqadmin) every master the NameServer knows.
"""

from __future__ import annotations

import dataclasses

from rocketlite.admin.errors import AdminError
from rocketlite.admin.session import AdminSession
from rocketlite.common.errors import FormatError
from rocketlite.protocol.admin_headers import GetBrokerConfigResponseHeader
from rocketlite.protocol.bodies import DataVersion
from rocketlite.protocol.codes import RequestCode


@dataclasses.dataclass(slots=True)
class BrokerConfigView:
    """A broker's configuration (keys sorted) and its version counter (one more per update)."""

    address: str
    version: int
    config: dict[str, str]


@dataclasses.dataclass(slots=True)
class ConfigUpdate:
    address: str
    key: str
    value: str


def config_lines(text: str) -> dict[str, str]:
    """GET_BROKER_CONFIG's body: ``key=value`` lines written as is, unescaped (Java's
    ``getAllConfigsFormatString`` and rocketlite's alike), so split at the first ``=``."""
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() and not key.lstrip().startswith(("#", "!")):
            out[key.strip()] = value
    return dict(sorted(out.items()))


async def get_broker_config(session: AdminSession, broker_addr: str | None = None,
                            cluster: str | None = None) -> list[BrokerConfigView]:
    """GET_BROKER_CONFIG (26) of ``broker_addr`` or of each master of ``cluster``."""
    out = []
    for addr in await session.targets(broker_addr, cluster):
        reply = await session.call(addr, RequestCode.GET_BROKER_CONFIG)
        try:
            text = bytes(reply.body or b"").decode("utf-8")
            version = DataVersion.from_json(
                GetBrokerConfigResponseHeader.from_ext(reply.ext_fields).version).counter
        except (UnicodeDecodeError, FormatError) as e:
            raise AdminError(f"broker {addr} answered a malformed configuration: {e}") from e
        out.append(BrokerConfigView(addr, version, config_lines(text)))
    return out


async def update_broker_config(session: AdminSession, key: str, value: str, *,
                               broker_addr: str | None = None,
                               cluster: str | None = None) -> list[ConfigUpdate]:
    """Set ``key`` to ``value`` on ``broker_addr`` or each master of ``cluster`` (in address
    order; a refusal stops there, naming the broker and its reason)."""
    key, value = key.strip(), value.strip()
    if not key or any(c in key for c in "=:# \t\r\n") or any(c in value for c in "\r\n"):
        raise AdminError(f"{key!r}={value!r} is not a key=value property")
    body = f"{key}={value}\n".encode()
    out = []
    for addr in await session.targets(broker_addr, cluster):
        await session.call(addr, RequestCode.UPDATE_BROKER_CONFIG, body=body)
        out.append(ConfigUpdate(addr, key, value))
    return out


async def clean_expired_cq(session: AdminSession, broker_addr: str | None = None,
                           cluster: str | None = None) -> list[str]:
    """CLEAN_EXPIRED_CONSUMEQUEUE on the brokers named (module doc); the addresses done."""
    if broker_addr is None and cluster is None:
        addrs = sorted((await session.all_masters()).values())
        if not addrs:
            raise AdminError("no master broker is registered at the NameServer")
    else:
        addrs = await session.targets(broker_addr, cluster)
    for addr in addrs:
        await session.call(addr, RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE)
    return addrs
