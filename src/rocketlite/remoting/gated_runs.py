"""A server's run handlers behind its ``gate`` (``RemotingServer.gate``, the ACL check): each
request of a run is checked on its own; a refused one is answered at once, and the run handler
gets the others, still together (so an ACL broker keeps the batched send path)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

from rocketlite.protocol.command import RemotingCommand
from rocketlite.remoting.connection import Connection, RunHandler

Gate = Callable[[Connection, RemotingCommand], RemotingCommand | None]
"""None lets a request run; a response answers it instead."""


class GatedRun:
    """``run`` behind ``gate``; equal to another for the same ``run`` (a connection hands
    consecutive requests of different codes to one run when their handlers are equal)."""

    __slots__ = ("gate", "run")

    def __init__(self, run: RunHandler, gate: Gate) -> None:
        self.run = run
        self.gate = gate

    def __call__(self, conn: Connection, cmds: list[RemotingCommand]) -> None:
        gate = self.gate
        allowed: list[RemotingCommand] = []
        for cmd in cmds:
            refused = gate(conn, cmd)
            if refused is None:
                allowed.append(cmd)
            elif not cmd.is_oneway:
                conn.send(refused)
        if allowed:
            self.run(conn, allowed)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, GatedRun) and other.run == self.run

    def __hash__(self) -> int:
        return hash(self.run)


class GatedRuns(Mapping[int, RunHandler]):
    """A read-through view of the server's run handlers (registrations made later show), each
    behind ``gate``."""

    __slots__ = ("gate", "runs")

    def __init__(self, runs: Mapping[int, RunHandler], gate: Gate) -> None:
        self.runs = runs
        self.gate = gate

    def __getitem__(self, code: int) -> RunHandler:
        return GatedRun(self.runs[code], self.gate)

    def __iter__(self) -> Iterator[int]:
        return iter(self.runs)

    def __len__(self) -> int:
        return len(self.runs)
