"""The broker's JSON config files (``topics.json``, ``consumerOffset.json``,
``subscriptionGroup.json``): read in any dialect fastjson writes, written atomically with a
``.bak`` copy of the previous version."""

from __future__ import annotations

from pathlib import Path

from rocketlite.common.errors import BodyError, ConfigError
from rocketlite.protocol import fastjson
from rocketlite.store.store_files import atomic_write_bytes, read_json


def load(path: Path) -> object | None:
    """The parsed file, or its backup; None if neither exists. ConfigError if both exist in
    some form but neither parses: starting without them would silently lose their content."""
    if not path.exists() and not path.with_name(path.name + ".bak").exists():
        return None
    obj = read_json(path, fastjson.loads, (BodyError,))
    if obj is None:
        raise ConfigError(f"{path} and its backup are unreadable; fix or remove them")
    return obj


def save(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, data, fastjson.parses)
