"""What metrics cost the broker's hot paths, per call, in this process (no broker, no sockets).

    python bench/metrics_cost.py

Prints the time of: ``BrokerMetrics.fold_in`` for an append of N one-topic messages (the send
path's usual append; per message = divided by N), a mixed-topic append, ``fold_out`` (once per
pull reply), and one ``rocketmq_rpc_latency`` observation through the processor wrapper
(``metrics_rpc``) against the bare processor call, and a whole PULL_MESSAGE of 32 messages
through the broker's processor with metrics off and on (an in-process broker). Compare with
the broker's µs per message that ``bench/broker_bench.py`` prints (``broker ... us/msg``), and with
``bench/broker_bench.py --metrics-port 0`` for the whole broker without metrics.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import timeit
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from rocketlite.broker.broker import Broker  # noqa: E402
from rocketlite.broker.config import BrokerConfig  # noqa: E402
from rocketlite.broker.metrics import BrokerMetrics  # noqa: E402
from rocketlite.broker.metrics_rpc import instrument  # noqa: E402
from rocketlite.formats.record_encode import AppendResult  # noqa: E402
from rocketlite.protocol.codes import PullSysFlag, RequestCode  # noqa: E402
from rocketlite.protocol.command import RemotingCommand  # noqa: E402
from rocketlite.protocol.headers import PullMessageRequestHeader  # noqa: E402
from rocketlite.remoting.server import RemotingServer  # noqa: E402
from rocketlite.store.config import StoreConfig  # noqa: E402
from rocketlite.store.message import MessageToStore  # noqa: E402


def per_call_us(fn: object, number: int) -> float:
    best = min(timeit.repeat(fn, number=number, repeat=5))  # type: ignore[arg-type]
    return best / number * 1e6


def pull_us(root: Path, metrics_port: int, batch: int = 32, pulls: int = 200) -> float:
    """µs per PULL_MESSAGE of ``batch`` messages through the broker's registered processor (a
    broker in this process, its store under ``root``, no sockets)."""
    b = Broker(BrokerConfig(namesrv_addr="", metrics_port=metrics_port),
               StoreConfig.from_properties({"storePathRootDir": str(root), "listenPort": "0",
                                            "mappedFileSizeCommitLog": str(64 << 20)}))
    b.store.start()
    try:
        b.topics.create_plain("T", 1)
        for _ in range(pulls):
            b.store.put_messages_sync([MessageToStore(topic="T", body=b"x" * 128)] * batch)
        proc = b.server.processors[int(RequestCode.PULL_MESSAGE)]
        cmds = [RemotingCommand.request(RequestCode.PULL_MESSAGE, PullMessageRequestHeader(
            consumerGroup="G", topic="T", queueId=0, queueOffset=i * batch, maxMsgNums=batch,
            sysFlag=int(PullSysFlag.SUBSCRIPTION), commitOffset=0, suspendTimeoutMillis=0,
            subVersion=0, subscription="*", expressionType="TAG").to_ext())
            for i in range(pulls)]

        def run() -> None:
            for cmd in cmds:
                proc(None, cmd)  # type: ignore[arg-type]
        return min(timeit.repeat(run, number=1, repeat=15)) / pulls * 1e6
    finally:
        b.store.shutdown()


def main() -> None:
    m = BrokerMetrics()
    for n in (1, 8, 64):
        msgs = [MessageToStore(topic="T", body=b"x" * 128) for _ in range(n)]
        results = [AppendResult(i * 300, 300, i, 0) for i in range(n)]
        us = per_call_us(lambda msgs=msgs, results=results: m.fold_in(msgs, results), 20_000)
        print(f"fold_in, one topic, {n:>2} messages  {us:6.2f} us per append  "
              f"{us / n:5.3f} us per message")
    mixed = [MessageToStore(topic=f"T{i % 4}", body=b"x") for i in range(64)]
    results = [AppendResult(i * 300, 300, i, 0) for i in range(64)]
    us = per_call_us(lambda: m.fold_in(mixed, results), 5_000)
    print(f"fold_in, 4 topics, 64 messages    {us:6.2f} us per append  {us / 64:5.3f} us per message")
    us = per_call_us(lambda: m.fold_out("T", "G", 32, 9600), 200_000)
    print(f"fold_out                           {us:6.2f} us per pull reply")

    server = RemotingServer()
    reply = RemotingCommand.request(0, {})
    for code in (11, 14):  # PULL_MESSAGE (sampled), QUERY_CONSUMER_OFFSET (every one timed)
        server.register(code, lambda conn, cmd: reply)
    bare = {code: server.processors[code] for code in (11, 14)}
    instrument(server, m.rpc)
    for code, what in ((14, "every request timed"), (11, "a pull: one in 8 timed")):
        cmd = RemotingCommand.request(code, {})
        us_bare = per_call_us(lambda b=bare[code], c=cmd: b(None, c), 200_000)
        timed = server.processors[code]
        us_timed = per_call_us(lambda t=timed, c=cmd: t(None, c), 200_000)
        print(f"rpc latency, {what:<22}{us_timed - us_bare:6.2f} us per request")

    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(3):  # alternate, best of each: the machine's other load moves both
            off = pull_us(Path(tmp) / "off", 0)
            on = pull_us(Path(tmp) / "on", 5557)
            shutil.rmtree(Path(tmp) / "off")
            shutil.rmtree(Path(tmp) / "on")
            print(f"pull of 32 through the processor    off {off:6.2f} us  on {on:6.2f} us  "
                  f"(+{(on - off) / off * 100:.1f}%)")


if __name__ == "__main__":
    main()
