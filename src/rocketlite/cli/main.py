"""``rocketlite``: the command line.

``app`` runs every command inside the shared error path (``rocketlite.cli.errors``): an expected
failure is one ``error: <reason>`` line and exit code 1; ``rocketlite --debug CMD`` (or a
command's own ``--debug``) shows the traceback instead."""

from __future__ import annotations

import sys
from importlib.metadata import PackageNotFoundError, version
from typing import Annotated, Any

import typer

from rocketlite.cli import errors, server_commands
from rocketlite.cli.admin_commands import admin_app
from rocketlite.cli.cluster_commands import cluster_app
from rocketlite.cli.dashboard_commands import dashboard
from rocketlite.cli.spark_commands import spark_app
from rocketlite.cli.store_commands import store_app


class _App(typer.Typer):
    """The root app: calling it (the ``rocketlite`` script, ``python -m rocketlite``) runs the
    command inside the shared error path."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        try:
            with errors.reported():
                return super().__call__(*args, **kwargs)
        except typer.Exit as e:  # the failure's line is printed; outside click, so exit here
            sys.exit(e.exit_code)


app = _App(help="rocketlite: a RocketMQ-compatible message broker in Python.",
                  no_args_is_help=True)
app.add_typer(store_app, name="store")
app.add_typer(admin_app, name="admin")
app.add_typer(spark_app, name="spark")
app.add_typer(cluster_app, name="cluster")
app.command(epilog=server_commands.LISTEN_NOTE)(server_commands.start)
app.command(epilog=server_commands.LISTEN_NOTE)(server_commands.namesrv)
app.command(epilog=server_commands.LISTEN_NOTE)(server_commands.broker)
app.command()(dashboard)


def package_version() -> str:
    """The installed package's version (``pyproject.toml``'s, through the package metadata)."""
    try:
        return version("rocketlite")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown (not installed)"


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"rocketlite {package_version()}")
        raise typer.Exit()


@app.callback()
def root(
    debug: Annotated[bool, typer.Option(
        "--debug", help="on an expected failure (port in use, store locked, bad broker.conf, "
                        "unreachable NameServer), show the traceback instead of one line")] = False,
    show_version: Annotated[bool, typer.Option(
        "--version", callback=_print_version, is_eager=True,
        help="print the version and exit")] = False,
) -> None:
    """rocketlite: a RocketMQ-compatible message broker in Python."""
    errors.begin(debug)


def main() -> None:
    app()
