"""TopicConfigManager: the broker's topic table, persisted in ``config/topics.json``.

The file is ``TopicConfigSerializeWrapper``'s JSON (``{"dataVersion":..,"topicConfigTable":{..}}``),
the same shape a Java broker writes, so either can read the other's. Every change bumps the data
version; the broker registers with its NameServers after each change so routes follow at once.

Built-in topics (Java's ``TopicConfigManager`` constructor): ``SELF_TEST_TOPIC``, ``TBW102``
(when ``autoCreateTopicEnable``; its INHERIT bit lets sends create topics from it), the cluster
and broker name topics, ``OFFSET_MOVED_EVENT``, ``SCHEDULE_TOPIC_XXXX`` (18 queues, one per
delay level) and, with ``traceTopicEnable``, the trace topic ``msgTraceTopicName`` (one queue).

Auto-creation on send (``createTopicInSendMessageMethod``): an unknown topic is created from the
request's ``defaultTopic`` when that topic exists and may be inherited, with
``min(defaultTopicQueueNums of the request, the default topic's write queues)`` queues and the
default topic's permissions minus INHERIT; at most ``autoCreateTopicsPerMinute`` of them
(``create_rate``): past it the send gets ``TopicNotExistError`` naming the limit.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable, Iterable
from pathlib import Path

from rocketlite.broker import config_file
from rocketlite.broker.config import PERM_INHERIT, PERM_READ, PERM_WRITE, BrokerConfig
from rocketlite.broker.create_rate import CreateRate
from rocketlite.common.errors import BodyError, ConfigError
from rocketlite.protocol.bodies import DataVersion, TopicConfig, TopicConfigSerializeWrapper

log = logging.getLogger(__name__)

AUTO_CREATE_TOPIC = "TBW102"
SELF_TEST_TOPIC = "SELF_TEST_TOPIC"
OFFSET_MOVED_EVENT = "OFFSET_MOVED_EVENT"
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
SYSTEM_TOPIC_PREFIX = "rmq_sys_"
RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
DLQ_GROUP_TOPIC_PREFIX = "%DLQ%"
TOPIC_MAX_LENGTH = 127  # a v1 CommitLog record's topic length is one signed byte
MAX_QUEUE_NUMS = 1024
MAX_TOPICS = 100_000
_TOPIC_CHARS = re.compile(r"[%|a-zA-Z0-9_-]+", re.ASCII)


class TopicError(ValueError):
    """A topic name or topic setting the broker refuses; the message says why."""


class TopicNotExistError(LookupError):
    """The topic does not exist and the send may not create it."""


def validate_topic(topic: str) -> None:
    """Java's ``TopicValidator.validateTopic``: not blank, ``[%|a-zA-Z0-9_-]``, at most 127."""
    if not topic or not topic.strip():
        raise TopicError("the topic name is blank")
    if not _TOPIC_CHARS.fullmatch(topic):
        raise TopicError(f"the topic name {topic[:80]!r} contains characters other than "
                         "letters, digits, '%', '|', '_' and '-'")
    if len(topic) > TOPIC_MAX_LENGTH:
        raise TopicError(f"the topic name is {len(topic)} characters long, "
                         f"longer than {TOPIC_MAX_LENGTH}")


TRANS_HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
TRANS_OP_HALF_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
TRANS_CHECK_MAX_TIME_TOPIC = "TRANS_CHECK_MAX_TIME_TOPIC"
SYNC_TOPICS = ("RMQ_SYS_TOPIC_CONFIG_SYNC", "RMQ_SYS_CONSUMER_OFFSET_SYNC",
               "RMQ_SYS_DELAY_OFFSET_SYNC", "RMQ_SYS_SUBSCRIPTION_GROUP_SYNC",
               "RMQ_SYS_MESSAGE_MODE_SYNC", "RMQ_SYS_TIMER_METRICS_SYNC")
NOT_ALLOWED_SEND_TOPICS = frozenset({
    SCHEDULE_TOPIC, TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC, TRANS_CHECK_MAX_TIME_TOPIC,
    SELF_TEST_TOPIC, OFFSET_MOVED_EVENT, *SYNC_TOPICS, AUTO_CREATE_TOPIC,
})
"""Topics a client may not send to, refused with NO_PERMISSION ("Sending message to topic[X] is
forbidden."): those only the broker writes (Java 5's ``TopicValidator.NOT_ALLOWED_SEND_TOPIC_SET``,
the slave-acting-master sync topics included) and ``TBW102``, the template new topics are created
from (Java 4's ``TopicValidator.validateTopic`` and the Java and Go clients' ``checkTopic`` refuse
it: "conflict with AUTO_CREATE_TOPIC_KEY_TOPIC")."""


