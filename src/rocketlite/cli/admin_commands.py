"""``rocketlite admin``: mqadmin's commands (its names and short options, so runbooks carry
over), over ``rocketlite.admin``: each command parses its options, calls one library function
through the shared error path (``admin_common.run``) and renders the result as rich tables, or as
JSON with ``--json``. Clusters and brokers live here; topics in ``admin_topics``, messages in
``admin_messages``, groups and offsets in ``admin_groups``, consumerStatus in ``admin_consumers``,
broker configuration and statsAll in ``admin_brokers``, queryMsgTraceById in ``admin_trace``.

=====================  =================================================================
clusterList            brokers of each cluster with their version, tps and today's counts
brokerStatus           a broker's runtime-info table (-b), or each master's of a cluster (-c)
haStatus               replication: each master's slaves, acked offsets and lag
resend-dlq             a group's dead letters back to their original topics
=====================  =================================================================
"""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table
from rich.text import Text

from rocketlite.admin import (
    BrokerEntry,
    HaMasterView,
    HaSlaveView,
    broker_status,
    cluster_list,
    ha_status,
    resend_dlq,
)
from rocketlite.admin.timeparse import format_timestamp
from rocketlite.cli import (
    admin_brokers,
    admin_consumers,
    admin_groups,
    admin_messages,
    admin_topics,
    admin_trace,
)
from rocketlite.cli.admin_common import (
    AccessKey,
    AsJson,
    Debug,
    Namesrv,
    SecretKey,
    TlsCa,
    TlsCert,
    TlsChoice,
    TlsFlag,
    TlsKey,
    console,
    print_json,
    run,
    set_credentials,
)

admin_app = typer.Typer(help="Operate a running cluster (mqadmin's commands).",
                        no_args_is_help=True)


BrokerAddr = Annotated[str | None, typer.Option("-b", "--broker-addr",
                                                help="the broker to ask, host:port")]
Cluster = Annotated[str | None, typer.Option("-c", "--cluster",
                                             help="every master of this cluster (needs -n)")]


@admin_app.callback()
def admin_options(tls: TlsFlag = False, ca: TlsCa = None, cert: TlsCert = None,
                  key: TlsKey = None, access_key: AccessKey = None,
                  secret_key: SecretKey = None) -> None:
    """Options of every admin command, before its name (``rocketlite admin --tls --ca ca.pem
    topicList -n host:9876``): TLS, and with an ACL the keys to sign with (--access-key and
    --secret-key, or $ROCKETLITE_ACCESS_KEY and $ROCKETLITE_SECRET_KEY)."""
    set_credentials(access_key, secret_key)
    TlsChoice.enabled = tls or ca is not None
    TlsChoice.ca, TlsChoice.cert, TlsChoice.key = ca, cert, key


def _one_target(broker_addr: str | None, cluster: str | None, namesrv: str | None) -> None:
    if (broker_addr is None) == (cluster is None):
        raise typer.BadParameter("give exactly one of -b/--broker-addr and -c/--cluster",
                                 param_hint="-b/-c")
    if cluster is not None and not namesrv:
        raise typer.BadParameter("-c/--cluster needs -n/--namesrv", param_hint="-n")


# ------------------------------------------------------------------------------ clusterList


def _entry_row(e: BrokerEntry) -> list[str]:
    if e.error is not None:
        return [e.cluster, e.broker_name, str(e.broker_id), e.address, "", e.error, "", "",
                "", ""]
    return [e.cluster, e.broker_name, str(e.broker_id), e.address, e.role, e.version,
            f"{e.put_tps:.2f}", f"{e.get_tps:.2f}", str(e.msg_put_today), str(e.msg_get_today)]


@admin_app.command("clusterList")
def cluster_list_command(
    namesrv: Namesrv = None,
    cluster: Annotated[str | None, typer.Option("-c", "--cluster",
                                                help="only this cluster")] = None,
    as_json: AsJson = False, debug: Debug = False,
) -> None:
    """Every broker of each cluster: role, version, tps in and out, messages today."""
    entries = run(lambda s: cluster_list(s, cluster), namesrv, debug)
    if as_json:
        print_json(entries)
        return
    t = Table()
    for col in ("#Cluster", "#Broker", "#BID", "#Addr", "#Role", "#Version", "#InTPS",
                "#OutTPS", "#InToday", "#OutToday"):
        t.add_column(col)
    for e in entries:
        t.add_row(*(Text(c) for c in _entry_row(e)))
    console().print(t)


