"""Helpers shared by the store tests (not a test module)."""

from __future__ import annotations

import time
from pathlib import Path

from rocketlite.formats.properties import encode_properties
from rocketlite.store.config import StoreConfig
from rocketlite.store.message import MessageToStore
from rocketlite.store.message_store import MessageStore


def small_config(root: Path, **extra: str) -> StoreConfig:
    props = {
        "storePathRootDir": str(root),
        "mappedFileSizeCommitLog": "8192",
        "mappedFileSizeConsumeQueue": "400",  # 20 units per file
        "maxHashSlotNum": "64",
        "maxIndexNum": "200",
        "flushIntervalCommitLog": "20",
        "flushIntervalConsumeQueue": "20",
        "warmMapedFileEnable": "false",
    }
    props.update(extra)
    return StoreConfig.from_properties(props)


def msg(topic: str = "TopicTest", body: bytes = b"hello", queue_id: int = 0,
        tags: str | None = "TagA", keys: str | None = None) -> MessageToStore:
    props: dict[str, str] = {}
    if tags:
        props["TAGS"] = tags
    if keys:
        props["KEYS"] = keys
    return MessageToStore(topic=topic, body=body, queue_id=queue_id,
                          properties=encode_properties(props), born_timestamp=1)


def wait_dispatched(store: MessageStore, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while store.dispatcher.dispatch_from < store.commitlog.max_offset:
        if time.monotonic() > deadline:
            raise AssertionError(
                f"dispatch stuck at {store.dispatcher.dispatch_from} < {store.commitlog.max_offset}"
            )
        time.sleep(0.002)


class Clock:
    """A clock in ms that a test moves by hand (``clock.t``): the store, the delay-level service
    and the timer wheel take it in place of the wall clock."""

    def __init__(self, t: int) -> None:
        self.t = t

    def __call__(self) -> int:
        return self.t