def is_system_topic(topic: str, config: BrokerConfig) -> bool:
    """Java's ``TopicValidator.isSystemTopic`` (the trace topic is one when the broker made it)."""
    return (
        topic in (AUTO_CREATE_TOPIC, SELF_TEST_TOPIC, OFFSET_MOVED_EVENT, SCHEDULE_TOPIC,
                  config.broker_cluster_name, config.broker_name)
        or topic.startswith(SYSTEM_TOPIC_PREFIX)
        or (config.trace_topic_enable and topic == config.msg_trace_topic_name)
    )


def keeps_queues(topic: str, config: BrokerConfig) -> bool:
    """A topic whose ConsumeQueues CLEAN_EXPIRED_CONSUMEQUEUE leaves alone: the system topics and
    those only the broker writes (transaction half/op, timer, revive: their offsets are the
    broker's own bookkeeping)."""
    return (is_system_topic(topic, config) or topic in NOT_ALLOWED_SEND_TOPICS
            or topic.upper().startswith(SYSTEM_TOPIC_PREFIX.upper()))


def perm_to_string(perm: int) -> str:
    return ("R" if perm & PERM_READ else "-") + ("W" if perm & PERM_WRITE else "-") + (
        "X" if perm & PERM_INHERIT else "-")


class TopicConfigManager:
    def __init__(self, config: BrokerConfig, path: Path) -> None:
        self.config = config
        self.path = path
        self.table: dict[str, TopicConfig] = {}
        self.data_version = DataVersion()
        self.lock = threading.Lock()
        self.on_change: list[Callable[[TopicConfig], None]] = []
        self.create_rate: CreateRate | None = None  # autoCreateTopicsPerMinute (the broker's)
        self._builtin()

    def _builtin(self) -> None:
        cfg = self.config
        rw = PERM_READ | PERM_WRITE
        builtin = [
            TopicConfig(topicName=SELF_TEST_TOPIC, readQueueNums=1, writeQueueNums=1),
            TopicConfig(topicName=cfg.broker_cluster_name, readQueueNums=16, writeQueueNums=16,
                        perm=PERM_INHERIT | rw),
            TopicConfig(topicName=cfg.broker_name, readQueueNums=1, writeQueueNums=1,
                        perm=PERM_INHERIT | rw),
            TopicConfig(topicName=OFFSET_MOVED_EVENT, readQueueNums=1, writeQueueNums=1),
            TopicConfig(topicName=SCHEDULE_TOPIC, readQueueNums=18, writeQueueNums=18),
        ]
        if cfg.trace_topic_enable:
            builtin.append(TopicConfig(topicName=cfg.msg_trace_topic_name, readQueueNums=1,
                                       writeQueueNums=1))
        if cfg.auto_create_topic_enable:
            n = cfg.default_topic_queue_nums
            builtin.append(TopicConfig(topicName=AUTO_CREATE_TOPIC, readQueueNums=n,
                                       writeQueueNums=n, perm=PERM_INHERIT | rw))
        for tc in builtin:
            self.table[tc.topicName] = tc

    # -- persistence -----------------------------------------------------------------------

    def load(self) -> None:
        """Read ``topics.json`` (or its backup); a missing file is an empty table. A file that
        is unreadable in both copies is an error: starting without its topics would lose them."""
        obj = config_file.load(self.path)
        if obj is None:
            return
        try:
            wrapper = TopicConfigSerializeWrapper.from_obj(obj, str(self.path))
        except BodyError as e:
            raise ConfigError(f"{self.path}: {e}") from e
        with self.lock:
            for name, tc in wrapper.topicConfigTable.items():
                if name != tc.topicName:
                    log.warning("%s: entry %r names topic %r; using the entry's key",
                                self.path, name, tc.topicName)
                    tc.topicName = name
                self.table[name] = tc
            self.data_version = wrapper.dataVersion

    def persist(self) -> None:
        config_file.save(self.path, self.wrapper().to_json())

    def persist_or_log(self) -> bool:
        return config_file.save_or_log(self.path, self.wrapper().to_json())

    def wrapper(self) -> TopicConfigSerializeWrapper:
        with self.lock:
            return TopicConfigSerializeWrapper(
                topicConfigTable=dict(self.table),
                dataVersion=DataVersion(stateVersion=self.data_version.stateVersion,
                                        timestamp=self.data_version.timestamp,
                                        counter=self.data_version.counter),
            )

    # -- reads -----------------------------------------------------------------------------

    def get(self, topic: str) -> TopicConfig | None:
        return self.table.get(topic)

    def __len__(self) -> int:
        return len(self.table)

    # -- changes ---------------------------------------------------------------------------

    def _changed(self, tc: TopicConfig | None) -> None:
        dv = self.data_version
        self.data_version = DataVersion(stateVersion=dv.stateVersion, counter=dv.counter + 1)
        self.persist_or_log()
        if tc is not None:
            for fn in self.on_change:
                try:
                    fn(tc)
                except Exception:
                    log.exception("topic change listener failed for %s", tc.topicName)

    def touch(self) -> None:
        """A new data version with the same topics: what the broker registers changed otherwise
        (its permission masks every topic's), and the NameServer takes topics only from a
        registration with a new version."""
        self._changed(None)

    def update(self, tc: TopicConfig) -> TopicConfig:
        """Create or replace a topic (UPDATE_AND_CREATE_TOPIC); TopicError if refused."""
        validate_topic(tc.topicName)
        for what, n in (("readQueueNums", tc.readQueueNums), ("writeQueueNums", tc.writeQueueNums)):
            if not 0 < n <= MAX_QUEUE_NUMS:
                raise TopicError(f"{what}={n}: must be within 1..{MAX_QUEUE_NUMS}")
        if not 0 <= tc.perm <= 0xF:
            raise TopicError(f"perm={tc.perm}: must be within 0..15")
        with self.lock:
            if tc.topicName not in self.table and len(self.table) >= MAX_TOPICS:
                raise TopicError(f"the broker already has {MAX_TOPICS} topics")
            self.table[tc.topicName] = tc
        log.info("topic %s: %d/%d queues, perm %s", tc.topicName, tc.readQueueNums,
                 tc.writeQueueNums, perm_to_string(tc.perm))
        self._changed(tc)
        return tc

    def delete(self, topic: str) -> bool:
        with self.lock:
            removed = self.table.pop(topic, None)
        if removed is None:
            return False
        log.info("topic %s deleted", topic)
        self._changed(None)
        return True

    def create_in_send(
        self, topic: str, default_topic: str, queue_nums: int, topic_sys_flag: int = 0
    ) -> TopicConfig | None:
        """The config for a send to an unknown ``topic``, created from ``default_topic`` when
        that is allowed; None when it is not (the caller answers TOPIC_NOT_EXIST). Raises
        ``TopicNotExistError`` past ``autoCreateTopicsPerMinute``."""
        tc = self.table.get(topic)
        if tc is not None:
            return tc
        validate_topic(topic)
        default = self.table.get(default_topic)
        if default is None or not default.perm & PERM_INHERIT:
            return None
        if default_topic == AUTO_CREATE_TOPIC and not self.config.auto_create_topic_enable:
            return None
        n = max(1, min(queue_nums, default.writeQueueNums))
        with self.lock:
            tc = self.table.get(topic)
            if tc is not None:
                return tc
        rate = self.create_rate
        if rate is not None and not rate.take():
            raise TopicNotExistError(rate.refusal(f"topic[{topic}]"))
        return self.update(TopicConfig(topicName=topic, readQueueNums=n, writeQueueNums=n,
                                       perm=default.perm & ~PERM_INHERIT,
                                       topicSysFlag=topic_sys_flag))

    def adopt_queues(self, queues: Iterable[tuple[str, int]]) -> list[str]:
        """Create the config of each topic the store has ConsumeQueues for but this table lacks
        (``queue ids + 1`` queues, read/write); the topics created. A slave promoted by the
        controller holds the replicated messages of a topic created on the old master less than
        a slave sync (10 s) before it died: without this, pulls of it are TOPIC_NOT_EXIST."""
        top: dict[str, int] = {}
        for topic, qid in queues:
            if topic not in self.table and not keeps_queues(topic, self.config):
                top[topic] = max(top.get(topic, 0), qid + 1)
        for topic, n in top.items():
            self.create_plain(topic, n)
        return sorted(top)

    def create_plain(self, topic: str, queue_nums: int, perm: int = PERM_READ | PERM_WRITE
                     ) -> TopicConfig:
        """The config of a broker-owned topic (retry, dead-letter), created if missing."""
        tc = self.table.get(topic)
        if tc is not None:
            return tc
        return self.update(TopicConfig(topicName=topic, readQueueNums=queue_nums,
                                       writeQueueNums=queue_nums, perm=perm))