# ------------------------------------------------------------------------------ brokerStatus


@admin_app.command("brokerStatus")
def broker_status_command(
    namesrv: Namesrv = None, broker_addr: BrokerAddr = None, cluster: Cluster = None,
    as_json: AsJson = False, debug: Debug = False,
) -> None:
    """A broker's runtime figures (GET_BROKER_RUNTIME_INFO), or each master's of a cluster."""
    _one_target(broker_addr, cluster, namesrv)
    found = run(lambda s: broker_status(s, broker_addr, cluster), namesrv, debug)
    if as_json:
        print_json(found)
        return
    for st in found:
        t = Table(title=st.broker)
        t.add_column("key")
        t.add_column("value")
        for k, v in st.table.items():
            t.add_row(Text(k), Text(v))
        console().print(t)


# ------------------------------------------------------------------------------ haStatus


def _print_ha(view: HaMasterView | HaSlaveView) -> None:
    out = console()
    if isinstance(view, HaSlaveView):
        ms = view.last_read_timestamp
        last = format_timestamp(ms) if ms > 0 else "never"
        out.print(f"slave {view.broker} of HA address {view.master_ha_address or '(unknown yet)'}"
                  f": CommitLog max offset {view.max_offset}, last frame from the master {last}",
                  soft_wrap=True, highlight=False, markup=False)
        return
    out.print(f"master {view.broker}: CommitLog max offset {view.max_offset}, "
              f"{len(view.slaves)} slave(s), {view.in_sync_slaves} in sync",
              soft_wrap=True, highlight=False, markup=False)
    if not view.slaves:
        return
    t = Table()
    for col in ("slave", "acked offset", "lag (bytes)", "lag (s)", "in sync", "from"):
        t.add_column(col, justify="left" if col == "slave" else "right")
    for sl in view.slaves:
        t.add_row(str(sl.address), str(sl.acked_offset), str(sl.lag_bytes),
                  f"{sl.lag_seconds:.3f}", "OK" if sl.in_sync else "Fall Behind",
                  str(sl.transfer_from_where))
    out.print(t)


@admin_app.command("haStatus")
def ha_status_command(
    namesrv: Namesrv = None, broker_addr: BrokerAddr = None, cluster: Cluster = None,
    as_json: AsJson = False, debug: Debug = False,
) -> None:
    """Replication state: each master's slaves, their acked offsets and lag."""
    _one_target(broker_addr, cluster, namesrv)
    views = run(lambda s: ha_status(s, broker_addr, cluster), namesrv, debug)
    if as_json:
        print_json(views)
        return
    for view in views:
        _print_ha(view)


# ------------------------------------------------------------------------------ resend-dlq


@admin_app.command("resend-dlq")
def resend_dlq_command(
    group: Annotated[str, typer.Option(
        "-g", "--group", help="the consumer group whose %DLQ% topic to drain")],
    namesrv: Namesrv = None,
    topic: Annotated[str | None, typer.Option(
        "-t", "--topic", help="original topic for dead letters without a RETRY_TOPIC property")] = None,
    max: Annotated[int | None, typer.Option(help="re-send at most this many messages")] = None,  # noqa: A002
    idle: Annotated[float, typer.Option(help="stop after this many seconds without a message")] = 3.0,
    as_json: AsJson = False, debug: Debug = False,
) -> None:
    """Re-send a group's dead letters to their original topics (exit 1: stopped at one)."""
    if max is not None and max < 1:
        raise typer.BadParameter("must be at least 1", param_hint="--max")
    counts = run(lambda s: resend_dlq(s, group, max, idle, topic), namesrv, debug)
    if as_json:
        print_json(counts)
    else:
        out = console()
        if counts.by_topic:
            t = Table(title=f"%DLQ%{group} re-sent")
            t.add_column("topic")
            t.add_column("messages", justify="right")
            for name, n in sorted(counts.by_topic.items()):
                t.add_row(Text(name), str(n))
            out.print(t)
        out.print(f"read {counts.read}, re-sent {counts.resent}, skipped {counts.skipped} "
                  f"(no RETRY_TOPIC and no --topic), failed {counts.failed}", highlight=False)
    if counts.stopped is not None:
        typer.echo(f"error: stopped: {counts.stopped}", err=True)
        raise typer.Exit(1)


admin_topics.register(admin_app)
admin_messages.register(admin_app)
admin_groups.register(admin_app)
admin_consumers.register(admin_app)
admin_brokers.register(admin_app)
admin_trace.register(admin_app)
