"""``rocketlite admin`` topic commands (mqadmin's names and options), over
``rocketlite.admin.topics``.

=====================  =================================================================
topicList              every topic the NameServer routes
topicRoute             a topic's brokers and queues (-t)
updateTopic            create or change a topic on a broker (-b) or each master (-c)
topicStatus            each queue's min and max offsets and last store time (-t)
getTopicConfig         a topic's config as each broker holds it (-t; -b, -c or its route)
deleteTopic            delete a topic from a cluster's masters, then the NameServers (-t -c)
=====================  =================================================================
"""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table
from rich.text import Text

from rocketlite.admin import (
    delete_topic,
    get_topic_config,
    topic_list,
    topic_route,
    topic_status,
    update_topic,
)
from rocketlite.admin.timeparse import format_timestamp
from rocketlite.cli.admin_common import AsJson, Debug, Namesrv, Topic, console, print_json, run


def topic_list_command(namesrv: Namesrv = None, as_json: AsJson = False,
                       debug: Debug = False) -> None:
    """Every topic the NameServer routes, one a line."""
    topics = run(topic_list, namesrv, debug)
    if as_json:
        print_json(topics)
        return
    for t in topics:
        print(t)


def topic_route_command(topic: Topic, namesrv: Namesrv = None, as_json: AsJson = False,
                        debug: Debug = False) -> None:
    """A topic's route: its brokers (with their addresses) and queues."""
    route = run(lambda s: topic_route(s, topic), namesrv, debug)
    if as_json:
        print_json(route)
        return
    out = console()
    brokers = Table(title=f"{topic}: brokers")
    for col in ("broker", "cluster", "id", "address"):
        brokers.add_column(col)
    for bd in sorted(route.brokerDatas, key=lambda b: b.brokerName):
        for bid, addr in sorted(bd.brokerAddrs.items()):
            brokers.add_row(Text(bd.brokerName), Text(bd.cluster or ""), str(bid), Text(addr))
    out.print(brokers)
    queues = Table(title=f"{topic}: queues")
    for col in ("broker", "read queues", "write queues", "perm", "sysFlag"):
        queues.add_column(col)
    for qd in sorted(route.queueDatas, key=lambda q: q.brokerName):
        queues.add_row(Text(qd.brokerName), str(qd.readQueueNums), str(qd.writeQueueNums),
                       str(qd.perm), str(qd.topicSysFlag))
    out.print(queues)
    if route.orderTopicConf:
        out.print(f"orderTopicConf: {route.orderTopicConf}", highlight=False, markup=False)


def update_topic_command(
    topic: Topic,
    namesrv: Namesrv = None,
    broker_addr: Annotated[str | None, typer.Option(
        "-b", "--broker-addr", help="create it on this broker, host:port")] = None,
    cluster: Annotated[str | None, typer.Option(
        "-c", "--cluster", help="create it on every master of this cluster (needs -n)")] = None,
    read_queues: Annotated[int, typer.Option("-r", "--read-queue-nums")] = 8,
    write_queues: Annotated[int, typer.Option("-w", "--write-queue-nums")] = 8,
    perm: Annotated[int, typer.Option("-p", "--perm",
                                      help="2 write only, 4 read only, 6 read and write")] = 6,
    order: Annotated[str, typer.Option("-o", "--order", metavar="true|false",
                                       help="an ordered topic (mqadmin's -o true)")] = "false",
    as_json: AsJson = False, debug: Debug = False,
) -> None:
    """Create a topic, or change its queue counts, perm or order flag."""
    if (broker_addr is None) == (cluster is None):
        raise typer.BadParameter("give exactly one of -b/--broker-addr and -c/--cluster",
                                 param_hint="-b/-c")
    if order.lower() not in ("true", "false"):
        raise typer.BadParameter(f"{order!r} is not true or false", param_hint="-o")
    ordered = order.lower() == "true"
    done = run(lambda s: update_topic(s, topic, broker_addr=broker_addr, cluster=cluster,
                                      read_queue_nums=read_queues,
                                      write_queue_nums=write_queues, perm=perm, order=ordered),
               namesrv, debug)
    if as_json:
        print_json(done)
        return
    for u in done:
        where = f"{u.broker_name} ({u.address})" if u.broker_name else u.address
        console().print(f"create topic to {where} success: {u.topic} read {u.read_queue_nums} "
                        f"write {u.write_queue_nums} perm {u.perm} order {str(u.order).lower()}",
                        highlight=False, markup=False)


