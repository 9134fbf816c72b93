"""Consumer offset stores (Java's ``OffsetStore``): where a consumer group keeps its progress.

Both stores keep the offsets in memory (:meth:`OffsetStore.update` is cheap and called after every
consumed batch) and write them out periodically (:meth:`OffsetStore.persist_all`, every
``persist_offset_interval``) and when a queue is given up (:meth:`OffsetStore.persist`).

- :class:`RemoteOffsetStore`, clustering mode: the broker keeps the offsets
  (QUERY_CONSUMER_OFFSET / UPDATE_CONSUMER_OFFSET through an :class:`OffsetBackend`).
- :class:`LocalFileOffsetStore`, broadcasting mode: every consumer keeps its own offsets in
  ``<root>/<client_id>/<group>/offsets.json``.

The tables hold only the queues the consumer works on: :meth:`OffsetStore.remove` drops a queue
given up by the rebalance, and the remote store's ``persist_all`` drops queues no longer assigned.

The local file has the shape Java's ``OffsetSerializeWrapper`` gets from fastjson, whose map keys
are ``MessageQueue`` objects written as JSON objects (fastjson's non-standard object keys)::

    {"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"TopicTest"}:42}}

so a file written by a Java client is read here and the other way round (parsed by
:mod:`rocketlite.protocol.fastjson`; not standard JSON, so ``jq`` cannot read it). It is written
through ``offsets.json.tmp`` (fsync) and a rename, the previous good version kept as
``offsets.json.bak`` (Java's ``MixAll.string2File``); :meth:`LocalFileOffsetStore.load` falls back
to the ``.bak`` when ``offsets.json`` is missing, empty or corrupt.
"""

from __future__ import annotations

import abc
import asyncio
import enum
import logging
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Protocol

from rocketlite.client.errors import MQClientError
from rocketlite.common.errors import BodyError, RocketliteError
from rocketlite.protocol import fastjson
from rocketlite.protocol.bodies import MessageQueue
from rocketlite.store.store_files import atomic_write_bytes

__all__ = [
    "OFFSET_STORE_DIR_ENV",
    "LocalFileOffsetStore",
    "OffsetBackend",
    "OffsetFileError",
    "OffsetStore",
    "ReadOffsetType",
    "RemoteOffsetStore",
    "default_offset_store_dir",
]

log = logging.getLogger(__name__)

OFFSET_STORE_DIR_ENV = "ROCKETLITE_OFFSET_STORE_DIR"
"""Overrides the local store's root (Java's ``-Drocketmq.client.localOffsetStoreDir``)."""

_PERSIST_ERRORS = (RocketliteError, OSError, TimeoutError)


class ReadOffsetType(enum.Enum):
    """Where :meth:`OffsetStore.read` looks."""

    READ_FROM_MEMORY = 0
    READ_FROM_STORE = 1
    MEMORY_FIRST_THEN_STORE = 2


class OffsetFileError(MQClientError):
    """The local offsets file and its backup both exist but neither can be read."""


