"""RebalanceLockManager: lock, refusal to other clients, renewal, expiry (fake clock), unlock."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from rocketlite.broker.locks import RebalanceLockManager
from rocketlite.protocol.bodies import MessageQueue


class Clock:
    def __init__(self) -> None:
        self.now = 10_000

    def __call__(self) -> int:
        return self.now


def mq(i: int, topic: str = "T") -> MessageQueue:
    return MessageQueue(topic=topic, brokerName="broker-a", queueId=i)


def make() -> tuple[RebalanceLockManager, Clock]:
    clock = Clock()
    return RebalanceLockManager(60_000, clock), clock


def test_lock_and_refuse_another_client() -> None:
    m, _ = make()
    assert m.try_lock_batch("G", [mq(0), mq(1)], "c1") == {mq(0), mq(1)}
    assert m.try_lock_batch("G", [mq(1), mq(2)], "c2") == {mq(2)}
    assert m.is_locked("G", mq(1), "c1") and not m.is_locked("G", mq(1), "c2")
    # other groups are independent
    assert m.try_lock_batch("G2", [mq(1)], "c2") == {mq(1)}
    assert m.try_lock_batch("G", [], "c1") == set()


def test_renewal_keeps_the_lock_alive() -> None:
    m, clock = make()
    m.try_lock_batch("G", [mq(0)], "c1")
    for _ in range(5):
        clock.now += 20_000
        assert m.try_lock_batch("G", [mq(0)], "c1") == {mq(0)}  # renewed
        assert m.try_lock_batch("G", [mq(0)], "c2") == set()
    assert m.expire() == 0


def test_expired_lock_goes_to_another_client() -> None:
    m, clock = make()
    m.try_lock_batch("G", [mq(0), mq(1)], "c1")
    clock.now += 60_000  # at the limit: still held
    assert m.try_lock_batch("G", [mq(0)], "c2") == set()
    clock.now += 1
    assert not m.is_locked("G", mq(0), "c1")
    assert m.try_lock_batch("G", [mq(0)], "c2") == {mq(0)}
    assert m.is_locked("G", mq(0), "c2")
    assert m.expire() == 1  # mq(1), still c1's, expired
    assert m.table == {"G": {mq(0): ("c2", clock.now)}}


def test_unlock_only_own_locks() -> None:
    m, _ = make()
    m.try_lock_batch("G", [mq(0), mq(1)], "c1")
    m.unlock_batch("G", [mq(0), mq(1)], "c2")
    assert m.is_locked("G", mq(0), "c1") and m.is_locked("G", mq(1), "c1")
    m.unlock_batch("G", [mq(0)], "c1")
    assert not m.is_locked("G", mq(0), "c1")
    assert m.try_lock_batch("G", [mq(0)], "c2") == {mq(0)}
    m.unlock_batch("G", [mq(1)], "c1")
    m.unlock_batch("G", [mq(0)], "c2")
    assert m.table == {} and m._count == 0
    m.unlock_batch("missing", [mq(0)], "c1")  # no error


def test_expire_drops_empty_groups() -> None:
    m, clock = make()
    m.try_lock_batch("G", [mq(0)], "c1")
    m.try_lock_batch("H", [mq(0)], "c1")
    clock.now += 30_000
    m.try_lock_batch("H", [mq(0)], "c1")
    clock.now += 30_001
    assert m.expire() == 1
    assert set(m.table) == {"H"} and m._count == 1


ops = st.lists(st.tuples(
    st.sampled_from(["lock", "unlock", "tick", "expire"]),
    st.sampled_from(["c1", "c2", "c3"]),
    st.sets(st.integers(0, 3), max_size=4),
    st.integers(0, 40_000),
), max_size=40)


@given(ops)
def test_one_live_holder_per_queue(steps: list[tuple[str, str, set[int], int]]) -> None:
    m, clock = make()
    model: dict[int, tuple[str, int]] = {}  # queue -> (client, last renewal)
    for op, client, queues, dt in steps:
        if op == "tick":
            clock.now += dt
        elif op == "lock":
            got = m.try_lock_batch("G", [mq(q) for q in queues], client)
            expected = set()
            for q in queues:
                held = model.get(q)
                if held is None or held[0] == client or clock.now - held[1] > 60_000:
                    model[q] = (client, clock.now)
                    expected.add(mq(q))
            assert got == expected
        elif op == "unlock":
            m.unlock_batch("G", [mq(q) for q in queues], client)
            for q in queues:
                if q in model and model[q][0] == client:
                    del model[q]
        else:
            m.expire()
            model = {q: v for q, v in model.items() if clock.now - v[1] <= 60_000}
        for q in range(4):
            live = [c for c in ("c1", "c2", "c3") if m.is_locked("G", mq(q), c)]
            held = model.get(q)
            alive = held is not None and clock.now - held[1] <= 60_000
            assert live == ([held[0]] if alive and held else [])
        assert m._count == sum(len(v) for v in m.table.values())


def test_unlock_client_releases_only_its_locks_in_the_group() -> None:
    m, _ = make()
    m.try_lock_batch("G", [mq(0), mq(1)], "c1")
    m.try_lock_batch("G", [mq(2)], "c2")
    m.try_lock_batch("G2", [mq(0)], "c1")
    assert m.unlock_client("G", "c1") == 2
    assert m.try_lock_batch("G", [mq(0), mq(1), mq(2)], "c3") == {mq(0), mq(1)}
    assert m.is_locked("G2", mq(0), "c1")
    assert m.unlock_client("nope", "c1") == 0
