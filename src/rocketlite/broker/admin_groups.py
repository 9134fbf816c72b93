"""Consumer group administration (mqadmin ``updateSubGroup``, ``deleteSubGroup``,
``resetOffsetByTime``), as Java's ``AdminBrokerProcessor`` and ``Broker2Client`` do it; the
Remoting adapter is ``admin_remoting``.

- Create or update a subscription group: the name is checked as Java's ``TopicValidator.
  validateGroup`` does (not blank, at most 255 characters of ``%|a-zA-Z0-9_-``).
- Delete one: its settings, and with ``cleanOffset`` its committed offsets too; online members
  stay registered (as in Java).
- Reset a group's offsets on a topic to a time: per read queue, the first message stored at or
  after ``timestamp`` (the max offset for -1). Without ``isForce`` an offset only moves back: a
  queue whose committed offset is behind the target keeps it. 5.x's one-queue form
  (``queueId`` >= 0 with an ``offset``) sets that offset after checking it lies within the queue.
  The offsets are committed here; the adapter then pushes them to the group's online members
  (RESET_CONSUMER_CLIENT_OFFSET), which must adopt them or their next commit would undo the reset.

  Differences from Java: Java's default path (``Broker2Client.resetOffset``) commits nothing itself
  and answers CONSUMER_NOT_ONLINE for a group without online members (mqadmin then falls back to
  committing each queue with UPDATE_CONSUMER_OFFSET); rocketlite commits either way and answers
  the new offsets. A queue the group never committed takes the target (Java fails the whole reset:
  "THe consumer group <g> not exist"). A group neither configured, online nor with offsets on the
  topic is SUBSCRIPTION_GROUP_NOT_EXIST, as in 5.x's server-side reset; a slave refuses.
"""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING

from rocketlite.broker.subscriptions import SubscriptionGroupConfig
from rocketlite.protocol.bodies import MessageQueue

if TYPE_CHECKING:
    from rocketlite.broker.broker import Broker

log = logging.getLogger(__name__)

GROUP_MAX_LENGTH = 255  # TopicValidator.CHARACTER_MAX_LENGTH
_GROUP_CHARS = re.compile(r"[%|a-zA-Z0-9_-]+", re.ASCII)


class AdminRequestError(ValueError):
    """An admin request that cannot be carried out; the message is the remark to answer."""


class InvalidRequest(AdminRequestError):
    """A malformed name or an out-of-range value (INVALID_PARAMETER / SYSTEM_ERROR)."""


class TopicNotFound(AdminRequestError):
    """TOPIC_NOT_EXIST."""


class GroupNotFound(AdminRequestError):
    """SUBSCRIPTION_GROUP_NOT_EXIST."""


class NotOnMaster(AdminRequestError):
    """A write a slave must not do (its offsets are its master's)."""


def validate_group(group: str) -> None:
    """Java's ``TopicValidator.validateGroup``; raises InvalidRequest with Java's remark."""
    if not group or not group.strip():
        raise InvalidRequest("the specified group is blank")
    if len(group) > GROUP_MAX_LENGTH:
        raise InvalidRequest(
            f"the specified group is longer than group max length {GROUP_MAX_LENGTH}.")
    if not _GROUP_CHARS.fullmatch(group):
        raise InvalidRequest(f"the specified group[{group}] contains illegal characters, "
                             "allowing only ^[%|a-zA-Z0-9_-]+$")


class GroupAdmin:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    def update_group(self, sgc: SubscriptionGroupConfig) -> None:
        validate_group(sgc.groupName)
        try:
            self.broker.subscriptions.update(sgc)
        except ValueError as e:  # the table is full
            raise InvalidRequest(str(e)) from None

    def delete_group(self, group: str, clean_offset: bool) -> None:
        b = self.broker
        b.subscriptions.delete(group)
        if clean_offset:
            b.offsets.remove_group(group)
        log.info("subscription group %s deleted%s", group, " with its offsets" if clean_offset else "")

    def reset_offset(self, topic: str, group: str, timestamp: int, force: bool,
                     queue_id: int = -1, offset: int | None = None) -> dict[MessageQueue, int]:
        """Commit the group's new offsets on ``topic`` (see the module docstring); the offsets."""
        b = self.broker
        if b.slave:
            raise NotOnMaster("Can not reset offset in slave broker")
        tc = b.topics.get(topic)
        if tc is None:
            raise TopicNotFound(f"[reset-offset] reset offset failed, no topic in this broker. "
                                f"topic={topic}")
        if (group not in b.subscriptions.table and b.consumers.get(group) is None
                and not b.offsets.offsets_of(group, topic)):
            raise GroupNotFound(f"Group {group} does not exist")
        store = b.store
        targets: dict[int, int] = {}
        if queue_id >= 0 and offset is not None and offset != -1:
            lo, hi = store.min_offset_in_queue(topic, queue_id), store.max_offset_in_queue(topic, queue_id)
            if offset < lo or offset > hi:
                raise InvalidRequest(
                    f"Target offset {offset} not in consume queue range [{lo}-{hi}]")
            targets[queue_id] = offset
            force = True
        else:
            for qid in ([queue_id] if queue_id >= 0 else range(tc.readQueueNums)):
                target = (store.max_offset_in_queue(topic, qid) if timestamp == -1
                          else store.offset_in_queue_by_time(topic, qid, timestamp))
                targets[qid] = max(0, target)
        out: dict[MessageQueue, int] = {}
        for qid, target in targets.items():
            committed = b.offsets.query(group, topic, qid)
            new = target if force or committed < 0 or target < committed else committed
            b.offsets.commit(group, topic, qid, new)
            out[MessageQueue(topic=topic, brokerName=b.config.broker_name, queueId=qid)] = new
        log.info("reset offsets of %s on %s to %s (timestamp %d, force %s)", group, topic,
                 {mq.queueId: o for mq, o in out.items()}, timestamp, force)
        return out
