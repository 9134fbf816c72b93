"""``rocketlite store inspect|verify PATH``: read a store's files directly (read-only, no lock, no
recovery), print them the way the seed's dump programs do, and check that they agree."""

from __future__ import annotations

import errno
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from rocketlite.cli import term
from rocketlite.common.errors import CorruptRecordError
from rocketlite.formats import message_record as rec
from rocketlite.formats.checkpoint_layout import CHECKPOINT
from rocketlite.formats.delay import DEFAULT_DELAY_LEVELS, parse_delay_levels
from rocketlite.formats.index_layout import INDEX_HEADER
from rocketlite.formats.javahash import index_key_hash
from rocketlite.formats.message_id import encode_message_id
from rocketlite.formats.properties import decode_properties
from rocketlite.store import store_files, store_reader
from rocketlite.store.dispatch_check import expected_unit_tags_code, index_keys
from rocketlite.store.store_reader import mapped, queue_dirs, read_units

__all__ = ["iter_commitlog", "read_units", "store_app", "verify_store"]

store_app = typer.Typer(help="Inspect and verify a store directory.", no_args_is_help=True)
console = term.console()  # full width when piped: ``store inspect | less``

PathArg = Annotated[Path, typer.Argument(help="store root (holds commitlog/, consumequeue/, index/)")]


def iter_commitlog(root: Path) -> Iterator[tuple[int, rec.MessageRecord | None, str | None]]:
    """Yield (offset, record, error) for every record; error ends that segment's walk. A record
    with odd content (a NUL in its topic or properties) is a record; the last one before the
    written records stop is an error when it is torn as recovery decides (``rec.torn_tail``)."""
    for seg in store_reader.commitlog_segments(root):
        base = seg.base
        with mapped(seg.path) as mm:
            pos, end = 0, len(mm)
            while pos < end:
                try:
                    m = rec.decode_record(mm, pos, end, verify_crc=True)
                except CorruptRecordError as e:
                    if mm[pos : pos + 8] != bytes(8):
                        yield base + pos, None, str(e)
                    break
                if m is None:
                    break
                nxt = pos + m.total_size
                if store_reader.head_kind(mm, nxt, end) is None and \
                        rec.torn_tail(mm, pos, m.total_size):
                    yield base + pos, None, ("torn last record: zeroed blocks over its topic or "
                                             "properties (recovery cuts it)")
                    break
                yield base + pos, m, None
                pos = nxt


def _ts(ms: int) -> str:
    if ms <= 0:
        return str(ms)
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000)) + f".{ms % 1000:03d}"


@store_app.command()
def inspect(
    path: PathArg,
    messages: Annotated[int, typer.Option(help="messages to print")] = 20,
    units: Annotated[int, typer.Option(help="ConsumeQueue units to print per queue")] = 5,
) -> None:
    """Print CommitLog messages, ConsumeQueue units, index headers and the checkpoint."""
    _check_store_dir(path)
    t = Table(title=f"CommitLog {path / 'commitlog'}")
    for col in ("offset", "size", "topic", "queue", "queueOffset", "sysFlag", "storeTime",
                "msgId", "properties", "body"):
        t.add_column(col)
    shown = total = 0
    for offset, m, err in iter_commitlog(path):
        total += 1
        if shown >= messages:
            continue
        shown += 1
        if m is None:
            t.add_row(str(offset), "-", f"[red]{err}[/]", *[""] * 7)
            continue
        props = decode_properties(m.properties_text)
        t.add_row(str(offset), str(m.total_size), m.topic, str(m.queue_id), str(m.queue_offset),
                  str(m.sys_flag), _ts(m.store_timestamp),
                  encode_message_id(m.store_host, m.store_port, offset),
                  " ".join(f"{k}={v}" for k, v in props.items()), repr(m.body[:32]))
    console.print(t)
    console.print(f"{total} records in the CommitLog ({shown} shown)")
    _print_queues(path, units)
    _print_index(path)
    _print_checkpoint(path)


