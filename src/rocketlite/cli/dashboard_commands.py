"""``rocketlite dashboard``: the web dashboard (``rocketlite.dashboard``) of the cluster behind a
NameServer, until SIGINT or SIGTERM.

It binds loopback by default: reads need no login there. Writes (resend) are refused unless
credentials are given (``--username``/``--password`` or the environment). Against a cluster with
an ACL its requests are signed with ``--access-key``/``--secret-key`` (or ``ROCKETLITE_ACCESS_KEY``
/ ``ROCKETLITE_SECRET_KEY``), as ``rocketlite admin``'s. ``--tls``/``--ca`` (``--cert``/``--key``)
reach a cluster whose ports take TLS (docs/security.md). A port in use or a bad option prints one
``error:`` line and exits 1.
"""

from __future__ import annotations

import asyncio
from typing import Annotated

import typer

from rocketlite.cli import errors
from rocketlite.cli.admin_common import (
    AccessKey,
    SecretKey,
    TlsCa,
    TlsCert,
    TlsFlag,
    TlsKey,
    acl_credentials,
    tls_option,
)
from rocketlite.common.errors import ConfigError
from rocketlite.dashboard import serve
from rocketlite.dashboard.app import DEFAULT_PORT
from rocketlite.dashboard.auth import credentials


def dashboard(
    namesrv: Annotated[str, typer.Option(
        "-n", "--namesrv", envvar="NAMESRV_ADDR",
        help="NameServer address(es), host:port[;host:port] (default: $NAMESRV_ADDR)")],
    port: Annotated[int, typer.Option("--port", help="HTTP port (dashboardPort)")] = DEFAULT_PORT,
    bind: Annotated[str, typer.Option(
        "--bind", help="address to listen on; reads from other hosts need the login")] = "127.0.0.1",
    username: Annotated[str | None, typer.Option(
        "--username", envvar="ROCKETLITE_DASHBOARD_USERNAME",
        help="login for writes (resend, offset reset); without it the dashboard is read-only")] = None,
    password: Annotated[str | None, typer.Option(
        "--password", envvar="ROCKETLITE_DASHBOARD_PASSWORD",
        help="password for --username")] = None,
    tls: TlsFlag = False, ca: TlsCa = None, cert: TlsCert = None, key: TlsKey = None,
    access_key: AccessKey = None,
    secret_key: SecretKey = None,
) -> None:
    """Serve the web dashboard (cluster, topics, groups, messages, DLQ, producers) of a cluster."""
    try:
        creds = credentials(username, password)
        context = tls_option(tls, ca, cert, key)
    except (ValueError, ConfigError) as e:
        errors.fail(str(e))
    acl = acl_credentials(access_key, secret_key)
    try:
        asyncio.run(serve(namesrv, bind, port, creds, context, acl))
    except OSError as e:
        if errors.debugging():
            raise
        errors.fail(f"cannot serve the dashboard on {bind}:{port}: {e.strerror or e}")
    except KeyboardInterrupt:
        pass
