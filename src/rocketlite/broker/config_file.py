"""The broker's JSON config files (``topics.json``, ``consumerOffset.json``,
``subscriptionGroup.json``): read in any dialect fastjson writes, written atomically with a
``.bak`` copy of the previous version."""

from __future__ import annotations

import logging
from pathlib import Path

from rocketlite.common.errors import BodyError, ConfigError
from rocketlite.protocol import fastjson
from rocketlite.store.store_files import atomic_write_bytes, read_json

log = logging.getLogger(__name__)


def load(path: Path) -> object | None:
    """The parsed file, or its backup; None if neither exists or both are empty (Java's
    ``ConfigManager.load`` takes an empty file for a missing one). ConfigError if either has
    content but neither parses: starting without them would silently lose their content."""
    if not _has_content(path) and not _has_content(path.with_name(path.name + ".bak")):
        return None
    obj = read_json(path, fastjson.loads, (BodyError,))
    if obj is None:
        raise ConfigError(f"{path} and its backup are unreadable; fix or remove them")
    return obj


def save(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, data, fastjson.parses)


def save_or_log(path: Path, data: bytes) -> bool:
    """``save`` after a change (a topic or group created on the fly); a failure (a full disk) is
    logged, not raised: the old file stays, the change lives in memory and is written with the
    next change or at shutdown."""
    try:
        save(path, data)
    except OSError as e:
        log.error("cannot write %s (%s): the change is kept in memory, written later", path, e)
        return False
    return True


def _has_content(path: Path) -> bool:
    try:
        return path.stat().st_size > 0
    except FileNotFoundError:
        return False
