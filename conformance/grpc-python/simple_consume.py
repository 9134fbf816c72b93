"""Receive with the official 5.x Python client's SimpleConsumer over gRPC (POP underneath) and
report every delivery.

    python simple_consume.py --endpoints 127.0.0.1:8081 --topic T --group G --run-id r1
                             --expect K [--batch 16] [--invisible-s 15] [--await-s 2]
                             [--first ack|skip|change|odd] [--change-to-s 2] [--tag '*']
                             [--linger-ms 0] [--deadline-ms 60000]

Loops ``receive(--batch, --invisible-s)`` (long polling --await-s) until K distinct keys of this
run were acked, then goes on receiving for --linger-ms (a redelivery or a duplicate shows then;
0, the default: it stops at once),
then ``shutdown()``. What it does with a message on its first delivery (``delivery_attempt`` 1):
  ack     ``ack`` it.
  skip    leave it: it comes back when its invisible time is over (with delivery_attempt 2).
  odd     leave it if its index i is odd (it counts as one of the K keys), ack it if even.
  change  ``change_invisible_duration(m, --change-to-s)`` and leave it: it comes back after the
          new duration, not after --invisible-s.
Every later delivery is acked. Messages of other runs (keys not starting with the run id) are
acked and reported as ``foreign``.

Events: start; ready; received {key, keys, body, msgId, topic, tag, properties, messageGroup,
deliveryAttempt, deliveryTimestamp, bornTimestamp, corrupted, recvMs, action}; acked {key,
deliveryAttempt}; changed {key, toS}; empty (a receive that returned nothing); receive_error
{name, message}; done {received, acked}; fatal; timeout.
"""

from __future__ import annotations

import time
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

SCRIPT = "g5py-simple"
MAX_RECEIVE_ERRORS = 20  # a broker that keeps failing receives fails the scenario


def main() -> int:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--expect", type=int, required=True)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--invisible-s", type=int, default=15)
    p.add_argument("--await-s", type=int, default=2)
    p.add_argument("--first", choices=("ack", "skip", "change", "odd"), default="ack")
    p.add_argument("--change-to-s", type=int, default=2)
    p.add_argument("--tag", default="*")
    p.add_argument("--linger-ms", type=int, default=0)
    args = parse(SCRIPT, p)
    received = acked = errors = 0
    done_keys: set[str] = set()
    deadline = Deadline(SCRIPT, args.deadline_ms,
                        lambda: {"received": received, "acked": len(done_keys)})
    home = check_home(SCRIPT)
    emit("start", script=SCRIPT, runId=args.run_id, topic=args.topic, group=args.group,
         expect=args.expect, first=args.first, endpoints=args.endpoints, home=home)

    from rocketmq import FilterExpression, SimpleConsumer

    consumer = SimpleConsumer(config(args), args.group, {args.topic: FilterExpression(args.tag)},
                              await_duration=args.await_s)
    deadline.phase = "starting the simple consumer"
    try:
        consumer.startup()
    except Exception as e:  # noqa: BLE001
        emit("fatal", script=SCRIPT, phase=deadline.phase, **error_fields(e))
        return EXIT_FAILED
    emit("ready", script=SCRIPT)

    def handle(m: Any) -> None:
        nonlocal received, acked
        fields = message_fields(m)
        key = fields["key"]
        ours = isinstance(key, str) and key.startswith(f"{args.run_id}-")
        attempt = fields["deliveryAttempt"] or 1
        action = args.first if ours and attempt == 1 else "ack"
        if action == "odd":  # leave odd indexes (they count as done), ack even ones
            action = "skip" if int(key.rsplit("-", 1)[1]) % 2 else "ack"
            if action == "skip":
                done_keys.add(key)
        received += 1
        emit("received", action=action, foreign=not ours, **fields)
        if action == "ack":
            consumer.ack(m)
            acked += 1
            if ours:
                done_keys.add(key)
            emit("acked", key=key, deliveryAttempt=attempt)
        elif action == "change":
            consumer.change_invisible_duration(m, args.change_to_s)
            emit("changed", key=key, toS=args.change_to_s)

    linger_until: float | None = None
    while linger_until is None or time.monotonic() < linger_until:
        deadline.phase = f"receiving ({len(done_keys)} of {args.expect} keys acked)"
        try:
            msgs = consumer.receive(args.batch, args.invisible_s)
        except Exception as e:  # noqa: BLE001 - MESSAGE_NOT_FOUND is an empty list, not this
            errors += 1
            emit("receive_error", **error_fields(e))
            if errors >= MAX_RECEIVE_ERRORS:
                emit("fatal", script=SCRIPT, phase=deadline.phase, **error_fields(e))
                shutdown(consumer, 10)
                return EXIT_FAILED
            time.sleep(0.2)
            continue
        if not msgs:
            emit("empty")
        for m in msgs:
            try:
                handle(m)
            except Exception as e:  # noqa: BLE001 - an ack or change that the broker refused
                emit("fatal", script=SCRIPT, phase=f"handling {message_fields(m)['key']}",
                     **error_fields(e))
                shutdown(consumer, 10)
                return EXIT_FAILED
        if linger_until is None and len(done_keys) >= args.expect:
            linger_until = time.monotonic() + args.linger_ms / 1000

    deadline.phase = "shutting the consumer down"
    closed = shutdown(consumer, 10)
    emit("done", script=SCRIPT, received=received, acked=acked, keys=len(done_keys), close=closed)
    return EXIT_OK


if __name__ == "__main__":
    run(SCRIPT, main)
