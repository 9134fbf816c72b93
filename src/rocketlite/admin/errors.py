"""The one exception the admin functions raise for an expected failure."""

from __future__ import annotations

from rocketlite.common.errors import RocketliteError


class AdminError(RocketliteError):
    """An expected failure (a NameServer or broker that cannot be reached, a topic or message
    that does not exist, a broker's refusal): the message is the one-line reason an operator
    reads, so a CLI prints it and a dashboard shows it, with no traceback."""


class UnreachableError(AdminError):
    """A NameServer or broker that could not be asked (no connection, no answer in time): for a
    NameServer list, the next one is tried."""


class TopicNotFoundError(AdminError):
    """The NameServer routes no such topic (TOPIC_NOT_EXIST)."""
