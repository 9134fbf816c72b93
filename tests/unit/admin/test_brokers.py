"""``getBrokerConfig``'s reading of the broker's ``key=value`` lines and ``updateBrokerConfig``'s
refusal of what is not one property (checked before anything is sent)."""

from __future__ import annotations

import asyncio

import pytest

from rocketlite.admin import AdminError, AdminSession, update_broker_config
from rocketlite.admin.brokers import config_lines


def test_config_lines_split_at_the_first_equals_sign_and_sort() -> None:
    text = "zKey=1\nbrokerName=broker-a\nstorePathRootDir=/data/x=y\n\n# comment=1\nempty=\n"
    assert config_lines(text) == {"brokerName": "broker-a", "empty": "", "storePathRootDir":
                                  "/data/x=y", "zKey": "1"}
    assert list(config_lines(text)) == sorted(config_lines(text))


@pytest.mark.parametrize(("key", "value"), [("", "1"), ("a=b", "1"), ("a b", "1"),
                                            ("key", "1\nbrokerName=x")])
def test_update_refuses_what_is_not_one_property(key: str, value: str) -> None:
    async def go() -> None:
        async with AdminSession("127.0.0.1:1") as s:
            await update_broker_config(s, key, value, broker_addr="127.0.0.1:1")

    with pytest.raises(AdminError, match="is not a key=value property"):
        asyncio.run(go())
