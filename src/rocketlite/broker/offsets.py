"""ConsumerOffsetManager: committed consume offsets, persisted in ``config/consumerOffset.json``.

The file is what a Java broker writes with fastjson: ``{"offsetTable":{"topic@group":{0:5,1:7}}}``
(bare integer keys), and either broker reads the other's. Keys hold one ``@`` between topic and
group (topic names cannot contain ``@``). The table is persisted every
``flushConsumerOffsetInterval`` and at shutdown; a crash loses at most that interval of commits,
so consumers re-read a few messages (at-least-once), as with RocketMQ.

A negative commit is ignored: ali-ons commits -1 for queues it never consumed, which must not
erase an offset another consumer of the group committed.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from rocketlite.broker import config_file
from rocketlite.common.errors import ConfigError
from rocketlite.protocol import fastjson

log = logging.getLogger(__name__)

TOPIC_GROUP_SEPARATOR = "@"
MAX_ENTRIES = 1_000_000  # topic@group keys; each holds at most one offset per queue


class ConsumerOffsetManager:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.table: dict[str, dict[int, int]] = {}
        self.lock = threading.Lock()
        # One write at a time: the periodic persist runs in a worker thread that a closing
        # broker cannot stop, and two writes of the file share its ``.tmp``.
        self._write_lock = threading.Lock()
        self._dirty = False

    @staticmethod
    def key(topic: str, group: str) -> str:
        return f"{topic}{TOPIC_GROUP_SEPARATOR}{group}"

    def load(self) -> None:
        obj = config_file.load(self.path)
        if obj is None:
            return
        if not isinstance(obj, dict) or not isinstance(obj.get("offsetTable", {}), dict):
            raise ConfigError(f"{self.path}: expected {{\"offsetTable\": {{...}}}}")
        table: dict[str, dict[int, int]] = {}
        for key, offsets in obj.get("offsetTable", {}).items():
            if not isinstance(key, str) or TOPIC_GROUP_SEPARATOR not in key:
                log.warning("%s: ignoring entry %r (not topic@group)", self.path, key)
                continue
            if not isinstance(offsets, dict):
                log.warning("%s: ignoring entry %r (not a map of queue to offset)", self.path, key)
                continue
            queues: dict[int, int] = {}
            for qid, off in offsets.items():
                try:
                    queues[int(qid)] = int(off)
                except (TypeError, ValueError):
                    log.warning("%s: ignoring %s queue %r offset %r", self.path, key, qid, off)
            table[key] = queues
        with self.lock:
            self.table = table

    def snapshot(self) -> dict[str, dict[int, int]]:
        """A copy of the table (``topic@group`` -> queue id -> offset)."""
        with self.lock:
            return {k: dict(v) for k, v in self.table.items()}

    def encode(self) -> bytes:
        with self.lock:
            snapshot = {k: dict(v) for k, v in self.table.items()}
            self._dirty = False
        return fastjson.dumps({"offsetTable": snapshot}, legacy=True)

    def put_all(self, table: dict[str, dict[int, int]]) -> None:
        """Take a master's offsets (a slave's sync): each ``topic@group`` entry of ``table``
        replaces this broker's; entries the master does not have are kept, as Java's
        ``offsetTable.putAll`` keeps them."""
        with self.lock:
            for key, queues in table.items():
                if TOPIC_GROUP_SEPARATOR not in key:
                    continue
                if key not in self.table and len(self.table) >= MAX_ENTRIES:
                    log.error("consumer offsets: %d topic@group entries, not adding %s",
                              MAX_ENTRIES, key)
                    continue
                self.table[key] = {q: o for q, o in queues.items() if o >= 0}
            self._dirty = True

    def persist(self, force: bool = True) -> None:
        if not force and not self._dirty:
            return
        with self._write_lock:
            data = self.encode()
            try:
                config_file.save(self.path, data)
            except BaseException:
                self._dirty = True  # not saved: the next periodic persist tries again
                raise

    # -- offsets ---------------------------------------------------------------------------

    def commit(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        if offset < 0:
            return
        key = self.key(topic, group)
        queues = self.table.get(key)
        if queues is None:
            with self.lock:
                if len(self.table) >= MAX_ENTRIES:
                    log.error("consumer offsets: %d topic@group entries, not adding %s",
                              MAX_ENTRIES, key)
                    return
                queues = self.table.setdefault(key, {})
        queues[queue_id] = offset
        self._dirty = True

    def query(self, group: str, topic: str, queue_id: int) -> int:
        """The committed offset, or -1 if none."""
        queues = self.table.get(self.key(topic, group))
        if queues is None:
            return -1
        return queues.get(queue_id, -1)

    def offsets_of(self, group: str, topic: str) -> dict[int, int]:
        return dict(self.table.get(self.key(topic, group), {}))

    def groups_of(self, topic: str) -> set[str]:
        prefix = topic + TOPIC_GROUP_SEPARATOR
        return {k[len(prefix):] for k in list(self.table) if k.startswith(prefix)}

    def topics_of(self, group: str) -> set[str]:
        """The topics ``group`` committed offsets for (Java's ``whichTopicByConsumer``)."""
        suffix = TOPIC_GROUP_SEPARATOR + group
        return {k[: -len(suffix)] for k in list(self.table) if k.endswith(suffix)
                and TOPIC_GROUP_SEPARATOR not in k[: -len(suffix)]}

    def remove_group(self, group: str) -> int:
        """Drop every offset ``group`` committed (Java's ``removeOffset``); the topics dropped."""
        suffix = TOPIC_GROUP_SEPARATOR + group
        with self.lock:
            keys = [k for k in self.table if k.endswith(suffix)
                    and TOPIC_GROUP_SEPARATOR not in k[: -len(suffix)]]
            for k in keys:
                del self.table[k]
            self._dirty = True
        return len(keys)

    def remove_topic(self, topic: str) -> None:
        prefix = topic + TOPIC_GROUP_SEPARATOR
        with self.lock:
            for k in [k for k in self.table if k.startswith(prefix)]:
                del self.table[k]
            self._dirty = True

