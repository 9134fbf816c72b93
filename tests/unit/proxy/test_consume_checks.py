"""The consumer RPCs' limits: poll length within the limits and the client's deadline, invisible
times, batch sizes, filters, and the limits read from broker.conf."""

from __future__ import annotations

import pytest

from rocketlite.broker.pop import errors as pop_errors
from rocketlite.common.errors import ConfigError
from rocketlite.proxy.consume_checks import (
    ConsumeLimits,
    FrontError,
    check_batch,
    check_invisible,
    polling_ms,
    subscription,
)
from rocketlite.proxy.consumer_errors import pop_status
from rocketlite.proxy.pb import definition_pb2 as pb
from rocketlite.proxy.renew import RenewConfig

L = ConsumeLimits()
C = pb.Code


def test_the_poll_is_the_requested_one_within_the_limits() -> None:
    assert polling_ms(8_000, None, L) == 8_000
    assert polling_ms(1_000, None, L) == 5_000
    assert polling_ms(60_000, None, L) == 20_000
    assert polling_ms(None, None, L) == 20_000


def test_the_poll_ends_the_reserve_before_the_deadline() -> None:
    assert polling_ms(15_000, 10_000, L) == 9_900
    assert polling_ms(None, 30_000, L) == 14_950  # half the deadline, as the proxy
    assert polling_ms(8_000, 60_000, L) == 8_000


def test_a_deadline_shorter_than_the_shortest_poll_is_refused_by_client_version() -> None:
    with pytest.raises(FrontError) as e:
        polling_ms(8_000, 3_000, L, "5.1.2")
    assert e.value.code == C.ILLEGAL_POLLING_TIME and "2900" in str(e.value)
    for old in ("5.0.2", None, "x"):
        with pytest.raises(FrontError) as e:
            polling_ms(8_000, 3_000, L, old)
        assert e.value.code == C.BAD_REQUEST


def test_invisible_times_and_batches_out_of_range_are_refused() -> None:
    assert check_invisible(10_000, L) == 10_000
    with pytest.raises(FrontError) as e:
        check_invisible(9_999, L)
    assert e.value.code == C.ILLEGAL_INVISIBLE_TIME and "10000" in str(e.value)
    with pytest.raises(FrontError):
        check_invisible(12 * 3600_000 + 1, L)
    assert check_invisible(1, L, minimum=1) == 1
    assert check_batch(32, L) == 32
    for bad in (0, 33, -1):
        with pytest.raises(FrontError) as e:
            check_batch(bad, L)
        assert e.value.code == C.BAD_REQUEST


def test_tag_filters_become_subscriptions_and_sql_is_refused() -> None:
    sub = subscription("T", pb.FilterExpression(type=pb.FilterType.TAG, expression="A || B"))
    assert sub.tagsSet == {"A", "B"} and not sub.matches_all
    assert subscription("T", pb.FilterExpression()).matches_all
    with pytest.raises(FrontError) as e:
        subscription("T", pb.FilterExpression(type=pb.FilterType.SQL, expression="a > 1"))
    assert e.value.code == C.ILLEGAL_FILTER_EXPRESSION


def test_limits_are_read_from_broker_conf_and_checked() -> None:
    lim = ConsumeLimits.from_properties({"minInvisibleTimeMillsForRecv": "500",
                                         "grpcClientConsumerMinLongPollingTimeoutMillis": "100",
                                         "unrelated": "x"})
    assert (lim.min_invisible_ms, lim.min_polling_ms, lim.max_polling_ms) == (500, 100, 20_000)
    with pytest.raises(ConfigError, match="grpcClientConsumerLongPollingBatchSize"):
        ConsumeLimits.from_properties({"grpcClientConsumerLongPollingBatchSize": "33"})
    with pytest.raises(ConfigError, match="minInvisibleTimeMillsForRecv"):
        ConsumeLimits(min_invisible_ms=0)
    with pytest.raises(ConfigError):
        ConsumeLimits(min_polling_ms=30_000)
    ConsumeLimits(max_invisible_ms=12 * 3600_000)
    with pytest.raises(ConfigError, match="the broker's bound"):  # the broker would refuse it
        ConsumeLimits.from_properties({"maxInvisibleTimeMills": str(12 * 3600_000 + 1)})


def test_renewal_settings_are_read_from_broker_conf_and_checked() -> None:
    rc = RenewConfig.from_properties({"renewSliceTimeMillis": "30000",
                                      "enableProxyAutoRenew": "false", "other": "1"})
    assert (rc.slice_ms, rc.enable, rc.ahead_ms) == (30_000, False, 10_000)
    with pytest.raises(ConfigError, match="renewSchedulePeriodMillis"):
        RenewConfig.from_properties({"renewSchedulePeriodMillis": "0"})
    with pytest.raises(ConfigError, match="maxRenewRetryTimes"):
        RenewConfig(max_retries=-1)


def test_pop_errors_map_to_v2_codes_with_their_message() -> None:
    cases = [(pop_errors.InvalidReceiptHandle("bad"), C.INVALID_RECEIPT_HANDLE),
             (pop_errors.ReceiptHandleExpired("late"), C.INVALID_RECEIPT_HANDLE),
             (pop_errors.GroupNotFound("g"), C.CONSUMER_GROUP_NOT_FOUND),
             (pop_errors.TopicNotFound("t"), C.TOPIC_NOT_FOUND),
             (pop_errors.NoPermission("p"), C.FORBIDDEN),
             (pop_errors.BadPopRequest("b"), C.BAD_REQUEST),
             (pop_errors.PollingFull("f"), C.TOO_MANY_REQUESTS),
             (FrontError(C.ILLEGAL_TOPIC, "why"), C.ILLEGAL_TOPIC),
             (RuntimeError("boom"), C.INTERNAL_SERVER_ERROR)]
    for e, code in cases:
        st = pop_status(e, "Test")
        assert st.code == code and st.message
    assert "expired" in pop_status(pop_errors.ReceiptHandleExpired("late"), "Test").message
