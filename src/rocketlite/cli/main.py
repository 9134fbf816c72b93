"""``rocketlite``: the command line."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from rocketlite.cli.store_commands import store_app
from rocketlite.formats.properties import KEYS, TAGS, encode_properties
from rocketlite.store.config import StoreConfig
from rocketlite.store.message import MessageToStore
from rocketlite.store.message_store import MessageStore

app = typer.Typer(help="rocketlite: a RocketMQ-compatible message broker in Python.",
                  no_args_is_help=True)
app.add_typer(store_app, name="store")
console = Console()


def load_config(store: Path, conf: Path | None) -> StoreConfig:
    props = StoreConfig.from_file(conf).to_properties() if conf else {}
    props["storePathRootDir"] = str(store)
    return StoreConfig.from_properties(props)


@app.command()
def start(
    store: Annotated[Path, typer.Option(help="store root directory")] = Path("store"),
    conf: Annotated[Path | None, typer.Option("-c", "--conf", help="broker.conf")] = None,
    messages: Annotated[int, typer.Option(help="messages the demo appends")] = 10_000,
) -> None:
    """Start rocketlite. Until the network server lands, this opens the store and runs a demo:
    append a batch, read it back by queue, by key and by message id, and print the figures."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    cfg = load_config(store, conf)
    with MessageStore(cfg) as ms:
        rec = ms.recovery
        if rec is not None:
            console.print(
                f"store [bold]{cfg.store_path_root_dir}[/] recovered in {rec.seconds:.3f} s "
                f"({rec.records} records verified, CommitLog ends at {rec.valid_end})"
            )
        batch = [
            MessageToStore(
                topic="DemoTopic",
                body=f"hello rocketlite {i}".encode(),
                queue_id=i % 4,
                properties=encode_properties({TAGS: "TagA", KEYS: f"demo-{i}"}),
                born_timestamp=int(time.time() * 1000),
            )
            for i in range(messages)
        ]
        t0 = time.perf_counter()
        results = []
        for i in range(0, len(batch), 1000):
            results.extend(ms.put_messages_sync(batch[i : i + 1000]))
        dt = time.perf_counter() - t0
        deadline = time.monotonic() + 10
        while ms.dispatcher.dispatch_from < ms.commitlog.max_offset and time.monotonic() < deadline:
            time.sleep(0.01)
        table = Table(title="DemoTopic")
        for col in ("queue", "min offset", "max offset"):
            table.add_column(col, justify="right")
        for q in range(4):
            table.add_row(str(q), str(ms.min_offset_in_queue("DemoTopic", q)),
                          str(ms.max_offset_in_queue("DemoTopic", q)))
        console.print(table)
        console.print(f"appended {len(results)} messages in {dt:.3f} s "
                      f"({len(results) / dt:,.0f} msg/s, {cfg.flush_disk_type})")
        if results:
            last = results[-1]
            msg_id = ms.message_id(last.commit_log_offset)
            m = ms.look_message_by_id(msg_id)
            console.print(f"by id {msg_id}: {m.body.decode() if m else None!r}")
            found = ms.query_message("DemoTopic", f"demo-{len(results) - 1}")
            console.print(f"by key demo-{len(results) - 1}: {[x.body.decode() for x in found]}")
            got = ms.get_message("DemoTopic", 0, 0, max_count=3)
            console.print(f"queue 0 from offset 0: {got.status.value}, {len(got.messages)} "
                          f"messages, next offset {got.next_begin_offset}")


def main() -> None:
    app()
