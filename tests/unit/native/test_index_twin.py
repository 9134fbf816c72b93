"""The compiled IndexFile entry writer against the pure ``_put_entries_py``: the same bytes (slots,
entries) and the same header counts for random batches of key hashes, offsets and times, on a
fresh file and over slots holding garbage (a torn write)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nativehelp import twin
from rocketlite.formats import index_entries as ref
from rocketlite.formats.index_layout import index_file_size
from rocketlite.formats.javahash import index_key_hash, java_string_hash
from rocketlite.store import index_service

C = twin("rocketlite.formats._index_c")

HASHES = st.integers(0, 0x7FFFFFFF) | st.sampled_from([0, 1, 7, 0x7FFFFFFF])


@given(st.integers(1, 16), st.integers(1, 5), st.data())
def test_put_entries(slots: int, start: int, d: st.DataObject) -> None:
    k = d.draw(st.integers(0, 12))
    entries = start + k + d.draw(st.integers(0, 3))
    size = index_file_size(slots, entries)
    garbage = d.draw(st.binary(min_size=slots * 4, max_size=slots * 4))
    base = bytearray(size)
    base[40 : 40 + slots * 4] = garbage if d.draw(st.booleans()) else bytes(slots * 4)
    hashes = d.draw(st.lists(HASHES, min_size=k, max_size=k))
    phys = d.draw(st.lists(st.integers(-(2**63), 2**63 - 1), min_size=k, max_size=k))
    stamps = d.draw(st.lists(st.integers(0, 2**45), min_size=k, max_size=k))
    begin = d.draw(st.sampled_from([0, -5, 1, 1_700_000_000_000]) | st.integers(0, 2**45))
    count = d.draw(st.integers(0, slots))
    a, b = bytearray(base), bytearray(base)
    got = C.put_entries(a, slots, start, count, begin, hashes, phys, stamps)
    want = ref._put_entries_py(b, slots, start, count, begin, hashes, phys, stamps)
    assert (got, a) == (want, b)


def test_chains_link_to_the_previous_entry_of_the_slot() -> None:
    for f in (C.put_entries, ref._put_entries_py):
        buf = bytearray(index_file_size(4, 8))
        assert f(buf, 4, 1, 0, 1000, [5, 9, 6], [10, 20, 30], [1000, 3500, 9000]) == (4, 2)
        entries = 40 + 16
        # entry 2 (hash 9, slot 1) links to entry 1 (hash 5, slot 1); its time is 2 s
        assert buf[entries + 40 : entries + 60] == (
            (9).to_bytes(4, "big") + (20).to_bytes(8, "big") + (2).to_bytes(4, "big")
            + (1).to_bytes(4, "big"))
        assert buf[40 + 4 : 40 + 8] == (2).to_bytes(4, "big")  # slot 1 -> entry 2


VALUES = st.text(alphabet=" ab\t\u00e9\x1f\x01k", max_size=12)


@st.composite
def property_strings(draw: st.DrawFn) -> bytes:
    props = {}
    if draw(st.booleans()):
        props["KEYS"] = draw(VALUES)
    if draw(st.booleans()):
        props["UNIQ_KEY"] = draw(VALUES)
    text = "".join(f"{k}\x01{v}\x02" for k, v in props.items())
    if draw(st.integers(0, 5)) == 0:
        text = draw(st.text(alphabet="\x01\x02KEYSUNIQ_ a", max_size=30))
    return text.encode()


@given(st.lists(st.tuples(st.sampled_from(["T", "Topic\u00e9", "T"]), property_strings(),
                          st.integers(-3, 30), st.integers(0, 2**40)), max_size=12),
       st.integers(-(2**63), 20))
def test_key_entries(msgs: list[tuple[str, bytes, int, int]], done: int) -> None:
    args = ([m[0] for m in msgs], [m[1] for m in msgs], [m[2] for m in msgs],
            [m[3] for m in msgs], done)
    assert C.key_entries(*args) == ref._key_entries_py(*args)


def test_keys_of_a_message() -> None:
    props = b"KEYS\x01a b  a \x02UNIQ_KEY\x01 u \x02"
    for f in (C.key_entries, ref._key_entries_py):
        assert f(["T"], [props], [5], [7], -1) == (["T#u", "T#a", "T#b"], [5] * 3, [7] * 3, 5)
        assert f(["T"], [props], [5], [7], 5) == ([], [], [], 5)  # indexed before


@given(st.lists(st.tuples(st.sampled_from(["T", "Topic\u00e9", "T"]), property_strings(),
                          st.integers(-3, 30), st.integers(0, 2**40)), max_size=12),
       st.integers(-(2**63), 20))
def test_key_hash_entries(msgs: list[tuple[str, bytes, int, int]], done: int) -> None:
    """The keys' index hashes in place of the keys: what the pure twin (key_entries, then
    index_key_hash) gives, and what hashing the pure key_entries' keys gives."""
    args = ([m[0] for m in msgs], [m[1] for m in msgs], [m[2] for m in msgs],
            [m[3] for m in msgs], done)
    keys, phys, stamps, end = ref._key_entries_py(*args)
    want = ([index_key_hash(k) for k in keys], phys, stamps, end)
    assert C.key_hash_entries(*args) == index_service._key_hash_entries_py(*args) == want


def _topic_whose_key_hashes_to(target: int, key: str) -> str:
    """A topic, ``T`` + seven chars, for which ``topic#key``'s Java hashCode is ``target`` (mod
    2**32): hash(topic#key) = hash(topic) * 31**(len(key) + 1) + hash(#key), and the seven chars
    are the base-31 digits of what hash(topic) must be beyond ``T``'s part."""
    tail = 31 ** (len(key) + 1)
    need = (target - java_string_hash("#" + key)) * pow(tail, -1, 2**32) % 2**32
    v = (need - ord("T") * 31**7) % 2**32
    return "T" + "".join(chr(v // 31**i % 31) for i in range(6, -1, -1))


@pytest.mark.parametrize(("java_hash", "index_hash"), [(-(2**31), 0), (-5, 5), (2**31 - 1, 2**31 - 1)])
def test_key_hash_is_abs_of_the_java_hash(java_hash: int, index_hash: int) -> None:
    topic = _topic_whose_key_hashes_to(java_hash, "k")
    assert java_string_hash(topic + "#k") == java_hash
    for f in (C.key_hash_entries, index_service._key_hash_entries_py):
        assert f([topic], [b"UNIQ_KEY\x01k\x02"], [5], [7], -1) == ([index_hash], [5], [7], 5)


def test_a_message_with_many_keys_gets_every_key_once() -> None:
    """More keys than the compiled walk tracks for duplicates (64): the pure keys, on both."""
    keys = " ".join(f"k{i % 90}" for i in range(200)).encode()
    args = (["T", "T"], [b"KEYS\x01" + keys + b"\x02UNIQ_KEY\x01u\x02", b"KEYS\x01a a\x02"],
            [1, 2], [3, 4], -1)
    want = ref._key_entries_py(*args)
    assert len(want[0]) == 92  # T#u, 90 distinct T#k.., T#a
    assert C.key_entries(*args) == want
    assert C.key_hash_entries(*args) == index_service._key_hash_entries_py(*args)
