"""A real crash: the store runs in a subprocess doing SYNC_FLUSH writes and is killed with SIGKILL
mid-burst. After restart every acknowledged record must be there and intact."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from rocketlite.formats.properties import decode_properties
from rocketlite.store.message_store import MessageStore
from storehelp import small_config, wait_dispatched

pytestmark = pytest.mark.crash

WRITER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from rocketlite.formats.properties import encode_properties
    from rocketlite.store.config import StoreConfig
    from rocketlite.store.message import MessageToStore
    from rocketlite.store.message_store import MessageStore

    cfg = StoreConfig.from_properties({
        "storePathRootDir": sys.argv[1], "flushDiskType": "SYNC_FLUSH",
        "mappedFileSizeCommitLog": "65536", "mappedFileSizeConsumeQueue": "2000",
        "maxHashSlotNum": "1000", "maxIndexNum": "100000", "warmMapedFileEnable": "true",
    })
    store = MessageStore(cfg).start()
    i = 0
    out = sys.stdout
    while True:
        batch = [
            MessageToStore(topic="CrashTopic", queue_id=(i + j) % 3,
                           body=(b"%08d" % (i + j)) * (1 + (i + j) % 40),
                           properties=encode_properties({"KEYS": "k%d" % (i + j)}))
            for j in range(1 + i % 7)
        ]
        results = store.put_messages_sync(batch)
        for j, r in enumerate(results):
            out.write("%d %d %d %d\\n" % (i + j, r.commit_log_offset, r.size, r.queue_offset))
        out.flush()
        i += len(batch)
    """
)


def run_and_kill(root: Path, acks_before_kill: int) -> list[tuple[int, int, int, int]]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    acked: list[tuple[int, int, int, int]] = []
    deadline = time.monotonic() + 60
    with subprocess.Popen(
        [sys.executable, "-c", WRITER, str(root)], stdout=subprocess.PIPE, env=env
    ) as proc:
        assert proc.stdout is not None
        try:
            while len(acked) < acks_before_kill and time.monotonic() < deadline:
                line = proc.stdout.readline()
                if not line:
                    break
                a, b, c, d = (int(x) for x in line.split())
                acked.append((a, b, c, d))
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait(10)
        # Lines the child wrote before the kill were acknowledged too.
        for line in proc.stdout.read().splitlines():
            parts = line.split()
            if len(parts) == 4:
                a, b, c, d = (int(x) for x in parts)
                acked.append((a, b, c, d))
    return acked


@pytest.mark.parametrize("acks", [300, 1500])
def test_every_acknowledged_record_survives_sigkill(tmp_path: Path, acks: int) -> None:
    acked = run_and_kill(tmp_path, acks)
    assert len(acked) >= min(acks, 50), "the writer produced too little before the kill"
    assert (tmp_path / "abort").exists()
    cfg = small_config(
        tmp_path,
        mappedFileSizeCommitLog="65536",
        mappedFileSizeConsumeQueue="2000",
        maxHashSlotNum="1000",
        maxIndexNum="100000",
    )
    with MessageStore(cfg) as s:
        wait_dispatched(s)
        for n, offset, size, qoff in acked:
            m = s.look_message(offset)
            assert m is not None, f"acked message {n} at {offset} is missing"
            assert m.total_size == size
            assert m.body == (b"%08d" % n) * (1 + n % 40)
            assert m.queue_offset == qoff
            assert decode_properties(m.properties_text)["KEYS"] == f"k{n}"
        for q in range(3):
            mine = [a for a in acked if a[0] % 3 == q]
            assert s.max_offset_in_queue("CrashTopic", q) >= len(mine)
            got = s.get_message("CrashTopic", q, 0, max_count=100_000, max_bytes=1 << 40)
            assert len(got.messages) == s.max_offset_in_queue("CrashTopic", q)
        last = max(acked, key=lambda a: a[1])
        assert len(s.query_message("CrashTopic", f"k{last[0]}")) == 1
        s.put_messages_sync([])  # still writable
