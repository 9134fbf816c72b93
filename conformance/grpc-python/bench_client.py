"""The load side of ``bench/grpc_bench.py``: the official 5.x Python client sending or receiving
N messages over gRPC as fast as its API allows, timing itself.

    python bench_client.py --endpoints 127.0.0.1:8081 --topic T --group G --run-id b1
                           --op send|receive --n 20000 [--window 64] [--body-bytes 128]

  send     ``Producer.send_async`` with --window sends in flight (a deque of futures: when it is
           full the oldest is awaited); one topic, the client's own queue round robin.
  receive  ``SimpleConsumer.receive(32, 30 s)`` in a loop, each message acked by a pool of
           --window threads (``ack_async`` of 5.1.2 returns no future, so ``ack`` runs there),
           until N messages were acked.

Events: ready (the client started; the timed part begins now); done {op, messages, seconds,
msgsPerS, errors}; fatal; timeout. The bench reads the broker's CPU time at ``ready`` and at
``done``.
"""

from __future__ import annotations

import collections
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from g5_common import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    Deadline,
    check_home,
    config,
    emit,
    error_fields,
    parse,
    parser,
    run,
    shutdown,
)

SCRIPT = "g5py-bench"
MAX_ERRORS = 100


def send(args: Any, deadline: Deadline) -> dict[str, Any]:
    from rocketmq import Message, Producer

    producer = Producer(config(args), (args.topic,))
    producer.startup()
    body = b"x" * args.body_bytes
    pending: collections.deque[Future[Any]] = collections.deque()
    errors = 0

    def settle(f: Future[Any]) -> None:
        nonlocal errors
        try:
            f.result()
        except Exception:  # counted; too many fail the run
            errors += 1
            if errors > MAX_ERRORS:
                raise

    emit("ready", op="send")
    deadline.phase = "sending"
    t0 = time.perf_counter()
    for _ in range(args.n):
        msg = Message()
        msg.topic = args.topic
        msg.body = body
        msg.tag = "Bench"
        pending.append(producer.send_async(msg))
        if len(pending) >= args.window:
            settle(pending.popleft())
    while pending:
        settle(pending.popleft())
    seconds = time.perf_counter() - t0
    shutdown(producer, 10)
    return {"messages": args.n - errors, "seconds": seconds, "errors": errors}


def receive(args: Any, deadline: Deadline) -> dict[str, Any]:
    from rocketmq import FilterExpression, SimpleConsumer

    consumer = SimpleConsumer(config(args), args.group, {args.topic: FilterExpression("*")},
                              await_duration=2)
    consumer.startup()
    acks = ThreadPoolExecutor(max_workers=args.window, thread_name_prefix="ack")
    pending: collections.deque[Future[Any]] = collections.deque()
    received = errors = 0
    emit("ready", op="receive")
    deadline.phase = "receiving"
    t0 = time.perf_counter()
    while received < args.n:
        try:
            msgs = consumer.receive(32, 30)
        except Exception:  # counted; too many fail the run
            errors += 1
            if errors > MAX_ERRORS:
                raise
            continue
        received += len(msgs)
        pending.extend(acks.submit(consumer.ack, m) for m in msgs)
        while len(pending) > 4 * args.window:
            pending.popleft().result()
    for f in pending:
        f.result()
    seconds = time.perf_counter() - t0
    acks.shutdown()
    shutdown(consumer, 10)
    return {"messages": received, "seconds": seconds, "errors": errors}


def main() -> int:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--op", choices=("send", "receive"), required=True)
    p.add_argument("--window", type=int, default=64)
    p.add_argument("--body-bytes", type=int, default=128)
    args = parse(SCRIPT, p)
    if args.window < 1 or args.body_bytes < 1:
        emit("fatal", script=SCRIPT, message="usage: --window and --body-bytes must be >= 1")
        return EXIT_USAGE
    deadline = Deadline(SCRIPT, args.deadline_ms)
    check_home(SCRIPT)
    try:
        result = (send if args.op == "send" else receive)(args, deadline)
    except Exception as e:  # noqa: BLE001
        emit("fatal", script=SCRIPT, phase=deadline.phase, **error_fields(e))
        return EXIT_FAILED
    emit("done", op=args.op, msgsPerS=result["messages"] / result["seconds"], **result)
    return EXIT_OK


if __name__ == "__main__":
    run(SCRIPT, main)