def topic_status_command(topic: Topic, namesrv: Namesrv = None, as_json: AsJson = False,
                         debug: Debug = False) -> None:
    """Each queue of a topic: min and max offsets, store time of its last message."""
    queues = run(lambda s: topic_status(s, topic), namesrv, debug)
    if as_json:
        print_json(queues)
        return
    t = Table(title=topic)
    for col in ("#Broker Name", "#QID", "#Min Offset", "#Max Offset", "#Last Updated"):
        t.add_column(col, justify="right" if col in ("#QID", "#Min Offset", "#Max Offset")
                     else "left")
    for q in queues:
        t.add_row(Text(q.broker_name), str(q.queue_id), str(q.min_offset), str(q.max_offset),
                  format_timestamp(q.last_update_timestamp) if q.last_update_timestamp else "-")
    console().print(t)


def get_topic_config_command(
    topic: Topic,
    namesrv: Namesrv = None,
    broker_addr: Annotated[str | None, typer.Option(
        "-b", "--broker-addr", help="ask this broker, host:port")] = None,
    cluster: Annotated[str | None, typer.Option(
        "-c", "--cluster", help="ask every master of this cluster (needs -n)")] = None,
    as_json: AsJson = False, debug: Debug = False,
) -> None:
    """A topic's config as each broker holds it (GET_TOPIC_CONFIG): queue numbers, perm, order,
    filter type, attributes. Without -b or -c: every master of the topic's route."""
    if broker_addr is not None and cluster is not None:
        raise typer.BadParameter("give at most one of -b/--broker-addr and -c/--cluster",
                                 param_hint="-b/-c")
    found = run(lambda s: get_topic_config(s, topic, broker_addr=broker_addr, cluster=cluster),
                namesrv, debug)
    if as_json:
        print_json(found)
        return
    t = Table(title=topic)
    for col in ("#Broker", "#Read Queues", "#Write Queues", "#Perm", "#Order", "#Filter",
                "#SysFlag", "#Attributes"):
        t.add_column(col, justify="right" if "Queues" in col or col in ("#Perm", "#SysFlag")
                     else "left")
    for bc in found:
        c = bc.config
        attrs = ",".join(f"{k}={v}" for k, v in sorted(c.attributes.items()))
        t.add_row(Text(bc.address), str(c.readQueueNums), str(c.writeQueueNums), str(c.perm),
                  str(c.order).lower(), c.topicFilterType.name, str(c.topicSysFlag), Text(attrs))
    console().print(t)


def delete_topic_command(
    topic: Topic,
    cluster: Annotated[str, typer.Option("-c", "--cluster",
                                         help="delete it from this cluster's masters")],
    namesrv: Namesrv = None, as_json: AsJson = False, debug: Debug = False,
) -> None:
    """Delete a topic from every master of a cluster, then from every NameServer."""
    done = run(lambda s: delete_topic(s, topic, cluster), namesrv, debug)
    if as_json:
        print_json(done)
        return
    out = console()
    for addr in done.brokers:
        out.print(f"delete topic [{topic}] from cluster [{cluster}] broker {addr} success.",
                  highlight=False, markup=False)
    for ns in done.namesrvs:
        out.print(f"delete topic [{topic}] from NameServer {ns} success.", highlight=False,
                  markup=False)


def register(app: typer.Typer) -> None:
    app.command("topicList")(topic_list_command)
    app.command("topicRoute")(topic_route_command)
    app.command("updateTopic")(update_topic_command)
    app.command("topicStatus")(topic_status_command)
    app.command("getTopicConfig")(get_topic_config_command)
    app.command("deleteTopic")(delete_topic_command)
