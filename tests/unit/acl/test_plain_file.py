"""plain_acl.yml reloads: a change takes effect at the next poll; a broken file keeps the last good
configuration and says why."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from rocketlite.acl.plain_file import PlainAclFile, acl_path
from rocketlite.common.errors import FormatError

GOOD = """
accounts:
  - accessKey: RocketMQ
    secretKey: "12345678"
    defaultTopicPerm: PUB
"""


def write(path: Path, text: str, bump: int) -> None:
    path.write_text(text)
    st = path.stat()  # a distinct mtime even within the file system's time resolution
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + bump * 1_000_000_000))


def test_reload_on_change_and_keep_last_good(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "plain_acl.yml"
    write(path, GOOD, 0)
    f = PlainAclFile(path)
    assert f.config.accounts["RocketMQ"].default_topic_perm == 4
    assert f.poll() is False  # unchanged
    write(path, GOOD.replace("PUB", "SUB"), 1)
    assert f.poll() is True
    assert f.config.accounts["RocketMQ"].default_topic_perm == 8
    good = f.config
    with caplog.at_level(logging.ERROR):
        write(path, "accounts: [ {accessKey: RocketMQ, secretKey: ", 2)  # not YAML
        assert f.poll() is False
    assert f.config is good
    assert "not reloaded, the previous configuration stays in force" in caplog.text
    assert f.last_error is not None and "not YAML" in f.last_error
    write(path, "accounts:\n  - accessKey: ab\n    secretKey: cd\n", 3)  # YAML, bad schema
    assert f.poll() is False and f.config is good
    assert "shorter than 6" in (f.last_error or "")
    path.unlink()
    assert f.poll() is False and f.config is good
    write(path, GOOD, 4)
    assert f.poll() is True and f.reloads == 2 and f.last_error is None


def test_a_bad_file_at_start_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "plain_acl.yml"
    path.write_text("accounts: 3\n")
    with pytest.raises(FormatError, match="accounts is not a list"):
        PlainAclFile(path)
    with pytest.raises(FileNotFoundError):
        PlainAclFile(tmp_path / "missing.yml")


def test_default_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("ROCKETMQ_HOME", str(tmp_path))
    assert acl_path() == tmp_path / "conf" / "plain_acl.yml"
    assert acl_path("/etc/x.yml") == Path("/etc/x.yml")
    monkeypatch.delenv("ROCKETMQ_HOME")
    assert acl_path() == Path("conf/plain_acl.yml")
