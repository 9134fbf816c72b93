"""``rocketmq_rpc_latency``: the broker's Remoting processors, timed.

``instrument`` wraps every processor and run handler a ``RemotingServer`` has once the broker
registered them (only when metrics are on: off, the dispatch is untouched). A processor that
answers at once is observed with its reply's code; one that answers later itself (a queued
send: the batch's append answers it; a held pull) with SUCCESS when it hands the request over;
a coroutine when it completes. A run of sends (``SendProcessor.send_run``) is one observation
of the run's time, under its first request's code (the requests the run hands back to the
processor, such as a send that creates its topic, are part of it, not observed again). Oneway
requests are observed with result ``oneway``; a processor that raises with
``process_request_failed`` and SYSTEM_ERROR. The consume path's requests (``SAMPLED``: pulls,
pops, acks) are sampled: one in ``SAMPLE_EVERY`` per request code is timed and counted that many
times, so the histogram's count stays the number of requests (to within ``SAMPLE_EVERY``) and its
quantiles those of the sample; every other request is timed.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Awaitable
from time import perf_counter
from typing import Any

from rocketlite.broker.metrics import Histogram, RpcLatency
from rocketlite.protocol.codes import RPC_ONEWAY, RequestCode, ResponseCode
from rocketlite.protocol.command import RemotingCommand
from rocketlite.remoting.connection import Connection, RunHandler
from rocketlite.remoting.server import Processor, RemotingServer

__all__ = ["instrument"]

_SUCCESS = int(ResponseCode.SUCCESS)
_SYSTEM_ERROR = int(ResponseCode.SYSTEM_ERROR)
_RPC_ONEWAY = int(RPC_ONEWAY)
_OK, _ONEWAY = "success", "oneway"

SAMPLE_EVERY = 8
SAMPLED = frozenset(int(c) for c in (
    RequestCode.PULL_MESSAGE, RequestCode.LITE_PULL_MESSAGE, RequestCode.POP_MESSAGE,
    RequestCode.ACK_MESSAGE, RequestCode.BATCH_ACK_MESSAGE,
    RequestCode.CHANGE_MESSAGE_INVISIBLETIME))
"""The consume path's request codes, one per few messages: one in ``SAMPLE_EVERY`` is timed
(a full observation costs about 1.5 µs in a loaded broker, 4 % of a pull of 32 messages)."""


def instrument(server: RemotingServer, rpc: RpcLatency) -> None:
    """Time every processor and run handler registered on ``server`` so far."""
    in_run = [False]  # a run handler is running: its requests are its observation
    for code, proc in list(server.processors.items()):
        server.processors[code] = _timed(proc, rpc, in_run, SAMPLE_EVERY if code in SAMPLED else 1)
    # one wrapper per run handler (equal bound methods are one): its codes still form one run
    timed_runs: dict[RunHandler, RunHandler] = {}
    for code, run in list(server.run_processors.items()):
        if run not in timed_runs:
            timed_runs[run] = _timed_run(run, rpc, in_run)
        server.run_processors[code] = timed_runs[run]


def _timed(proc: Processor, rpc: RpcLatency, in_run: list[bool], every: int) -> Processor:
    """``proc``, one call in ``every`` observed (the first, then every ``every``-th), counted
    ``every`` times; the observation inlined (one dict lookup, one bisect)."""
    by_key = rpc.by_key
    bounds = rpc.bounds
    mask = every - 1  # a power of two
    calls = [0]

    def timed(conn: Connection, cmd: RemotingCommand) -> Any:
        if in_run[0]:
            return proc(conn, cmd)
        n = calls[0]
        calls[0] = n + 1
        if n & mask:
            return proc(conn, cmd)
        t0 = perf_counter()
        try:
            result = proc(conn, cmd)
        except Exception:
            rpc.observe_ms(cmd.code, _SYSTEM_ERROR, (perf_counter() - t0) * 1000, False,
                           "process_request_failed", every)
            raise
        if result is None:
            code = _SUCCESS
        elif isinstance(result, RemotingCommand):
            code = result.code
        else:
            return _awaited(result, cmd, t0, rpc.observe_ms, every)
        ms = (perf_counter() - t0) * 1000
        key = (cmd.code, code, False, _ONEWAY if cmd.flag & _RPC_ONEWAY else _OK)
        hist = by_key.get(key)
        if hist is None:
            hist = by_key[key] = Histogram(bounds)
        hist.counts[bisect_left(bounds, ms)] += every
        hist.sum += ms * every
        return result

    return timed


async def _awaited(result: Awaitable[RemotingCommand | None], cmd: RemotingCommand, t0: float,
                   observe: Any, weight: int) -> RemotingCommand | None:
    try:
        reply = await result
    except Exception:
        observe(cmd.code, _SYSTEM_ERROR, (perf_counter() - t0) * 1000, False,
                "process_request_failed", weight)
        raise
    observe(cmd.code, _SUCCESS if reply is None else reply.code, (perf_counter() - t0) * 1000,
            False, "oneway" if cmd.is_oneway else "success", weight)
    return reply


def _timed_run(run: RunHandler, rpc: RpcLatency, in_run: list[bool]) -> RunHandler:
    observe = rpc.observe_ms

    def timed(conn: Connection, cmds: list[RemotingCommand]) -> None:
        t0 = perf_counter()
        in_run[0] = True
        try:
            run(conn, cmds)
        finally:
            in_run[0] = False
        observe(cmds[0].code, _SUCCESS, (perf_counter() - t0) * 1000, False, "success")

    return timed
