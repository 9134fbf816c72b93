"""TLS on a Remoting port (issue 22, TLS): permissive takes TLS and plain clients on one port,
enforcing refuses plain ones with an error that names TLS, an expired or untrusted certificate
fails the client's connect with an error naming the problem, mutual TLS refuses a client without
a certificate; and the config's keys and files are checked before a port is bound."""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from rocketlite.common.errors import ConfigError, RemotingError
from rocketlite.protocol.command import RemotingCommand
from rocketlite.remoting.client import RemotingClient
from rocketlite.remoting.connection import Connection
from rocketlite.remoting.server import RemotingServer
from rocketlite.remoting.tls import TlsMode, TlsServerConfig, TlsSettings
from tlshelp import Certs, make_certs

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]
ECHO = 77


def echo(conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    """Answers with the body and whether the connection is TLS."""
    tls = conn.transport is not None and conn.transport.get_extra_info("ssl_object") is not None
    return cmd.response(0, ext_fields={"tls": str(tls).lower()}, body=cmd.body)


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("certs"))


async def serving(tls: TlsServerConfig | None) -> RemotingServer:
    server = RemotingServer("127.0.0.1", 0, tls=tls)
    server.register(ECHO, echo)
    await server.start()
    return server


async def ask(addr: str, tls: ssl.SSLContext | bool | None, body: bytes = b"hi") -> RemotingCommand:
    client = RemotingClient(tls=tls, connect_timeout=5.0)
    try:
        return await client.invoke(addr, RemotingCommand.request(ECHO, body=body), 5.0)
    finally:
        await client.close()


@pytest.fixture
async def server_for(certs: Certs) -> AsyncIterator[list[RemotingServer]]:
    servers: list[RemotingServer] = []
    yield servers
    for s in servers:
        await s.close()


async def start(servers: list[RemotingServer], tls: TlsServerConfig | None) -> str:
    server = await serving(tls)
    servers.append(server)
    return f"127.0.0.1:{server.port}"


async def test_permissive_serves_tls_and_plain_clients_on_one_port(
        certs: Certs, server_for: list[RemotingServer]) -> None:
    addr = await start(server_for, certs.server_tls("permissive"))
    body = bytes(range(256)) * 4000  # ~1 MB: many TLS records
    secure, plain = await asyncio.gather(ask(addr, certs.client_tls(), body), ask(addr, None, body))
    assert (secure.code, secure.ext_fields["tls"], secure.body) == (0, "true", body)
    assert (plain.code, plain.ext_fields["tls"], plain.body) == (0, "false", body)


def test_permissive_and_enforcing_on_uvloop(certs: Certs) -> None:
    """The servers run on uvloop (``rocketlite start``): the peek, and the hand-over of the peeked
    socket to uvloop's transports, work there too."""
    import uvloop

    async def both(mode: str) -> tuple[RemotingCommand, RemotingCommand]:
        server = await serving(certs.server_tls(mode))
        addr = f"127.0.0.1:{server.port}"
        try:
            return await ask(addr, certs.client_tls()), await ask(addr, None)
        finally:
            await server.close()

    secure, plain = uvloop.run(both("permissive"))
    assert (secure.ext_fields["tls"], plain.ext_fields["tls"]) == ("true", "false")
    secure, refused = uvloop.run(both("enforcing"))
    assert secure.code == 0 and "accepts TLS connections only" in refused.remark


async def test_enforcing_refuses_plain_with_an_error_naming_tls_and_logs_once_per_peer(
        certs: Certs, server_for: list[RemotingServer], caplog: pytest.LogCaptureFixture) -> None:
    addr = await start(server_for, certs.server_tls("enforcing"))
    secure = await ask(addr, certs.client_tls())
    assert (secure.code, secure.ext_fields["tls"]) == (0, "true")
    with caplog.at_level(logging.WARNING, "rocketlite.remoting"):
        for _ in range(3):
            refused = await ask(addr, None)
            assert refused.code == 1  # SYSTEM_ERROR
            assert "accepts TLS connections only" in refused.remark
            assert "tlsServerMode=enforcing" in refused.remark
    lines = [r for r in caplog.records if "refused a plain" in r.getMessage()]
    assert len(lines) == 1


