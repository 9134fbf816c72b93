"""The front's name checks, one per name for the producer and the consumer RPCs alike (the codes
and reasons of GrpcValidator's validateTopic/validateConsumerGroup), and the user property names
it refuses (MessageConst.STRING_HASH_SET and the Remoting client's reserved ones)."""

from __future__ import annotations

import pytest

from rocketlite.broker.config import BrokerConfig
from rocketlite.proxy import validate
from rocketlite.proxy.pb import definition_pb2 as pb
from rocketlite.proxy.status import FrontError

C = pb.Code
CONF = BrokerConfig(broker_cluster_name="C1", broker_name="b1")


def test_topic_names_follow_javas_rules() -> None:
    assert validate.topic_name("T_ok-1%x|y", CONF) == "T_ok-1%x|y"
    assert validate.topic_name(pb.Resource(name="T")) == "T"  # a Resource, no broker names
    assert validate.topic_name("C1") == "C1"
    for bad, why in [("", "blank"), (" ", "blank"), ("a b", "characters other than"),
                     ("x" * 128, "longer than 127"), ("TBW102", "system topic"),
                     ("RMQ_SYS_TRANS_HALF_TOPIC", "system topic"),
                     ("OFFSET_MOVED_EVENT", "system topic"), ("rmq_sys_X", "system topic"),
                     ("C1", "system topic"), ("b1", "system topic")]:
        with pytest.raises(FrontError, match=why) as e:
            validate.topic_name(bad, CONF)
        assert e.value.code == C.ILLEGAL_TOPIC


def test_group_names_follow_javas_rules() -> None:
    assert validate.group_name("GID_ok-1%x|y") == "GID_ok-1%x|y"
    assert validate.group_name(pb.Resource(name="G")) == "G"
    for bad, why in [("", "blank"), (" ", "blank"), ("CID_RMQ_SYS_X", "system consumer group"),
                     ("a b", "characters other than"), ("x" * 256, "longer than 255")]:
        with pytest.raises(FrontError, match=why) as e:
            validate.group_name(bad)
        assert e.value.code == C.ILLEGAL_CONSUMER_GROUP


def test_user_properties_may_not_take_a_system_name() -> None:
    validate.prop("color", "red")
    # Java's MessageConst.STRING_HASH_SET, a v2 system field, a name the Remoting client reserves
    for name in ("UNIQ_KEY", "POP_CK_OFFSET", "__BORNHOST", "TRACE_CONTEXT", "__SHARDINGKEY",
                 "__STARTDELIVERTIME"):
        with pytest.raises(FrontError, match="used by the system") as e:
            validate.prop(name, "x")
        assert e.value.code == C.ILLEGAL_MESSAGE_PROPERTY_KEY
    with pytest.raises(FrontError, match="control character"):
        validate.prop("k", "a\x02b")