def _print_queues(root: Path, units: int) -> None:
    t = Table(title="ConsumeQueue")
    for col in ("topic", "queue", "units", "min", "max", "first units (offset, commitLogOffset, "
                "size, tagsCode)"):
        t.add_column(col)
    for topic, qid, qdir in queue_dirs(root):
        us = read_units(qdir)
        lo = us[0][0] if us else 0
        hi = us[-1][0] + 1 if us else 0
        t.add_row(topic, str(qid), str(len(us)), str(lo), str(hi),
                  " ".join(f"({u[0]},{u[1]},{u[2]},{u[3]})" for u in us[:units]))
    console.print(t)


def _print_index(root: Path) -> None:
    t = Table(title="IndexFile headers")
    for col in ("file", "beginTimestamp", "endTimestamp", "beginPhyOffset", "endPhyOffset",
                "hashSlotCount", "indexCount"):
        t.add_column(col)
    idir = root / "index"
    for f in sorted(idir.iterdir()) if idir.is_dir() else []:
        with f.open("rb") as fh:
            head = fh.read(INDEX_HEADER.size)
        if len(head) < INDEX_HEADER.size:
            t.add_row(f.name, "[red]truncated[/]", "", "", "", "", "")
            continue
        b, e, bp, ep, slots, count = INDEX_HEADER.unpack(head)
        t.add_row(f.name, _ts(b), _ts(e), str(bp), str(ep), str(slots), str(count))
    console.print(t)


def _print_checkpoint(root: Path) -> None:
    cp = root / "checkpoint"
    if not cp.exists() or cp.stat().st_size < CHECKPOINT.size:
        console.print("checkpoint: missing")
        return
    physic, logics, index, _, confirm = CHECKPOINT.unpack(cp.read_bytes()[: CHECKPOINT.size])
    console.print(f"checkpoint: physicMsgTimestamp={_ts(physic)} logicsMsgTimestamp={_ts(logics)} "
                  f"indexMsgTimestamp={_ts(index)} confirmPhyOffset={confirm}")
    holder = store_files.lock_holder(root)
    if holder is not None:  # a running broker keeps its abort file until it stops
        who = f" (pid {holder})" if holder else ""
        console.print(f"lock: the store is held by a running process{who}: these files are "
                      "still being written")
        state = f"present: held by a running process{who}"
    elif (root / "abort").exists():
        state = "present: the last run did not stop cleanly"
    else:
        state = "absent"
    console.print(f"abort file: {state}")


def _check_store_dir(path: Path) -> None:
    """A missing store is an error (``FileNotFoundError``, one line through the CLI's error path),
    not a page of empty tables."""
    if not path.is_dir():
        raise FileNotFoundError(errno.ENOENT, "no store directory", str(path))


@dataclass(slots=True)
class _Expected:
    offset: int
    size: int
    tags_code: int


