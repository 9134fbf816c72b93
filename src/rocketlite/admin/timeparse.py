"""The timestamps the admin commands take (mqadmin's ``-s``/``-e``): milliseconds since the epoch,
or ``yyyy-MM-dd#HH:mm:ss:SSS`` in local time (``UtilAll.YYYY_MM_DD_HH_MM_SS_SSS``, read by Java's
``SimpleDateFormat`` in the JVM's time zone), or ``now`` (mqadmin ``resetOffsetByTime -s now``)."""

from __future__ import annotations

import datetime
import re
import time

from rocketlite.admin.errors import AdminError

_DATE = re.compile(r"(\d{4})-(\d{2})-(\d{2})#(\d{2}):(\d{2}):(\d{2}):(\d{3})", re.ASCII)
_MS = re.compile(r"\d{1,15}", re.ASCII)


def parse_timestamp(text: str) -> int:
    """Milliseconds since the epoch from ``text``; AdminError saying which forms are accepted."""
    s = text.strip()
    if s.lower() == "now":
        return int(time.time() * 1000)
    if _MS.fullmatch(s):
        return int(s)
    m = _DATE.fullmatch(s)
    if m is None:
        raise AdminError(f"timestamp {text!r} is neither milliseconds since the epoch, "
                         "yyyy-MM-dd#HH:mm:ss:SSS nor now")
    y, mo, d, h, mi, sec, ms = (int(g) for g in m.groups())
    try:
        local = datetime.datetime(y, mo, d, h, mi, sec)  # naive: the local time zone
    except ValueError as e:
        raise AdminError(f"timestamp {text!r} is not a valid date: {e}") from e
    return int(local.timestamp()) * 1000 + ms


def format_timestamp(ms: int) -> str:
    """``ms`` as ``yyyy-MM-dd#HH:mm:ss:SSS`` in local time (what ``parse_timestamp`` reads)."""
    t = datetime.datetime.fromtimestamp(ms / 1000)
    return t.strftime("%Y-%m-%d#%H:%M:%S:") + f"{t.microsecond // 1000:03d}"