class OffsetStore(abc.ABC):
    """The in-memory offset table of one consumer group plus where it is persisted."""

    def __init__(self, group: str) -> None:
        self.group = group
        self._table: dict[MessageQueue, int] = {}

    @abc.abstractmethod
    async def load(self) -> None:
        """Load what the store already holds (the local file; nothing for the broker)."""

    async def update(self, mq: MessageQueue, offset: int, increase_only: bool) -> None:
        """Set ``mq``'s offset in memory; with ``increase_only`` only if it is larger."""
        old = self._table.get(mq)
        if old is None or not increase_only or offset > old:
            self._table[mq] = offset

    async def read(self, mq: MessageQueue, type: ReadOffsetType) -> int:  # noqa: A002 (Java's name)
        """``mq``'s offset, -1 if unknown. From the store, a found offset also replaces memory's."""
        if type is not ReadOffsetType.READ_FROM_STORE:
            offset = self._table.get(mq)
            if offset is not None:
                return offset
            if type is ReadOffsetType.READ_FROM_MEMORY:
                return -1
        stored = await self._read_stored(mq)
        if stored is None:
            return -1
        self._table[mq] = stored
        return stored

    def in_memory(self, mq: MessageQueue) -> int:
        """``mq``'s offset in memory, -1 if unknown (READ_FROM_MEMORY, without awaiting)."""
        return self._table.get(mq, -1)

    @abc.abstractmethod
    async def _read_stored(self, mq: MessageQueue) -> int | None:
        """``mq``'s offset in the store, None if it has none."""

    @abc.abstractmethod
    async def persist(self, mq: MessageQueue) -> None:
        """Write ``mq``'s offset (if known) to the store; failures are logged."""

    @abc.abstractmethod
    async def persist_all(self, mqs: Iterable[MessageQueue]) -> None:
        """Write the offsets of the queues in use, ``mqs``; failures are logged. No-op if empty."""

    async def remove(self, mq: MessageQueue) -> None:
        """Forget ``mq`` (the rebalance gave it up)."""
        self._table.pop(mq, None)

    async def clone_table(self, topic: str | None = None) -> dict[MessageQueue, int]:
        """A copy of the table, restricted to ``topic`` unless it is None or blank."""
        if topic is None or not topic.strip():
            return dict(self._table)
        return {mq: off for mq, off in self._table.items() if mq.topic == topic}


# -------------------------------------------------------------------------------------------- remote


class OffsetBackend(Protocol):
    """The broker requests the remote store needs (the client instance implements them)."""

    async def query_offset(self, group: str, mq: MessageQueue) -> int | None:
        """QUERY_CONSUMER_OFFSET; None when the broker has no offset (QUERY_NOT_FOUND, 22)."""
        ...

    async def update_offset(self, group: str, mq: MessageQueue, offset: int, oneway: bool) -> None:
        """UPDATE_CONSUMER_OFFSET, as a oneway request or waiting for the answer."""
        ...


class RemoteOffsetStore(OffsetStore):
    """Clustering mode: the broker of each queue keeps the group's offset.

    A failed query raises the backend's error (Java returns -2 there), so that a failure is never
    taken for "no offset yet" and the queue is not started from the wrong place. Writes are
    oneway unless ``oneway=False``, as in Java; a failed write is logged and retried at the next
    ``persist_all``.
    """

    def __init__(self, group: str, backend: OffsetBackend, *, oneway: bool = True) -> None:
        super().__init__(group)
        self._backend = backend
        self._oneway = oneway

    async def load(self) -> None:
        """Nothing to load: offsets are read from the broker queue by queue."""

    async def _read_stored(self, mq: MessageQueue) -> int | None:
        return await self._backend.query_offset(self.group, mq)

    async def persist(self, mq: MessageQueue) -> None:
        offset = self._table.get(mq)
        if offset is not None:
            await self._send(mq, offset)

    async def persist_all(self, mqs: Iterable[MessageQueue]) -> None:
        """Send the offset of every queue in ``mqs`` and drop the other queues from the table."""
        in_use = set(mqs)
        if not in_use:
            return
        unused = []
        for mq, offset in list(self._table.items()):  # a snapshot: sends await
            if mq in in_use:
                await self._send(mq, offset)
            else:
                unused.append(mq)
        for mq in unused:
            self._table.pop(mq, None)
            log.info("group %s: dropped the offset of unused queue %s", self.group, mq)

    async def _send(self, mq: MessageQueue, offset: int) -> None:
        try:
            await self._backend.update_offset(self.group, mq, offset, self._oneway)
        except _PERSIST_ERRORS as e:
            log.warning("group %s: could not update the offset of %s to %d: %s", self.group, mq, offset, e)


# --------------------------------------------------------------------------------------------- local


def default_offset_store_dir() -> Path:
    """``$ROCKETLITE_OFFSET_STORE_DIR``, else ``~/.rocketmq_offsets`` (Java's default)."""
    env = os.environ.get(OFFSET_STORE_DIR_ENV)
    return Path(env) if env else Path.home() / ".rocketmq_offsets"


def encode_offsets(table: dict[MessageQueue, int]) -> bytes:
    """The file content for ``table`` (see the module docstring)."""
    inner = {fastjson.ObjectKey.from_mapping(mq.to_obj()): off for mq, off in table.items()}
    return fastjson.dumps({"offsetTable": inner})


