"""``rocketlite spark export|verify|stats``: the Spark store jobs (``rocketlite.spark.jobs``) from
the command line.

Each command builds its own SparkSession: ``--master local[*]`` by default (every core of this
machine), the web UI and progress bars off, workers on this interpreter (``PYSPARK_PYTHON``
defaults to ``sys.executable``, so they import the same rocketlite and pyarrow), and, for a local
master, ``SPARK_LOCAL_IP`` defaulting to 127.0.0.1. ``--master spark://host:7077`` runs the same
job on a standalone cluster: then every executor needs ``pip install rocketlite[spark]`` and
the store directory at the same path (a shared mount), and ``SPARK_LOCAL_IP`` is left alone so
executors can reach the driver. pyspark is imported only when a command runs: without it the
command says ``pip install rocketlite[spark]`` and exits 2.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from rocketlite.cli import errors, term

if TYPE_CHECKING:
    from rocketlite.spark.jobs import ExportResult, StatsReport, VerifyReport

CLUSTER_NOTE = ("--master spark://host:7077 runs the same job on a cluster: the store must be on a "
                "path every executor sees, and each needs rocketlite with its spark extra installed.")
spark_app = typer.Typer(help="Spark jobs over a store directory (read-only). " + CLUSTER_NOTE,
                        no_args_is_help=True)
console = term.console()  # full width when piped

StoreArg = Annotated[Path, typer.Argument(help="store root (holds commitlog/, consumequeue/, index/)",
                                          exists=True, file_okay=False)]
MasterOpt = Annotated[str, typer.Option(help="Spark master: local[*], local[N] or spark://host:7077 "
                                             "(the store must then be on a path every executor sees)")]
ConfOpt = Annotated[list[str] | None, typer.Option("--conf", help="extra Spark setting KEY=VALUE "
                                                                  "(repeatable)")]
BoundOpt = Annotated[str, typer.Option(help="flushed: what is durable (checkpoint while a broker "
                                            "runs); valid: every record that verifies")]
PartsOpt = Annotated[int, typer.Option(help="Spark partitions per CommitLog segment", min=1)]
CorruptOpt = Annotated[str, typer.Option(help="fail: stop at a record that does not verify; skip: "
                                              "log it and go on")]
TopicOpt = Annotated[list[str] | None, typer.Option("--topic", help="only this topic (repeatable)")]


@contextmanager
def spark_session(master: str, app_name: str, conf: list[str] | None = None) -> Iterator[Any]:
    """A SparkSession for one command, stopped on exit (see the module docstring). Called where a
    session is already active (a notebook, a test), the command runs in it and leaves it running:
    ``--master`` and ``--conf`` cannot change a running session."""
    try:
        from pyspark.sql import SparkSession
    except ImportError as e:
        console.print(f"pyspark is not installed ({e}): pip install 'rocketlite[spark]'",
                      style="red", markup=False)
        raise typer.Exit(2) from e
    active = SparkSession.getActiveSession()
    if active is not None:
        yield active
        return
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = (SparkSession.builder.master(master).appName(app_name)
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.session.timeZone", "UTC"))
    if master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        # Spark's 200 shuffle partitions made verify 2.5x slower on one machine (4 s -> 10 s on
        # a small store): a local session gets two per core.
        builder = builder.config("spark.sql.shuffle.partitions", str(2 * (os.cpu_count() or 1)))
    for item in conf or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise typer.BadParameter(f"--conf {item!r}: expected KEY=VALUE")
        builder = builder.config(key.strip(), value.strip())
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    try:
        yield spark
    finally:
        spark.stop()


@contextmanager
def reported_errors() -> Iterator[None]:
    """A job's failure as one line and exit 1, not a page of JVM and worker stack: the reason a
    rocketlite reader raised (a corrupt record with its file and offset, a bad option) is the
    last ``SomethingError: text`` line of the Python traceback Spark wraps. The line goes through
    the CLI's one error path (``rocketlite.cli.errors``)."""
    from pyspark.errors import PySparkException

    from rocketlite.common.errors import RocketliteError

    try:
        yield
    except (PySparkException, RocketliteError, ValueError, FileNotFoundError) as e:
        if errors.debugging():  # ``rocketlite --debug spark ...``: the whole story
            raise
        errors.fail(_reason(str(e)))


