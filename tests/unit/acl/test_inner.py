"""The broker's own credentials in broker.conf (``innerClientAuthenticationCredentials``, RocketMQ
5's JSON value): read beside BrokerConfig, refused with the key named when malformed."""

from __future__ import annotations

import pytest

from rocketlite.acl.inner import INNER_CREDENTIALS_KEY, inner_credentials
from rocketlite.acl.sign import Credentials
from rocketlite.broker.config import BrokerConfig
from rocketlite.cli.server_commands import FrontConfigs
from rocketlite.common.errors import ConfigError


def test_the_json_value_gives_the_credentials() -> None:
    props = {INNER_CREDENTIALS_KEY: '{"accessKey":"broker-inner","secretKey":"12345678"}'}
    assert inner_credentials(props) == Credentials("broker-inner", "12345678")
    with_token = {INNER_CREDENTIALS_KEY: '{"accessKey":"a1","secretKey":"s1","securityToken":"t"}'}
    assert inner_credentials(with_token) == Credentials("a1", "s1", "t")
    assert inner_credentials({}) is None
    assert inner_credentials({INNER_CREDENTIALS_KEY: "  "}) is None


@pytest.mark.parametrize("value", ["broker-inner:12345678", "[1, 2]", '{"accessKey":"a"}',
                                   '{"accessKey":"a","secretKey":5}',
                                   '{"accessKey":"a","secretKey":"s","securityToken":1}'])
def test_a_malformed_value_names_the_key(value: str) -> None:
    with pytest.raises(ConfigError, match=INNER_CREDENTIALS_KEY):
        inner_credentials({INNER_CREDENTIALS_KEY: value})


def test_broker_conf_reads_it_beside_the_broker_config() -> None:
    props = {"brokerName": "b", INNER_CREDENTIALS_KEY: '{"accessKey":"ak1","secretKey":"sk1"}'}
    assert FrontConfigs.from_properties(props).inner_credentials == Credentials("ak1", "sk1")
    assert FrontConfigs.from_properties({"brokerName": "b"}).inner_credentials is None
    shown = BrokerConfig.from_properties(props).to_properties()  # what getBrokerConfig answers
    assert INNER_CREDENTIALS_KEY not in shown and "sk1" not in str(shown)
