"""ACL with unmodified third-party clients: ali-ons (``accessKeyId``/``accessKeySecret``) and the
C++ 4.x client (``set_session_credentials``) over Remoting, rocketmq-python-client 5.1.2
(``Credentials(ak, sk)``) over the gRPC front, against a broker with ``aclEnable``. Their signing
(Remoting: HmacSHA1 over the sorted header values with ``AccessKey`` and ``OnsChannel``, then the
body; gRPC: HmacSHA1 of ``x-mq-date-time`` in the ``authorization`` metadata) is theirs,
untouched: the broker must accept it with the right secret, and refuse it (NO_PERMISSION,
UNAUTHORIZED), storing nothing, with a wrong one."""

from __future__ import annotations

import pytest
from harness import (
    FINISH_S,
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


# per client: its Conformance launcher, the producer's script and options, the reader's, and
# what the client itself reports of a refusal (the C++ client logs the broker's answer; ali-ons
# reports only that its sends failed)
CLIENTS = {
    "ali-ons": ("ons", ("produce",), ("consume", "--consume-from", "FIRST"), None),
    "cpp": ("cpp", ("produce", "--mode", "sync"), ("pull",), "error code:16"),
    "grpc-python": ("g5py", ("produce",), ("simple_consume", "--await-s", "1"), "40100"),
}


@acl_broker
@pytest.mark.parametrize("client", sorted(CLIENTS))
def test_client_with_credentials_sends_and_reads(cx: Conformance, client: str) -> None:
    """``n`` messages sent signed, read back signed: exactly those; the store holds them; no
    client or broker complaint."""
    kind, produce, read, _ = CLIENTS[client]
    start = getattr(cx, kind)
    cx.client_env = USER
    n, topic = 10, cx.name("ACL")
    cx.create_topic(topic)
    p = start(produce[0], topic, cx.name("PID"), "--n", str(n), *produce[1:])
    sent = sent_of(p.finish(FINISH_S))
    assert len(sent) == n and all(e.get("status", "OK") == "OK" for e in sent), p.describe()
    reader = start(read[0], topic, cx.name("GID"), "--expect", str(n), *read[1:])
    received = received_of(reader.finish(FINISH_S))
    assert_same_messages(pairs(sent, "sent"), pairs(received, "received"), f"{client} with ACL")
    state = cx.stop_broker()
    assert sorted(m.body for m in state.messages_of(topic)) == sorted(b for _, b in pairs(sent, "sent"))


@acl_broker
@pytest.mark.parametrize("client", sorted(CLIENTS))
def test_client_with_a_wrong_secret_is_refused(cx: Conformance, client: str) -> None:
    """The one send fails (exit 1, a 'fatal' event, nothing reported sent), the broker logged the
    signature refusal, nothing is stored. (The client's complaints are the point here, so the
    store is read without ``stop_broker``'s check that there are none.)"""
    kind, produce, _, answer = CLIENTS[client]
    cx.client_env = WRONG
    topic = cx.name("ACL_BAD")
    cx.create_topic(topic)
    p = getattr(cx, kind)(produce[0], topic, cx.name("PID"), "--n", "1", *produce[1:])
    assert p.wait(FINISH_S) == 1 and p.of("fatal") and not sent_of(p.events), p.describe()
    assert REFUSAL in cx.broker.log_path.read_text(), cx.broker.describe()
    if answer is not None:  # the client got the broker's answer: the code and the reason
        said = [e["message"] for e in p.of("client_error")] + cx.client_complaints()
        assert any(REFUSAL in line and answer in line for line in said), p.describe()
    assert cx.broker.stop() == 0, cx.broker.describe()
    assert StoreState.read(cx.broker.store_dir).messages_of(topic) == []
