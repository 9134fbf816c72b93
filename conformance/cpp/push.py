"""Consume a topic with the C++ 4.x client's PushConsumer (``rocketmq==0.4.4``), concurrently or
orderly, and report every message.

    python push.py --namesrv 127.0.0.1:9876 --topic T --group G --run-id r1 [--orderly]
                   [--expect 20] [--linger-ms 1500] [--deadline-ms 60000]

``PushConsumer(group, orderly=True)`` registers the wheel's orderly listener
(``RegisterMessageCallbackOrderly``): the C++ client then locks its queues at the broker with
LOCK_BATCH_MQ (41) before it pulls from them, keeps them locked, and unlocks them with
UNLOCK_BATCH_MQ (42) on shutdown; it consumes only queues the broker reported locked. The wheel
has no consumeFromWhere setting: a new group uses the C++ default CONSUME_FROM_LAST_OFFSET.

It stops cleanly (shutdown, which commits offsets) after --expect distinct keys and --linger-ms
more, or on SIGTERM/SIGINT; with --expect 0 only a signal stops it. Events: start; ready;
received {key, body, msgId, topic, queueId, queueOffset, reconsumeTimes, shard, seq, thread};
done {received, distinct}; fatal; timeout.
"""

from __future__ import annotations

import signal
import threading
import time

from cpp_common import (
    EXIT_FAILED,
    EXIT_OK,
    Deadline,
    call_within,
    check_home,
    emit,
    error_fields,
    parse,
    parser,
    run,
    sign_with_env_credentials,
    text,
)

SCRIPT = "cpp-push"


def main() -> int:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--orderly", action="store_true")
    p.add_argument("--expect", type=int, default=0)
    p.add_argument("--linger-ms", type=int, default=1500)
    p.add_argument("--threads", type=int, default=0, help="consume threads (0: client default)")
    args = parse(SCRIPT, p)
    lock = threading.Lock()
    received = 0
    keys: set[str] = set()
    enough = threading.Event()
    stop_reason: list[str] = []
    deadline = Deadline(SCRIPT, args.deadline_ms,
                        lambda: {"received": received, "distinct": len(keys), "expect": args.expect})
    home = check_home(SCRIPT)
    emit("start", script=SCRIPT, runId=args.run_id, topic=args.topic, group=args.group,
         orderly=args.orderly, expect=args.expect, home=home)

    from rocketmq.client import PushConsumer
    from rocketmq.exceptions import RocketMQException

    def on_message(m) -> None:  # type: ignore[no-untyped-def]
        nonlocal received
        key = text(m.keys)
        shard, seq = text(m.get_property("shard")), text(m.get_property("seq"))
        emit("received", key=key, body=text(m.body), msgId=m.id, topic=m.topic,
             queueId=m.queue_id, queueOffset=m.queue_offset, reconsumeTimes=m.reconsume_times,
             shard=int(shard) if shard else None, seq=int(seq) if seq else None,
             thread=threading.get_ident())
        with lock:
            received += 1
            if key:
                keys.add(key)
            if args.expect and len(keys) >= args.expect:
                enough.set()

    def on_signal(signum: int, _frame: object) -> None:
        stop_reason.append(signal.Signals(signum).name)
        enough.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    consumer = PushConsumer(args.group, orderly=args.orderly)
    consumer.set_namesrv_addr(args.namesrv)
    sign_with_env_credentials(consumer)
    if args.threads:
        consumer.set_thread_count(args.threads)
    consumer.subscribe(args.topic, on_message)
    deadline.phase = "starting the push consumer"
    try:
        consumer.start()
    except RocketMQException as e:  # PushConsumerStartFailed
        emit("fatal", script=SCRIPT, phase=deadline.phase, **error_fields(e))
        return EXIT_FAILED
    emit("ready", script=SCRIPT)
    deadline.phase = (f"waiting for {args.expect} distinct keys" if args.expect
                      else "consuming until SIGTERM")
    while not enough.wait(0.2):
        pass
    if not stop_reason:
        deadline.phase = f"lingering {args.linger_ms} ms after {args.expect} distinct keys"
        time.sleep(args.linger_ms / 1000)
    reason = stop_reason[0] if stop_reason else "expected keys received"
    deadline.phase = f"shutting the push consumer down ({reason})"
    closed = call_within(consumer.shutdown, 15)
    with lock:
        emit("done", script=SCRIPT, reason=reason, received=received, distinct=len(keys),
             close=closed)
    return EXIT_OK


if __name__ == "__main__":
    run(SCRIPT, main)
