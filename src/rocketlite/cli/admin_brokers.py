"""``rocketlite admin`` broker configuration and statistics commands (mqadmin's names and
options), over ``rocketlite.admin.brokers`` and ``rocketlite.admin.topic_stats``.

=====================  =================================================================
getBrokerConfig        a broker's configuration (-b), or each master's of a cluster (-c)
updateBrokerConfig     change one key live (-k -v); keys that cannot change are refused
cleanExpiredCQ         drop ConsumeQueues whose messages all left the CommitLog
statsAll               per topic and group: messages, lag, online members
=====================  =================================================================
"""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table
from rich.text import Text

from rocketlite.admin import clean_expired_cq, get_broker_config, stats_all, update_broker_config
from rocketlite.admin.timeparse import format_timestamp
from rocketlite.cli.admin_common import (
    AsJson,
    Debug,
    Namesrv,
    ProgressBar,
    console,
    print_json,
    run,
)

BrokerAddr = Annotated[str | None, typer.Option("-b", "--broker-addr",
                                                help="the broker, host:port")]
Cluster = Annotated[str | None, typer.Option("-c", "--cluster",
                                             help="every master of this cluster (needs -n)")]


def _one_target(broker_addr: str | None, cluster: str | None) -> None:
    if (broker_addr is None) == (cluster is None):
        raise typer.BadParameter("give exactly one of -b/--broker-addr and -c/--cluster",
                                 param_hint="-b/-c")


def get_broker_config_command(namesrv: Namesrv = None, broker_addr: BrokerAddr = None,
                              cluster: Cluster = None, as_json: AsJson = False,
                              debug: Debug = False) -> None:
    """Every configuration key of a broker with its current value."""
    _one_target(broker_addr, cluster)
    views = run(lambda s: get_broker_config(s, broker_addr, cluster), namesrv, debug)
    if as_json:
        print_json(views)
        return
    out = console()
    for v in views:
        out.print(f"============{v.address}============ (version {v.version})", highlight=False,
                  markup=False)
        for k, value in v.config.items():
            out.print(f"{k:<50}=  {value}", highlight=False, markup=False)


def update_broker_config_command(
    key: Annotated[str, typer.Option("-k", "--key", help="the configuration key")],
    value: Annotated[str, typer.Option("-v", "--value", help="its new value")],
    namesrv: Namesrv = None, broker_addr: BrokerAddr = None, cluster: Cluster = None,
    as_json: AsJson = False, debug: Debug = False,
) -> None:
    """Change one configuration key of a broker while it runs (not written to broker.conf)."""
    _one_target(broker_addr, cluster)
    done = run(lambda s: update_broker_config(s, key, value, broker_addr=broker_addr,
                                              cluster=cluster), namesrv, debug)
    if as_json:
        print_json(done)
        return
    for u in done:
        console().print(f"update broker config success, {u.address}: {u.key}={u.value}",
                        highlight=False, markup=False)


def clean_expired_cq_command(namesrv: Namesrv = None, broker_addr: BrokerAddr = None,
                             cluster: Cluster = None, as_json: AsJson = False,
                             debug: Debug = False) -> None:
    """Drop the ConsumeQueues whose messages all left the CommitLog (on -b, each master of -c,
    or every master)."""
    done = run(lambda s: clean_expired_cq(s, broker_addr, cluster), namesrv, debug)
    if as_json:
        print_json(done)
        return
    for addr in done:
        console().print(f"cleanExpiredCQ success on {addr}", highlight=False, markup=False)


def stats_all_command(
    namesrv: Namesrv = None,
    topic: Annotated[str | None, typer.Option("-t", "--topic",
                                              help="only this topic")] = None,
    active: Annotated[bool, typer.Option("-a", "--active-topic",
                                         help="only topics that hold messages")] = False,
    as_json: AsJson = False, debug: Debug = False,
) -> None:
    """Per topic and consuming group: messages held and ever stored, the group's lag and online
    members. TPS columns are the brokers' own figures (rocketlite's: the last minute's rates)."""
    bar = ProgressBar("statsAll")
    with bar:
        stats = run(lambda s: stats_all(s, topic, on_total=bar.total, on_progress=bar.advance),
                    namesrv, debug)
    if active:
        stats = [t for t in stats if t.messages > 0]
    if as_json:
        print_json(stats)
        return
    t = Table()
    for col in ("#Topic", "#Queues", "#Messages", "#Stored Total", "#Last Stored", "#PutTPS",
                "#Consumer Group", "#Online", "#Accumulation", "#ConsumeTPS"):
        t.add_column(col, justify="left" if col in ("#Topic", "#Last Stored",
                                                    "#Consumer Group") else "right")
    for ts in stats:
        head: list[Text | str] = [Text(ts.topic), str(ts.queues), str(ts.messages), str(ts.put_total),
                format_timestamp(ts.last_update_timestamp) if ts.last_update_timestamp else "-",
                f"{ts.put_tps:.2f}"]
        if not ts.groups:
            t.add_row(*head, "", "", "", "")
        for g in ts.groups:
            t.add_row(*head, Text(g.group), str(g.online), str(g.accumulation),
                      f"{g.consume_tps:.2f}")
    console().print(t)


def register(app: typer.Typer) -> None:
    app.command("getBrokerConfig")(get_broker_config_command)
    app.command("updateBrokerConfig")(update_broker_config_command)
    app.command("cleanExpiredCQ")(clean_expired_cq_command)
    app.command("statsAll")(stats_all_command)
