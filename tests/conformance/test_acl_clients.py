"""ACL with unmodified third-party clients: ali-ons (``accessKeyId``/``accessKeySecret``) and the
C++ 4.x client (``set_session_credentials``) against a broker with ``aclEnable``. Their signing
(HmacSHA1 over the sorted header values with ``AccessKey`` and ``OnsChannel``, then the body) is
theirs, untouched: the broker must accept it with the right secret, and refuse it with
NO_PERMISSION, storing nothing, with a wrong one."""

from __future__ import annotations

import pytest
from harness import (
    FINISH_S,
    Conformance,
    Event,
    assert_same_messages,
    pairs,
    received_of,
    sent_of,
)

from rocketlite.acl.sign import Credentials

pytestmark = pytest.mark.conformance

ADMIN = Credentials("conformance-admin", "admin-secret-1")
ACL_YML = """
accounts:
  - accessKey: conformance-admin
    secretKey: admin-secret-1
    admin: true
  - accessKey: conformance-user
    secretKey: user-secret-1
    defaultTopicPerm: PUB|SUB
    defaultGroupPerm: SUB
"""
USER = {"CONFORMANCE_ACCESS_KEY": "conformance-user", "CONFORMANCE_SECRET_KEY": "user-secret-1"}
WRONG = {"CONFORMANCE_ACCESS_KEY": "conformance-user", "CONFORMANCE_SECRET_KEY": "not-the-secret"}
acl_broker = pytest.mark.acl(ACL_YML, admin=ADMIN)


def refused(cx: Conformance, events: list[Event], topic: str, what: str) -> None:
    """The client failed to send with the broker's signature refusal, and nothing was stored."""
    assert not sent_of(events), f"{what} sent with a wrong secret\n{cx.describe()}"
    fatal = [e for e in events if e["event"] == "fatal"]
    assert fatal, f"{what} did not fail\n{cx.describe()}"
    assert "Check signature failed" in fatal[0]["message"] or "16" in fatal[0]["message"], fatal
    assert "Check signature failed for accessKey=conformance-user" in cx.broker.describe() or \
        cx.broker.log_path.exists()
    cx.processes.clear()  # their complaints are the point: stop_broker must not count them
    assert cx.stop_broker().messages_of(topic) == []


@acl_broker
def test_ali_ons_with_credentials_sends_and_consumes(cx: Conformance) -> None:
    cx.client_env = USER
    n = 10
    topic, group = cx.name("ACL_ONS"), cx.name("GID_ACL")
    cx.create_topic(topic)
    p = cx.ons("produce", topic, cx.name("PID"), "--n", str(n))
    sent = sent_of(p.finish(FINISH_S))
    assert len(sent) == n, p.describe()
    c = cx.ons("consume", topic, group, "--consume-from", "FIRST", "--expect", str(n))
    received = received_of(c.finish(FINISH_S))
    assert_same_messages(pairs(sent, "sent"), pairs(received, "received"), "ali-ons with ACL")
    state = cx.stop_broker()  # no client complaints, no broker errors
    assert sorted((m.key, m.body) for m in state.messages_of(topic)) == sorted(pairs(sent, "sent"))


@acl_broker
def test_ali_ons_with_a_wrong_secret_is_refused(cx: Conformance) -> None:
    cx.client_env = WRONG
    topic = cx.name("ACL_ONS_BAD")
    cx.create_topic(topic)
    p = cx.ons("produce", topic, cx.name("PID"), "--n", "1")
    refused(cx, p.finish(FINISH_S), topic, "ali-ons")


@acl_broker
def test_cpp_client_with_session_credentials_sends_and_pulls(cx: Conformance) -> None:
    cx.client_env = USER
    n = 10
    topic = cx.name("ACL_CPP")
    cx.create_topic(topic)
    p = cx.cpp("produce", topic, cx.name("PID"), "--n", str(n), "--mode", "sync")
    sent = sent_of(p.finish(FINISH_S))
    assert len(sent) == n and {e["status"] for e in sent} == {"OK"}, p.describe()
    c = cx.cpp("pull", topic, cx.name("GID_PULL"), "--expect", str(n))
    received = received_of(c.finish(FINISH_S))
    assert_same_messages(pairs(sent, "sent"), pairs(received, "received"), "C++ with ACL")
    state = cx.stop_broker()
    assert sorted((m.key, m.body) for m in state.messages_of(topic)) == sorted(pairs(sent, "sent"))


@acl_broker
def test_cpp_client_with_a_wrong_secret_is_refused(cx: Conformance) -> None:
    cx.client_env = WRONG
    topic = cx.name("ACL_CPP_BAD")
    cx.create_topic(topic)
    p = cx.cpp("produce", topic, cx.name("PID"), "--n", "1", "--mode", "sync")
    refused(cx, p.finish(FINISH_S), topic, "the C++ client")
