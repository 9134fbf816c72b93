"""Send N messages with the C++ 4.x client's Producer (``rocketmq==0.4.4``) and report each.

    python produce.py --namesrv 127.0.0.1:9876 --topic T --group PID --n 20 --run-id r1
                      [--mode sync|batch|orderly] [--batch-size 8] [--shards 4] [--start 0]
                      [--tag TagA] [--hold] [--deadline-ms 60000]

Modes, and what the wheel sends for them (see conformance/README.md):
  sync     ``Producer.send_sync``: one SEND_MESSAGE (10) per message, queues round robin.
  batch    ``Producer.send_batch``: one SEND_MESSAGE (10) with ``batch`` true per --batch-size
           messages; the body is the concatenated ``encodeMessage`` records.
  orderly  ``Producer.send_orderly(msg, shard)``: the queue is ``shard % queue count``, so each
           shard's messages keep their order in one queue.

Message i (start <= i < start+n) has key ``<run-id>-<i>`` and body ``body_for(run-id, i)``; in
orderly mode its shard is ``i % shards`` and it carries the properties ``shard`` and ``seq`` (its
rank within the shard). With --hold the producer stays started after its last send (it keeps
sending heartbeats, so the broker lists it) until SIGTERM/SIGINT, then shuts down. Events: start;
sent {key, body, msgId, status, offset, shard, seq} (batch: ``batch`` index, msgId/offset are the
batch's); holding; done {sent}; fatal; timeout.
"""

from __future__ import annotations

import signal
import threading

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

SCRIPT = "cpp-produce"


def main() -> int:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--mode", choices=("sync", "batch", "orderly"), default="sync")
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--shards", type=int, default=4)
    p.add_argument("--start", type=int, default=0)
    p.add_argument("--tag", default="TagA")
    p.add_argument("--hold", action="store_true")
    args = parse(SCRIPT, p)
    stop = threading.Event()
    if args.hold:  # otherwise a signal ends the process as it always did
        signal.signal(signal.SIGTERM, lambda _s, _f: stop.set())
        signal.signal(signal.SIGINT, lambda _s, _f: stop.set())
    sent = 0
    deadline = Deadline(SCRIPT, args.deadline_ms, lambda: {"sent": sent})
    home = check_home(SCRIPT)
    emit("start", script=SCRIPT, runId=args.run_id, topic=args.topic, group=args.group, n=args.n,
         mode=args.mode, home=home)

    from rocketmq.client import Message, Producer  # after check_home: it loads librocketmq
    from rocketmq.exceptions import RocketMQException

    producer = Producer(args.group)
    producer.set_namesrv_addr(args.namesrv)
    sign_with_env_credentials(producer)
    deadline.phase = "starting the producer"
    try:
        producer.start()
    except RocketMQException as e:  # the wrapper's ProducerStartFailed and kin
        emit("fatal", script=SCRIPT, phase=deadline.phase, sent=sent, **error_fields(e))
        return EXIT_FAILED

    def make(i: int) -> tuple[Message, dict[str, object]]:
        key = f"{args.run_id}-{i}"
        body = body_for(args.run_id, i)
        msg = Message(args.topic)
        msg.set_keys(key)
        msg.set_tags(args.tag)
        msg.set_body(body)
        info: dict[str, object] = {"key": key, "body": body}
        if args.mode == "orderly":
            shard, seq = i % args.shards, i // args.shards
            msg.set_property("shard", str(shard))
            msg.set_property("seq", str(seq))
            info |= {"shard": shard, "seq": seq}
        return msg, info

    indexes = list(range(args.start, args.start + args.n))
    try:
        if args.mode == "batch":
            for b, first in enumerate(range(0, len(indexes), args.batch_size)):
                chunk = [make(i) for i in indexes[first : first + args.batch_size]]
                deadline.phase = f"sending batch {b} ({sent} of {args.n} sent)"
                r = producer.send_batch([m for m, _ in chunk])
                for _, info in chunk:
                    sent += 1
                    emit("sent", batch=b, msgId=r.msg_id, status=r.status.name, offset=r.offset,
                         **info)
        else:
            for i in indexes:
                msg, info = make(i)
                deadline.phase = f"sending message {i} ({sent} of {args.n} sent)"
                if args.mode == "orderly":
                    r = producer.send_orderly(msg, int(str(info["shard"])))
                else:
                    r = producer.send_sync(msg)
                sent += 1
                emit("sent", msgId=r.msg_id, status=r.status.name, offset=r.offset, **info)
    except RocketMQException as e:  # ProducerSendSyncFailed and kin carry the C++ client's message
        emit("fatal", script=SCRIPT, phase=deadline.phase, sent=sent, **error_fields(e))
        return EXIT_FAILED

    if args.hold:
        deadline.phase = "holding the connection until SIGTERM"
        emit("holding", script=SCRIPT)
        while not stop.wait(0.2):
            pass

    deadline.phase = "shutting the producer down"
    closed = call_within(producer.shutdown, 10)
    emit("done", script=SCRIPT, sent=sent, close=closed)
    return EXIT_OK


if __name__ == "__main__":
    run(SCRIPT, main)
