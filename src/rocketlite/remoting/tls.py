"""TLS settings for the servers' ports and rocketlite's clients, under RocketMQ's keys.

The server side (``TlsServerConfig``) reads ``tlsServerMode`` (RocketMQ's ``tls.server.mode``
system property is taken too) and ``TlsSystemConfig``'s ``tls.server.*`` keys:

============================  ======================================================================
key                           meaning
============================  ======================================================================
tlsServerMode                 ``disabled`` (plain only, the default), ``permissive`` (TLS and plain
                              on one port, told apart by the first byte), ``enforcing`` (TLS only)
tls.server.certPath           the server's certificate chain (PEM)
tls.server.keyPath            its private key (PEM)
tls.server.keyPassword        the key's password, when it is encrypted
tls.server.trustCertPath      CA certificates (PEM) that client certificates must chain to
tls.server.need.client.auth   ``none`` (default), ``optional`` (a client certificate, if sent, must
                              chain to the trust CAs), ``require`` (mutual TLS: none, no connection)
============================  ======================================================================

RocketMQ's default mode is permissive with a self-signed test certificate
(``tls.test.mode.enable``); rocketlite serves TLS only with the certificate it is given, so its
default is ``disabled``.

The client side (``client_context``): ``tls=True`` verifies the server against the system's CAs
and the host name it connects to; an ``ssl.SSLContext`` is used as given (a private CA, a client
certificate for mutual TLS). ``handshake_error`` turns a failed handshake into one line that
names the problem (an expired or untrusted certificate, a server without TLS).
"""

from __future__ import annotations

import enum
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field

from rocketlite.common.errors import ConfigError

TLS_HANDSHAKE_RECORD = 0x16
"""The first byte of every TLS connection (a handshake record). A plain Remoting frame starts with
its length's high byte (0 below 16 MiB, never 0x16 within ``frameMaxLength``), a plain HTTP/2
connection with its preface's 'P'."""
HANDSHAKE_TIMEOUT_S = 10.0
CLIENT_AUTH = {"none": ssl.CERT_NONE, "optional": ssl.CERT_OPTIONAL, "require": ssl.CERT_REQUIRED}


class TlsMode(enum.StrEnum):
    DISABLED = "disabled"
    PERMISSIVE = "permissive"
    ENFORCING = "enforcing"


KEYS = {
    "mode": "tlsServerMode",
    "cert_path": "tls.server.certPath",
    "key_path": "tls.server.keyPath",
    "key_password": "tls.server.keyPassword",
    "trust_cert_path": "tls.server.trustCertPath",
    "need_client_auth": "tls.server.need.client.auth",
}
MODE_ALIAS = "tls.server.mode"  # RocketMQ's system property for the same setting


@dataclass(frozen=True, slots=True)
class TlsServerConfig:
    """What a server's port accepts, and the certificate it shows (module doc)."""

    mode: TlsMode = TlsMode.DISABLED
    cert_path: str = ""
    key_path: str = ""
    key_password: str = ""
    trust_cert_path: str = ""
    need_client_auth: str = "none"
    handshake_timeout_s: float = HANDSHAKE_TIMEOUT_S

    def __post_init__(self) -> None:
        if self.need_client_auth not in CLIENT_AUTH:
            raise ConfigError(f"{KEYS['need_client_auth']}={self.need_client_auth}: not one of "
                              f"{', '.join(CLIENT_AUTH)}")
        if self.mode is TlsMode.DISABLED:
            return
        if not self.cert_path or not self.key_path:
            raise ConfigError(f"{KEYS['mode']}={self.mode}: needs {KEYS['cert_path']} and "
                              f"{KEYS['key_path']}")
        if self.need_client_auth != "none" and not self.trust_cert_path:
            raise ConfigError(f"{KEYS['need_client_auth']}={self.need_client_auth}: needs "
                              f"{KEYS['trust_cert_path']} (the CAs client certificates chain to)")

    @property
    def enabled(self) -> bool:
        return self.mode is not TlsMode.DISABLED

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> TlsServerConfig:
        """The keys of the module doc from a broker.conf's properties; others are ignored."""
        mode = props.get(KEYS["mode"], props.get(MODE_ALIAS, TlsMode.DISABLED.value)).strip()
        try:
            tls_mode = TlsMode(mode.lower())
        except ValueError:
            raise ConfigError(f"{KEYS['mode']}={mode}: not one of "
                              f"{', '.join(m.value for m in TlsMode)}") from None
        def value(f: str) -> str:
            return props.get(KEYS[f], "").strip()

        return cls(tls_mode, value("cert_path"), value("key_path"), value("key_password"),
                   value("trust_cert_path"), (value("need_client_auth") or "none").lower())

    def context(self, alpn: list[str] | None = None) -> ssl.SSLContext:
        """The server's SSLContext (TLS 1.2 or later); ConfigError naming the file that does not
        load."""
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        try:
            ctx.load_cert_chain(self.cert_path, self.key_path, password=self.key_password or None)
        except (OSError, ssl.SSLError) as e:
            raise ConfigError(f"{KEYS['cert_path']}={self.cert_path}, {KEYS['key_path']}="
                              f"{self.key_path}: cannot load the certificate and key: {e}") from e
        if self.trust_cert_path:
            try:
                ctx.load_verify_locations(self.trust_cert_path)
            except (OSError, ssl.SSLError) as e:
                raise ConfigError(f"{KEYS['trust_cert_path']}={self.trust_cert_path}: cannot "
                                  f"load: {e}") from e
        ctx.verify_mode = CLIENT_AUTH[self.need_client_auth]
        if alpn:
            ctx.set_alpn_protocols(alpn)
        return ctx


