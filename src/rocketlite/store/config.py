"""StoreConfig: the storage engine's settings, under Apache RocketMQ's key names.

================================  =====================================  ====================  =======
RocketMQ key                      field                                  default               unit
================================  =====================================  ====================  =======
storePathRootDir                  store_path_root_dir                    ~/store               path
mappedFileSizeCommitLog           mapped_file_size_commit_log            1073741824 (1 GiB)    bytes
mappedFileSizeConsumeQueue        mapped_file_size_consume_queue         6000000 (300000×20)   bytes
flushDiskType                     flush_disk_type                        ASYNC_FLUSH
flushIntervalCommitLog            flush_interval_commit_log              500                   ms
commitIntervalCommitLog           commit_interval_commit_log             200                   ms
flushIntervalConsumeQueue         flush_interval_consume_queue           1000                  ms
syncFlushTimeout                  sync_flush_timeout                     5000                  ms
transientStorePoolEnable          transient_store_pool_enable            false
warmMapedFileEnable               warm_mapped_file_enable                false
fileReservedTime                  file_reserved_time                     72                    hours
deleteWhen                        delete_when                            04                    hours
diskMaxUsedSpaceRatio             disk_max_used_space_ratio              75                    %
diskSpaceCleanForciblyRatio       disk_space_clean_forcibly_ratio        85                    %
cleanFileForciblyEnable           clean_file_forcibly_enable             true
diskSpaceWarningLevelRatio        disk_space_warning_level_ratio         90                    %
cleanResourceInterval             clean_resource_interval                10000                 ms
destroyMapedFileIntervalForcibly  destroy_mapped_file_interval_forcibly  120000                ms
deleteFileBatchMax                delete_file_batch_max                  10                    files
messageIndexEnable                message_index_enable                   true
maxHashSlotNum                    max_hash_slot_num                      5000000               slots
maxIndexNum                       max_index_num                          20000000              entries
maxMessageSize                    max_message_size                       4194304 (4 MiB)       bytes
brokerIP1                         broker_ip1                             127.0.0.1
listenPort                        listen_port                            10911
messageDelayLevel                 message_delay_level                    1s 5s ... 2h          levels
flushDelayOffsetInterval          flush_delay_offset_interval            10000                 ms
brokerRole                        broker_role                            ASYNC_MASTER
haListenPort                      ha_listen_port                         listenPort + 1        port
haMasterAddress                   ha_master_address                      (none)                host:port
haSendHeartbeatInterval           ha_send_heartbeat_interval             5000                  ms
haHousekeepingInterval            ha_housekeeping_interval               20000                 ms
haTransferBatchSize               ha_transfer_batch_size                 32768                 bytes
haMaxGapNotInSync                 ha_max_gap_not_in_sync                 268435456 (256 MiB)   bytes
================================  =====================================  ====================  =======

The ``ha*`` keys and ``brokerRole`` are 4.x master/slave replication's (``broker/ha``), kept in
MessageStoreConfig as in Java. ``brokerRole`` is ASYNC_MASTER, SYNC_MASTER or SLAVE; a SLAVE's
store refuses sends (``SlaveModeError``) and takes CommitLog bytes from its master only.
``haListenPort`` -1 (the default) means ``listenPort + 1`` (an ephemeral port when ``listenPort``
is 0); the master listens there for slaves. ``haMasterAddress`` is the master's HA address
(``host:haListenPort``), for a slave; without it the slave replicates from the address the
NameServer answers its registration with (the master's registered ``haServerAddr``).
``haSendHeartbeatInterval``: the master sends an empty frame, and the slave reports its offset,
at least this often; ``haHousekeepingInterval``: either side closes a connection that was silent
this long; ``haTransferBatchSize``: the largest body of one transfer frame.
``haMaxGapNotInSync`` (controller mode, ``broker/ha/role.py``): a slave whose acked offset is
more than this many bytes behind the master's max offset is left out of the SyncStateSet.

``messageDelayLevel`` is the delay level table (``formats/delay.py``): the dispatcher needs it for
the tag code (deliver time) of ``SCHEDULE_TOPIC_XXXX`` records, as in RocketMQ's MessageStoreConfig.
``flushDelayOffsetInterval`` is how often the broker's schedule service writes ``delayOffset.json``
(after a crash, what it delivered since the last write is delivered again).
``warmMapedFileEnable`` and ``destroyMapedFileIntervalForcibly`` keep RocketMQ's spelling.
``cleanFileForciblyEnable`` false keeps files younger than ``fileReservedTime`` even when disk use
passes ``diskSpaceCleanForciblyRatio`` (then only expired files go, as in RocketMQ).
``deleteWhen`` is one or more two-digit hours separated by ``;`` (``"04"``, ``"04;16"``).

The defaults are RocketMQ's. ``rocketlite start`` gives a new store smaller files
(``cli/server_commands.START_DEFAULTS``: 64 MiB segments, 500,000 slots, 2,000,000 entries).

``load_properties`` reads Java ``.properties`` text such as RocketMQ's ``broker.conf``;
``StoreConfig.from_properties`` reads only the keys above and ignores the rest, so a full broker.conf
works.
"""

