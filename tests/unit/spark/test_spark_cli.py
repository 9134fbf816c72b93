"""``rocketlite spark`` without starting Spark: a missing pyspark, one-line job errors, help."""

from __future__ import annotations

import sys

import pytest
from typer.testing import CliRunner

from rocketlite.cli.main import app
from rocketlite.cli.spark_commands import _reason

runner = CliRunner()


def test_a_missing_pyspark_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch, tmp_path: object) -> None:
    monkeypatch.setitem(sys.modules, "pyspark", None)
    monkeypatch.setitem(sys.modules, "pyspark.sql", None)
    r = runner.invoke(app, ["spark", "stats", str(tmp_path)])
    assert r.exit_code == 2
    assert "pip install 'rocketlite[spark]'" in r.output


def test_help_tells_how_to_run_on_a_cluster() -> None:
    for command in ("export", "verify", "stats"):
        r = runner.invoke(app, ["spark", command, "--help"], terminal_width=200)
        assert r.exit_code == 0
        assert "spark://host:7077" in r.output and "every executor" in r.output


def test_export_needs_a_store_or_a_namesrv() -> None:
    r = runner.invoke(app, ["spark", "export", "--out", "x"])
    assert r.exit_code == 2 and "--namesrv" in r.output


def test_a_job_failure_is_reported_by_its_reason() -> None:
    text = """An exception was thrown from the Python worker. Please see the stack trace below.
Traceback (most recent call last):
  File "/x/store_scan.py", line 331, in decode_range
    _check(err or "", opts.on_corrupt)
rocketlite.common.errors.CorruptRecordError: CommitLog segment /s/commitlog/00000000000000000000 \
position 4904 (offset 4904): body CRC mismatch at position 4904

JVM stacktrace:
org.apache.spark.api.python.PythonException: Traceback (most recent call last):
\tat org.apache.spark.api.python.BasePythonRunner"""
    assert _reason(text).startswith("rocketlite.common.errors.CorruptRecordError: CommitLog segment")
    assert _reason("plain message") == "plain message"
