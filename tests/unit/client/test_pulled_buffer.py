"""The LitePullConsumer's per-queue buffer: takes hand out the pulled messages in order, whole
lists or slices, and the count follows; the same as one flat queue of messages would."""

from __future__ import annotations

import collections

from hypothesis import given
from hypothesis import strategies as st

from rocketlite.client.lite_pull_consumer import _Pulled
from rocketlite.client.message import MessageExt

ops = st.lists(st.one_of(st.tuples(st.just("add"), st.integers(0, 7)),
                         st.tuples(st.just("take"), st.integers(-1, 9)),
                         st.tuples(st.just("clear"), st.just(0))), max_size=40)


def _msg(offset: int) -> MessageExt:
    return MessageExt("T", b"", {}, 0, offset, 0, 0, 0, 0, 0, "", "", 0, 0, 0, "", "")


@given(ops)
def test_takes_follow_a_flat_queue(steps: list[tuple[str, int]]) -> None:
    pulled, flat = _Pulled(), collections.deque[MessageExt]()
    offset = 0
    for op, n in steps:
        if op == "add":
            msgs = [_msg(offset + i) for i in range(n)]
            offset += n
            pulled.add(msgs)
            flat.extend(msgs)
        elif op == "take":
            out = [_msg(-1)]
            pulled.take(n, out)
            want = [flat.popleft() for _ in range(min(max(n, 0), len(flat)))]
            assert out[1:] == want and all(a is b for a, b in zip(out[1:], want, strict=True))
        else:
            pulled.clear()
            flat.clear()
        assert len(pulled) == len(flat) and bool(pulled) == bool(flat)
