"""The client's exceptions.

``MQClientError`` is anything that went wrong on this side (no route, bad argument, timeout, a
closed connection); ``MQBrokerError`` is a broker's refusal, with the broker's response code and
remark, so callers can branch on ``e.code`` (e.g. ``ResponseCode.TOPIC_NOT_EXIST``).
"""

from __future__ import annotations

from rocketlite.common.errors import RocketliteError
from rocketlite.protocol.codes import ResponseCode


class MQClientError(RocketliteError):
    """A client-side failure: a bad argument, no route, no answer in time, a lost connection."""


class MQBrokerError(RocketliteError):
    """The broker (or NameServer) answered with an error ``code`` and ``remark``."""

    def __init__(self, code: int, remark: str | None, addr: str = "") -> None:
        self.code = code
        self.remark = remark or ""
        self.addr = addr
        try:
            name = ResponseCode(code).name
        except ValueError:
            name = "UNKNOWN"
        where = f" from {addr}" if addr else ""
        super().__init__(f"{name} ({code}){where}: {self.remark}")
