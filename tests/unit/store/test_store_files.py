"""store_files: the lock (across processes), atomic JSON with .bak, the abort marker, layout, disk."""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from rocketlite.common.errors import StoreLockedError
from rocketlite.store import store_files as sf
from rocketlite.store.config import StoreConfig

SRC = str(Path(__file__).resolve().parents[3] / "src")


def run_python(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": SRC}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args], env=env,
                          capture_output=True, text=True, timeout=60, check=False)


TRY_LOCK = """
    import sys
    from pathlib import Path
    from rocketlite.common.errors import StoreLockedError
    from rocketlite.store.store_files import StoreLock
    lock = StoreLock()
    try:
        lock.acquire(Path(sys.argv[1]))
    except StoreLockedError as e:
        print(e)
        sys.exit(3)
    print("acquired")
    lock.release()
"""


# -- lock --------------------------------------------------------------------------------------


def test_lock_writes_pid_and_refuses_another_process(tmp_path: Path) -> None:
    lock = sf.StoreLock()
    lock.acquire(tmp_path)
    try:
        assert (tmp_path / "lock").read_text().strip() == str(os.getpid())
        r = run_python(TRY_LOCK, str(tmp_path))
        assert r.returncode == 3, r.stderr
        assert str(tmp_path) in r.stdout
        assert f"pid {os.getpid()}" in r.stdout
    finally:
        lock.release()
    assert not lock.locked
    r = run_python(TRY_LOCK, str(tmp_path))
    assert (r.returncode, r.stdout.strip()) == (0, "acquired"), r.stderr


def test_lock_held_by_a_subprocess_refuses_this_process(tmp_path: Path) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent("""
            import sys
            from pathlib import Path
            from rocketlite.store.store_files import StoreLock
            StoreLock().acquire(Path(sys.argv[1]))
            print("locked", flush=True)
            sys.stdin.read()
        """), str(tmp_path)],
        env={**os.environ, "PYTHONPATH": SRC}, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        with pytest.raises(StoreLockedError, match=re.escape(str(tmp_path))) as info:
            sf.StoreLock().acquire(tmp_path)
        assert f"pid {holder.pid}" in str(info.value)
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=30)
        assert holder.stdout is not None
        holder.stdout.close()
    # the kernel dropped the lock with the process
    lock = sf.StoreLock()
    lock.acquire(tmp_path)
    lock.release()


def test_second_lock_in_the_same_process_is_refused(tmp_path: Path) -> None:
    first = sf.StoreLock()
    first.acquire(tmp_path)
    try:
        with pytest.raises(StoreLockedError, match=re.escape(str(tmp_path))):
            sf.StoreLock().acquire(tmp_path)
        with pytest.raises(StoreLockedError, match="already holds"):
            first.acquire(tmp_path)
    finally:
        first.release()
        first.release()  # a second release does nothing


# -- JSON --------------------------------------------------------------------------------------


def test_atomic_write_json_sorted_indented_and_no_tmp_left(tmp_path: Path) -> None:
    path = tmp_path / "topics.json"
    sf.atomic_write_json(path, {"b": 1, "a": [1, 2]})
    assert path.read_text() == '{\n  "a": [\n    1,\n    2\n  ],\n  "b": 1\n}'
    assert not (tmp_path / "topics.json.tmp").exists()
    assert not (tmp_path / "topics.json.bak").exists()  # nothing to back up yet
    assert sf.read_json(path) == {"a": [1, 2], "b": 1}


def test_atomic_write_json_keeps_bak(tmp_path: Path) -> None:
    path = tmp_path / "consumerOffset.json"
    sf.atomic_write_json(path, {"v": 1})
    sf.atomic_write_json(path, {"v": 2})
    assert sf.read_json(tmp_path / "consumerOffset.json.bak") == {"v": 1}
    sf.atomic_write_json(path, {"v": 3})
    assert sf.read_json(path) == {"v": 3}
    assert sf.read_json(tmp_path / "consumerOffset.json.bak") == {"v": 2}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["consumerOffset.json", "consumerOffset.json.bak"]


def test_read_json_falls_back_to_bak(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "delayOffset.json"
    sf.atomic_write_json(path, {"v": 1})
    sf.atomic_write_json(path, {"v": 2})
    path.write_bytes(b'{"v": 2, "trunc')  # torn by something other than atomic_write_json
    with caplog.at_level(logging.WARNING, logger="rocketlite.store.store_files"):
        assert sf.read_json(path) == {"v": 1}
    assert any("backup" in r.getMessage() for r in caplog.records)
    # writing over a corrupt file keeps the good backup rather than copying the corrupt bytes
    sf.atomic_write_json(path, {"v": 3})
    assert sf.read_json(path) == {"v": 3}
    assert sf.read_json(tmp_path / "delayOffset.json.bak") == {"v": 1}


def test_read_json_missing_main_uses_bak_and_none_when_nothing(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    assert sf.read_json(path) is None
    (tmp_path / "x.json.bak").write_bytes(b"[1]")
    assert sf.read_json(path) == [1]
    (tmp_path / "x.json.bak").write_bytes(b"")
    path.write_bytes(b"\xff\xfe not json")
    assert sf.read_json(path) is None


def test_atomic_write_json_unserializable_leaves_file_alone(tmp_path: Path) -> None:
    path = tmp_path / "a.json"
    sf.atomic_write_json(path, [1])
    with pytest.raises(TypeError):
        sf.atomic_write_json(path, {"x": object()})
    assert sf.read_json(path) == [1]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json"]


# -- abort marker, layout, disk ------------------------------------------------------------------


def test_abort_file_helpers(tmp_path: Path) -> None:
    abort = tmp_path / "abort"
    assert not sf.abort_file_exists(abort)
    sf.create_abort_file(abort)
    assert sf.abort_file_exists(abort)
    sf.create_abort_file(abort)  # idempotent
    sf.remove_abort_file(abort)
    assert not sf.abort_file_exists(abort)
    sf.remove_abort_file(abort)  # a missing marker is fine


def test_ensure_layout(tmp_path: Path) -> None:
    cfg = StoreConfig(store_path_root_dir=tmp_path / "deep" / "store")
    sf.ensure_layout(cfg)
    sf.ensure_layout(cfg)  # idempotent
    assert sorted(p.name for p in cfg.store_path_root_dir.iterdir()) == [
        "commitlog", "config", "consumequeue", "index"]


def test_disk_usage_ratio(tmp_path: Path) -> None:
    ratio = sf.disk_usage_ratio(tmp_path)
    assert 0.0 <= ratio <= 1.0
    assert ratio == round(ratio, 2)  # whole percent, as RocketMQ
    st = os.statvfs(tmp_path)
    used = (st.f_blocks - st.f_bfree) * st.f_frsize
    entire = used + st.f_bavail * st.f_frsize
    if entire:
        assert abs(ratio - used / entire) <= 0.011
    # a path not created yet is measured on its nearest existing parent
    assert sf.disk_usage_ratio(tmp_path / "not" / "yet") == pytest.approx(ratio, abs=0.011)
