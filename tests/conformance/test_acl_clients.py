"""ACL with unmodified third-party clients: ali-ons (``accessKeyId``/``accessKeySecret``) and the
C++ 4.x client (``set_session_credentials``) over Remoting, rocketmq-python-client 5.1.2
(``Credentials(ak, sk)``) over the gRPC front, against a broker with ``aclEnable``. Their signing
(Remoting: HmacSHA1 over the sorted header values with ``AccessKey`` and ``OnsChannel``, then the
body; gRPC: HmacSHA1 of ``x-mq-date-time`` in the ``authorization`` metadata) is theirs,
untouched: the broker must accept it with the right secret, and refuse it (NO_PERMISSION,
UNAUTHORIZED), storing nothing, with a wrong one."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from harness import (
    FINISH_S,
    ClientProcess,
    Conformance,
    assert_same_messages,
    pairs,
    received_of,
    sent_of,
)
from store_state import StoreState

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
REFUSAL = "Check signature failed for accessKey=conformance-user"  # in the broker's warning


def refused(cx: Conformance, p: ClientProcess, topic: str) -> None:
    """The client's one send failed (exit 1, a 'fatal' event, nothing reported sent), the broker
    refused it for its signature, and nothing was stored. (The client's complaints are the
    point here, so the store is read without ``stop_broker``'s check that there are none.)"""
    code = p.wait(FINISH_S)
    assert code == 1 and p.of("fatal") and not sent_of(p.events), p.describe()
    assert REFUSAL in cx.broker.log_path.read_text(), cx.broker.describe()
    assert cx.broker.stop() == 0, cx.broker.describe()
    assert StoreState.read(cx.broker.store_dir).messages_of(topic) == []


def round_trip(cx: Conformance, topic: str, producer: ClientProcess,
               reader: Callable[[], ClientProcess], n: int) -> None:
    """``producer`` sent ``n`` messages, ``reader`` (started after it) got exactly those, the
    store holds them, and neither client nor broker complained."""
    sent = sent_of(producer.finish(FINISH_S))
    assert len(sent) == n and all(e.get("status", "OK") == "OK" for e in sent), producer.describe()
    received = received_of(reader().finish(FINISH_S))
    assert_same_messages(pairs(sent, "sent"), pairs(received, "received"), f"{topic} with ACL")
    state = cx.stop_broker()  # no client complaints, no broker errors
    assert sorted(m.body for m in state.messages_of(topic)) == sorted(b for _, b in pairs(sent, "sent"))


@acl_broker
def test_ali_ons_with_credentials_sends_and_consumes(cx: Conformance) -> None:
    cx.client_env = USER
    n, topic = 10, cx.name("ACL_ONS")
    cx.create_topic(topic)
    round_trip(cx, topic, cx.ons("produce", topic, cx.name("PID"), "--n", str(n)),
               lambda: cx.ons("consume", topic, cx.name("GID_ACL"), "--consume-from", "FIRST",
                              "--expect", str(n)), n)


@acl_broker
def test_ali_ons_with_a_wrong_secret_is_refused(cx: Conformance) -> None:
    cx.client_env = WRONG
    topic = cx.name("ACL_ONS_BAD")
    cx.create_topic(topic)
    refused(cx, cx.ons("produce", topic, cx.name("PID"), "--n", "1"), topic)


@acl_broker
def test_cpp_client_with_session_credentials_sends_and_pulls(cx: Conformance) -> None:
    cx.client_env = USER
    n, topic = 10, cx.name("ACL_CPP")
    cx.create_topic(topic)
    round_trip(cx, topic, cx.cpp("produce", topic, cx.name("PID"), "--n", str(n), "--mode", "sync"),
               lambda: cx.cpp("pull", topic, cx.name("GID_PULL"), "--expect", str(n)), n)


@acl_broker
def test_cpp_client_with_a_wrong_secret_is_refused(cx: Conformance) -> None:
    cx.client_env = WRONG
    topic = cx.name("ACL_CPP_BAD")
    cx.create_topic(topic)
    refused(cx, cx.cpp("produce", topic, cx.name("PID"), "--n", "1", "--mode", "sync"), topic)
    # the C++ client got the answer: NO_PERMISSION with the broker's remark
    assert any(REFUSAL in line and "error code:16" in line for line in cx.client_complaints())


@acl_broker
def test_grpc_python_client_with_credentials_sends_and_receives(cx: Conformance) -> None:
    cx.client_env = USER
    n, topic = 10, cx.name("ACL_G5")
    cx.create_topic(topic)
    round_trip(cx, topic, cx.g5py("produce", topic, cx.name("P"), "--n", str(n)),
               lambda: cx.g5py("simple_consume", topic, cx.name("GS"), "--expect", str(n),
                               "--await-s", "1"), n)


@acl_broker
def test_grpc_python_client_with_a_wrong_secret_is_refused(cx: Conformance) -> None:
    cx.client_env = WRONG
    topic = cx.name("ACL_G5_BAD")
    cx.create_topic(topic)
    p = cx.g5py("produce", topic, cx.name("P"), "--n", "1")
    refused(cx, p, topic)
    # the client got the answer: UNAUTHORIZED (40100) with the broker's reason
    assert any(f"40100, {REFUSAL}" in e["message"] for e in p.of("client_error")), p.describe()