async def test_tls_client_to_a_plain_port_fails_with_a_clear_error(
        certs: Certs, server_for: list[RemotingServer]) -> None:
    addr = await start(server_for, None)
    with pytest.raises(RemotingError, match=r"TLS handshake with .* failed: the server closed"):
        await ask(addr, certs.client_tls())
    assert (await ask(addr, None)).code == 0  # the port still serves plain clients


@pytest.mark.parametrize(("which", "reason"), [
    ("expired", "certificate has expired"),
    ("untrusted", "unable to get local issuer certificate"),
    ("other_host", "IP address mismatch"),
])
async def test_a_bad_server_certificate_fails_the_connect_naming_the_problem(
        certs: Certs, server_for: list[RemotingServer], which: str, reason: str) -> None:
    addr = await start(server_for, certs.server_tls("enforcing", getattr(certs, which)))
    with pytest.raises(RemotingError) as e:
        await ask(addr, certs.client_tls())
    assert "the server's certificate is not trusted" in str(e.value)
    assert reason in str(e.value)


async def test_mutual_tls_refuses_a_client_without_a_certificate(
        certs: Certs, server_for: list[RemotingServer]) -> None:
    addr = await start(server_for, certs.server_tls("enforcing", need_client_auth="require"))
    with pytest.raises(RemotingError, match="may require a client certificate"):
        await ask(addr, certs.client_tls(with_cert=False))
    accepted = await ask(addr, certs.client_tls(with_cert=True))
    assert (accepted.code, accepted.ext_fields["tls"]) == (0, "true")


def test_config_keys_are_rocketmqs_and_bad_values_are_refused(certs: Certs) -> None:
    props = {"tls.server.mode": "Enforcing", "tls.server.certPath": str(certs.server),
             "tls.server.keyPath": str(certs.server), "tls.server.trustCertPath": str(certs.ca),
             "tls.server.need.client.auth": "require"}
    cfg = TlsServerConfig.from_properties(props)
    assert (cfg.mode, cfg.need_client_auth, cfg.trust_cert_path) == (
        TlsMode.ENFORCING, "require", str(certs.ca))
    assert cfg.context().verify_mode == ssl.CERT_REQUIRED
    assert TlsServerConfig.from_properties({}).mode is TlsMode.DISABLED
    with pytest.raises(ConfigError, match="tlsServerMode=strict: not one of"):
        TlsServerConfig.from_properties({"tlsServerMode": "strict"})
    with pytest.raises(ConfigError, match=r"needs tls\.server\.certPath"):
        TlsServerConfig.from_properties({"tlsServerMode": "permissive"})
    with pytest.raises(ConfigError, match=r"needs tls\.server\.trustCertPath"):
        TlsServerConfig(TlsMode.PERMISSIVE, "c", "k", need_client_auth="require")
    missing = TlsServerConfig(TlsMode.PERMISSIVE, str(certs.ca), "/nonexistent/key.pem")
    with pytest.raises(ConfigError, match="cannot load the certificate and key"):
        missing.context()
    with pytest.raises(ConfigError, match=r"tls\.enable=yes"):
        TlsSettings.from_properties({"tls.enable": "yes"})
    client = TlsSettings.from_properties({"tls.enable": "true",
                                          "tls.client.trustCertPath": str(certs.ca)}).client
    assert client is not None and client.verify_mode == ssl.CERT_REQUIRED


async def test_a_bad_certificate_file_fails_start_before_the_port_is_bound(tmp_path: Path) -> None:
    bad = tmp_path / "bad.pem"
    bad.write_text("not a certificate")
    server = RemotingServer("127.0.0.1", 0, tls=TlsServerConfig(TlsMode.ENFORCING, str(bad), str(bad)))
    with pytest.raises(ConfigError, match="cannot load"):
        await server.start()
