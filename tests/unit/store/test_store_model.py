"""A state machine against a simple model: append, flush, crash (the unflushed tail of the
CommitLog is lost from a tear boundary on, as a killed ``pwrite`` or a power loss leaves it), recover,
read. After every recovery the store holds exactly the records that end at or before the cut, every
flushed record among them, and reads agree."""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from rocketlite.formats import message_record as rec
from rocketlite.formats.message_record import decode_record
from rocketlite.store.message_store import MessageStore
from storehelp import msg, small_config, wait_dispatched

TOPICS = ("TopicA", "TopicB")


@dataclass(frozen=True)
class Acked:
    topic: str
    queue_id: int
    body: bytes
    offset: int
    end: int
    queue_offset: int


class StoreMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="rocketlite-model-"))
        self.cfg = small_config(self.root, mappedFileSizeCommitLog="4096",
                                flushIntervalCommitLog="100000")
        self.store = MessageStore(self.cfg).start()
        self.model: list[Acked] = []
        self.flushed_end = 0

    @rule(batch=st.lists(st.tuples(st.sampled_from(TOPICS), st.integers(0, 1),
                                   st.binary(min_size=0, max_size=700)), min_size=1, max_size=5))
    def append(self, batch: list[tuple[str, int, bytes]]) -> None:
        results = self.store.put_messages_sync(
            [msg(topic=t, queue_id=q, body=b, keys=f"k{len(self.model) + i}")
             for i, (t, q, b) in enumerate(batch)])
        for (t, q, b), r in zip(batch, results, strict=True):
            self.model.append(Acked(t, q, b, r.commit_log_offset, r.end_offset, r.queue_offset))

    @rule()
    def flush(self) -> None:
        self.flushed_end = self.store.commitlog.files.flush()

    @precondition(lambda self: bool(self.model))
    @rule(data=st.data())
    def crash_and_recover(self, data: st.DataObject) -> None:
        written = self.store.commitlog.max_offset
        unit = rec.TEAR_UNIT
        blocks = range(-(-self.flushed_end // unit), written // unit + 1)
        cut = data.draw(st.sampled_from([written, *(b * unit for b in blocks)]), label="cut")
        self.store.halt()
        for seg in sorted(self.cfg.commit_log_dir.iterdir()):
            base = int(seg.name)
            if base + self.cfg.mapped_file_size_commit_log <= cut:
                continue
            raw = bytearray(seg.read_bytes())
            start = max(0, cut - base)
            raw[start:] = bytes(len(raw) - start)
            seg.write_bytes(bytes(raw))
        self.model = [a for a in self.model if a.end <= cut]
        self.store = MessageStore(self.cfg).start()
        self.flushed_end = self.store.commitlog.max_offset

    @invariant()
    def reads_match_model(self) -> None:
        wait_dispatched(self.store)
        for topic in TOPICS:
            for q in (0, 1):
                mine = [a for a in self.model if a.topic == topic and a.queue_id == q]
                assert self.store.max_offset_in_queue(topic, q) == len(mine)
                got = self.store.get_message(topic, q, 0, max_count=10_000, max_bytes=1 << 30)
                bodies = [decode_record(b).body for b in got.messages]  # type: ignore[union-attr]
                assert bodies == [a.body for a in mine]
                assert [a.queue_offset for a in mine] == list(range(len(mine)))
        if self.model:
            last = self.model[-1]
            m = self.store.look_message_by_id(self.store.message_id(last.offset))
            assert m is not None and m.body == last.body
            found = self.store.query_message(last.topic, f"k{len(self.model) - 1}")
            assert [x.body for x in found] == [last.body]

    def teardown(self) -> None:
        self.store.shutdown()
        shutil.rmtree(self.root, ignore_errors=True)


StoreMachine.TestCase.settings = settings(max_examples=30, stateful_step_count=12, deadline=None)
test_store_model = StoreMachine.TestCase
