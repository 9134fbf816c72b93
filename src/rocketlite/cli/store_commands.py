"""``rocketlite store inspect|verify PATH``: read a store's files directly (read-only, no lock, no
recovery), print them the way the seed's dump programs do, and check that they agree."""

from __future__ import annotations

import contextlib
import mmap
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from rocketlite.common.errors import CorruptRecordError
from rocketlite.formats import message_record as rec
from rocketlite.formats.checkpoint_layout import CHECKPOINT
from rocketlite.formats.consume_queue_unit import CQ_UNIT, CQ_UNIT_SIZE, is_valid_unit
from rocketlite.formats.delay import (
    DEFAULT_DELAY_LEVELS,
    SCHEDULE_TOPIC,
    parse_delay_levels,
    schedule_tags_code,
)
from rocketlite.formats.index_layout import (
    INDEX_ENTRY,
    INDEX_ENTRY_SIZE,
    INDEX_HEADER,
    INDEX_SLOT_SIZE,
)
from rocketlite.formats.javahash import index_key_hash, tags_code
from rocketlite.formats.message_id import encode_message_id
from rocketlite.formats.properties import DELAY, KEYS, TAGS, UNIQ_KEY, decode_properties

store_app = typer.Typer(help="Inspect and verify a store directory.", no_args_is_help=True)
console = Console()

PathArg = Annotated[Path, typer.Argument(help="store root (holds commitlog/, consumequeue/, index/)")]


@contextlib.contextmanager
def _mapped(path: Path) -> Iterator[mmap.mmap | bytes]:
    size = path.stat().st_size
    if size == 0:
        yield b""
        return
    with path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        yield mm


def _segments(directory: Path) -> list[Path]:
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.iterdir() if p.name.isdigit() and len(p.name) == 20)


def iter_commitlog(root: Path) -> Iterator[tuple[int, rec.MessageRecord | None, str | None]]:
    """Yield (offset, record, error) for every record; error ends that segment's walk."""
    for seg in _segments(root / "commitlog"):
        base = int(seg.name)
        with _mapped(seg) as mm:
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
                yield base + pos, m, None
                pos += m.total_size


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


def _queue_dirs(root: Path) -> Iterator[tuple[str, int, Path]]:
    cq_root = root / "consumequeue"
    if not cq_root.is_dir():
        return
    for topic_dir in sorted(cq_root.iterdir()):
        if topic_dir.is_dir():
            for qdir in sorted(topic_dir.iterdir()):
                if qdir.is_dir() and qdir.name.isdigit():
                    yield topic_dir.name, int(qdir.name), qdir


def read_units(qdir: Path) -> list[tuple[int, int, int, int]]:
    """(queue offset, CommitLog offset, size, tags code) of every valid unit of a queue."""
    out: list[tuple[int, int, int, int]] = []
    for seg in _segments(qdir):
        base = int(seg.name) // CQ_UNIT_SIZE
        with _mapped(seg) as mm:
            usable = len(mm) - len(mm) % CQ_UNIT_SIZE
            for i, (off, size, tag) in enumerate(CQ_UNIT.iter_unpack(mm[:usable])):
                if is_valid_unit(off, size):
                    out.append((base + i, off, size, tag))
    return out


def _print_queues(root: Path, units: int) -> None:
    t = Table(title="ConsumeQueue")
    for col in ("topic", "queue", "units", "min", "max", "first units (offset, commitLogOffset, "
                "size, tagsCode)"):
        t.add_column(col)
    for topic, qid, qdir in _queue_dirs(root):
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
    state = "present: the last run did not stop cleanly" if (root / "abort").exists() else "absent"
    console.print(f"abort file: {state}")


@dataclass(slots=True)
class _Expected:
    offset: int
    size: int
    tags_code: int


