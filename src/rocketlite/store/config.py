"""StoreConfig: the storage engine's settings, under Apache RocketMQ's key names.

==================================  ===================================  =================  ======
RocketMQ key                        field                                default            unit
==================================  ===================================  =================  ======
storePathRootDir                    store_path_root_dir                  ~/store            path
mappedFileSizeCommitLog             mapped_file_size_commit_log          1073741824         bytes
mappedFileSizeConsumeQueue          mapped_file_size_consume_queue       6000000            bytes
flushDiskType                       flush_disk_type                      ASYNC_FLUSH
flushIntervalCommitLog              flush_interval_commit_log            500                ms
commitIntervalCommitLog             commit_interval_commit_log           200                ms
flushIntervalConsumeQueue           flush_interval_consume_queue         1000               ms
syncFlushTimeout                    sync_flush_timeout                   5000               ms
transientStorePoolEnable            transient_store_pool_enable          false
warmMapedFileEnable                 warm_mapped_file_enable              true
fileReservedTime                    file_reserved_time                   72                 hours
deleteWhen                          delete_when                          04                 hours
diskMaxUsedSpaceRatio               disk_max_used_space_ratio            75                 %
diskSpaceCleanForciblyRatio         disk_space_clean_forcibly_ratio      85                 %
diskSpaceWarningLevelRatio          disk_space_warning_level_ratio       90                 %
cleanResourceInterval               clean_resource_interval              10000              ms
destroyMapedFileIntervalForcibly    destroy_mapped_file_interval_forcibly 120000            ms
deleteFileBatchMax                  delete_file_batch_max                10                 files
messageIndexEnable                  message_index_enable                 true
maxHashSlotNum                      max_hash_slot_num                    5000000
maxIndexNum                         max_index_num                        20000000
maxMessageSize                      max_message_size                     4194304            bytes
brokerIP1                           broker_ip1                           127.0.0.1
listenPort                          listen_port                          10911
==================================  ===================================  =================  ======

``load_properties`` reads a Java ``.properties`` file such as RocketMQ's ``broker.conf``; keys this
table does not know are ignored, so a full broker.conf works.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from rocketlite.common.errors import ConfigError

_CAMEL = re.compile(r"(?<!^)(?=[A-Z])")
_DELETE_WHEN = re.compile(r"^\d{2}(;\d{2})*$")


def _key(name: str) -> dict[str, str]:
    return {"key": name}


@dataclass(slots=True, frozen=True)
class StoreConfig:
    store_path_root_dir: Path = field(default=Path.home() / "store",
                                      metadata=_key("storePathRootDir"))
    mapped_file_size_commit_log: int = field(default=1 << 30,
                                             metadata=_key("mappedFileSizeCommitLog"))
    mapped_file_size_consume_queue: int = field(default=300_000 * 20,
                                                metadata=_key("mappedFileSizeConsumeQueue"))
    flush_disk_type: str = field(default="ASYNC_FLUSH", metadata=_key("flushDiskType"))
    flush_interval_commit_log: int = field(default=500, metadata=_key("flushIntervalCommitLog"))
    commit_interval_commit_log: int = field(default=200, metadata=_key("commitIntervalCommitLog"))
    flush_interval_consume_queue: int = field(default=1000,
                                              metadata=_key("flushIntervalConsumeQueue"))
    sync_flush_timeout: int = field(default=5000, metadata=_key("syncFlushTimeout"))
    transient_store_pool_enable: bool = field(default=False,
                                              metadata=_key("transientStorePoolEnable"))
    warm_mapped_file_enable: bool = field(default=True, metadata=_key("warmMapedFileEnable"))
    file_reserved_time: int = field(default=72, metadata=_key("fileReservedTime"))
    delete_when: str = field(default="04", metadata=_key("deleteWhen"))
    disk_max_used_space_ratio: int = field(default=75, metadata=_key("diskMaxUsedSpaceRatio"))
    disk_space_clean_forcibly_ratio: int = field(default=85,
                                                 metadata=_key("diskSpaceCleanForciblyRatio"))
    disk_space_warning_level_ratio: int = field(default=90,
                                                metadata=_key("diskSpaceWarningLevelRatio"))
    clean_resource_interval: int = field(default=10_000, metadata=_key("cleanResourceInterval"))
    destroy_mapped_file_interval_forcibly: int = field(
        default=120_000, metadata=_key("destroyMapedFileIntervalForcibly"))
    delete_file_batch_max: int = field(default=10, metadata=_key("deleteFileBatchMax"))
    message_index_enable: bool = field(default=True, metadata=_key("messageIndexEnable"))
    max_hash_slot_num: int = field(default=5_000_000, metadata=_key("maxHashSlotNum"))
    max_index_num: int = field(default=20_000_000, metadata=_key("maxIndexNum"))
    max_message_size: int = field(default=4 << 20, metadata=_key("maxMessageSize"))
    broker_ip1: str = field(default="127.0.0.1", metadata=_key("brokerIP1"))
    listen_port: int = field(default=10911, metadata=_key("listenPort"))

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        if self.flush_disk_type not in ("SYNC_FLUSH", "ASYNC_FLUSH"):
            raise ConfigError(
                f"flushDiskType={self.flush_disk_type!r}: must be SYNC_FLUSH or ASYNC_FLUSH"
            )
        if self.mapped_file_size_commit_log < 4096:
            raise ConfigError(
                f"mappedFileSizeCommitLog={self.mapped_file_size_commit_log}: at least 4096"
            )
        cq = self.mapped_file_size_consume_queue
        if cq < 20 or cq % 20:
            raise ConfigError(f"mappedFileSizeConsumeQueue={cq}: a positive multiple of 20")
        for key, ratio in (("diskMaxUsedSpaceRatio", self.disk_max_used_space_ratio),
                           ("diskSpaceCleanForciblyRatio", self.disk_space_clean_forcibly_ratio),
                           ("diskSpaceWarningLevelRatio", self.disk_space_warning_level_ratio)):
            if not 10 <= ratio <= 95:
                raise ConfigError(f"{key}={ratio}: must be within 10..95")
        if not _DELETE_WHEN.match(self.delete_when):
            raise ConfigError(f"deleteWhen={self.delete_when!r}: hours like '04' or '04;16'")
        for key, value in (("maxHashSlotNum", self.max_hash_slot_num),
                           ("maxIndexNum", self.max_index_num),
                           ("maxMessageSize", self.max_message_size),
                           ("syncFlushTimeout", self.sync_flush_timeout),
                           ("flushIntervalCommitLog", self.flush_interval_commit_log),
                           ("deleteFileBatchMax", self.delete_file_batch_max)):
            if value <= 0:
                raise ConfigError(f"{key}={value}: must be positive")

    # -- derived paths -----------------------------------------------------------------------

    @property
    def sync_flush(self) -> bool:
        return self.flush_disk_type == "SYNC_FLUSH"

    @property
    def commit_log_dir(self) -> Path:
        return self.store_path_root_dir / "commitlog"

    @property
    def consume_queue_dir(self) -> Path:
        return self.store_path_root_dir / "consumequeue"

    @property
    def index_dir(self) -> Path:
        return self.store_path_root_dir / "index"

    @property
    def config_dir(self) -> Path:
        return self.store_path_root_dir / "config"

    @property
    def checkpoint_path(self) -> Path:
        return self.store_path_root_dir / "checkpoint"

    @property
    def abort_path(self) -> Path:
        return self.store_path_root_dir / "abort"

    @property
    def lock_path(self) -> Path:
        return self.store_path_root_dir / "lock"

    # -- properties --------------------------------------------------------------------------

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> StoreConfig:
        values: dict[str, Any] = {}
        for f in fields(cls):
            key = f.metadata["key"]
            if key not in props:
                continue
            raw = props[key].strip()
            values[f.name] = _parse(key, raw, f.type)
        return cls(**values)

    @classmethod
    def from_file(cls, path: Path) -> StoreConfig:
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as e:
            raise ConfigError(f"cannot read {path}: {e}") from e
        return cls.from_properties(load_properties(text))

    def to_properties(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for f in fields(self):
            v = getattr(self, f.name)
            out[f.metadata["key"]] = str(v).lower() if isinstance(v, bool) else str(v)
        return out

    def replace(self, **changes: Any) -> StoreConfig:
        return dataclasses.replace(self, **changes)


def _parse(key: str, raw: str, typ: object) -> object:
    t = typ if isinstance(typ, str) else getattr(typ, "__name__", str(typ))
    try:
        if t == "int":
            return int(raw)
        if t == "bool":
            low = raw.lower()
            if low not in ("true", "false"):
                raise ValueError(raw)
            return low == "true"
        if t == "Path":
            return Path(raw).expanduser()
        return raw
    except ValueError as e:
        raise ConfigError(f"{key}={raw!r}: expected {t}") from e


_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(s: str) -> str:
    out: list[str] = []
    it = iter(s)
    for c in it:
        if c == "\\":
            nxt = next(it, "")
            out.append(_ESCAPES.get(nxt, nxt))
        else:
            out.append(c)
    return "".join(out)


def load_properties(text: str) -> dict[str, str]:
    """Parse Java ``.properties`` text: ``k=v``, ``k: v``, ``k v``, comments, continuations."""
    props: dict[str, str] = {}
    logical: list[str] = []
    for raw in text.splitlines():
        line = raw.lstrip()
        if not logical and (not line or line[0] in "#!"):
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            logical.append(line[:-1])
            continue
        logical.append(line)
        entry = "".join(logical)
        logical = []
        m = re.match(r"((?:\\.|[^=:\s\\])*)\s*[=:\s]?\s*(.*)$", entry)
        if m is None or not m.group(1):
            continue
        props[_unescape(m.group(1))] = _unescape(m.group(2).rstrip())
    return props