from __future__ import annotations

import dataclasses
import os
import re
import typing
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from rocketlite.common.errors import ConfigError
from rocketlite.formats.delay import DEFAULT_DELAY_LEVELS, DelayLevelError, parse_delay_levels

_INT = re.compile(r"[+-]?[0-9]+", re.ASCII)
_HOUR = re.compile(r"[0-9]{2}", re.ASCII)
_HOST_PORT = re.compile(r"[^\s:]+:[0-9]{1,5}|\[[0-9a-fA-F:.]+\]:[0-9]{1,5}", re.ASCII)
_LONG_MIN, _LONG_MAX = -(1 << 63), (1 << 63) - 1
_RANGES: dict[str, tuple[int, int]] = {  # field: (lowest, highest) allowed
    "mapped_file_size_commit_log": (4096, _LONG_MAX),
    "mapped_file_size_consume_queue": (20, _LONG_MAX),
    "ha_max_gap_not_in_sync": (0, _LONG_MAX),
    "disk_max_used_space_ratio": (10, 95),
    "disk_space_clean_forcibly_ratio": (10, 95),
    "disk_space_warning_level_ratio": (10, 95),
    "flush_interval_commit_log": (1, _LONG_MAX),
    "commit_interval_commit_log": (1, _LONG_MAX),
    "flush_interval_consume_queue": (1, _LONG_MAX),
    "sync_flush_timeout": (1, _LONG_MAX),
    "file_reserved_time": (0, _LONG_MAX),
    "clean_resource_interval": (1, _LONG_MAX),
    "destroy_mapped_file_interval_forcibly": (0, _LONG_MAX),
    "delete_file_batch_max": (1, _LONG_MAX),
    "max_hash_slot_num": (1, _LONG_MAX),
    "max_index_num": (1, _LONG_MAX),
    "max_message_size": (1, _LONG_MAX),
    "listen_port": (0, 65535),
    "flush_delay_offset_interval": (1, _LONG_MAX),
    "ha_listen_port": (-1, 65535),
    "ha_send_heartbeat_interval": (1, _LONG_MAX),
    "ha_housekeeping_interval": (1, _LONG_MAX),
    "ha_transfer_batch_size": (1, 1 << 30),
}
BROKER_ROLES = ("ASYNC_MASTER", "SYNC_MASTER", "SLAVE")


def _key(name: str) -> dict[str, str]:
    return {"key": name}


def _default_root() -> Path:
    return Path.home() / "store"


