"""Java's ``String.hashCode`` in Python.

RocketMQ stores ``tags.hashCode()`` in every ConsumeQueue unit and ``abs(key.hashCode())`` in every
IndexFile entry, so both must match the JVM bit for bit: 31-based polynomial over UTF-16 code units,
wrapping at 32 bits, read as a signed int.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

from rocketlite.common import native

_MASK = 0xFFFFFFFF
_SIGN = 0x80000000


def _java_string_hash_py(s: str) -> int:
    """Return ``s.hashCode()`` as Java computes it (signed 32-bit)."""
    h = 0
    if s.isascii():
        for c in s.encode("ascii"):
            h = (31 * h + c) & _MASK
    else:
        b = s.encode("utf-16-be")
        for i in range(0, len(b), 2):
            h = (31 * h + ((b[i] << 8) | b[i + 1])) & _MASK
    return h - (1 << 32) if h & _SIGN else h


# The compiled twin (``_javahash_c.pyx``) needs no cache: hashing a 45-character index key costs it
# less than a cache lookup. The pure one keeps its cache for tags, which repeat.
java_string_hash: Callable[[str], int] = lru_cache(maxsize=65536)(_java_string_hash_py)
_c = native.load("rocketlite.formats._javahash_c")
if _c is not None:
    java_string_hash = _c.Hasher(_java_string_hash_py)


def index_key_hash(key: str) -> int:
    """The IndexFile key hash: ``abs(hashCode)``, with Integer.MIN_VALUE mapped to 0."""
    h = abs(java_string_hash(key))
    return 0 if h > 0x7FFFFFFF else h


def tags_code(tags: str | None) -> int:
    """The ConsumeQueue tag hash: ``tags.hashCode()`` sign-extended to a long, 0 for no tags."""
    if not tags:
        return 0
    return java_string_hash(tags)
