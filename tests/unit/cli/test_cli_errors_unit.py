"""``rocketlite.cli.errors``: which failures are expected, their one-line reasons, and --debug."""

from __future__ import annotations

import errno

import pytest
import typer

from rocketlite.cli import errors
from rocketlite.cli.spark_commands import reported_errors
from rocketlite.common.errors import ConfigError, StoreLockedError

BIND = OSError(errno.EADDRINUSE, "error while attempting to bind on address ('0.0.0.0', 9876): "
                                 "address already in use")


@pytest.fixture(autouse=True)
def no_debug(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(errors._State, "debug", False)


def wrapped_bind() -> OSError:
    try:
        raise BIND
    except OSError as e:
        try:
            raise OSError(f"the gRPC front cannot listen on 0.0.0.0:8081: {e}") from e
        except OSError as outer:
            return outer


def test_expected_failures() -> None:
    assert errors.is_expected(ConfigError("x"))
    assert errors.is_expected(StoreLockedError("x"))
    assert errors.is_expected(BIND)
    assert errors.is_expected(wrapped_bind())  # no errno of its own: its cause's
    assert errors.is_expected(FileNotFoundError(errno.ENOENT, "no store directory", "/x"))
    assert not errors.is_expected(OSError("no errno, no cause"))
    assert not errors.is_expected(KeyError("a bug"))


def test_reasons_are_one_line_and_name_the_port() -> None:
    assert errors.reason(BIND) == "port 9876 is already in use (another process listens there)"
    assert errors.reason(wrapped_bind()) == (
        "the gRPC front cannot listen on 0.0.0.0:8081: port 9876 is already in use "
        "(another process listens there)")
    assert errors.reason(ConfigError("a\n  b")) == "a b"
    assert errors.reason(FileNotFoundError(errno.ENOENT, "no store directory", "/x")) == \
        "no store directory: '/x'"


def test_reported_prints_one_line_and_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(typer.Exit) as e, errors.reported():
        raise ConfigError("listenPort='x': expected an integer")
    assert e.value.exit_code == 1
    assert capsys.readouterr().err == "error: listenPort='x': expected an integer\n"


def test_debug_and_bugs_keep_the_traceback(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError), errors.reported(debug=True):
        raise ConfigError("x")
    with pytest.raises(KeyError), errors.reported():
        raise KeyError("a bug")
    errors.set_debug(False)  # a command's own --debug not given: a root --debug still counts
    monkeypatch.setattr(errors._State, "debug", True)
    errors.set_debug(False)
    with pytest.raises(ConfigError), errors.reported():
        raise ConfigError("x")


def test_spark_errors_take_the_shared_path(monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(typer.Exit), reported_errors():
        raise ValueError("bad option")
    assert capsys.readouterr().err == "error: bad option\n"
    monkeypatch.setattr(errors._State, "debug", True)
    with pytest.raises(ValueError), reported_errors():
        raise ValueError("bad option")


def test_each_command_line_starts_without_an_earlier_debug(monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from rocketlite.cli.main import app

    monkeypatch.setattr(errors._State, "debug", True)  # left by an earlier `rocketlite --debug`
    CliRunner().invoke(app, ["store", "inspect", "/nonexistent/store"])
    assert not errors.debugging()
    CliRunner().invoke(app, ["--debug", "store", "inspect", "/nonexistent/store"])
    assert errors.debugging()