@dataclass(slots=True, frozen=True)
class StoreConfig:
    """The store's settings; each field's RocketMQ key is in ``field.metadata["key"]``."""

    store_path_root_dir: Path = field(default_factory=_default_root, metadata=_key("storePathRootDir"))
    mapped_file_size_commit_log: int = field(default=1024 * 1024 * 1024,
                                             metadata=_key("mappedFileSizeCommitLog"))
    mapped_file_size_consume_queue: int = field(default=300_000 * 20,
                                                metadata=_key("mappedFileSizeConsumeQueue"))
    flush_disk_type: str = field(default="ASYNC_FLUSH", metadata=_key("flushDiskType"))
    flush_interval_commit_log: int = field(default=500, metadata=_key("flushIntervalCommitLog"))
    commit_interval_commit_log: int = field(default=200, metadata=_key("commitIntervalCommitLog"))
    flush_interval_consume_queue: int = field(default=1000, metadata=_key("flushIntervalConsumeQueue"))
    sync_flush_timeout: int = field(default=5000, metadata=_key("syncFlushTimeout"))
    transient_store_pool_enable: bool = field(default=False, metadata=_key("transientStorePoolEnable"))
    warm_mapped_file_enable: bool = field(default=False, metadata=_key("warmMapedFileEnable"))
    file_reserved_time: int = field(default=72, metadata=_key("fileReservedTime"))
    delete_when: str = field(default="04", metadata=_key("deleteWhen"))
    disk_max_used_space_ratio: int = field(default=75, metadata=_key("diskMaxUsedSpaceRatio"))
    disk_space_clean_forcibly_ratio: int = field(default=85, metadata=_key("diskSpaceCleanForciblyRatio"))
    clean_file_forcibly_enable: bool = field(default=True, metadata=_key("cleanFileForciblyEnable"))
    disk_space_warning_level_ratio: int = field(default=90, metadata=_key("diskSpaceWarningLevelRatio"))
    clean_resource_interval: int = field(default=10_000, metadata=_key("cleanResourceInterval"))
    destroy_mapped_file_interval_forcibly: int = field(default=120_000,
                                                       metadata=_key("destroyMapedFileIntervalForcibly"))
    delete_file_batch_max: int = field(default=10, metadata=_key("deleteFileBatchMax"))
    message_index_enable: bool = field(default=True, metadata=_key("messageIndexEnable"))
    max_hash_slot_num: int = field(default=5_000_000, metadata=_key("maxHashSlotNum"))
    max_index_num: int = field(default=20_000_000, metadata=_key("maxIndexNum"))
    max_message_size: int = field(default=1024 * 1024 * 4, metadata=_key("maxMessageSize"))
    broker_ip1: str = field(default="127.0.0.1", metadata=_key("brokerIP1"))
    listen_port: int = field(default=10911, metadata=_key("listenPort"))
    message_delay_level: str = field(default=DEFAULT_DELAY_LEVELS, metadata=_key("messageDelayLevel"))
    flush_delay_offset_interval: int = field(default=10_000,
                                             metadata=_key("flushDelayOffsetInterval"))
    broker_role: str = field(default="ASYNC_MASTER", metadata=_key("brokerRole"))
    ha_listen_port: int = field(default=-1, metadata=_key("haListenPort"))
    ha_master_address: str = field(default="", metadata=_key("haMasterAddress"))
    ha_send_heartbeat_interval: int = field(default=5000, metadata=_key("haSendHeartbeatInterval"))
    ha_housekeeping_interval: int = field(default=20_000, metadata=_key("haHousekeepingInterval"))
    ha_transfer_batch_size: int = field(default=32 * 1024, metadata=_key("haTransferBatchSize"))
    ha_max_gap_not_in_sync: int = field(default=256 * 1024 * 1024,
                                        metadata=_key("haMaxGapNotInSync"))

    def __post_init__(self) -> None:
        root: object = self.store_path_root_dir
        if isinstance(root, str | os.PathLike) and not isinstance(root, Path):
            object.__setattr__(self, "store_path_root_dir", Path(root))
        self.validate()

    def validate(self) -> None:
        """Raise ``ConfigError`` naming the RocketMQ key of the first unusable value."""
        for f in fields(self):
            key, value, typ = f.metadata["key"], getattr(self, f.name), _FIELD_TYPES[f.name]
            if not isinstance(value, typ) or (typ is int and isinstance(value, bool)):
                raise ConfigError(f"{key}={value!r}: expected {typ.__name__}")
        for name, (low, high) in _RANGES.items():
            number: int = getattr(self, name)
            if not low <= number <= high:
                bound = f"within {low}..{high}" if high < _LONG_MAX else f"at least {low}"
                raise ConfigError(f"{_FIELD_KEYS[name]}={number}: must be {bound}")
        if self.flush_disk_type not in ("SYNC_FLUSH", "ASYNC_FLUSH"):
            raise ConfigError(f"flushDiskType={self.flush_disk_type!r}: must be SYNC_FLUSH or ASYNC_FLUSH")
        cq = self.mapped_file_size_consume_queue
        if cq % 20:
            raise ConfigError(f"mappedFileSizeConsumeQueue={cq}: must be a multiple of 20 (one unit)")
        if not all(_HOUR.fullmatch(h) and int(h) < 24 for h in self.delete_when.split(";")):
            raise ConfigError(f"deleteWhen={self.delete_when!r}: must be two-digit hours 00..23 "
                              "separated by ';', like '04' or '04;16'")
        if not self.broker_ip1.strip():
            raise ConfigError("brokerIP1='': must not be empty")
        if self.broker_role not in BROKER_ROLES:
            raise ConfigError(f"brokerRole={self.broker_role!r}: must be one of "
                              f"{', '.join(BROKER_ROLES)}")
        if self.ha_master_address and not _HOST_PORT.fullmatch(self.ha_master_address):
            raise ConfigError(f"haMasterAddress={self.ha_master_address!r}: expected host:port")
        try:
            parse_delay_levels(self.message_delay_level)
        except DelayLevelError as e:
            raise ConfigError(f"messageDelayLevel={self.message_delay_level!r}: {e}") from e

    # -- derived -----------------------------------------------------------------------------

    @property
    def sync_flush(self) -> bool:
        return self.flush_disk_type == "SYNC_FLUSH"

    @property
    def is_slave(self) -> bool:
        return self.broker_role == "SLAVE"

    @property
    def ha_port(self) -> int:
        """The port the master's HA server listens on: ``haListenPort``, or ``listenPort + 1``
        (0, ephemeral, when ``listenPort`` is 0)."""
        if self.ha_listen_port >= 0:
            return self.ha_listen_port
        return self.listen_port + 1 if self.listen_port else 0

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
    def delay_levels_ms(self) -> tuple[int, ...]:
        """``messageDelayLevel`` parsed: the delay of level i+1 in ms."""
        return parse_delay_levels(self.message_delay_level)

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
        """Build from RocketMQ keys; unknown keys are ignored, values are stripped and typed."""
        return cls(**kwargs_from_properties(cls, props))

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> StoreConfig:
        return cls.from_properties(read_properties_file(path))

    def to_properties(self) -> dict[str, str]:
        """RocketMQ key -> value string; ``from_properties`` of it gives an equal config."""
        return to_properties(self)

    def replace(self, **changes: Any) -> StoreConfig:
        return dataclasses.replace(self, **changes)


