"""The settings every producer and consumer shares (Java's ``ClientConfig``), how a client's
arguments become them (``client_config``: credentials, TLS), and the local address a client id
is made of (``local_ip``)."""

from __future__ import annotations

import dataclasses
import os
import socket
from dataclasses import dataclass

from rocketlite.acl.sign import Credentials
from rocketlite.client.errors import MQClientError
from rocketlite.remoting.tls import TlsOption


@dataclass(slots=True, kw_only=True)
class ClientConfig:
    """Settings every client shares (``ClientConfig.java``). ``namesrv_addr`` is
    ``host:port;host:port``; empty means the ``NAMESRV_ADDR`` environment variable. ``tls``
    (Java's ``tls.enable``): True connects to NameServers and brokers with TLS verified against
    the system's CAs, an ``ssl.SSLContext`` with that context (a private CA, a client certificate;
    ``remoting.tls.make_client_context``)."""

    namesrv_addr: str = ""
    instance_name: str | None = None
    client_ip: str | None = None
    request_timeout: float = 3.0
    poll_name_server_interval: float = 30.0
    heartbeat_interval: float = 30.0
    persist_offset_interval: float = 5.0
    rebalance_interval: float = 20.0
    unit_name: str | None = None
    tls: TlsOption = None
    # ACL: every request is signed with these (``SessionCredentials``); None: unsigned
    credentials: Credentials | None = None

    def namesrv_list(self) -> list[str]:
        text = self.namesrv_addr or os.environ.get("NAMESRV_ADDR", "")
        addrs = [a.strip() for a in text.replace(",", ";").split(";") if a.strip()]
        if not addrs:
            raise MQClientError("no NameServer address: pass namesrv_addr='host:9876' or set NAMESRV_ADDR")
        return addrs


CredentialsLike = Credentials | tuple[str, str] | tuple[str, str, str | None]
"""``(access_key, secret_key)``, ``(access_key, secret_key, security_token)`` or ``Credentials``."""


def client_config(config: ClientConfig | None, namesrv_addr: str,
                  credentials: CredentialsLike | None, tls: TlsOption = None) -> ClientConfig:
    """A client's settings: ``config`` (else one for ``namesrv_addr``), with ``credentials``
    and ``tls`` (True, or an ``ssl.SSLContext``) when given."""
    cfg = config or ClientConfig(namesrv_addr=namesrv_addr)
    if credentials is not None:
        cfg = dataclasses.replace(cfg, credentials=Credentials.of(credentials))
    if tls is not None and tls is not False:
        cfg = dataclasses.replace(cfg, tls=tls)
    return cfg


def local_ip() -> str:
    """The address other hosts would see (no packet is sent: UDP connect only picks a route)."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("192.0.2.1", 9))  # TEST-NET-1: never routed anywhere
            return str(s.getsockname()[0])
    except OSError:
        return "127.0.0.1"
