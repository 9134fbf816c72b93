"""``rocketlite``: the command line."""

from __future__ import annotations

import typer

from rocketlite.cli import server_commands
from rocketlite.cli.admin_commands import admin_app
from rocketlite.cli.cluster_commands import cluster_app
from rocketlite.cli.dashboard_commands import dashboard
from rocketlite.cli.spark_commands import spark_app
from rocketlite.cli.store_commands import store_app

app = typer.Typer(help="rocketlite: a RocketMQ-compatible message broker in Python.",
                  no_args_is_help=True)
app.add_typer(store_app, name="store")
app.add_typer(admin_app, name="admin")
app.add_typer(spark_app, name="spark")
app.add_typer(cluster_app, name="cluster")
app.command()(server_commands.start)
app.command()(server_commands.namesrv)
app.command()(server_commands.broker)
app.command()(dashboard)


def main() -> None:
    app()
