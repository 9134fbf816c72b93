"""decode_messages reads the common record (IPv4, V1 topic) without an intermediate object: it
must give what the general path (decode_record, then the fields one by one) gives, for every
record shape, and refuse damage the same way."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketlite.client.errors import MQClientError
from rocketlite.client.message import _format_host, decode_messages
from rocketlite.formats import message_record as rec
from rocketlite.formats.message_id import encode_message_id
from rocketlite.formats.properties import decode_properties
from strategies import records


def reference(m: rec.MessageRecord) -> tuple[object, ...]:
    offset_id = encode_message_id(m.store_host, m.store_port, m.commit_log_offset)
    properties = decode_properties(m.properties_text)
    return (m.topic, m.body, properties, m.queue_id, m.queue_offset, m.commit_log_offset, m.sys_flag,
            m.flag, m.born_timestamp, m.store_timestamp, _format_host(m.born_host, m.born_port),
            _format_host(m.store_host, m.store_port), m.reconsume_times,
            m.prepared_transaction_offset, m.body_crc, properties.get("UNIQ_KEY") or offset_id,
            offset_id)


@given(st.lists(records(), min_size=1, max_size=4))
def test_fast_and_general_paths_agree(ms: list[rec.MessageRecord]) -> None:
    ms = [m for m in ms if not m.sys_flag & rec.SYSFLAG_COMPRESSED]  # bodies here are not zlib
    data = b"".join(m.encode() for m in ms)
    got = decode_messages(data, "broker-x")
    assert len(got) == len(ms)
    for g, m in zip(got, ms, strict=True):
        assert (g.topic, g.body, g.properties, g.queue_id, g.queue_offset, g.commit_log_offset,
                g.sys_flag, g.flag, g.born_timestamp, g.store_timestamp, g.born_host, g.store_host,
                g.reconsume_times, g.prepared_transaction_offset, g.body_crc, g.msg_id,
                g.offset_msg_id) == reference(m)
        assert g.broker_name == "broker-x"


def test_damage_is_refused_with_its_position() -> None:
    good = rec.encode_record(
        topic=b"T", body=b"hello", properties=b"UNIQ_KEY\x01AB\x02", queue_id=1, flag=0,
        queue_offset=7, commit_log_offset=0, sys_flag=0, born_timestamp=1, born_host=b"\x7f\0\0\1",
        born_port=1, store_timestamp=2, store_host=b"\x7f\0\0\1", store_port=10911)
    assert decode_messages(good + good)[1].msg_id == "AB"
    bad = bytearray(good)
    bad[-20] ^= 0xFF  # in the body
    with pytest.raises(MQClientError, match=f"byte {len(good)}"):
        decode_messages(good + bytes(bad))
    assert decode_messages(bytes(bad), verify_crc=False)[0].queue_offset == 7
