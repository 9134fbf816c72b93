"""The broker's own credentials for the requests it sends (RocketMQ 5's
``innerClientAuthenticationCredentials``, which its ``BrokerOuterAPI`` signs with; 4.9's broker
signs nothing, so an ACL master must white-list its slaves).

In broker.conf, as in RocketMQ 5, a JSON object::

    innerClientAuthenticationCredentials={"accessKey":"broker-inner","secretKey":"12345678"}

With it the broker signs every request of its Remoting client: a slave's synchronisation from its
master (topics, offsets, delay offsets, groups), its registrations with the NameServers. The key is
read beside ``BrokerConfig`` (as TLS is), so ``getBrokerConfig`` never shows the secret.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from rocketlite.acl.sign import Credentials
from rocketlite.common.errors import ConfigError

INNER_CREDENTIALS_KEY = "innerClientAuthenticationCredentials"


def inner_credentials(props: Mapping[str, str]) -> Credentials | None:
    """The credentials ``props`` give the broker's own requests; None without the key.
    ``ConfigError`` for a value that is not ``{"accessKey": ..., "secretKey": ...}``."""
    raw = props.get(INNER_CREDENTIALS_KEY, "").strip()
    if not raw:
        return None
    try:
        data = json.loads(raw)
    except ValueError as e:
        raise ConfigError(f"{INNER_CREDENTIALS_KEY}: not a JSON object: {e}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{INNER_CREDENTIALS_KEY}: not a JSON object")
    ak, sk, token = data.get("accessKey"), data.get("secretKey"), data.get("securityToken")
    if not isinstance(ak, str) or not ak or not isinstance(sk, str) or not sk:
        raise ConfigError(f'{INNER_CREDENTIALS_KEY}: needs "accessKey" and "secretKey" (strings)')
    if token is not None and not isinstance(token, str):
        raise ConfigError(f'{INNER_CREDENTIALS_KEY}: "securityToken" is not a string')
    return Credentials(ak, sk, token or None)
