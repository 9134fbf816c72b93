"""The timer wheel driven round by round with a fake clock: divert rules, delivery at (never
before) the deliver time, rolling, catch-up after downtime, crash recovery, log retention."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketlite.broker.config import BrokerConfig
from rocketlite.broker.timer import TimerMessageStore
from rocketlite.broker.timer_divert import (
    NEVER_ENQUEUED,
    TIMER_TOPIC,
    TimerNotEnabledError,
    get_property,
    set_properties,
    slot_time_ms,
)
from rocketlite.common.errors import MessageIllegalError
from rocketlite.formats.message_record import MessageRecord, decode_record
from rocketlite.formats.properties import decode_properties, encode_properties
from rocketlite.formats.timer import MIN_BLANK_LEN, TIMER_LOG_UNIT_SIZE
from rocketlite.store.message import MessageToStore
from rocketlite.store.message_store import MessageStore
from storehelp import Clock, small_config, wait_dispatched

T0 = 1_700_000_000_000  # a whole second
SLOTS = 200
TOPIC = "TimerTopic"


@dataclass
class Env:
    root: Path
    clock: Clock
    store: MessageStore
    timer: TimerMessageStore
    conf: BrokerConfig

    def send(self, props: dict[str, str], body: bytes = b"x", queue_id: int = 1,
             sys_flag: int = 0) -> MessageToStore:
        msg = MessageToStore(TOPIC, body, queue_id, properties=encode_properties(props),
                             sys_flag=sys_flag, born_timestamp=self.clock.t)
        out = self.timer.divert(msg) or msg
        self.store.put_messages_sync([out])
        wait_dispatched(self.store)
        return out

    def pump(self) -> None:
        """What the threads do, until nothing moves: enqueue, move the write time, dequeue."""
        while True:
            n = 0
            while (k := self.timer.enqueue_round()) > 0:
                n += k
            wait_dispatched(self.store)
            self.timer.move_write_time()
            d = 0
            while self.timer.dequeue_round():
                d += 1
            wait_dispatched(self.store)
            if n == 0 and d == 0:
                return

    def at(self, t: int) -> None:
        self.clock.t = t
        self.pump()

    def delivered(self, queue_id: int = 1, topic: str = TOPIC) -> list[MessageRecord]:
        got = self.store.get_message(topic, queue_id, 0, 100_000, 1 << 40)
        out = [decode_record(raw) for raw in got.messages]
        return [m for m in out if m is not None]

    def restart(self, crash: bool = False, clock: int | None = None) -> None:
        if crash:
            self.timer.halt()
            self.store.halt()
        else:
            self.timer.shutdown()
            self.store.shutdown()
        if clock is not None:
            self.clock.t = clock
        self.store = MessageStore(small_config(self.root, mappedFileSizeCommitLog="1048576"))
        self.store.start()
        self.timer = TimerMessageStore(self.store, self.conf, self.clock, SLOTS)
        self.timer.open()


def make_env(root: Path, **conf: object) -> Env:
    store = MessageStore(small_config(root, mappedFileSizeCommitLog="1048576")).start()
    clock = Clock(T0 + 123)
    config = BrokerConfig(**conf)  # type: ignore[arg-type]
    timer = TimerMessageStore(store, config, clock, SLOTS)
    timer.open()
    return Env(root, clock, store, timer, config)


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    e = make_env(tmp_path)
    yield e
    e.timer.shutdown()
    e.store.shutdown()


def bodies(msgs: list[MessageRecord]) -> list[bytes]:
    return [m.body for m in msgs]


# -- property strings, read and rewritten in place ---------------------------------------------

NAMES = st.sampled_from(["TAGS", "REAL_TOPIC", "TIMER_OUT_MS", "XTIMER_OUT_MS", "A", "UNIQ_KEY"])
VALUES = st.text(st.characters(blacklist_characters="\x01\x02", blacklist_categories=["Cs"]),
                 min_size=1, max_size=8)


@given(st.lists(st.tuples(NAMES, VALUES), max_size=6), st.booleans())
def test_get_property_agrees_with_decode(entries: list[tuple[str, str]], trailing: bool) -> None:
    text = "".join(f"{k}\x01{v}\x02" for k, v in entries)
    if not trailing:
        text = text.rstrip("\x02")
    decoded = decode_properties(text)  # the last of duplicate names wins, as in Java
    for name in ("TAGS", "REAL_TOPIC", "TIMER_OUT_MS", "XTIMER_OUT_MS", "A", "UNIQ_KEY", "B"):
        assert get_property(text, name) == decoded.get(name)


@given(st.lists(st.tuples(NAMES, VALUES), max_size=6), st.booleans(),
       st.dictionaries(NAMES, VALUES, max_size=3), st.lists(NAMES, max_size=2))
def test_set_properties_agrees_with_decode(entries: list[tuple[str, str]], trailing: bool,
                                           put: dict[str, str], drop: list[str]) -> None:
    text = "".join(f"{k}\x01{v}\x02" for k, v in entries)
    if not trailing:
        text = text.rstrip("\x02")
    expected = {k: v for k, v in decode_properties(text).items() if k not in drop and k not in put}
    expected.update(put)
    assert decode_properties(set_properties(text, tuple(drop), put)) == expected


# -- divert ------------------------------------------------------------------------------------


def test_divert_rewrites_for_the_timer_topic(env: Env) -> None:
    deliver = env.clock.t + 3000
    out = env.timer.divert(MessageToStore(TOPIC, b"b", 2, properties=encode_properties(
        {"TIMER_DELIVER_MS": str(deliver), "UNIQ_KEY": "U1"})))
    assert out is not None and (out.topic, out.queue_id) == (TIMER_TOPIC, 0)
    props = decode_properties(out.properties)
    assert props["REAL_TOPIC"] == TOPIC and props["REAL_QID"] == "2"
    assert props["TIMER_OUT_MS"] == str(T0 + 3000) and props["UNIQ_KEY"] == "U1"


def test_slot_time_is_the_tick_before_the_deliver_time() -> None:
    assert slot_time_ms(T0 + 3123, 1000) == T0 + 3000
    assert slot_time_ms(T0 + 3000, 1000) == T0 + 2000  # exact: delivered as that tick passes
    assert slot_time_ms(T0 + 3050, 100) == T0 + 3000


@pytest.mark.parametrize("props", [
    {"TAGS": "a"},  # not a timer message
    {"TIMER_DELIVER_MS": str(T0 - 5)},  # in the past: delivered now, as sent
    {"TIMER_DELIVER_MS": str(T0 + 123)},  # now
    {"TIMER_DELIVER_MS": str(T0 + 5000), "DELAY": "3"},  # a delay level wins (5.x)
    {"TIMER_DELIVER_MS": str(T0 + 5000), "TIMER_OUT_MS": str(T0)},  # timed already
])
def test_divert_passes(env: Env, props: dict[str, str]) -> None:
    assert env.timer.divert(MessageToStore(TOPIC, b"b", properties=encode_properties(props))) is None


def test_divert_and_transactions(env: Env) -> None:
    props = encode_properties({"TIMER_DELAY_SEC": "5"})
    assert env.timer.divert(MessageToStore(TOPIC, b"b", properties=props, sys_flag=0x4)) is None
    assert env.timer.divert(MessageToStore(TOPIC, b"b", properties=props, sys_flag=0xC)) is None
    committed = env.timer.divert(MessageToStore(TOPIC, b"b", properties=props, sys_flag=0x8))
    assert committed is not None and committed.topic == TIMER_TOPIC


def test_relative_delays(env: Env) -> None:
    for props, out in (({"TIMER_DELAY_SEC": "10"}, T0 + 10_000),
                       ({"TIMER_DELAY_MS": "2500"}, T0 + 2000)):
        m = env.timer.divert(MessageToStore(TOPIC, b"b", properties=encode_properties(props)))
        assert m is not None and decode_properties(m.properties)["TIMER_OUT_MS"] == str(out)


def test_refusals(env: Env, tmp_path: Path) -> None:
    def divert(props: dict[str, str]) -> object:
        return env.timer.divert(MessageToStore(TOPIC, b"b", properties=encode_properties(props)))

    limit = 259_200_000
    assert divert({"TIMER_DELAY_MS": str(limit)}) is not None
    with pytest.raises(MessageIllegalError, match="max delay 259200000ms"):
        divert({"TIMER_DELAY_MS": str(limit + 1)})
    with pytest.raises(MessageIllegalError, match="not an integer"):
        divert({"TIMER_DELIVER_MS": "soon"})
    with pytest.raises(MessageIllegalError, match="TIMER_DEL_UNIQKEY"):  # a marker too late
        divert({"TIMER_DELIVER_MS": str(env.clock.t), "TIMER_DEL_UNIQKEY": "x"})
    off = TimerMessageStore(env.store, BrokerConfig(timer_wheel_enable=False), env.clock, SLOTS)
    with pytest.raises(TimerNotEnabledError, match="timerWheelEnable is false"):
        off.divert(MessageToStore(TOPIC, b"b", properties=encode_properties({"TIMER_DELAY_SEC": "5"})))


# -- delivery ----------------------------------------------------------------------------------


def test_delivered_when_its_time_has_come_never_before(env: Env) -> None:
    sent = env.send({"TIMER_DELIVER_MS": str(T0 + 3123), "UNIQ_KEY": "U1", "TAGS": "t"}, b"hello")
    env.pump()
    assert env.timer.stats.enqueued == 1
    env.at(T0 + 3122)
    assert env.delivered() == []
    env.at(T0 + 4000)  # the first tick at or after the deliver time
    [m] = env.delivered()
    props = m.properties
    assert m.body == b"hello" and m.queue_id == 1 and m.born_timestamp == T0 + 123
    assert props["UNIQ_KEY"] == "U1" and props["TAGS"] == "t"
    assert "REAL_TOPIC" not in props and "REAL_QID" not in props
    assert props["TIMER_OUT_MS"] == decode_properties(sent.properties)["TIMER_OUT_MS"]
    assert props["TIMER_ENQUEUE_MS"] == str(T0) and props["TIMER_DEQUEUE_MS"] == str(T0 + 4000)
    assert env.timer.stats.delivered == 1


def test_an_exact_second_is_delivered_on_that_tick(env: Env) -> None:
    env.send({"TIMER_DELIVER_MS": str(T0 + 5000)})
    env.at(T0 + 4999)
    assert env.delivered() == []
    env.at(T0 + 5000)
    assert len(env.delivered()) == 1


def test_many_messages_in_one_second_arrive_in_order(env: Env) -> None:
    for i in range(1500):
        env.send({"TIMER_DELIVER_MS": str(T0 + 2001 + i % 1000)}, b"%d" % i)  # (2 s, 3 s]
    env.at(T0 + 2999)
    assert env.delivered() == []
    env.at(T0 + 3000)
    assert bodies(env.delivered()) == [b"%d" % i for i in range(1500)]


def test_due_before_it_was_enqueued_is_delivered_at_once(env: Env) -> None:
    env.send({"TIMER_DELIVER_MS": str(T0 + 2000)})
    env.clock.t = T0 + 10_000
    env.timer.move_write_time()  # the wheel moved on before the enqueue saw the message
    env.pump()
    [m] = env.delivered()
    assert m.properties["TIMER_ENQUEUE_MS"] == NEVER_ENQUEUED


def test_far_messages_roll_through_a_small_window(tmp_path: Path) -> None:
    env = make_env(tmp_path, timer_roll_window_slot=10)
    try:
        env.send({"TIMER_DELIVER_MS": str(T0 + 35_000)}, b"far")
        env.send({"TIMER_DELIVER_MS": str(T0 + 12_000)}, b"near")  # just past the window
        t = T0 + 1000
        while t < T0 + 35_000:
            env.at(t)
            assert [b for b in bodies(env.delivered()) if b == b"far"] == []
            t += 1000
        env.at(T0 + 35_000)
        got = {m.body: m.properties for m in env.delivered()}
        assert set(got) == {b"far", b"near"}
        assert int(got[b"far"]["TIMER_ROLL_TIMES"]) >= 2
        assert env.timer.stats.rolled >= 3 and env.timer.stats.delivered == 2
    finally:
        env.timer.shutdown()
        env.store.shutdown()


# -- restarts ----------------------------------------------------------------------------------


def test_clean_restart_catches_up_without_duplicates(env: Env) -> None:
    for i in range(20):
        env.send({"TIMER_DELIVER_MS": str(T0 + 2000 + i * 500)}, b"%d" % i)
    env.at(T0 + 4000)
    before = len(env.delivered())
    assert 0 < before < 20
    env.restart(clock=T0 + 60_000)  # down for a minute
    env.pump()
    assert sorted(bodies(env.delivered()), key=int) == [b"%d" % i for i in range(20)]


def test_crash_loses_nothing(env: Env) -> None:
    for i in range(30):
        env.send({"TIMER_DELIVER_MS": str(T0 + 2000 + i * 300)}, b"%d" % i)
    env.at(T0 + 3000)
    env.timer.flush()  # a checkpoint, then more work it does not cover
    for i in range(30, 60):
        env.send({"TIMER_DELIVER_MS": str(T0 + 2000 + i * 300)}, b"%d" % i)
    env.at(T0 + 6000)
    env.restart(crash=True)
    env.at(T0 + 30_000)
    got = bodies(env.delivered())
    assert set(got) == {b"%d" % i for i in range(60)}  # at least once
    assert len(got) < 120


def test_power_loss_slot_pointing_past_the_log_is_relinked(env: Env) -> None:
    for i in range(2):
        env.send({"TIMER_DELIVER_MS": str(T0 + 9000)}, b"%d" % i)
    env.pump()
    env.timer.flush()  # checkpoint: two units linked
    env.send({"TIMER_DELIVER_MS": str(T0 + 9000)}, b"2")
    env.pump()
    assert env.timer.wheel is not None
    assert env.timer.wheel.get_slot(T0 + 8000).last_pos == 2 * TIMER_LOG_UNIT_SIZE
    env.timer.halt()
    # The wheel's page reached the disk, the log's third unit did not.
    seg = env.root / "timerlog" / f"{0:020d}"
    with seg.open("r+b") as f:
        f.seek(2 * TIMER_LOG_UNIT_SIZE)
        f.write(bytes(TIMER_LOG_UNIT_SIZE))
    env.store.halt()
    env.store = MessageStore(small_config(env.root, mappedFileSizeCommitLog="1048576")).start()
    env.timer = TimerMessageStore(env.store, env.conf, env.clock, SLOTS)
    env.timer.open()
    env.at(T0 + 9000)
    assert sorted(bodies(env.delivered())) == [b"0", b"1", b"2"]


def test_delivered_log_segments_are_deleted(tmp_path: Path) -> None:
    env = make_env(tmp_path, mapped_file_size_timer_log=4 * TIMER_LOG_UNIT_SIZE + MIN_BLANK_LEN)
    try:
        for i in range(10):
            env.send({"TIMER_DELIVER_MS": str(T0 + 2000 + i * 1000)}, b"%d" % i)
        env.pump()
        assert env.timer.log is not None and len(env.timer.log.files.files) == 3
        env.at(T0 + 7000)
        env.timer.flush()  # retention runs with the first flush
        assert len(env.timer.log.files.files) == 2
        env.at(T0 + 40_000)
        env.timer.flush()
        assert len(env.timer.log.files.files) == 1
        assert len(env.delivered()) == 10
    finally:
        env.timer.shutdown()
        env.store.shutdown()


def test_threads_deliver_on_their_own(tmp_path: Path) -> None:
    import time

    store = MessageStore(small_config(tmp_path)).start()
    timer = TimerMessageStore(store, BrokerConfig(timer_flush_interval_ms=50), slots_total=SLOTS)
    timer.start()
    try:
        now = int(time.time() * 1000)
        msg = MessageToStore(TOPIC, b"t", 0, properties=encode_properties(
            {"TIMER_DELIVER_MS": str(now + 1200)}))
        store.put_messages_sync([timer.divert(msg) or msg])
        deadline = time.monotonic() + 5
        while not store.get_message(TOPIC, 0, 0, 10).messages:
            assert time.monotonic() < deadline, "not delivered"
            time.sleep(0.01)
        arrived = int(time.time() * 1000)
        assert now + 1200 <= arrived <= now + 1200 + 1000 + 300
    finally:
        timer.shutdown()
        store.shutdown()
    assert (tmp_path / "config" / "timercheck").exists()