_FIELD_TYPES: dict[str, type] = {
    name: typ for name, typ in typing.get_type_hints(StoreConfig).items() if isinstance(typ, type)
}
_FIELD_KEYS: dict[str, str] = {f.name: f.metadata["key"] for f in fields(StoreConfig)}
KEY_TO_FIELD: dict[str, str] = {key: name for name, key in _FIELD_KEYS.items()}
"""RocketMQ key -> StoreConfig field name."""


def kwargs_from_properties(cls: type, props: Mapping[str, str]) -> dict[str, Any]:
    """Constructor arguments of a config dataclass whose fields carry their RocketMQ key in
    ``metadata["key"]``: the keys present in ``props``, typed by the fields' annotations. A field
    may also be set under the other names in ``metadata["aliases"]`` (another RocketMQ version's
    name for the same setting); given under two names with different values it is a
    ConfigError naming both, as neither can be said to win."""
    types = typing.get_type_hints(cls)
    values: dict[str, Any] = {}
    for f in fields(cls):
        given = [k for k in (f.metadata["key"], *f.metadata.get("aliases", ())) if k in props]
        if not given:
            continue
        key = given[0]
        values[f.name] = parse_value(key, props[key].strip(), types[f.name])
        for other in given[1:]:
            if parse_value(other, props[other].strip(), types[f.name]) != values[f.name]:
                raise ConfigError(f"{key}={props[key].strip()} and {other}="
                                  f"{props[other].strip()}: one setting given twice with two "
                                  "values; keep one")
    return values


def key_aliases(cls: type) -> dict[str, str]:
    """Alias -> RocketMQ key of a config dataclass's fields (see ``kwargs_from_properties``)."""
    return {alias: f.metadata["key"] for f in fields(cls) for alias in f.metadata.get("aliases", ())}


