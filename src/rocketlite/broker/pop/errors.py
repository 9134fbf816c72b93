"""Errors of the POP path; the Remoting processor and the gRPC front map each to their codes."""

from __future__ import annotations

from rocketlite.common.errors import RocketliteError
from rocketlite.protocol import pop_info


class PopError(RocketliteError):
    """Base of the POP path's errors."""


class InvalidReceiptHandle(PopError, pop_info.InvalidReceiptHandle):
    """A receipt handle (extraInfo) that does not parse, or that names another topic or queue
    (``acks.parse_handle`` turns the codec's refusal into this one)."""


class ReceiptHandleExpired(PopError):
    """The handle's invisible time is over (the message may already be revived) or its FIFO batch
    was given up: the ack or change is refused. Remoting answers NO_MESSAGE ("ack offset
    illegal" style remark), gRPC INVALID_RECEIPT_HANDLE."""


class GroupNotFound(PopError):
    """Unknown subscription group and ``autoCreateSubscriptionGroup`` off."""


class TopicNotFound(PopError):
    """The topic does not exist on this broker."""


class NoPermission(PopError):
    """The broker, topic or group forbids consuming."""


class BadPopRequest(PopError):
    """A parameter out of range (queue id, batch size, invisible time) or an unsupported filter
    type; the message says which."""


class PollingFull(PopError):
    """Too many pops are held already (``popPollingSize`` on the topic or ``maxPopPollingSize``
    in all). ``PopService.pop`` answers it as ``PopStatus.POLLING_FULL`` (Remoting
    POLLING_FULL), not as an exception."""
