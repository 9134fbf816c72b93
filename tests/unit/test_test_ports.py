"""The port picker the server tests use (tests/ports.py): ports a listener can bind, outside the
kernel's ephemeral range (where outgoing connections would take them), never given twice."""

from __future__ import annotations

import socket

import ports


def test_ports_are_outside_the_ephemeral_range_distinct_and_bindable() -> None:
    low, high = ports._ephemeral()
    given = [ports.free_port() for _ in range(200)]
    assert len(set(given)) == len(given)
    assert all(not low <= p <= high and p >= ports.LOWEST for p in given)
    with socket.socket() as s:
        s.bind(("127.0.0.1", given[-1]))
        s.listen()


def test_a_base_spans_free_ports_none_given_before() -> None:
    before = {ports.free_port() for _ in range(20)}
    base = ports.free_base(12)
    span = set(range(base, base + 12))
    assert span.isdisjoint(before)
    low, high = ports._ephemeral()
    assert base + 11 < low or base > high