def decode_offsets(data: bytes) -> dict[MessageQueue, int]:
    """Parse a file's content; BodyError if it is not an offset table."""
    obj: Any = fastjson.loads(data)
    if not isinstance(obj, dict):
        raise BodyError("offsets file: not a JSON object")
    raw = obj.get("offsetTable")
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise BodyError("offsets file: offsetTable is not an object")
    table: dict[MessageQueue, int] = {}
    for key, value in raw.items():
        if not isinstance(key, fastjson.ObjectKey):
            raise BodyError(f"offsets file: key {key!r} is not a MessageQueue object")
        if isinstance(value, bool) or not isinstance(value, int):
            raise BodyError(f"offsets file: offset {value!r} is not an integer")
        table[MessageQueue.from_obj(key.to_dict(), "offsetTable key")] = value
    return table


def _is_offsets(data: bytes) -> bool:
    try:
        decode_offsets(data)
    except BodyError:
        return False
    return True


class LocalFileOffsetStore(OffsetStore):
    """Broadcasting mode: the offsets live in ``<root>/<client_id>/<group>/offsets.json``.

    The file holds the table as it was at the last persist: ``persist`` and ``persist_all`` both
    write every queue in memory (``persist_all`` only those in ``mqs``), so a queue dropped with
    :meth:`remove` leaves the file at the next write. File I/O runs in a worker thread, one write
    at a time.
    """

    def __init__(self, client_id: str, group: str, root: Path | None = None) -> None:
        super().__init__(group)
        for name, part in (("client id", client_id), ("group", group)):
            if not part or part in (".", "..") or "/" in part or "\\" in part or "\0" in part:
                raise ValueError(f"the {name} {part!r} cannot be a directory name")
        self.client_id = client_id
        root = root if root is not None else default_offset_store_dir()
        self.path = root / client_id / group / "offsets.json"
        self._write_lock = asyncio.Lock()

    @property
    def backup_path(self) -> Path:
        """The previous good version of the file."""
        return self.path.with_name(self.path.name + ".bak")

    async def load(self) -> None:
        """Read the file (or its backup) into memory. OffsetFileError if one of them has content but
        neither is readable: starting from scratch would silently move the group's offsets."""
        table = await asyncio.to_thread(self._read_file)
        self._table.update(table)
        log.info("group %s: loaded %d offsets from %s", self.group, len(table), self.path)

    def _read_file(self) -> dict[MessageQueue, int]:
        problems: list[str] = []
        for candidate in (self.path, self.backup_path):
            try:
                data = candidate.read_bytes()
            except FileNotFoundError:
                continue
            except OSError as e:
                problems.append(f"{candidate}: {e}")
                continue
            if not data.strip():
                continue
            try:
                table = decode_offsets(data)
            except BodyError as e:
                problems.append(f"{candidate}: {e}")
                log.warning("offsets file %s is corrupt: %s", candidate, e)
                continue
            if candidate != self.path:
                log.warning("offsets file %s is missing or corrupt; using its backup", self.path)
            return table
        if problems:
            raise OffsetFileError(
                "cannot read the consumer offsets; fix or remove the files: " + "; ".join(problems)
            )
        return {}

    async def _read_stored(self, mq: MessageQueue) -> int | None:
        try:
            table = await asyncio.to_thread(self._read_file)
        except OffsetFileError as e:
            log.warning("group %s: %s", self.group, e)
            return None
        return table.get(mq)

    async def persist(self, mq: MessageQueue) -> None:
        if mq in self._table:
            await self._write(dict(self._table))

    async def persist_all(self, mqs: Iterable[MessageQueue]) -> None:
        in_use = set(mqs)
        if in_use:
            await self._write({mq: off for mq, off in self._table.items() if mq in in_use})

    async def _write(self, table: dict[MessageQueue, int]) -> None:
        data = encode_offsets(table)
        async with self._write_lock:
            try:
                await asyncio.to_thread(self._write_file, data)
            except OSError as e:
                log.error("group %s: could not write %s: %s", self.group, self.path, e)

    def _write_file(self, data: bytes) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(self.path, data, _is_offsets)