_JVM_PACKAGES = ("org.", "java.", "javax.", "scala.", "py4j.", "com.")


def _reason(text: str) -> str:
    """The last Python ``pkg.SomeError: text`` line of a Spark error (JVM frames and exception
    classes skipped), else its first line."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for ln in reversed(lines):
        head = ln.split(":", 1)[0]
        if head.endswith(("Error", "Exception")) and " " not in head and not head.startswith(_JVM_PACKAGES):
            return ln
    return lines[0] if lines else text


# -- export ------------------------------------------------------------------------------------


@spark_app.command(help="Write messages to Parquet under OUT/topic=T/date=YYYY-MM-DD/ (UTC), from a "
                        "store directory or, with --namesrv, from topics through the brokers. "
                        + CLUSTER_NOTE)
def export(
    out: Annotated[Path, typer.Option(help="output directory (Parquet)")],
    store: Annotated[Path | None, typer.Argument(help="store root; omit with --namesrv")] = None,
    topic: TopicOpt = None,
    namesrv: Annotated[str | None, typer.Option(help="read topics through this NameServer "
                                                     "instead of a store")] = None,
    starting_offsets: Annotated[str, typer.Option(help="with --namesrv: earliest, latest or JSON "
                                                       "per queue")] = "earliest",
    ending_offsets: Annotated[str, typer.Option(help="with --namesrv: latest or JSON per queue")] = "latest",
    include_system_topics: Annotated[bool, typer.Option(help="also internal topics (store only)")] = False,
    bound: BoundOpt = "flushed",
    partitions_per_segment: PartsOpt = 1,
    on_corrupt: CorruptOpt = "fail",
    mode: Annotated[str, typer.Option(help="overwrite or append")] = "overwrite",
    master: MasterOpt = "local[*]",
    conf: ConfOpt = None,
) -> None:
    if (store is None) == (namesrv is None):
        raise typer.BadParameter("give either a STORE directory or --namesrv (with --topic)")
    if namesrv is not None and not topic:
        raise typer.BadParameter("--namesrv needs at least one --topic")
    with spark_session(master, "rocketlite-spark-export", conf) as spark, reported_errors():
        from rocketlite.spark import jobs  # after spark_session: it reports a missing pyspark

        if store is not None:
            result = jobs.export(spark, store, out, topics=topic, mode=mode,
                                 include_system_topics=include_system_topics, bound=bound,
                                 partitions_per_segment=partitions_per_segment, on_corrupt=on_corrupt)
        else:
            assert namesrv is not None and topic
            result = jobs.export_topic(spark, namesrv, topic, out, starting_offsets=starting_offsets,
                                       ending_offsets=ending_offsets, mode=mode)
    _print_export(result)


def _print_export(result: ExportResult) -> None:
    t = Table(title=f"Parquet at {result.out}")
    t.add_column("topic")
    t.add_column("rows", justify="right")
    for name, n in sorted(result.rows_by_topic.items()):
        t.add_row(name, str(n))
    console.print(t)
    console.print(f"{result.rows} rows in {len(result.rows_by_topic)} topics")


# -- verify ------------------------------------------------------------------------------------


@spark_app.command(help="Recompute every ConsumeQueue unit and index entry from the CommitLog and "
                        "report mismatches; exit 1 if there are any. " + CLUSTER_NOTE)
def verify(
    store: StoreArg,
    hash_slot_num: Annotated[int | None, typer.Option(help="maxHashSlotNum, if the index "
                                                           "geometry cannot be inferred")] = None,
    delay_levels: Annotated[str | None, typer.Option(help="the store's messageDelayLevel, if not "
                                                          "RocketMQ's default")] = None,
    bound: BoundOpt = "flushed",
    partitions_per_segment: PartsOpt = 1,
    limit: Annotated[int, typer.Option(help="mismatches to print", min=0)] = 50,
    as_json: Annotated[bool, typer.Option("--json", help="print a JSON report")] = False,
    master: MasterOpt = "local[*]",
    conf: ConfOpt = None,
) -> None:
    with spark_session(master, "rocketlite-spark-verify", conf) as spark, reported_errors():
        from rocketlite.spark import jobs  # after spark_session: it reports a missing pyspark

        report = jobs.verify(spark, store, hash_slot_num=hash_slot_num, delay_levels=delay_levels,
                             bound=bound, partitions_per_segment=partitions_per_segment,
                             limit=max(limit, 1))
    if as_json:
        print(json.dumps(_verify_json(report, limit)))
    else:
        _print_verify(report, limit)
    if not report.ok:
        raise typer.Exit(1)


def _verify_json(report: VerifyReport, limit: int) -> dict[str, Any]:
    return {"bound": {"end": report.bound.end, "rule": report.bound.rule}, "records": report.records,
            "units": report.units, "index_entries": report.index_entries, "counts": report.counts,
            "mismatches": [{"kind": m.kind, "topic": m.topic, "queue_id": m.queue_id,
                            "queue_offset": m.queue_offset, "commitlog_offset": m.commitlog_offset,
                            "detail": m.detail} for m in report.mismatches[:limit]]}


def _print_verify(report: VerifyReport, limit: int) -> None:
    index = ("no index entries: index not checked" if report.index_entries is None
             else f"{report.index_entries} index entries")
    console.print(f"scanned to CommitLog offset {report.bound.end} ({report.bound.rule}): "
                  f"{report.records} records, {report.units} ConsumeQueue units, {index}")
    if report.ok:
        console.print("[green]✓[/] CommitLog, ConsumeQueue and IndexFile agree")
        return
    for m in report.mismatches[:limit]:
        console.print(f"[red]✗[/] {escape(str(m))}", highlight=False)
    counts = ", ".join(f"{k} {n}" for k, n in report.counts.items())
    console.print(f"[red]{sum(report.counts.values())} mismatches[/] ({counts})")


# -- stats -------------------------------------------------------------------------------------


@spark_app.command(help="Messages and bytes per topic, queue and hour (UTC), and key cardinality. "
                        + CLUSTER_NOTE)
def stats(
    store: StoreArg,
    topic: TopicOpt = None,
    include_system_topics: Annotated[bool, typer.Option(help="also internal topics")] = False,
    bound: BoundOpt = "flushed",
    partitions_per_segment: PartsOpt = 1,
    on_corrupt: CorruptOpt = "fail",
    hourly: Annotated[int, typer.Option(help="hourly rows to print", min=0)] = 48,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON (every hourly row)")] = False,
    master: MasterOpt = "local[*]",
    conf: ConfOpt = None,
) -> None:
    with spark_session(master, "rocketlite-spark-stats", conf) as spark, reported_errors():
        from rocketlite.spark import jobs  # after spark_session: it reports a missing pyspark

        report = jobs.stats(spark, store, topics=topic, include_system_topics=include_system_topics,
                            bound=bound, partitions_per_segment=partitions_per_segment,
                            on_corrupt=on_corrupt)
    if as_json:
        print(json.dumps(report.as_json()))
    else:
        _print_stats(report, hourly)


def _print_stats(report: StatsReport, hourly: int) -> None:
    t = Table(title="Topics")
    for col in ("topic", "queues", "messages", "body bytes", "keyed", "distinct keys",
                "first stored (UTC)", "last stored (UTC)"):
        t.add_column(col, justify="left" if col == "topic" else "right")
    for s in report.topics:
        t.add_row(escape(s.topic), str(s.queues), str(s.messages), str(s.body_bytes),
                  str(s.keyed_messages), str(s.distinct_keys),
                  f"{s.first_store:%Y-%m-%d %H:%M:%S}" if s.first_store else "",
                  f"{s.last_store:%Y-%m-%d %H:%M:%S}" if s.last_store else "")
    console.print(t)
    if hourly:
        h = Table(title=f"Per queue and hour (first {min(hourly, len(report.hourly))} of "
                        f"{len(report.hourly)})")
        for col in ("topic", "queue", "hour (UTC)", "messages", "body bytes"):
            h.add_column(col, justify="left" if col in ("topic", "hour (UTC)") else "right")
        for r in report.hourly[:hourly]:
            h.add_row(escape(r.topic), str(r.queue_id), f"{r.hour:%Y-%m-%d %H:00}", str(r.messages),
                      str(r.body_bytes))
        console.print(h)
