"""Signatures as RocketMQ's AclClientRPCHook/AclUtils make them.

The vectors were computed outside Python, with OpenSSL, from the content Java's
``AclUtils.combineRequestContent`` builds (the sorted ext values without ``Signature``, then the
body)::

    printf 'RocketMQgroupAtopicAhello' | openssl dgst -sha1 -hmac 12345678 -binary | base64
    printf 'RocketMQgroupAtopicA' | openssl dgst -sha1 -hmac 12345678 -binary | base64
"""

from __future__ import annotations

import pytest

from rocketlite.acl.sign import Credentials, content, request_signature, signature

EXT = {"topic": "topicA", "producerGroup": "groupA", "AccessKey": "RocketMQ"}


def test_content_is_sorted_values_then_body_without_signature() -> None:
    ext = dict(EXT, Signature="ignored", _UNIQUE_KEY_QUERY="true")
    assert content(ext, b"hello") == b"RocketMQgroupAtopicAhello"
    assert content(ext, None) == b"RocketMQgroupAtopicA"


def test_signature_matches_openssl_vectors() -> None:
    assert signature(b"RocketMQgroupAtopicAhello", "12345678") == "Sl20I5Ea8u0EOkRDgOVJfWHmTQ4="
    assert signature(b"RocketMQgroupAtopicA", "12345678") == "wdcuftYlFelDqj+xx4pKlzipUO8="
    assert request_signature(EXT, b"hello", "12345678") == "Sl20I5Ea8u0EOkRDgOVJfWHmTQ4="
    assert request_signature(EXT, None, "12345678") == "wdcuftYlFelDqj+xx4pKlzipUO8="


def test_credentials_sign_adds_access_key_token_and_signature() -> None:
    ext = {"topic": "topicA", "producerGroup": "groupA"}
    Credentials("RocketMQ", "12345678").sign(ext, b"hello")
    assert ext["AccessKey"] == "RocketMQ"
    assert ext["Signature"] == "Sl20I5Ea8u0EOkRDgOVJfWHmTQ4="
    assert "SecurityToken" not in ext
    with_token = {"topic": "topicA"}
    Credentials("RocketMQ", "12345678", "tok").sign(with_token, None)
    assert with_token["SecurityToken"] == "tok"
    # the token is signed: the signature differs from one over the same fields without it
    assert with_token["Signature"] != signature(b"RocketMQtopicA", "12345678")
    assert with_token["Signature"] == signature(b"RocketMQtoktopicA", "12345678")


def test_signing_again_replaces_the_old_signature() -> None:
    ext = {"topic": "t"}
    creds = Credentials("RocketMQ", "12345678")
    creds.sign(ext, b"x")
    first = ext["Signature"]
    creds.sign(ext, b"x")
    assert ext["Signature"] == first


def test_credentials_of_tuple() -> None:
    assert Credentials.of(("ak1234", "sk1234")) == Credentials("ak1234", "sk1234")
    assert Credentials.of(("ak1234", "sk1234", "t")).security_token == "t"
    with pytest.raises(ValueError, match="credentials are"):
        Credentials.of(("only",))  # type: ignore[arg-type]
