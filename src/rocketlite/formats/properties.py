"""Message properties <-> RocketMQ's property string.

Each entry is ``name \\x01 value \\x02`` (the trailing ``\\x02`` included), UTF-8 on the wire and on
disk. On parse, segments shorter than 3 characters or with no name or value are skipped, as
``MessageDecoder.string2messageProperties`` does.

The store refuses a property string holding a NUL byte (``nul_error``): BODYCRC does not cover the
properties, and zeros there are how recovery recognises a write a crash cut short.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from rocketlite.common import native

NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"

# Property names (MessageConst.java).
TAGS = "TAGS"
KEYS = "KEYS"
UNIQ_KEY = "UNIQ_KEY"
WAIT = "WAIT"
DELAY = "DELAY"
RETRY_TOPIC = "RETRY_TOPIC"
REAL_TOPIC = "REAL_TOPIC"
REAL_QID = "REAL_QID"
TRAN_MSG = "TRAN_MSG"
PGROUP = "PGROUP"
MIN_OFFSET = "MIN_OFFSET"
MAX_OFFSET = "MAX_OFFSET"
ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
MSG_REGION = "MSG_REGION"
TRACE_ON = "TRACE_ON"
KEY_SEPARATOR = " "


def encode_properties(props: Mapping[str, str]) -> str:
    """Encode a mapping as a property string (empty mapping -> empty string)."""
    return "".join(f"{k}{NAME_VALUE_SEPARATOR}{v}{PROPERTY_SEPARATOR}" for k, v in props.items())


def _decode_properties_py(text: str) -> dict[str, str]:
    """Decode a property string; malformed segments are skipped, never raised on."""
    out: dict[str, str] = {}
    if not text:
        return out
    for item in text.split(PROPERTY_SEPARATOR):
        if len(item) < 3:
            continue
        name, sep, value = item.partition(NAME_VALUE_SEPARATOR)
        if not sep or not name or not value:
            continue
        out[name] = value
    return out


def _find_property_py(props: bytes, name: bytes) -> str | None:
    """The value of one property in an encoded property string, without decoding the rest.

    ``name`` must be given with its trailing ``\\x01`` (e.g. ``b"TAGS\\x01"``); a match counts only
    at the start of an entry.
    """
    i = props.find(name)
    while i > 0 and props[i - 1] != 2:
        i = props.find(name, i + 1)
    if i < 0:
        return None
    start = i + len(name)
    end = props.find(b"\x02", start)
    value = props[start:end] if end >= 0 else props[start:]
    return value.decode("utf-8", "replace") if value else None


# The compiled twins (``_properties_c.pyx``), unless ROCKETLITE_PURE or not built.
decode_properties: Callable[[str], dict[str, str]] = _decode_properties_py
find_property: Callable[[bytes, bytes], str | None] = _find_property_py
_c = native.load("rocketlite.formats._properties_c")
if _c is not None:
    decode_properties = _c.decode_properties
    find_property = _c.find_property


def nul_error(props: bytes) -> str | None:
    """None if the encoded property string holds no NUL byte; else why it is refused: the byte
    position of the first NUL and the property (name or value) it falls in."""
    i = props.find(b"\x00")
    if i < 0:
        return None
    start = props.rfind(b"\x02", 0, i) + 1
    name, sep, _ = props[start:i].partition(b"\x01")
    where = "value" if sep else "name"
    return (f"properties hold a NUL byte at byte {i}, in the {where} of property "
            f"{name.decode('utf-8', 'replace')!r}: keys, tags and other properties cannot "
            "contain NUL")
