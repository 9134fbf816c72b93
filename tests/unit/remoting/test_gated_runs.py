"""Run handlers behind a server's gate: refused requests answered at once, the rest still handed
to the run together; the wrapped handlers compare equal when their runs do."""

from __future__ import annotations

from typing import cast

from rocketlite.protocol.codes import ResponseCode
from rocketlite.protocol.command import RemotingCommand
from rocketlite.remoting.connection import Connection
from rocketlite.remoting.gated_runs import GatedRun, GatedRuns


class FakeConn:
    def __init__(self) -> None:
        self.sent: list[RemotingCommand] = []

    def send(self, cmd: RemotingCommand) -> None:
        self.sent.append(cmd)


def gate(conn: Connection, cmd: RemotingCommand) -> RemotingCommand | None:
    if cmd.ext_fields.get("ok") == "1":
        return None
    return cmd.response(ResponseCode.NO_PERMISSION, "refused")


def test_refused_requests_are_answered_and_the_rest_run_together() -> None:
    runs: list[list[int]] = []

    def run(conn: Connection, cmds: list[RemotingCommand]) -> None:
        runs.append([c.opaque for c in cmds])

    cmds = []
    for i, ok in enumerate(["1", "0", "1", "1"]):
        cmd = RemotingCommand.request(310, {"ok": ok})
        cmd.opaque = i
        cmds.append(cmd)
    oneway = RemotingCommand.request(310, {"ok": "0"})
    oneway.flag |= 2  # refused too, but a oneway request gets no answer
    conn = FakeConn()
    view = GatedRuns({310: run, 320: run}, gate)
    view[310](cast(Connection, conn), [*cmds, oneway])
    assert runs == [[0, 2, 3]]
    assert [(r.opaque, r.code, r.remark) for r in conn.sent] == [(1, ResponseCode.NO_PERMISSION, "refused")]
    view[320](cast(Connection, conn), [cmds[1]])  # all refused: the run is not called
    assert runs == [[0, 2, 3]]


def test_views_read_through_and_compare_by_run() -> None:
    def run(conn: Connection, cmds: list[RemotingCommand]) -> None: ...

    table = {310: run}
    view = GatedRuns(table, gate)
    assert view.get(320) is None and len(view) == 1
    table[320] = run  # registered later: seen
    assert view[310] == view[320] and hash(view[310]) == hash(view[320])
    assert view[310] != GatedRun(lambda c, cmds: None, gate)
