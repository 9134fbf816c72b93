"""Message properties <-> RocketMQ's property string.

Each entry is ``name \\x01 value \\x02`` (the trailing ``\\x02`` included), UTF-8 on the wire and on
disk. On parse, segments shorter than 3 characters or with no name or value are skipped, as
``MessageDecoder.string2messageProperties`` does.
"""

from __future__ import annotations

from collections.abc import Mapping

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
KEY_SEPARATOR = " "


def encode_properties(props: Mapping[str, str]) -> str:
    """Encode a mapping as a property string (empty mapping -> empty string)."""
    return "".join(f"{k}{NAME_VALUE_SEPARATOR}{v}{PROPERTY_SEPARATOR}" for k, v in props.items())


def decode_properties(text: str) -> dict[str, str]:
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
