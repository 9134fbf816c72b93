"""Send N messages with the official 5.x Python client's Producer over gRPC and report each.

    python produce.py --endpoints 127.0.0.1:8081 --topic T --group P --n 20 --run-id r1
                      [--mode normal|fifo|delay|transaction] [--tag TagA] [--start 0]
                      [--groups 3] [--delay-s 3] [--tx commit,rollback,unknown]
                      [--checker commit|rollback] [--wait-checks K] [--deadline-ms 60000]

Message i (start <= i < start+n) has keys ``<run-id>-<i>`` and ``<run-id>-<i>#k2``, tag --tag,
body ``body_for(run-id, i)`` and the user properties ``run`` (the run id) and ``idx`` (i). --group
names nothing on the wire (5.x producers have no group); it is accepted like the other scripts'.

Modes (the client derives the wire ``message_type`` from what is set):
  normal       NORMAL.
  fifo         FIFO: ``message_group`` = ``<run-id>-g<i % groups>``, user properties ``shard``
               (i % groups) and ``seq`` (its rank within the group); sent one at a time in order.
  delay        DELAY: ``delivery_timestamp`` = now + --delay-s. The 5.1.2 client writes the
               attribute into ``Timestamp.seconds`` as given, so it is set in whole seconds (the
               event's ``dueMs`` is that second * 1000).
  transaction  TRANSACTION: each message in its own ``begin_transaction()``; its fate is the
               --tx list cycled over i: ``commit`` / ``rollback`` (EndTransaction from the
               client right after the send) or ``unknown`` (left to the server's orphaned
               transaction check on the Telemetry stream, answered by a TransactionChecker that
               returns --checker). With --wait-checks K the producer stays up until K checks
               were answered.

Events: start; sent {key, body, msgId, txId, offset, queueId, sentMs, group?, shard?, seq?, dueMs?,
fate?}; tx_end {key, resolution}; checked {key, msgId, txId?, resolution}; done {sent, checks};
fatal; timeout.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from g5_common import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    Deadline,
    body_for,
    check_home,
    config,
    emit,
    error_fields,
    key_for,
    now_ms,
    parse,
    parser,
    run,
    shutdown,
)

SCRIPT = "g5py-produce"
FATES = ("commit", "rollback", "unknown")


def main() -> int:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--mode", choices=("normal", "fifo", "delay", "transaction"), default="normal")
    p.add_argument("--tag", default="TagA")
    p.add_argument("--start", type=int, default=0)
    p.add_argument("--groups", type=int, default=3)
    p.add_argument("--delay-s", type=int, default=3)
    p.add_argument("--tx", default="commit")
    p.add_argument("--checker", choices=("commit", "rollback"), default="commit")
    p.add_argument("--wait-checks", type=int, default=0)
    args = parse(SCRIPT, p)
    fates = [f.strip() for f in args.tx.split(",") if f.strip()]
    if not fates or any(f not in FATES for f in fates) or args.groups < 1 or args.delay_s < 0:
        emit("fatal", script=SCRIPT, message=f"usage: --tx takes {','.join(FATES)} (comma "
             "separated), --groups >= 1, --delay-s >= 0")
        return EXIT_USAGE
    sent = 0
    checks: list[dict[str, Any]] = []
    checks_lock = threading.Condition()
    deadline = Deadline(SCRIPT, args.deadline_ms, lambda: {"sent": sent, "checks": len(checks)})
    home = check_home(SCRIPT)
    emit("start", script=SCRIPT, runId=args.run_id, topic=args.topic, n=args.n, mode=args.mode,
         endpoints=args.endpoints, home=home)

    from rocketmq import Message, Producer, TransactionChecker, TransactionResolution

    answer = (TransactionResolution.COMMIT if args.checker == "commit"
              else TransactionResolution.ROLLBACK)

    class Checker(TransactionChecker):  # type: ignore[misc]
        def check(self, message: Any) -> Any:
            keys = sorted(message.keys or ())
            with checks_lock:
                checks.append({"key": keys[0] if keys else None, "msgId": message.message_id})
                emit("checked", key=keys[0] if keys else None, msgId=message.message_id,
                     resolution=args.checker)
                checks_lock.notify_all()
            return answer

    producer = Producer(config(args), (args.topic,),
                        checker=Checker() if args.mode == "transaction" else None)
    deadline.phase = "starting the producer"
    try:
        producer.startup()
    except Exception as e:  # noqa: BLE001 - the client raises its own and gRPC's errors
        emit("fatal", script=SCRIPT, phase=deadline.phase, sent=sent, **error_fields(e))
        return EXIT_FAILED

    def make(i: int) -> tuple[Any, dict[str, Any]]:
        key = key_for(args.run_id, i)
        body = body_for(args.run_id, i)
        msg = Message()
        msg.topic = args.topic
        msg.body = body.encode("utf-8")
        msg.tag = args.tag
        msg.keys = key
        msg.keys = f"{key}#k2"
        msg.add_property("run", args.run_id)
        msg.add_property("idx", str(i))
        info: dict[str, Any] = {"key": key, "body": body}
        if args.mode == "fifo":
            shard, seq = i % args.groups, (i - args.start) // args.groups
            msg.message_group = f"{args.run_id}-g{shard}"
            msg.add_property("shard", str(shard))
            msg.add_property("seq", str(seq))
            info |= {"group": msg.message_group, "shard": shard, "seq": seq}
        elif args.mode == "delay":
            due_s = int(time.time()) + args.delay_s
            msg.delivery_timestamp = due_s
            info["dueMs"] = due_s * 1000
        return msg, info

    try:
        for i in range(args.start, args.start + args.n):
            msg, info = make(i)
            deadline.phase = f"sending message {i} ({sent} of {args.n} sent)"
            tx = None
            if args.mode == "transaction":
                info["fate"] = fates[(i - args.start) % len(fates)]
                tx = producer.begin_transaction()
            sent_ms = now_ms()
            r = producer.send(msg, transaction=tx)
            sent += 1
            queue = r.message_queue
            emit("sent", msgId=r.message_id, txId=r.transaction_id, offset=r.offset,
                 queueId=getattr(queue, "_MessageQueue__queue_id", None),  # no public getter
                 sentMs=sent_ms, **info)
            if tx is not None and info["fate"] != "unknown":
                deadline.phase = f"ending the transaction of message {i} ({info['fate']})"
                tx.commit() if info["fate"] == "commit" else tx.rollback()
                emit("tx_end", key=info["key"], resolution=info["fate"])
    except Exception as e:  # noqa: BLE001 - ClientException, gRPC errors, IllegalArgument...
        emit("fatal", script=SCRIPT, phase=deadline.phase, sent=sent, **error_fields(e))
        shutdown(producer, 10)
        return EXIT_FAILED

    if args.wait_checks:
        deadline.phase = f"waiting for {args.wait_checks} transaction checks"
        with checks_lock:
            checks_lock.wait_for(lambda: len(checks) >= args.wait_checks)
        time.sleep(0.5)  # the checker's EndTransaction goes out after check() returns

    deadline.phase = "shutting the producer down"
    closed = shutdown(producer, 10)
    emit("done", script=SCRIPT, sent=sent, checks=len(checks), close=closed)
    return EXIT_OK


if __name__ == "__main__":
    run(SCRIPT, main)
