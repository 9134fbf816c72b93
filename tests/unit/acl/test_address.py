"""plain_acl.yml address patterns (RemoteAddressStrategyFactory's forms)."""

from __future__ import annotations

import pytest

from rocketlite.acl.address import parse_address
from rocketlite.common.errors import FormatError


@pytest.mark.parametrize(("pattern", "ip", "hit"), [
    ("*", "10.1.2.3", True),
    ("*.*.*.*", "::1", True),
    ("192.168.*.*", "192.168.200.7", True),
    ("192.168.*.*", "192.169.0.1", False),
    ("10.10.103.1-100", "10.10.103.100", True),
    ("10.10.103.1-100", "10.10.103.101", False),
    ("10.10.103.1-100", "10.10.103.0", False),
    ("192.168.0.{1,2,3}", "192.168.0.2", True),
    ("192.168.0.{1,2,3}", "192.168.0.4", False),
    ("127.0.0.1", "127.0.0.1", True),
    ("127.0.0.1", "127.0.0.2", False),
    ("127.0.0.1", "::ffff:127.0.0.1", True),  # an IPv4-mapped peer address
    ("::1", "0:0:0:0:0:0:0:1", True),
    ("", "127.0.0.1", False),  # no pattern: matches nothing
    ("10.0.0.*", "not-an-ip", False),
])
def test_match(pattern: str, ip: str, hit: bool) -> None:
    assert parse_address(pattern).match(ip) is hit


@pytest.mark.parametrize("bad", ["10.0.0", "10.0.0.256", "10.0.0.9-3", "a.b.c.d", "fe80::zz"])
def test_bad_patterns_are_named(bad: str) -> None:
    with pytest.raises(FormatError, match="address pattern"):
        parse_address(bad)
