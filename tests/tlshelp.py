"""Certificates made at test time (trustme) for the TLS tests, written as PEM files under a
directory: a CA and a server certificate for 127.0.0.1/localhost signed by it, an expired one, one
signed by a CA nobody trusts, one for another host name, and a client certificate for mutual TLS
(not a test module)."""

from __future__ import annotations

import datetime
import ssl
from dataclasses import dataclass
from pathlib import Path

import trustme

from rocketlite.remoting.tls import TlsMode, TlsServerConfig, make_client_context

HOSTS = ("127.0.0.1", "localhost")


@dataclass(frozen=True)
class Certs:
    ca: Path  # the trusted CA's certificate
    server: Path  # certificate chain and key in one PEM
    expired: Path
    untrusted: Path  # signed by another CA
    other_host: Path  # signed by ``ca`` for another host name only
    client: Path  # a client certificate signed by ``ca``, with its key

    def server_tls(self, mode: str, pem: Path | None = None,
                   need_client_auth: str = "none") -> TlsServerConfig:
        """The server's config showing ``pem`` (``server`` by default)."""
        pem = pem or self.server
        return TlsServerConfig(TlsMode(mode), str(pem), str(pem),
                               trust_cert_path=str(self.ca) if need_client_auth != "none" else "",
                               need_client_auth=need_client_auth)

    def client_tls(self, with_cert: bool = False) -> ssl.SSLContext:
        """A client context trusting ``ca`` (and showing ``client`` with ``with_cert``)."""
        cert = str(self.client) if with_cert else None
        return make_client_context(str(self.ca), cert, cert)


def make_certs(root: Path) -> Certs:
    root.mkdir(parents=True, exist_ok=True)
    ca, stranger = trustme.CA(), trustme.CA()
    now = datetime.datetime.now(datetime.UTC)
    files = {
        "ca": ca.cert_pem,
        "server": ca.issue_cert(*HOSTS).private_key_and_cert_chain_pem,
        "expired": ca.issue_cert(*HOSTS, not_before=now - datetime.timedelta(days=10),
                                 not_after=now - datetime.timedelta(days=1)
                                 ).private_key_and_cert_chain_pem,
        "untrusted": stranger.issue_cert(*HOSTS).private_key_and_cert_chain_pem,
        "other_host": ca.issue_cert("broker.example.test").private_key_and_cert_chain_pem,
        "client": ca.issue_cert("client@test").private_key_and_cert_chain_pem,
    }
    paths = {}
    for name, blob in files.items():
        paths[name] = root / f"{name}.pem"
        blob.write_to_path(str(paths[name]))
    return Certs(**paths)
