"""``admin.trace.group_records``: a message's records as queryMsgTraceById shows them: Pubs with
their store time estimate, each consumption pairing a SubBefore with the SubAfter of its request
id (several groups, a retry, one still running, one whose SubBefore was not found), EndTransaction
records, and only the records of the asked msgId."""

from __future__ import annotations

from rocketlite.admin.trace import group_records
from rocketlite.client.trace_codec import ConsumeReturnType, TraceRecord, TraceType

ID = "AC1415116D1418B4AAC217FE1B4E0000"


def before(group: str, req: str, t: int, retry: int = 0, msg_id: str = ID) -> TraceRecord:
    return TraceRecord(TraceType.SubBefore, t, "R", group, req, msg_id=msg_id, retry_times=retry)


def after(req: str, t: int, cost: int, ok: bool, code: ConsumeReturnType) -> TraceRecord:
    return TraceRecord(TraceType.SubAfter, t, request_id=req, msg_id=ID, cost_time=cost, success=ok,
                       context_code=code)


def test_consumptions_pair_by_request_id_and_sort_by_time() -> None:
    pub = TraceRecord(TraceType.Pub, 1000, "R", "PG", topic="T", msg_id=ID, store_host="h:1",
                      cost_time=10, msg_type=3, offset_msg_id="OFF")
    records = [
        after("q2", 1300, 5, True, ConsumeReturnType.SUCCESS), before("G2", "q2", 1295),
        before("G1", "q1", 1100), after("q1", 1150, 50, False, ConsumeReturnType.FAILED),
        before("G1", "q3", 12000, retry=1),  # the retry, still running
        after("lost", 900, 4, True, ConsumeReturnType.SUCCESS),  # its SubBefore is not there
        pub, before("G9", "x", 1, msg_id="OTHER"),
        TraceRecord(TraceType.EndTransaction, 2000, "R", "PG", msg_id=ID, transaction_id="TX",
                    transaction_state="COMMIT_MESSAGE", from_transaction_check=True),
    ]
    tr = group_records(ID, "RMQ_SYS_TRACE_TOPIC", records)
    (p,) = tr.pubs
    assert (p.producer_group, p.send_time, p.store_time, p.cost_ms, p.msg_type, p.broker) == \
        ("PG", 1000, 1005, 10, "Delay_Msg", "h:1")
    got = [(s.consumer_group, s.consume_time, s.retry_times, s.success, s.status, s.cost_ms)
           for s in tr.subs]
    assert got == [(None, 896, 0, True, "SUCCESS", 4), ("G1", 1100, 0, False, "FAILED", 50),
                   ("G2", 1295, 0, True, "SUCCESS", 5), ("G1", 12000, 1, None, None, None)]
    (e,) = tr.end_transactions
    assert (e.transaction_id, e.state, e.from_transaction_check) == ("TX", "COMMIT_MESSAGE", True)