def verify_store(root: Path, hash_slot_num: int | None = None,
                 delay_levels_ms: Sequence[int] | None = None) -> list[str]:
    """Check that CommitLog, ConsumeQueue and IndexFile agree; return the problems found.

    A ``SCHEDULE_TOPIC_XXXX`` unit carries its deliver time instead of the tag hash (as the
    dispatcher writes it), computed with ``delay_levels_ms`` (the store's ``messageDelayLevel``;
    RocketMQ's default table if None)."""
    levels = (parse_delay_levels(DEFAULT_DELAY_LEVELS) if delay_levels_ms is None
              else delay_levels_ms)
    problems: list[str] = []
    expected: dict[tuple[str, int], dict[int, _Expected]] = {}
    keyed: list[tuple[str, str, int]] = []
    for offset, m, err in iter_commitlog(root):
        if m is None:
            problems.append(f"CommitLog offset {offset}: {err}")
            continue
        if m.commit_log_offset != offset:
            problems.append(f"CommitLog offset {offset}: record says PHYSICALOFFSET "
                            f"{m.commit_log_offset}")
        txn = m.sys_flag & rec.SYSFLAG_TRANSACTION_MASK
        if txn in (rec.SYSFLAG_TRANSACTION_PREPARED, rec.SYSFLAG_TRANSACTION_ROLLBACK):
            continue
        props = decode_properties(m.properties_text)
        code = None
        if m.topic == SCHEDULE_TOPIC:
            code = schedule_tags_code(props.get(DELAY), m.store_timestamp, levels)
        expected.setdefault((m.topic, m.queue_id), {})[m.queue_offset] = _Expected(
            offset, m.total_size, tags_code(props.get(TAGS)) if code is None else code)
        keys = [*props.get(KEYS, "").split(" "), props.get(UNIQ_KEY, "")]
        keyed.extend((m.topic, key, offset) for key in keys if key)
    queues = {(topic, qid): read_units(qdir) for topic, qid, qdir in _queue_dirs(root)}
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
    segs = _segments(root / "commitlog")
    return int(segs[0].name) if segs else 0


def _index_geometry(size: int, hash_slot_num: int | None) -> int | None:
    """The slot count of an index file of ``size`` bytes (entries default to 4 per slot)."""
    if hash_slot_num is not None:
        return hash_slot_num
    body = size - INDEX_HEADER.size
    return body // 84 if body > 0 and body % 84 == 0 else None


def _verify_index(
    root: Path, keyed: list[tuple[str, str, int]], hash_slot_num: int | None
) -> list[str]:
    idir = root / "index"
    files = sorted(idir.iterdir()) if idir.is_dir() else []
    if not files or not keyed:
        return []
    found: set[tuple[int, int]] = set()
    first_indexed: int | None = None
    for f in files:
        with _mapped(f) as mm:
            if len(mm) < INDEX_HEADER.size:
                return [f"index file {f.name} is truncated"]
            _, _, begin_phy, _, _, count = INDEX_HEADER.unpack_from(mm, 0)
            slots = _index_geometry(len(mm), hash_slot_num)
            if slots is None:
                return [f"index file {f.name}: pass --hash-slot-num (size {len(mm)} is not default)"]
            entries_at = INDEX_HEADER.size + slots * INDEX_SLOT_SIZE
            if count > 1:
                first_indexed = begin_phy if first_indexed is None else min(first_indexed, begin_phy)
            for n in range(1, count):
                h, phy, _, _ = INDEX_ENTRY.unpack_from(mm, entries_at + n * INDEX_ENTRY_SIZE)
                found.add((h, phy))
    problems = []
    for topic, key, offset in keyed:
        if first_indexed is None or offset < first_indexed:
            continue  # indexed in a file that retention already deleted
        if (index_key_hash(f"{topic}#{key}"), offset) not in found:
            problems.append(f"index: key {topic}#{key} of offset {offset} is not indexed")
    return problems


@store_app.command()
def verify(
    path: PathArg,
    hash_slot_num: Annotated[int | None, typer.Option(help="maxHashSlotNum if not default")] = None,
) -> None:
    """Check that the CommitLog, ConsumeQueues and IndexFiles agree; exit 1 if they do not."""
    problems = verify_store(path, hash_slot_num)
    if problems:
        for p in problems[:50]:
            console.print(f"[red]✗[/] {p}")
        console.print(f"[red]{len(problems)} problems[/]")
        raise typer.Exit(1)
    console.print("[green]✓[/] CommitLog, ConsumeQueue and IndexFile agree")
