"""Store-file fuzzing (issue 22's chaos suite): a small store is written once with known messages,
then, round after round, a copy of its files has one or two of them mutated (bit flips,
truncation, zeroed ranges, garbage appended, swapped or rewritten bytes in a record's length or
CRC field, a ConsumeQueue unit's offset or size, the index header, the checkpoint; the ``abort``
file created, removed or filled) and the store is opened on it (``MessageStore.start``: the
recovery a broker runs at start-up).

What a round must show (``check_round``): recovery ends either with a running store or with a
``RocketliteError`` that says why (never another exception); and every message the recovered
store serves (pulls through every ConsumeQueue, look-ups by CommitLog offset, queries by key)
is one that was written (topic, queue, queue offset, body and properties all equal to the ground
truth); and a message sent after recovery is read back whole. Losing messages to a mutation is
allowed (the files lie); serving a wrong one is the failure this exists to find.

Not a test module: ``tests/chaos/test_fuzz_store.py`` runs a short seeded series, and
``scripts/chaos_fuzz.py store`` the long one.
"""

from __future__ import annotations

import random
import shutil
import struct
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from rocketlite.common.errors import CorruptRecordError, RocketliteError
from rocketlite.formats import message_record as rec
from rocketlite.formats.properties import decode_properties
from rocketlite.store.get_message import GetMessageStatus
from rocketlite.store.message_store import MessageStore
from storehelp import msg, small_config, wait_dispatched

TOPICS = ("FuzzA", "FuzzB")
QUEUES = 3
MESSAGES = 70


@dataclass(frozen=True, slots=True)
class Written:
    """One acknowledged message: what any read of it must give back."""

    topic: str
    queue_id: int
    queue_offset: int
    commit_log_offset: int
    body: bytes
    properties: dict[str, str]
    body_at: int  # CommitLog offset of its body
    end: int  # and of the record's end

    def unchecked(self, changed: frozenset[int]) -> bool:
        """Whether bytes of this record outside its body changed: the header, topic and
        properties, which no checksum covers (BODYCRC is over the body alone)."""
        return any(o in changed for o in range(self.commit_log_offset, self.body_at)) or any(
            o in changed for o in range(self.body_at + len(self.body), self.end))


@dataclass(slots=True)
class Pristine:
    """The store's files as the last writer left them, and what was written to it."""

    files: dict[str, bytes]
    by_queue: dict[tuple[str, int, int], Written]
    by_offset: dict[int, Written]
    record_starts: list[int]  # CommitLog offsets of every record, in order
    crashed: bool  # left by ``halt`` (abort file present) rather than ``shutdown``


class WrongMessageError(AssertionError):
    """The recovered store served bytes that are not a message that was written."""


class RecoveryCrashError(AssertionError):
    """Recovery raised something other than a ``RocketliteError`` (an exception trace)."""


def build_pristine(root: Path, *, crashed: bool, seed: int = 1) -> Pristine:
    """Write ``MESSAGES`` messages over several small segments, keyed for the index; stop the
    store cleanly or as a crash would; keep its files in memory."""
    rng = random.Random(seed)
    store = MessageStore(small_config(root)).start()
    by_queue: dict[tuple[str, int, int], Written] = {}
    try:
        for i in range(MESSAGES):
            topic, qid = TOPICS[i % len(TOPICS)], rng.randrange(QUEUES)
            body = rng.randbytes(rng.randrange(0, 400))
            m = msg(topic=topic, body=body, queue_id=qid, tags=f"T{i % 3}", keys=f"k{i} kk{i % 5}")
            (r,) = store.put_messages_sync([m])
            end = r.commit_log_offset + r.size
            w = Written(topic, qid, r.queue_offset, r.commit_log_offset, body,
                        decode_properties(m.properties),
                        end - 2 - len(m.properties.encode()) - 1 - len(topic) - len(body), end)
            by_queue[topic, qid, r.queue_offset] = w
        wait_dispatched(store)
    finally:
        if crashed:
            store.flush_queues()
            store.halt()
        else:
            store.shutdown()
    files = {str(p.relative_to(root)): p.read_bytes()
             for p in sorted(root.rglob("*")) if p.is_file() and p.name != "lock"}
    by_offset = {w.commit_log_offset: w for w in by_queue.values()}
    return Pristine(files, by_queue, by_offset, sorted(by_offset), crashed)


# -- mutations ------------------------------------------------------------------------------------

@dataclass(slots=True)
class Mutation:
    """What was done to which file (a description that reproduces it with the seed)."""

    path: str
    kind: str
    detail: str = ""
    changed: list[int] = field(default_factory=list, repr=False)  # CommitLog offsets changed


