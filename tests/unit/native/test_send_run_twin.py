"""The broker's run taker (``broker/send_run.py``) against its compiled twin (``_send_run_c``):
for any run of send requests, the same stopping index, messages and replies' tuples; and every
send either takes is the message the per-request path (the header decoder, ``send._message``)
builds from it."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from nativehelp import twin
from rocketlite.broker import send_run as ref
from rocketlite.broker.config import PERM_WRITE
from rocketlite.broker.send import _message
from rocketlite.broker.topics import NOT_ALLOWED_SEND_TOPICS
from rocketlite.protocol.bodies import TopicConfig
from rocketlite.protocol.codes import RequestCode
from rocketlite.protocol.command import RemotingCommand
from rocketlite.protocol.headers import SendMessageRequestHeader
from rocketlite.store.message import MessageToStore

C = twin("rocketlite.broker._send_run_c")

V1, V2 = int(RequestCode.SEND_MESSAGE), int(RequestCode.SEND_MESSAGE_V2)
KEYS = dict(zip((V1, V2), ref.send_keys(SendMessageRequestHeader.V2_KEYS), strict=True))
TABLE = {
    "T": TopicConfig(topicName="T", readQueueNums=8, writeQueueNums=4),
    "RO": TopicConfig(topicName="RO", perm=4),
    "SCHEDULE_TOPIC_XXXX": TopicConfig(topicName="SCHEDULE_TOPIC_XXXX"),
}
CONN = SimpleNamespace(peer_host=b"\x0a\x00\x00\x07", peer_port=50123)

# What a client may put in any field: the usual forms and every near miss the per-request path
# coerces or refuses (signs, empty, too long, other cases, non-strings).
values = st.one_of(
    st.integers(0, 2**40).map(str),
    st.from_regex(r"[+-]?[0-9]{0,20}", fullmatch=True),
    st.sampled_from(["", "true", "false", "TRUE", "1", "0", "T", "RO", "Unknown",
                     "SCHEDULE_TOPIC_XXXX", "DELAY\x013\x02", "TIMER_DELAY_SEC\x015\x02",
                     "TAGS\x01a\x02", "١"]),
    st.text(max_size=6), st.integers(-5, 5), st.booleans(), st.none(),
)


def usual(code: int) -> dict[str, str]:
    k = KEYS[code]
    return dict(zip(k, ("PG", "T", "TBW102", "4", "1", "0", "1795599582362", "0",
                        "TAGS\x01a\x02", "0", "false", "false", "16", "broker-a"), strict=True))


@st.composite
def commands(draw: st.DrawFn) -> RemotingCommand:
    code = draw(st.sampled_from([V1, V2, V2, int(RequestCode.SEND_BATCH_MESSAGE)]))
    ext: dict[str, Any] = usual(code if code != int(RequestCode.SEND_BATCH_MESSAGE) else V2)
    for key in draw(st.lists(st.sampled_from(KEYS[V1] + KEYS[V2]), max_size=3)):
        if draw(st.booleans()):
            ext.pop(key, None)
        else:
            ext[key] = draw(values)
    return RemotingCommand.request(code, ext, draw(st.binary(max_size=8)))


def take(taker: Any, cmds: list[RemotingCommand], start: int, diverting: bool) -> tuple[Any, ...]:
    msgs: list[MessageToStore] = []
    pending: list[tuple[Any, RemotingCommand, int]] = []
    end = taker.take(CONN, cmds, start, TABLE, diverting, msgs, pending)
    return end, msgs, pending


@given(st.lists(commands(), max_size=8), st.integers(0, 3), st.booleans())
def test_compiled_taker_equals_the_pure_one(cmds: list[RemotingCommand], start: int,
                                            diverting: bool) -> None:
    pure = ref.SendTakerPy(MessageToStore, KEYS, NOT_ALLOWED_SEND_TOPICS, PERM_WRITE)
    compiled = C.SendTaker(MessageToStore, KEYS, NOT_ALLOWED_SEND_TOPICS, PERM_WRITE)
    start = min(start, len(cmds))
    out = take(pure, cmds, start, diverting)
    assert take(compiled, cmds, start, diverting) == out
    end, msgs, pending = out
    assert [p[1] for p in pending] == cmds[start:end]
    for cmd, msg, (_, _, qid) in zip(cmds[start:end], msgs, pending, strict=True):
        # what the per-request path would queue for it, and the checks it would pass
        h = (SendMessageRequestHeader.from_v2_ext(cmd.ext_fields) if cmd.code == V2
             else SendMessageRequestHeader.from_ext(cmd.ext_fields))
        assert not h.batch and h.topic == "T" and 0 <= h.queueId < 4 and qid == h.queueId
        assert msg == _message(CONN, cmd, h, h.queueId)  # type: ignore[arg-type]
        if diverting:
            assert not h.sysFlag & ref.TXN_MASK and not ref_diverts(h.properties or "")


def ref_diverts(properties: str) -> bool:
    return "DELAY\x01" in properties or "TIMER_" in properties


def test_usual_sends_are_taken_and_the_first_other_stops_the_run() -> None:
    for taker in (ref.SendTakerPy(MessageToStore, KEYS, NOT_ALLOWED_SEND_TOPICS, PERM_WRITE),
                  C.SendTaker(MessageToStore, KEYS, NOT_ALLOWED_SEND_TOPICS, PERM_WRITE)):
        odd = [{"e": "-1"}, {"e": "4"}, {"b": "RO"}, {"b": "Unknown"}, {"m": "true"}, {"e": "+1"},
               {"b": "SCHEDULE_TOPIC_XXXX"}, {"k": "TRUE"}, {"g": ""}]
        for change in odd:
            cmds = [RemotingCommand.request(V2, usual(V2), b"a"),
                    RemotingCommand.request(V2, {**usual(V2), **change}, b"b"),
                    RemotingCommand.request(V1, usual(V1), b"c")]
            end, msgs, pending = take(taker, cmds, 0, False)
            assert end == 1 and [m.body for m in msgs] == [b"a"], change
            assert take(taker, cmds, 2, False)[0] == 3
        delayed = RemotingCommand.request(V2, {**usual(V2), "i": "DELAY\x012\x02"}, b"d")
        assert take(taker, [delayed], 0, True)[0] == 0
        assert take(taker, [delayed], 0, False)[0] == 1  # no diverters: stored as is
        end, msgs, pending = take(taker, [RemotingCommand.request(V1, usual(V1), b"x")], 0, False)
        assert msgs == [MessageToStore("T", b"x", 1, 0, "TAGS\x01a\x02", 0, 1795599582362,
                                       CONN.peer_host, CONN.peer_port, 0, 0)]
        assert pending[0][0] is CONN and pending[0][2] == 1


def _other(cmd: RemotingCommand, queue_id: int, offset: int, queue_offset: int) -> bytes:
    return b"other %d %d %d %d" % (cmd.opaque, queue_id, offset, queue_offset)


@given(st.lists(st.tuples(st.sampled_from(["a", "b"]), st.integers(-(2**31), 2**31 - 1),
                          st.sampled_from([0, 0, 1, 1, 2]), st.sampled_from([0, 0, 2, 3]),
                          st.integers(0, 2**31 - 1), st.integers(-1, 2**63 - 1),
                          st.integers(0, 2**63 - 1)), max_size=12),
       st.sampled_from([b"\x7f\x00\x00\x01", bytes(range(16))]),
       st.sampled_from(["DefaultRegion", 'a "q" 100% r\x01']), st.booleans())
def test_compiled_ok_runs_equal_the_pure_ones(rows: list[tuple[Any, ...]], host: bytes,
                                              region: str, trace_on: bool) -> None:
    from rocketlite.protocol.replies import SendOkFrames
    from rocketlite.store.message import AppendResult

    frames = SendOkFrames(host, 10911, region, trace_on)
    conns = {"a": object(), "b": object()}
    pending, results = [], []
    for conn, opaque, stype, flag, qid, offset, qoff in rows:
        cmd = RemotingCommand.request(V2, {})
        cmd.opaque, cmd.serialize_type, cmd.flag = opaque, stype, flag
        pending.append((conns[conn], cmd, qid))
        results.append(AppendResult(offset, 100, qoff, 0))
    pure = ref.OkRunsPy(frames, 0x2, _other).runs(pending, results)
    assert C.OkRuns(frames, 0x2, _other).runs(pending, results) == pure
    answered = [(c, cmd) for c, cmd, _ in pending if not cmd.flag & 0x2]
    assert b"".join(b for _, b in pure).count(b"other") == sum(
        cmd.serialize_type == 2 for _, cmd in answered)
    assert [c for c, _ in pure] == [c for i, (c, _) in enumerate(answered)
                                    if i == 0 or answered[i - 1][0] is not c]
