"""The broker's files, read after it stopped, with the project's own readers
(``rocketlite.cli.store_commands``: read-only, no lock, no recovery): what the conformance tests
compare with what the clients sent and received. ``harness`` re-exports these names.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from remoting_admin import loads_lenient

from rocketlite.cli.store_commands import iter_commitlog, read_units, verify_store
from rocketlite.formats.properties import KEYS, decode_properties


@dataclass(frozen=True)
class StoredMessage:
    topic: str
    queue_id: int
    queue_offset: int
    key: str | None
    body: str
    sys_flag: int
    properties: dict[str, str]


@dataclass
class StoreState:
    """What a stopped broker left in its store directory, read with the project's own readers
    (``rocketlite.cli.store_commands``: read-only, no lock, no recovery)."""

    root: Path
    messages: list[StoredMessage]
    queue_units: dict[tuple[str, int], int]      # valid ConsumeQueue units per (topic, queue)
    queue_max: dict[tuple[str, int], int]        # next queue offset per (topic, queue)
    consumer_offsets: dict[str, dict[int, int]]  # "topic@group" -> {queue: committed offset}
    problems: list[str] = field(default_factory=list)
    abort_present: bool = False

    @classmethod
    def read(cls, root: Path, delay_levels_ms: Sequence[int] | None = None) -> StoreState:
        """``delay_levels_ms``: the broker's ``messageDelayLevel`` (default: RocketMQ's)."""
        messages = []
        for _, rec, err in iter_commitlog(root):
            if rec is None:
                raise AssertionError(f"the CommitLog in {root} holds a bad record: {err}")
            props = decode_properties(rec.properties_text)
            body = zlib.decompress(rec.body) if rec.sys_flag & 0x1 else rec.body
            messages.append(StoredMessage(rec.topic, rec.queue_id, rec.queue_offset,
                                          props.get(KEYS), body.decode("utf-8", "replace"),
                                          rec.sys_flag, props))
        units: dict[tuple[str, int], int] = {}
        qmax: dict[tuple[str, int], int] = {}
        cq_root = root / "consumequeue"
        for topic_dir in sorted(cq_root.iterdir()) if cq_root.is_dir() else []:
            for qdir in sorted(topic_dir.iterdir()) if topic_dir.is_dir() else []:
                if qdir.is_dir() and qdir.name.isdigit():
                    us = read_units(qdir)
                    units[(topic_dir.name, int(qdir.name))] = len(us)
                    qmax[(topic_dir.name, int(qdir.name))] = us[-1][0] + 1 if us else 0
        return cls(root=root, messages=messages, queue_units=units, queue_max=qmax,
                   consumer_offsets=read_consumer_offsets(root),
                   problems=verify_store(root, delay_levels_ms=delay_levels_ms),
                   abort_present=(root / "abort").exists())

    def units_of(self, topic: str) -> dict[int, int]:
        return {q: n for (t, q), n in self.queue_units.items() if t == topic}

    def max_offsets_of(self, topic: str) -> dict[int, int]:
        return {q: n for (t, q), n in self.queue_max.items() if t == topic}

    def messages_of(self, topic: str) -> list[StoredMessage]:
        return [m for m in self.messages if m.topic == topic]

    def offsets_of(self, topic: str, group: str) -> dict[int, int]:
        return self.consumer_offsets.get(f"{topic}@{group}", {})

    def describe(self, topic: str) -> str:
        return (f"store {self.root}: ConsumeQueue units of {topic} {self.units_of(topic)}, "
                f"CommitLog records of {topic} {len(self.messages_of(topic))}, consumer offsets "
                f"{ {k: v for k, v in self.consumer_offsets.items() if k.startswith(topic + '@')} }")


def read_consumer_offsets(root: Path) -> dict[str, dict[int, int]]:
    """``config/consumerOffset.json`` in RocketMQ's format, ``{"offsetTable": {"Topic@Group":
    {0: 5, 1: 3}}}`` (fastjson writes the queue ids as bare integers; quoted ones are accepted)."""
    path = root / "config" / "consumerOffset.json"
    if not path.exists():
        return {}
    data = loads_lenient(path.read_text())
    table = data.get("offsetTable", {}) if isinstance(data, dict) else {}
    return {str(k): {int(q): int(o) for q, o in v.items()} for k, v in table.items()}