Mutated = tuple[bytearray | None, str]  # the file's new bytes (None: deleted), what was done
Mutator = Callable[[random.Random, bytearray, Pristine, str], Mutated]


def _bitflip(rng: random.Random, data: bytearray, _p: Pristine, _path: str) -> Mutated:
    if not data:
        return data, "empty"
    flips = [rng.randrange(len(data) * 8) for _ in range(rng.choice((1, 1, 2, 8)))]
    for bit in flips:
        data[bit // 8] ^= 1 << (bit % 8)
    return data, f"bits {flips}"


def _truncate(rng: random.Random, data: bytearray, _p: Pristine, _path: str) -> Mutated:
    n = rng.choice((0, rng.randrange(len(data) + 1), max(0, len(data) - rng.randrange(1, 64))))
    return data[:n], f"to {n}"


def _zero(rng: random.Random, data: bytearray, _p: Pristine, _path: str) -> Mutated:
    if not data:
        return data, "empty"
    start = rng.randrange(len(data))
    end = min(len(data), start + rng.choice((1, 4, 8, 64, 512, 4096)))
    data[start:end] = bytes(end - start)
    return data, f"[{start}, {end})"


def _append(rng: random.Random, data: bytearray, _p: Pristine, _path: str) -> Mutated:
    extra = rng.randbytes(rng.choice((1, 7, 100, 4096, 9000)))
    return data + extra, f"{len(extra)} bytes"


def _delete(_rng: random.Random, _data: bytearray, _p: Pristine, _path: str) -> Mutated:
    return None, ""


def _segment_records(p: Pristine, path: str, size: int) -> list[int]:
    base = int(Path(path).name)
    return [o - base for o in p.record_starts if base <= o < base + size]


def _record_field(rng: random.Random, data: bytearray, p: Pristine, path: str) -> Mutated:
    """A record's TOTALSIZE, MAGIC or BODYCRC: two bytes swapped, or another value written."""
    starts = _segment_records(p, path, len(data))
    if not starts:
        return _bitflip(rng, data, p, path)
    pos = rng.choice(starts)
    name, at = rng.choice((("size", 0), ("size", 0), ("magic", 4), ("crc", 8)))
    at += pos
    how = rng.randrange(3)
    if how == 0:
        i, j = rng.sample(range(4), 2)
        data[at + i], data[at + j] = data[at + j], data[at + i]
    elif how == 1:
        other = rng.choice(starts)
        data[at : at + 4] = data[other + at - pos : other + at - pos + 4]
    else:
        value = rng.choice((0, 1, -1, 2**31 - 1, -(2**31), len(data), rng.randrange(2**32) - 2**31))
        data[at : at + 4] = struct.pack(">i", value)
    return data, f"record at {pos}: {name} ({('swap', 'copied', 'set')[how]})"


def _cq_field(rng: random.Random, data: bytearray, p: Pristine, path: str) -> Mutated:
    """A ConsumeQueue unit's CommitLog offset, size or tag: bytes swapped, another unit's, or
    another value."""
    units = [u for u in range(len(data) // 20) if data[u * 20 + 8 : u * 20 + 12] != b"\0\0\0\0"]
    if not units:
        return _bitflip(rng, data, p, path)
    u = rng.choice(units) * 20
    name, at, width = rng.choice((("offset", 0, 8), ("size", 8, 4), ("tag", 12, 8)))
    at += u
    how = rng.randrange(3)
    if how == 0:
        i, j = rng.sample(range(width), 2)
        data[at + i], data[at + j] = data[at + j], data[at + i]
    elif how == 1:
        other = rng.choice(units) * 20 + at - u
        data[at : at + width] = data[other : other + width]
    else:
        choices = [0, -1, 1, rng.choice(p.record_starts), rng.randrange(2**31)]
        value = rng.choice(choices)
        data[at : at + width] = value.to_bytes(width, "big", signed=True)
    return data, f"unit {u // 20}: {name} ({('swap', 'copied', 'set')[how]})"


def _header_field(rng: random.Random, data: bytearray, p: Pristine, path: str) -> Mutated:
    """One 8-byte field of an index header or the checkpoint rewritten."""
    if len(data) < 40:
        return _bitflip(rng, data, p, path)
    at = rng.randrange(0, 40, 4)
    data[at : at + 8] = rng.choice((bytes(8), b"\xff" * 8, rng.randbytes(8)))
    return data, f"header bytes [{at}, {at + 8})"


GENERIC: tuple[Mutator, ...] = (_bitflip, _bitflip, _truncate, _zero, _zero, _append, _delete)
BY_KIND: dict[str, tuple[Mutator, ...]] = {
    "commitlog": (*GENERIC, _record_field, _record_field, _record_field),
    "consumequeue": (*GENERIC, _cq_field, _cq_field, _cq_field),
    "index": (*GENERIC, _header_field),
    "checkpoint": (*GENERIC, _header_field),
}


def _kind(path: str) -> str:
    return path.split("/", 1)[0] if "/" in path else path


def mutate(rng: random.Random, p: Pristine, files: dict[str, bytes | None]) -> list[Mutation]:
    """Mutate one file of ``files`` (two, one time in five) in place; the ``abort`` file is
    toggled or filled one time in ten."""
    done: list[Mutation] = []
    if rng.random() < 0.1:
        if rng.random() < 0.5:
            files["abort"] = None if "abort" in files and files["abort"] is not None else b""
            done.append(Mutation("abort", "deleted" if files["abort"] is None else "created"))
        else:
            files["abort"] = rng.randbytes(rng.randrange(1, 64))
            done.append(Mutation("abort", "garbage"))
    weighted = [f for f in p.files if _kind(f) in BY_KIND]
    weights = [{"commitlog": 6, "consumequeue": 3, "index": 2, "checkpoint": 2}[_kind(f)]
               for f in weighted]
    for path in rng.choices(weighted, weights, k=2 if rng.random() < 0.2 else 1):
        old = files.get(path)
        if old is None:
            continue
        mutator = rng.choice(BY_KIND[_kind(path)])
        new, detail = mutator(rng, bytearray(old), p, path)
        files[path] = None if new is None else bytes(new)
        done.append(Mutation(path, mutator.__name__.strip("_"), detail,
                             _changed(path, old, files[path])))
    return done


def _changed(path: str, old: bytes, new: bytes | None) -> list[int]:
    """The CommitLog offsets a mutation of a segment changed (or cut off)."""
    if _kind(path) != "commitlog":
        return []
    base = int(Path(path).name)
    new = new or b""
    n = min(len(old), len(new))
    out = [base + i for i in range(n) if old[i] != new[i]]
    return out + [base + i for i in range(n, len(old))]


# -- a round --------------------------------------------------------------------------------------

@dataclass(slots=True)
class Tally:
    """What a series of rounds did and found."""

    rounds: int = 0
    files_mutated: int = 0
    refused: Counter[str] = field(default_factory=Counter)
    served: int = 0
    lost: int = 0
    # Served with the body written at that CommitLog offset but another topic, queue, queue
    # offset or properties, the mutation having changed those very bytes: RocketMQ's record has
    # no checksum over them (BODYCRC covers the body only), so no reader can tell. Counted and
    # reported (docs/reliability.md), not failed.
    unchecked_fields: int = 0
    by_mutation: Counter[str] = field(default_factory=Counter)

    def line(self) -> str:
        refused = sum(self.refused.values())
        return (f"{self.rounds} rounds, {self.files_mutated} files mutated: "
                f"{self.rounds - refused} recovered ({self.served} messages served, all equal to "
                f"what was written; {self.lost} not served; {self.unchecked_fields} with "
                f"mutated header/topic/properties, which no checksum covers), {refused} refused to open "
                f"({dict(self.refused) or 'none'})")


def write_files(root: Path, files: dict[str, bytes | None]) -> None:
    if root.exists():
        shutil.rmtree(root)
    for rel, data in files.items():
        if data is None:
            continue
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


@dataclass(slots=True)
class Checker:
    """Compares what the store serves with the ground truth, knowing which CommitLog bytes the
    round's mutations changed."""

    pristine: Pristine
    changed: frozenset[int]
    tally: Tally

    def same(self, w: Written | None, m: rec.MessageRecord, where: str) -> None:
        props = decode_properties(m.properties_text)
        got = (m.topic, m.queue_id, m.queue_offset, m.body, props)
        if w is not None and got == (w.topic, w.queue_id, w.queue_offset, w.body, w.properties):
            return
        for there in (w, self.pristine.by_offset.get(m.commit_log_offset)):
            if there is not None and m.body == there.body and there.unchecked(self.changed):
                self.tally.unchecked_fields += 1
                return
        want = None if w is None else (w.topic, w.queue_id, w.queue_offset, w.body, w.properties)
        raise WrongMessageError(f"{where}: served {got!r}, written {want!r}"[:600])


def _decode_all(body: bytes, sizes: list[int], where: str) -> list[rec.MessageRecord]:
    out, pos = [], 0
    for size in sizes:
        try:
            m = rec.decode_record(body[pos : pos + size], 0)
        except CorruptRecordError as e:
            raise WrongMessageError(f"{where}: served a {size}-byte record that does not decode: "
                                    f"{e}") from e
        if m is None or m.total_size != size:
            raise WrongMessageError(f"{where}: served {size} bytes that are not one record")
        out.append(m)
        pos += size
    return out


def check_reads(store: MessageStore, p: Pristine, c: Checker) -> int:
    """Everything the store serves is what was written; the number of messages served."""
    served = 0
    for (topic, qid), cq in sorted(store.queues.items()):
        offset = cq.min_offset
        while offset < cq.max_offset:
            r = store.get_message(topic, qid, offset, 16)
            if r.status is not GetMessageStatus.FOUND:
                if r.next_begin_offset <= offset:
                    break
                offset = r.next_begin_offset
                continue
            where = f"pull {topic}/{qid}"
            for m, qo in zip(_decode_all(r.body, r.sizes, where), r.queue_offsets, strict=True):
                c.same(p.by_queue.get((topic, qid, qo)), m, f"{where} at queue offset {qo}")
                served += 1
            offset = r.next_begin_offset
    for w in p.by_queue.values():
        try:
            m = store.look_message(w.commit_log_offset)
        except RocketliteError:
            continue
        if m is not None:
            c.same(w, m, f"look-up of CommitLog offset {w.commit_log_offset}")
    for i in range(5):
        for topic in TOPICS:
            for m in store.query_message(topic, f"kk{i}", 64):
                c.same(p.by_offset.get(m.commit_log_offset), m, f"query {topic} kk{i}")
    return served


def check_new_write(store: MessageStore) -> None:
    """A message sent after recovery is read back whole (from its queue's end)."""
    qid = 0
    body = b"after recovery"
    (r,) = store.put_messages_sync([msg(topic="FuzzAfter", body=body, queue_id=qid)])
    wait_dispatched(store)
    got = store.get_message("FuzzAfter", qid, r.queue_offset, 1)
    (m,) = _decode_all(got.body, got.sizes, "the write after recovery")
    if (m.body, m.queue_offset, m.commit_log_offset) != (body, r.queue_offset, r.commit_log_offset):
        raise WrongMessageError(f"the write after recovery read back as {m!r}"[:600])


def check_round(root: Path, p: Pristine, muts: list[Mutation], tally: Tally) -> None:
    """Open the store on the mutated files and check it (see the module docstring)."""
    try:
        store = MessageStore(small_config(root)).start()
    except RocketliteError as e:
        if not str(e):
            raise RecoveryCrashError(
                f"{muts}: refused with an empty message ({type(e).__name__})") from e
        tally.refused[type(e).__name__] += 1
        return
    except Exception as e:
        raise RecoveryCrashError(f"{muts}: recovery raised {type(e).__name__}: {e}") from e
    try:
        if store.recovery is None:
            raise RecoveryCrashError(f"{muts}: no recovery report")
        changed = frozenset(o for m in muts for o in m.changed)
        served = check_reads(store, p, Checker(p, changed, tally))
        tally.served += served
        tally.lost += len(p.by_queue) - min(served, len(p.by_queue))
        check_new_write(store)
    finally:
        store.shutdown()


def run(work: Path, rounds: int, seed: int, progress: Callable[[Tally], None] | None = None,
        every: int = 1000) -> Tally:
    """``rounds`` rounds (half over a cleanly stopped store, half over a crashed one) under
    ``work``; raises the first finding (``WrongMessageError``, ``RecoveryCrashError``) with the
    mutations that produced it."""
    pristines = [build_pristine(work / "clean", crashed=False, seed=seed),
                 build_pristine(work / "crashed", crashed=True, seed=seed)]
    rng = random.Random(seed)
    tally = Tally()
    root = work / "round"
    for i in range(rounds):
        p = pristines[i % 2]
        files: dict[str, bytes | None] = dict(p.files)
        muts = mutate(rng, p, files)
        write_files(root, files)
        try:
            check_round(root, p, muts, tally)
        except AssertionError as e:
            raise type(e)(f"round {i} (seed {seed}, {'crashed' if p.crashed else 'clean'} "
                          f"store): {muts}: {e}") from e
        tally.rounds += 1
        tally.files_mutated += sum(1 for m in muts if m.path != "abort" or m.kind == "garbage")
        for m in muts:
            tally.by_mutation[f"{_kind(m.path)}:{m.kind}"] += 1
        if progress is not None and tally.rounds % every == 0:
            progress(tally)
    return tally
