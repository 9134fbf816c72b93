"""Queues and index rebuilt from the CommitLog (the compiled dispatch plan and batched index, or
their pure twins under ROCKETLITE_PURE=1) hold the same bytes as the ones live dispatch wrote from
the appends' hints: records of every kind the plan takes or hands back (plain, tags not in ASCII,
the schedule topic, prepared and rolled-back transactions, keys), across segments."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from rocketlite.formats import message_record as rec
from rocketlite.formats.properties import encode_properties
from rocketlite.store.message import MessageBatch, MessageToStore
from rocketlite.store.message_store import MessageStore
from storehelp import small_config

REBUILD = """
import sys
from rocketlite.store.message_store import MessageStore
sys.path.insert(0, sys.argv[2])
from storehelp import small_config
MessageStore(small_config(__import__("pathlib").Path(sys.argv[1]))).start().shutdown()
"""


def _messages() -> list[MessageToStore]:
    out = []
    for i in range(60):
        props = {"TAGS": ["TagA", "\u00e9t\u00e9", ""][i % 3]}
        if i % 4 == 0:
            props["KEYS"] = f"k{i} k{i + 1}"
        if i % 5 == 0:
            props["UNIQ_KEY"] = f"{i:032X}"
        topic = "SCHEDULE_TOPIC_XXXX" if i % 11 == 0 else f"Topic{i % 2}"
        if topic.startswith("SCHEDULE"):
            props["DELAY"] = "2"
        sys_flag = [0, 0, 0, rec.SYSFLAG_TRANSACTION_PREPARED, rec.SYSFLAG_TRANSACTION_ROLLBACK,
                    rec.SYSFLAG_TRANSACTION_COMMIT][i % 6]
        out.append(MessageToStore(topic=topic, body=b"b" * (i % 7 * 30), queue_id=i % 3,
                                  properties=encode_properties(props), sys_flag=sys_flag,
                                  born_timestamp=1))
    return out


def _files(root: Path) -> list[bytes]:
    """Every ConsumeQueue and index file's bytes, in path order (index files by age)."""
    paths = sorted((root / "consumequeue").rglob("*")) + sorted((root / "index").glob("*"))
    return [p.read_bytes() for p in paths if p.is_file()]


def test_rebuilt_queues_and_index_match_live_dispatch(tmp_path: Path) -> None:
    live = tmp_path / "live"
    with MessageStore(small_config(live)) as store:
        msgs = _messages()
        for i in range(0, len(msgs), 7):
            store.put_messages(msgs[i : i + 7])
        props = [encode_properties({"TAGS": "T", "UNIQ_KEY": f"{i:032X}"}).encode()
                 for i in range(40)]
        store.put_batch(MessageBatch(topic="Topic1", queue_id=1, bodies=[b"x"] * 40,
                                     properties=props))
    want = _files(live)
    assert len(want) >= 10
    tests_dir = str(Path(__file__).resolve().parents[2])
    for pure in ("0", "1"):
        root = tmp_path / f"rebuilt-{pure}"
        shutil.copytree(live / "commitlog", root / "commitlog")
        subprocess.run([sys.executable, "-c", REBUILD, str(root), tests_dir], check=True,
                       env={**os.environ, "ROCKETLITE_PURE": pure}, timeout=120)
        assert _files(root) == want, f"ROCKETLITE_PURE={pure}"