def to_properties(config: Any) -> dict[str, str]:
    """RocketMQ key -> value string of a config dataclass (see ``kwargs_from_properties``)."""
    out: dict[str, str] = {}
    for f in fields(config):
        v = getattr(config, f.name)
        out[f.metadata["key"]] = ("true" if v else "false") if isinstance(v, bool) else str(v)
    return out


def read_properties_file(path: str | os.PathLike[str]) -> dict[str, str]:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"cannot read config file {path}: {e}") from e
    return load_properties(text)


def parse_value(key: str, raw: str, typ: type) -> object:
    """One properties value as ``typ`` (bool, int, Path or str); ConfigError names the key."""
    if typ is bool:
        low = raw.lower()
        if low not in ("true", "false"):
            raise ConfigError(f"{key}={raw!r}: expected true or false")
        return low == "true"
    if typ is int:
        if not _INT.fullmatch(raw):
            raise ConfigError(f"{key}={raw!r}: expected an integer")
        value = int(raw)
        if not _LONG_MIN <= value <= _LONG_MAX:
            raise ConfigError(f"{key}={raw!r}: out of range of a 64-bit integer")
        return value
    if typ is Path:
        if not raw:
            raise ConfigError(f"{key}='': expected a path")
        return Path(raw).expanduser()
    return raw


# -- Java .properties --------------------------------------------------------------------------

_WS = " \t\f"
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_LINE_BREAK = re.compile(r"\r\n|\r|\n")


def _logical_lines(text: str) -> Iterator[str]:
    """Join continued lines (odd number of trailing backslashes); drop comments and blanks."""
    pending: list[str] | None = None
    for raw in _LINE_BREAK.split(text):
        line = raw.lstrip(_WS)
        if pending is None and (not line or line[0] in "#!"):
            continue
        parts = pending if pending is not None else []
        if (len(line) - len(line.rstrip("\\"))) % 2:
            parts.append(line[:-1])
            pending = parts
            continue
        parts.append(line)
        pending = None
        yield "".join(parts)
    if pending is not None:  # a continuation at the end of the text
        yield "".join(pending)


def _unescape(s: str) -> str:
    out: list[str] = []
    i, n = 0, len(s)
    while i < n:
        c = s[i]
        i += 1
        if c != "\\" or i == n:
            out.append(c)
            continue
        c = s[i]
        i += 1
        if c == "u":
            digits = s[i : i + 4]
            if len(digits) != 4 or not all(d in "0123456789abcdefABCDEF" for d in digits):
                raise ConfigError(f"malformed \\uxxxx escape in {s!r}")
            out.append(chr(int(digits, 16)))
            i += 4
        else:
            out.append(_ESCAPES.get(c, c))
    return "".join(out)


def _split_entry(line: str) -> tuple[str, str]:
    """Split a logical line into key and value as ``java.util.Properties.load`` does."""
    n = len(line)
    key_len, value_start, has_sep, backslash = 0, n, False, False
    while key_len < n:
        c = line[key_len]
        if not backslash and c in "=:":
            value_start, has_sep = key_len + 1, True
            break
        if not backslash and c in _WS:
            value_start = key_len + 1
            break
        backslash = (not backslash) if c == "\\" else False
        key_len += 1
    while value_start < n:
        c = line[value_start]
        if c not in _WS:
            if has_sep or c not in "=:":
                break
            has_sep = True
        value_start += 1
    return _unescape(line[:key_len]), _unescape(line[value_start:])


def load_properties(text: str) -> dict[str, str]:
    """Parse Java ``.properties`` text.

    Separators ``key=value``, ``key: value`` and ``key value``; ``#``/``!`` comment lines; blank
    lines; a trailing backslash continues the entry on the next line (whose leading whitespace is
    dropped); escapes ``\\t \\n \\r \\f \\uXXXX`` and ``\\`` before any other character. As in Java,
    trailing whitespace of a value is kept (``StoreConfig.from_properties`` strips it); a later
    duplicate key wins.
    """
    props: dict[str, str] = {}
    for line in _logical_lines(text):
        key, value = _split_entry(line)
        props[key] = value
    return props
