"""Remote address patterns of ``plain_acl.yml`` (RocketMQ's ``RemoteAddressStrategyFactory``):

* ``*`` (also ``*.*.*.*``): every address;
* ``192.168.0.{1,2,3}``: the listed values in the last part;
* per IPv4 part: a number, ``*``, or a range ``1-100`` (``192.168.*.*``, ``10.10.103.1-100``);
* anything else: that exact address (IPv6 addresses compare in their canonical form).

An empty pattern matches nothing. A malformed one is a ``FormatError`` naming it.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from rocketlite.common.errors import FormatError

_ALL = frozenset(("*", "*.*.*.*", "*:*:*:*:*:*:*:*"))


@dataclass(frozen=True, slots=True)
class AddressPattern:
    """One pattern: ``match(ip)`` tells whether a peer's address is covered."""

    text: str
    parts: tuple[tuple[int, int], ...] | None = None  # IPv4: (low, high) per part
    choices: frozenset[int] | None = None  # the {a,b} set, in place of the last part's range
    exact: str | None = None
    everything: bool = False

    def match(self, ip: str) -> bool:
        if self.everything:
            return True
        if self.exact is not None:
            return _canonical(ip) == self.exact
        if self.parts is None:
            return False
        octets = _octets(ip)
        if octets is None:
            return False
        for i, (value, (low, high)) in enumerate(zip(octets, self.parts, strict=True)):
            if i == 3 and self.choices is not None:
                if value not in self.choices:
                    return False
            elif not low <= value <= high:
                return False
        return True


def parse_address(text: str | None) -> AddressPattern:
    """The pattern ``text`` stands for (see the module's docstring)."""
    raw = (text or "").strip()
    if not raw:
        return AddressPattern(raw)
    if raw in _ALL:
        return AddressPattern(raw, everything=True)
    if ":" in raw:  # IPv6: exact addresses only
        return AddressPattern(raw, exact=_canonical(raw, strict=True))
    pieces = raw.split(".")
    if len(pieces) != 4:
        raise FormatError(f"address pattern {raw!r} is not a.b.c.d (parts may be *, n-m or {{x,y}})")
    parts: list[tuple[int, int]] = []
    choices: frozenset[int] | None = None
    for i, piece in enumerate(pieces):
        if piece.startswith("{") and piece.endswith("}") and i == 3:
            choices = frozenset(_octet(v, raw) for v in piece[1:-1].split(","))
            parts.append((0, 255))
        elif piece == "*":
            parts.append((0, 255))
        elif "-" in piece:
            low, _, high = piece.partition("-")
            lo, hi = _octet(low, raw), _octet(high, raw)
            if lo > hi:
                raise FormatError(f"address pattern {raw!r}: range {piece} is empty")
            parts.append((lo, hi))
        else:
            v = _octet(piece, raw)
            parts.append((v, v))
    return AddressPattern(raw, parts=tuple(parts), choices=choices)


def _octet(text: str, pattern: str) -> int:
    t = text.strip()
    if not t.isdigit() or int(t) > 255:
        raise FormatError(f"address pattern {pattern!r}: {text!r} is not a number from 0 to 255")
    return int(t)


def _octets(ip: str) -> tuple[int, ...] | None:
    try:
        addr = ipaddress.ip_address(ip)
    except ValueError:
        return None
    if isinstance(addr, ipaddress.IPv6Address):
        if addr.ipv4_mapped is None:
            return None
        addr = addr.ipv4_mapped
    return tuple(addr.packed)


def _canonical(ip: str, *, strict: bool = False) -> str:
    try:
        return str(ipaddress.ip_address(ip.strip("[]")))
    except ValueError:
        if strict:
            raise FormatError(f"address pattern {ip!r} is not an address") from None
        return ip
