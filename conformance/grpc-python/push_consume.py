"""Consume with the official 5.x Python client's PushConsumer over gRPC (QueryAssignment, then
ReceiveMessage/AckMessage; POP underneath) and report every delivery.

    python push_consume.py --endpoints 127.0.0.1:8081 --topic T --group G --run-id r1
                           --expect K [--fail-times 0] [--threads 4] [--tag '*']
                           [--linger-ms 1000] [--deadline-ms 60000]

The listener returns ``ConsumeResult.FAILURE`` for the first --fail-times deliveries of each key
of this run (counted here; it does not raise, so the client logs no error for it) and
``SUCCESS`` otherwise; the client acks a success, and on a failure changes the message's
invisible time to its retry back-off (standard group) or re-runs the listener locally (FIFO
group, as the server's Settings say). The scenario ends --linger-ms after K distinct keys
succeeded (--expect 0: after --linger-ms), or on SIGTERM, with ``shutdown()``. Messages of
other runs succeed and are reported as ``foreign``.

Events: start; ready; received {key, keys, body, msgId, topic, tag, properties, messageGroup,
deliveryAttempt, deliveryTimestamp, bornTimestamp, corrupted, recvMs, fail, thread, foreign};
done {received, succeeded}; fatal; timeout.
"""

from __future__ import annotations

import signal
import threading
import time
from collections import Counter
from typing import Any

from g5_common import (
    EXIT_FAILED,
    EXIT_OK,
    Deadline,
    check_home,
    config,
    emit,
    error_fields,
    message_fields,
    parse,
    parser,
    run,
    shutdown,
)

SCRIPT = "g5py-push"


def main() -> int:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--expect", type=int, required=True)
    p.add_argument("--fail-times", type=int, default=0)
    p.add_argument("--threads", type=int, default=4)
    p.add_argument("--tag", default="*")
    p.add_argument("--linger-ms", type=int, default=1000)
    args = parse(SCRIPT, p)
    lock = threading.Condition()
    deliveries: Counter[str] = Counter()
    succeeded: set[str] = set()
    received = 0
    deadline = Deadline(SCRIPT, args.deadline_ms,
                        lambda: {"received": received, "succeeded": len(succeeded)})
    home = check_home(SCRIPT)
    emit("start", script=SCRIPT, runId=args.run_id, topic=args.topic, group=args.group,
         expect=args.expect, failTimes=args.fail_times, endpoints=args.endpoints, home=home)

    from rocketmq import ConsumeResult, FilterExpression, MessageListener, PushConsumer

    class Listener(MessageListener):  # type: ignore[misc]
        def consume(self, message: Any) -> Any:
            nonlocal received
            fields = message_fields(message)
            key = fields["key"]
            ours = isinstance(key, str) and key.startswith(f"{args.run_id}-")
            with lock:
                received += 1
                deliveries[key] += 1
                fail = ours and deliveries[key] <= args.fail_times
                emit("received", fail=fail, foreign=not ours,
                     thread=threading.current_thread().name, **fields)
                if not fail and ours:
                    succeeded.add(key)
                    lock.notify_all()
            return ConsumeResult.FAILURE if fail else ConsumeResult.SUCCESS

    consumer = PushConsumer(config(args), args.group, Listener(),
                            {args.topic: FilterExpression(args.tag)},
                            consumption_thread_count=args.threads)
    deadline.phase = "starting the push consumer"
    try:
        consumer.startup()
    except Exception as e:  # noqa: BLE001
        emit("fatal", script=SCRIPT, phase=deadline.phase, **error_fields(e))
        return EXIT_FAILED
    emit("ready", script=SCRIPT)

    deadline.phase = f"consuming (expecting {args.expect} keys)"
    stop = threading.Event()  # SIGTERM: stop consuming now, shut down cleanly
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with lock:  # (the waits are bounded by the Deadline, which ends the process)
        while len(succeeded) < args.expect and not stop.is_set():
            lock.wait(0.2)
    linger_until = time.monotonic() + args.linger_ms / 1000
    while time.monotonic() < linger_until and not stop.is_set():
        time.sleep(min(0.2, max(0.0, linger_until - time.monotonic())))

    deadline.phase = "shutting the consumer down"
    closed = shutdown(consumer, 15)
    emit("done", script=SCRIPT, received=received, succeeded=len(succeeded), close=closed)
    return EXIT_OK


if __name__ == "__main__":
    run(SCRIPT, main)
