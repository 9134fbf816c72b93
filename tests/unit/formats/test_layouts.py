"""Every byte layout matches its documented table."""

from __future__ import annotations

import pytest

from rocketlite.common.errors import FormatError
from rocketlite.formats import checkpoint_layout as cp
from rocketlite.formats import consume_queue_unit as cq
from rocketlite.formats import ha
from rocketlite.formats import index_layout as ix
from rocketlite.formats import message_record as rec


def test_commitlog_record_fixed_sizes() -> None:
    assert rec.HEAD.size == rec.HEAD_SIZE == 4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8
    assert rec.FIXED_SIZE_V4 == 91
    assert rec.record_size(0, 0, 0) == 91
    # IPv6 hosts add 12 bytes each; a V2 topic adds one byte of length.
    assert rec.record_size(0, 0, 0, rec.SYSFLAG_BORNHOST_V6) == 103
    assert rec.record_size(0, 0, 0, rec.SYSFLAG_BORNHOST_V6 | rec.SYSFLAG_STOREHOST_V6) == 115
    assert rec.record_size(0, 200, 0) == 91 + 1 + 200
    assert rec.BLANK.size == rec.END_FILE_MIN_BLANK_LENGTH == 8


def test_magic_codes_match_java() -> None:
    assert rec.MAGIC_V1 & 0xFFFFFFFF == 0xDAA320A7
    assert rec.MAGIC_V2 & 0xFFFFFFFF == 0xDAA320AB
    assert rec.BLANK_MAGIC & 0xFFFFFFFF == 0xCBD43194


def test_consume_queue_unit_is_20_bytes() -> None:
    assert cq.CQ_UNIT.size == cq.CQ_UNIT_SIZE == 8 + 4 + 8
    assert cq.CQ_UNITS_PER_FILE * cq.CQ_UNIT_SIZE == 6_000_000


def test_index_layout() -> None:
    assert ix.INDEX_HEADER.size == ix.INDEX_HEADER_SIZE == 8 * 4 + 4 + 4
    assert ix.INDEX_SLOT.size == ix.INDEX_SLOT_SIZE == 4
    assert ix.INDEX_ENTRY.size == ix.INDEX_ENTRY_SIZE == 4 + 8 + 4 + 4
    assert ix.index_file_size(ix.DEFAULT_HASH_SLOT_NUM, ix.DEFAULT_INDEX_NUM) == 420_000_040


def test_checkpoint_layout() -> None:
    assert cp.CHECKPOINT.size == cp.CHECKPOINT_USED_SIZE == 40
    assert cp.CHECKPOINT_FILE_SIZE == 4096


def test_ha_layout() -> None:
    assert ha.REPORT.size == ha.REPORT_SIZE == 8
    assert ha.TRANSFER_HEADER.size == ha.TRANSFER_HEADER_SIZE == 8 + 4
    assert ha.encode_report(0x0102030405060708) == bytes(range(1, 9))
    assert ha.decode_report(ha.encode_report(123)) == 123
    assert ha.encode_transfer_header(1 << 32, 5) == b"\x00\x00\x00\x01" + b"\x00" * 4 + b"\x00\x00\x00\x05"
    assert ha.decode_transfer_header(ha.encode_transfer_header(7, 0), 10) == (7, 0)


def test_ha_refuses_bad_frames() -> None:
    with pytest.raises(FormatError):
        ha.decode_report(ha.REPORT.pack(-1))
    with pytest.raises(FormatError):
        ha.decode_transfer_header(ha.encode_transfer_header(0, 11), 10)
    with pytest.raises(FormatError):
        ha.decode_transfer_header(ha.encode_transfer_header(-5, 1), 10)
