"""Send numbered messages with the C++ 4.x client's Producer (``rocketmq==0.4.4``) at a steady
pace, across a broker failover, and report every acknowledgement and every failure.

    python failover_produce.py --namesrv 127.0.0.1:9876 --topic T --group PID --run-id r1
                               [--interval-ms 30] [--duration-ms 60000] [--send-timeout-ms 3000]
                               [--deadline-ms 90000]

``send_sync`` once per number: a failed send is reported and the next number is sent (no retry
of the same number), so "every acknowledged id is received" can be checked. It sends until
--duration-ms has passed or SIGTERM/SIGINT, then shuts the producer down. The wheel has no
setting for the route poll: the C++ client re-reads its topics' routes from the NameServer on its
own 30 s timer (the first 3 s after start), and a failed send does not trigger a lookup.

Message i has key ``<run-id>-<i>`` and body ``body_for(run-id, i)``. Events: start; ready;
sent {key, body, i, msgId, status, offset, ms}; send_failed {key, i, ms, name, message};
done {acked, failed, close}; fatal; timeout. ``ms`` is the wall clock (epoch ms) when the send
returned.
"""

from __future__ import annotations

import signal
import time

from cpp_common import (
    EXIT_FAILED,
    EXIT_OK,
    Deadline,
    body_for,
    call_within,
    check_home,
    emit,
    error_fields,
    parse,
    parser,
    run,
    sign_with_env_credentials,
)

SCRIPT = "cpp-failover-produce"


def main() -> int:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--interval-ms", type=int, default=30)
    p.add_argument("--duration-ms", type=int, default=60000)
    p.add_argument("--send-timeout-ms", type=int, default=3000)
    args = parse(SCRIPT, p)
    acked = failed = 0
    deadline = Deadline(SCRIPT, args.deadline_ms, lambda: {"acked": acked, "failed": failed})
    home = check_home(SCRIPT)
    emit("start", script=SCRIPT, runId=args.run_id, topic=args.topic, group=args.group,
         intervalMs=args.interval_ms, durationMs=args.duration_ms, home=home)
    stop_reason: list[str] = []

    def on_signal(signum: int, _frame: object) -> None:
        stop_reason.append(signal.Signals(signum).name)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    from rocketmq.client import Message, Producer  # after check_home: it loads librocketmq
    from rocketmq.exceptions import RocketMQException

    producer = Producer(args.group, timeout=args.send_timeout_ms)
    producer.set_namesrv_addr(args.namesrv)
    sign_with_env_credentials(producer)
    deadline.phase = "starting the producer"
    try:
        producer.start()
    except RocketMQException as e:  # the wrapper's ProducerStartFailed and kin
        emit("fatal", script=SCRIPT, phase=deadline.phase, **error_fields(e))
        return EXIT_FAILED
    emit("ready", script=SCRIPT)

    begin = time.monotonic()
    i = 0
    while not stop_reason and time.monotonic() - begin < args.duration_ms / 1000:
        key, body = f"{args.run_id}-{i}", body_for(args.run_id, i)
        msg = Message(args.topic)
        msg.set_keys(key)
        msg.set_tags("TagA")
        msg.set_body(body)
        deadline.phase = f"sending message {i} ({acked} acked, {failed} failed)"
        try:
            r = producer.send_sync(msg)
        except RocketMQException as e:  # ProducerSendSyncFailed carries the client's message
            failed += 1
            emit("send_failed", key=key, i=i, ms=int(time.time() * 1000), **error_fields(e))
        else:
            acked += 1
            emit("sent", key=key, body=body, i=i, msgId=r.msg_id, status=r.status.name,
                 offset=r.offset, ms=int(time.time() * 1000))
        i += 1
        time.sleep(args.interval_ms / 1000)

    deadline.phase = "shutting the producer down"
    closed = call_within(producer.shutdown, 10)
    emit("done", script=SCRIPT, reason=stop_reason[0] if stop_reason else "duration",
         acked=acked, failed=failed, close=closed)
    return EXIT_OK


if __name__ == "__main__":
    run(SCRIPT, main)
