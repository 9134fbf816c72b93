"""Run handlers (``RemotingServer.register(..., run=...)``): consecutive requests of the codes a
run handler was registered for reach it in one call, in order; other requests and responses
between them split the runs; what it hands back goes through the processor; a failing one gets
its requests answered SYSTEM_ERROR; registering a plain processor again drops it."""

from __future__ import annotations

import logging

import pytest

from remotinghelp import connect, written
from rocketlite.protocol.codes import ResponseCode
from rocketlite.protocol.command import RemotingCommand
from rocketlite.remoting.connection import Connection
from rocketlite.remoting.limits import ConnectionLimits
from rocketlite.remoting.server import RemotingServer


def _frames(*codes: int, oneway: int | None = None) -> bytes:
    out = []
    for i, code in enumerate(codes):
        cmd = RemotingCommand.request(code, {"i": str(i)})
        cmd.opaque = 100 + i
        if i == oneway:
            cmd.flag |= 0x2
        out.append(cmd.encode())
    return b"".join(out)


class Recorder:
    def __init__(self) -> None:
        self.runs: list[list[str]] = []
        self.single: list[str] = []

    def processor(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        self.single.append(cmd.ext_fields["i"])
        return cmd.response(0, f"one {cmd.ext_fields['i']}")

    def run(self, conn: Connection, cmds: list[RemotingCommand]) -> None:
        self.runs.append([c.ext_fields["i"] for c in cmds])
        for cmd in cmds:
            if cmd.ext_fields["i"] == "3":
                conn.handle_request(cmd)  # not taken: the processor answers it
            elif not cmd.is_oneway:
                conn.send(cmd.response(0, f"run {cmd.ext_fields['i']}"))


def _server(rec: Recorder) -> tuple[RemotingServer, Connection]:
    server = RemotingServer()
    server.register(10, rec.processor, run=rec.run)
    server.register(310, rec.processor, run=rec.run)
    server.register(11, rec.processor)
    conn = server._make_connection()
    connect(conn)
    return server, conn


async def test_consecutive_requests_go_to_the_run_handler_in_one_call() -> None:
    rec = Recorder()
    _, conn = _server(rec)
    conn.data_received(_frames(10, 310, 10, 10, 11, 310, 310, 99, 10, oneway=6))
    assert rec.runs == [["0", "1", "2", "3"], ["5", "6"], ["8"]]
    assert rec.single == ["3", "4"]
    replies = written(conn.transport)  # type: ignore[arg-type]
    assert [(r.opaque, r.code, r.remark) for r in replies] == [
        (100, 0, "run 0"), (101, 0, "run 1"), (102, 0, "run 2"), (103, 0, "one 3"),
        (104, 0, "one 4"), (105, 0, "run 5"),  # 106 is oneway: unanswered
        (107, ResponseCode.REQUEST_CODE_NOT_SUPPORTED, "remoting: request code 99 is not supported"),
        (108, 0, "run 8")]


async def test_a_failing_run_handler_answers_its_requests_with_system_error(
        caplog: pytest.LogCaptureFixture) -> None:
    server = RemotingServer()

    def broken(conn: Connection, cmds: list[RemotingCommand]) -> None:
        raise RuntimeError("bug")

    server.register(10, lambda conn, cmd: cmd.response(0), run=broken)
    conn = server._make_connection()
    connect(conn)
    with caplog.at_level(logging.ERROR):
        conn.data_received(_frames(10, 10, oneway=1))
    replies = written(conn.transport)  # type: ignore[arg-type]
    assert [(r.opaque, r.code) for r in replies] == [(100, ResponseCode.SYSTEM_ERROR)]
    assert "RuntimeError: bug" in (replies[0].remark or "")
    assert "run handler" in caplog.text


async def test_registering_a_plain_processor_drops_the_run_handler() -> None:
    rec = Recorder()
    server, conn = _server(rec)
    server.register(10, rec.processor)
    conn.data_received(_frames(10, 10, 310))
    assert rec.runs == [["2"]]
    assert rec.single == ["0", "1"]


async def test_a_request_with_too_many_ext_fields_is_refused_inside_a_run() -> None:
    rec = Recorder()
    server = RemotingServer(limits=ConnectionLimits(max_ext_fields=3))
    server.register(10, rec.processor, run=rec.run)
    conn = server._make_connection()
    connect(conn)
    wide = RemotingCommand.request(10, {"i": "1", "a": "", "b": "", "c": ""})
    wide.opaque = 101
    frames = _frames(10)
    conn.data_received(frames + wide.encode() + frames.replace(b'"i":"0"', b'"i":"2"'))
    assert rec.runs == [["0"], ["2"]]
    replies = written(conn.transport)  # type: ignore[arg-type]
    assert [(r.opaque, r.code) for r in replies] == [
        (100, 0), (101, ResponseCode.SYSTEM_ERROR), (100, 0)]
    assert replies[1].remark == "the request header has 4 ext fields, above maxExtFields (3)"
    assert server.counts.get("ext_fields") == 1


async def test_a_oneway_request_with_too_many_ext_fields_is_dropped_and_the_connection_goes_on(
) -> None:
    rec = Recorder()
    server = RemotingServer(limits=ConnectionLimits(max_ext_fields=3))
    server.register(11, rec.processor)
    conn = server._make_connection()
    connect(conn)
    wide = RemotingCommand.request(11, {"i": "1", "a": "", "b": "", "c": ""}, oneway=True)
    wide.opaque = 101
    conn.data_received(wide.encode() + _frames(11))
    assert rec.single == ["0"]  # the wide one was not run
    assert [(r.opaque, r.code) for r in written(conn.transport)] == [(100, 0)]  # type: ignore[arg-type]
    assert server.counts.get("ext_fields") == 1 and conn.is_open