TlsOption = bool | ssl.SSLContext | None
"""A client's ``tls``: None/False plain, True TLS verified against the system's CAs, or a context."""


def client_context(tls: TlsOption) -> ssl.SSLContext | None:
    """The SSLContext a client connects with, or None for plain connections."""
    if tls is None or tls is False:
        return None
    if isinstance(tls, ssl.SSLContext):
        return tls
    return ssl.create_default_context()


def make_client_context(ca: str | None = None, cert: str | None = None, key: str | None = None,
                        password: str | None = None) -> ssl.SSLContext:
    """A client context that trusts ``ca`` (PEM; the system's CAs without it) and, for mutual TLS,
    shows ``cert`` with ``key``."""
    try:
        ctx = ssl.create_default_context(cafile=ca)
        if cert:
            ctx.load_cert_chain(cert, key or None, password=password or None)
    except (OSError, ssl.SSLError) as e:
        raise ConfigError(f"TLS client files (ca={ca}, cert={cert}, key={key}): {e}") from e
    return ctx


def handshake_error(addr: str, e: BaseException) -> str:
    """One line on why a TLS connection to ``addr`` failed, naming the certificate problem."""
    if isinstance(e, ssl.SSLCertVerificationError):
        return (f"TLS handshake with {addr} failed: the server's certificate is not trusted: "
                f"{e.verify_message or e.reason}")
    if isinstance(e, ssl.SSLError):
        return f"TLS handshake with {addr} failed: {e.reason or e}"
    if isinstance(e, (ConnectionError, EOFError)):
        return (f"TLS handshake with {addr} failed: the server closed the connection "
                "(does it accept TLS? tlsServerMode=permissive or enforcing)")
    return f"TLS handshake with {addr} failed: {e}"


CLIENT_KEYS = {
    "enable": "tls.enable",
    "trust_cert_path": "tls.client.trustCertPath",
    "cert_path": "tls.client.certPath",
    "key_path": "tls.client.keyPath",
    "key_password": "tls.client.keyPassword",
}


@dataclass(frozen=True, slots=True)
class TlsSettings:
    """A server process's TLS: its ports' (``server``) and its own connections' (``client``: a
    broker's to its NameServers, with ``tls.enable=true``; None: plain). The client verifies the
    server against ``tls.client.trustCertPath`` (the system's CAs without it) and shows
    ``tls.client.certPath``/``keyPath`` when given (mutual TLS)."""

    server: TlsServerConfig = field(default_factory=TlsServerConfig)
    client: ssl.SSLContext | None = None

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> TlsSettings:
        server = TlsServerConfig.from_properties(props)
        enable = props.get(CLIENT_KEYS["enable"], "false").strip().lower()
        if enable not in ("true", "false"):
            raise ConfigError(f"{CLIENT_KEYS['enable']}={enable}: expected true or false")
        client = None
        if enable == "true":
            files = {f: props.get(k, "").strip() or None for f, k in CLIENT_KEYS.items()}
            try:
                client = make_client_context(files["trust_cert_path"], files["cert_path"],
                                             files["key_path"], files["key_password"])
            except ConfigError as e:
                given = ", ".join(f"{CLIENT_KEYS[f]}={v}" for f, v in files.items()
                                  if v and f not in ("enable", "key_password"))
                raise ConfigError(f"{given or CLIENT_KEYS['enable']}: cannot load: "
                                  f"{e.__cause__ or e}") from e
        return cls(server, client)
