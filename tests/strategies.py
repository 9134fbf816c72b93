"""Hypothesis strategies shared by the tests of several layers."""

from __future__ import annotations

from hypothesis import strategies as st

from rocketlite.formats import message_record as rec
from rocketlite.formats.properties import encode_properties

i32 = st.integers(-(2**31), 2**31 - 1)
i64 = st.integers(-(2**63), 2**63 - 1)
hosts = st.one_of(st.binary(min_size=4, max_size=4), st.binary(min_size=16, max_size=16))
topics = st.text(alphabet="abcXYZ019_-%|", min_size=1, max_size=300)


@st.composite
def records(draw: st.DrawFn) -> rec.MessageRecord:
    born = draw(hosts)
    store = draw(hosts)
    sys_flag = draw(st.integers(0, 0xF)) | (rec.SYSFLAG_BORNHOST_V6 if len(born) == 16 else 0)
    sys_flag |= rec.SYSFLAG_STOREHOST_V6 if len(store) == 16 else 0
    body = draw(st.binary(max_size=300))
    topic = draw(topics)
    props = encode_properties(draw(st.dictionaries(
        st.text(alphabet="ABCKEYS_", min_size=1, max_size=8),
        st.text(alphabet="xyz 019", min_size=1, max_size=20), max_size=4)))
    m = rec.MessageRecord(
        total_size=rec.record_size(len(body), len(topic.encode()), len(props.encode()), sys_flag),
        magic=rec.MAGIC_V2 if len(topic) > 127 else rec.MAGIC_V1,
        body_crc=rec.body_crc(body),
        queue_id=draw(st.integers(0, 1000)), flag=draw(i32), queue_offset=draw(i64),
        commit_log_offset=draw(i64), sys_flag=sys_flag, born_timestamp=draw(i64),
        born_host=born, born_port=draw(i32), store_timestamp=draw(i64), store_host=store,
        store_port=draw(i32), reconsume_times=draw(i32), prepared_transaction_offset=draw(i64),
        body=body, topic=topic, properties_text=props,
    )
    return m
