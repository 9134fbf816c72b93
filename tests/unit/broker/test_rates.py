"""``Rates``: topicPutTps and consumeTps from BrokerMetrics' counters, between the oldest and the
newest sample of the last minute."""

from __future__ import annotations

from rocketlite.broker.metrics import BrokerMetrics
from rocketlite.broker.rates import Rates


def test_rates_between_the_oldest_and_newest_samples() -> None:
    m, r = BrokerMetrics(), Rates(window_s=60)
    assert (r.put_tps("T"), r.consume_tps("T", "G")) == (0.0, 0.0)  # no sample yet
    m.fold_in_batch("T", 5, 500)
    r.sample(m, now=100.0)
    assert r.put_tps("T") == 0.0  # one sample: no interval yet
    m.fold_in_batch("T", 20, 2000)
    m.fold_pull("G", "T", 0, 6, 600, 6)
    m.fold_pull("G", "T", 1, 4, 400, 4)
    m.fold_out("T", "P", 3, 300)  # a POP group
    r.sample(m, now=105.0)
    assert r.put_tps("T") == 20 / 5
    assert (r.consume_tps("T", "G"), r.consume_tps("T", "P")) == (10 / 5, 3 / 5)
    assert (r.put_tps("Other"), r.consume_tps("T", "Other")) == (0.0, 0.0)
    r.sample(m, now=110.0)  # nothing new: the rate over 10 s halves
    assert r.put_tps("T") == 20 / 10


def test_samples_older_than_the_window_are_dropped() -> None:
    m, r = BrokerMetrics(), Rates(window_s=60)
    for i in range(20):  # 10 messages every 5 s
        m.fold_in_batch("T", 10, 100)
        r.sample(m, now=5.0 * i)
    # the window starts at the newest sample at least 60 s old: 95 - 35 = 60 s, 120 messages
    assert r.put_tps("T") == 120 / 60
    for i in range(20, 40):  # then silence
        r.sample(m, now=5.0 * i)
    assert r.put_tps("T") == 0.0

