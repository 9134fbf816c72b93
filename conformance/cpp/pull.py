"""Read a topic from queue offset 0 with the C++ 4.x client's PullConsumer (``rocketmq==0.4.4``)
and report every message: a check of what the broker stored that does not depend on where a push
consumer starts (the wheel exposes no consumeFromWhere setting).

    python pull.py --namesrv 127.0.0.1:9876 --topic T --group G --run-id r1 --expect 20
                   [--round-pause-ms 300] [--deadline-ms 60000]

``PullConsumer.pull(topic)`` fetches the topic's queues from the NameServer, then sends
PULL_MESSAGE (11) for each queue from offset 0 until the broker has no new message; this script
repeats such rounds (each resumes where the last stopped) until it has seen --expect distinct keys,
then runs one more round to catch extras. Events: start; received {key, body, msgId, topic,
queueId, queueOffset, tags}; round {round, received} (when it got more); done {received,
distinct}; client_error; fatal; timeout.
"""

from __future__ import annotations

import time

from cpp_common import (
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

SCRIPT = "cpp-pull"


def main() -> int:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--expect", type=int, required=True)
    p.add_argument("--round-pause-ms", type=int, default=300)
    args = parse(SCRIPT, p)
    received = 0
    keys: set[str] = set()
    deadline = Deadline(SCRIPT, args.deadline_ms,
                        lambda: {"received": received, "distinct": len(keys), "expect": args.expect})
    home = check_home(SCRIPT)
    emit("start", script=SCRIPT, runId=args.run_id, topic=args.topic, group=args.group,
         expect=args.expect, home=home)

    from rocketmq.client import PullConsumer
    from rocketmq.exceptions import RocketMQException

    consumer = PullConsumer(args.group)
    consumer.set_namesrv_addr(args.namesrv)
    sign_with_env_credentials(consumer)
    deadline.phase = "starting the pull consumer"
    consumer.start()

    errors_seen: set[str] = set()
    rounds = 0
    last_reported = -1
    extra_round_done = False
    while not extra_round_done:
        if len(keys) >= args.expect:
            extra_round_done = True  # this round only looks for extras
        deadline.phase = f"pull round {rounds} ({len(keys)} of {args.expect} distinct keys)"
        try:
            for m in consumer.pull(args.topic, max_num=32):
                received += 1
                key = text(m.keys)
                emit("received", key=key, body=text(m.body), msgId=m.id, topic=m.topic,
                     tags=text(m.tags), queueId=m.queue_id, queueOffset=m.queue_offset)
                if key:
                    keys.add(key)
        except RocketMQException as e:  # no route yet (PullConsumerFetchMQFailed), broker errors
            fields = error_fields(e)
            if fields["message"] not in errors_seen:
                errors_seen.add(fields["message"])
                emit("client_error", **fields)
            extra_round_done = False
        if received != last_reported:
            emit("round", round=rounds, received=received, distinct=len(keys))
            last_reported = received
        rounds += 1
        if not extra_round_done:
            time.sleep(args.round_pause_ms / 1000)

    deadline.phase = "shutting the pull consumer down"
    closed = call_within(consumer.shutdown, 10)
    emit("done", script=SCRIPT, received=received, distinct=len(keys), rounds=rounds, close=closed)
    return EXIT_OK


if __name__ == "__main__":
    run(SCRIPT, main)
