"""The chaos suite's clock scenario (issue 22): delay-level and timer messages are neither lost nor
delivered twice when the wall clock steps back or forward.

One fake clock drives the store (store timestamps), the delay-level service
(``ScheduleMessageService``) and the timer wheel (``TimerMessageStore``), all in this process and
run round by round, so a program of steps is exact and repeatable. Hypothesis generates programs
of: sends (delay levels, timer messages due from the past to a minute ahead), small ticks, jumps
forward (up to two hours: past the wheel's span, into catch-up) and back (up to an hour), and
clean restarts (both services persist and reload their progress). After the program the clock
runs on past every deliver time; then every message sent must have reached its topic exactly
once, each with its own body. A failing program is shrunk to the fewest steps and printed.

``ROCKETLITE_CHAOS_CLOCK_EXAMPLES`` sets the number of programs (CI: 40; the full run in
``docs/reliability.md``: 2,000).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocketlite.broker.config import BrokerConfig
from rocketlite.broker.schedule import ScheduleMessageService
from rocketlite.broker.timer import TimerMessageStore
from rocketlite.formats.message_record import decode_record
from rocketlite.formats.properties import encode_properties
from rocketlite.store.message import MessageToStore
from rocketlite.store.message_store import MessageStore
from storehelp import Clock, small_config, wait_dispatched

EXAMPLES = int(os.environ.get("ROCKETLITE_CHAOS_CLOCK_EXAMPLES", "40"))
# a program takes about 0.3 s (1 s on a loaded machine): the full run needs more than the default
pytestmark = [pytest.mark.chaos, pytest.mark.timeout(max(300, 2 * EXAMPLES))]
T0 = 1_700_000_000_000
SLOTS = 120  # a two-minute wheel at 1 s precision: a jump of an hour goes past it
LEVELS = "1s 5s 30s"
TOPIC = "ClockTopic"


@dataclass
class World:
    """A store and both delay services on one fake clock; what was sent, by body."""

    root: Path
    clock: Clock = field(default_factory=lambda: Clock(T0))
    sent: list[bytes] = field(default_factory=list)
    latest_due: int = T0

    def __post_init__(self) -> None:
        self._open()

    def _open(self) -> None:
        self.store = MessageStore(small_config(self.root, mappedFileSizeCommitLog="1048576",
                                               messageDelayLevel=LEVELS), clock=self.clock).start()
        self.schedule = ScheduleMessageService(self.store, self.clock)
        self.schedule.load()
        self.timer = TimerMessageStore(self.store, BrokerConfig(), self.clock, SLOTS)
        self.timer.open()

    def close(self) -> None:
        self.timer.shutdown()
        self.schedule.persist()
        self.store.shutdown()

    def restart(self) -> None:
        self.close()
        self._open()

    def send(self, props: dict[str, str]) -> None:
        body = b"m%d" % len(self.sent)
        self.sent.append(body)
        msg = MessageToStore(TOPIC, body, 0, properties=encode_properties(props),
                             born_timestamp=self.clock.t)
        out = self.schedule.divert(msg) or self.timer.divert(msg) or msg
        self.store.put_messages_sync([out])
        wait_dispatched(self.store)

    def pump(self) -> None:
        """What the services' threads do at this clock, until nothing moves."""
        while True:
            moved = 0
            while (k := self.timer.enqueue_round()) > 0:
                moved += k
            wait_dispatched(self.store)
            self.timer.move_write_time()
            while self.timer.dequeue_round():
                moved += 1
            wait_dispatched(self.store)
            while True:
                n, due = self.schedule.deliver_round()
                moved += n
                wait_dispatched(self.store)
                if n == 0 or due is None or due > self.clock.t:
                    break
            if moved == 0:
                return

    def delivered(self) -> Counter[bytes]:
        got = self.store.get_message(TOPIC, 0, 0, 100_000, 1 << 40)
        return Counter(m.body for raw in got.messages if (m := decode_record(raw)) is not None)


SEND = st.one_of(
    st.tuples(st.just("delay"), st.integers(1, 3)),
    st.tuples(st.just("timer"), st.integers(-5_000, 60_000)),  # due from the past to 1 min on
)
STEP = st.one_of(
    SEND,
    st.tuples(st.just("tick"), st.integers(1, 3_000)),
    st.tuples(st.just("jump"), st.integers(-3_600_000, 7_200_000)),
    st.tuples(st.just("restart"), st.just(0)),
)


STATS: Counter[str] = Counter()
"""What the programs of this run did (printed at the end of the module: ``pytest -s``)."""


@pytest.fixture(scope="module", autouse=True)
def report() -> Iterator[None]:
    yield
    print(f"\nclock jumps: {STATS['programs']} programs, {STATS['steps']} steps: "
          f"{STATS['delay'] + STATS['timer']} messages sent ({STATS['delay']} delay level, "
          f"{STATS['timer']} timer), {STATS['back']} jumps back, {STATS['forward']} forward, "
          f"{STATS['restart']} restarts; {STATS['delivered']} delivered, 0 lost, 0 twice")


def run_program(steps: list[tuple[str, int]]) -> None:
    STATS.update(programs=1, steps=len(steps))
    STATS.update(kind for kind, _ in steps if kind in ("delay", "timer", "restart"))
    STATS.update(("back" if arg < 0 else "forward") for kind, arg in steps if kind == "jump")
    root = Path(tempfile.mkdtemp(prefix="clock-"))
    world = World(root)
    try:
        for kind, arg in steps:
            if kind == "delay":
                world.send({"DELAY": str(arg)})
            elif kind == "timer":
                due = world.clock.t + arg
                world.latest_due = max(world.latest_due, due)
                world.send({"TIMER_DELIVER_MS": str(due)})
            elif kind in ("tick", "jump"):
                world.clock.t += arg
                world.pump()
            else:
                world.restart()
        # the clock runs on past every deliver time: the latest timer due, and any delay level
        # from the latest clock (a clock that went back delays a level message by the jump)
        world.clock.t = max(world.clock.t, world.latest_due) + 31_000
        for _ in range(3):
            world.pump()
            world.clock.t += 1_000
        got = world.delivered()
        lost = [b for b in world.sent if got[b] == 0]
        twice = {b: n for b, n in got.items() if n > 1}
        strange = set(got) - set(world.sent)
        assert not lost and not twice and not strange, (
            f"lost {lost}, delivered more than once {twice}, never sent {strange}")
        STATS["delivered"] += len(world.sent)
    finally:
        world.close()
        shutil.rmtree(root, ignore_errors=True)


@settings(max_examples=EXAMPLES, deadline=None, derandomize=False,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(STEP, min_size=1, max_size=30))
def test_delay_and_timer_messages_survive_clock_jumps(steps: list[tuple[str, int]]) -> None:
    run_program(steps)


def test_a_clock_set_back_an_hour_holds_nothing_forever_and_repeats_nothing() -> None:
    """The plain case, always run: messages due soon, then the clock goes back an hour."""
    run_program([("timer", 2_000), ("delay", 1), ("delay", 2), ("tick", 1_500),
                 ("jump", -3_600_000), ("timer", 500), ("delay", 1), ("tick", 2_000),
                 ("restart", 0), ("jump", 3_600_000), ("tick", 1_000)])