def verify_store(root: Path, hash_slot_num: int | None = None,
                 delay_levels_ms: Sequence[int] | None = None) -> list[str]:
    """Check that CommitLog, ConsumeQueue and IndexFile agree; return the problems found.

    What each record should have produced comes from ``rocketlite.store.dispatch_check`` (the
    rules the Spark verify job applies too). A ``SCHEDULE_TOPIC_XXXX`` unit carries its deliver
    time, computed with ``delay_levels_ms`` (the store's ``messageDelayLevel``; RocketMQ's default
    table if None)."""
    levels = (parse_delay_levels(DEFAULT_DELAY_LEVELS) if delay_levels_ms is None
              else delay_levels_ms)
    problems: list[str] = []
    expected: dict[tuple[str, int], dict[int, _Expected]] = {}
    keyed: list[tuple[str, int]] = []
    for offset, m, err in iter_commitlog(root):
        if m is None:
            problems.append(f"CommitLog offset {offset}: {err}")
            continue
        if m.commit_log_offset != offset:
            problems.append(f"CommitLog offset {offset}: record says PHYSICALOFFSET "
                            f"{m.commit_log_offset}")
        props = decode_properties(m.properties_text)
        code = expected_unit_tags_code(m.topic, m.queue_id, m.sys_flag, props, m.store_timestamp, levels)
        if code is not None:
            expected.setdefault((m.topic, m.queue_id), {})[m.queue_offset] = _Expected(
                offset, m.total_size, code)
        keyed.extend((full_key, offset) for full_key in index_keys(m.topic, m.sys_flag, props))
    queues = {(topic, qid): read_units(qdir) for topic, qid, qdir in queue_dirs(root)}
    for (topic, qid), want in expected.items():
        units = {u[0]: u for u in queues.get((topic, qid), [])}
        for qoff, e in want.items():
            u = units.get(qoff)
            if u is None:
                if units and qoff >= min(units):
                    problems.append(f"{topic}-{qid}: no ConsumeQueue unit for queue offset {qoff}")
            elif (u[1], u[2], u[3]) != (e.offset, e.size, e.tags_code):
                problems.append(f"{topic}-{qid} offset {qoff}: unit {u[1:]} but CommitLog has "
                                f"({e.offset}, {e.size}, {e.tags_code})")
    cl_min = _min_commitlog_offset(root)
    for (topic, qid), units_list in queues.items():
        want = expected.get((topic, qid), {})
        for qoff, off, _, _ in units_list:
            if qoff not in want and off >= cl_min:
                problems.append(f"{topic}-{qid} offset {qoff}: unit points at {off}, "
                                "no such record")
    problems.extend(_verify_index(root, keyed, hash_slot_num))
    return problems


def _min_commitlog_offset(root: Path) -> int:
    segs = store_reader.commitlog_segments(root)
    return segs[0].base if segs else 0


def _verify_index(root: Path, keyed: list[tuple[str, int]], hash_slot_num: int | None) -> list[str]:
    files = store_reader.index_files(root)
    if not files or not keyed:
        return []
    found: set[tuple[int, int]] = set()
    first_indexed: int | None = None
    for f in files:
        with mapped(f) as mm:
            head = store_reader.read_index_header(mm)
            if head is None:
                return [f"index file {f.name} is truncated"]
            if head.index_count <= 1:
                continue  # no entries yet (the next file, created ahead of need)
            slots = store_reader.index_slot_num(mm, head, hash_slot_num)
            if slots is None:
                return [f"index file {f.name}: cannot tell its slot count from its size "
                        f"({len(mm)} bytes); pass --hash-slot-num (maxHashSlotNum)"]
            first_indexed = (head.begin_phy_offset if first_indexed is None
                             else min(first_indexed, head.begin_phy_offset))
            found.update((h, phy) for _, h, phy, _, _ in
                         store_reader.iter_index_entries(mm, slots, 1, head.index_count))
    problems = []
    for full_key, offset in keyed:
        if first_indexed is None or offset < first_indexed:
            continue  # indexed in a file that retention already deleted
        if (index_key_hash(full_key), offset) not in found:
            problems.append(f"index: key {full_key} of offset {offset} is not indexed")
    return problems


@store_app.command()
def verify(
    path: PathArg,
    hash_slot_num: Annotated[int | None, typer.Option(help="maxHashSlotNum if not default")] = None,
    delay_levels: Annotated[str | None, typer.Option(
        help="messageDelayLevel if not default, e.g. '1s 5s 10s' (the deliver times of "
             "SCHEDULE_TOPIC_XXXX units follow it)")] = None,
) -> None:
    """Check that the CommitLog, ConsumeQueues and IndexFiles agree; exit 1 if they do not."""
    _check_store_dir(path)
    try:
        levels = None if delay_levels is None else parse_delay_levels(delay_levels)
    except ValueError as e:
        raise typer.BadParameter(str(e), param_hint="--delay-levels") from e
    problems = verify_store(path, hash_slot_num, levels)
    if problems:
        for p in problems[:50]:
            console.print(f"[red]✗[/] {p}")
        console.print(f"[red]{len(problems)} problems[/]")
        raise typer.Exit(1)
    console.print("[green]✓[/] CommitLog, ConsumeQueue and IndexFile agree")
