"""``rocketlite start`` with ``--metrics-port``: traffic through the broker, then ``/metrics`` over
HTTP shows it (messages and bytes in and out, the consumer's lag, rpc latency per request code),
and a real Prometheus (Debian's ``prometheus``) scraping it every second answers a query for
``rocketmq_messages_in_total`` with what was sent. broker.conf's ``metricsPromExporterPort``
(RocketMQ 5's name) sets the port too."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from brokerhelp import (
    ServerProcess,
    broker_addr,
    decode_records,
    free_port,
    pull_request,
    scrape_metrics,
    send_request,
    start_args,
    wait_port,
)
from rocketlite.protocol.codes import RequestCode
from rocketlite.protocol.command import RemotingCommand
from rocketlite.protocol.headers import UpdateConsumerOffsetRequestHeader
from rocketlite.remoting.client import RemotingClient

pytestmark = pytest.mark.integration

TOPIC = "MetricsTopic"
SENT = 40
COMMITTED = 15
STATIC = {"cluster": "DefaultCluster", "node_type": "broker", "node_id": "broker-a"}


def _get(samples: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str,
         **labels: str) -> float | None:
    return samples.get((name, frozenset({**STATIC, **labels}.items())))


async def _traffic(addr: str) -> tuple[int, int]:
    """Send SENT messages to queue 0, pull them all as group CG, commit COMMITTED: the bytes
    pulled (the stored records) and the number of pulls."""
    client = RemotingClient()
    try:
        for i in range(SENT):
            r = await client.invoke(addr, send_request(TOPIC, b"m%03d" % i, 0), 10.0)
            assert r.code == 0, r.remark
        pulled, offset, pulls = 0, 0, 0
        while offset < SENT:
            pulls += 1
            r = await client.invoke(addr, pull_request(TOPIC, 0, offset, 16), 10.0)
            assert r.code == 0, r.remark
            pulled += sum(m.total_size for m in decode_records(r.body))
            offset = int(r.ext_fields["nextBeginOffset"])
        h = UpdateConsumerOffsetRequestHeader(consumerGroup="CG", topic=TOPIC, queueId=0,
                                              commitOffset=COMMITTED)
        r = await client.invoke(addr, RemotingCommand.request(
            RequestCode.UPDATE_CONSUMER_OFFSET, h.to_ext()), 10.0)
        assert r.code == 0, r.remark
        return pulled, pulls
    finally:
        await client.close()


def test_metrics_endpoint_shows_the_traffic(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("")
    port = free_port()
    args = [*start_args(tmp_path / "store", conf), "--metrics-port", str(port)]
    with ServerProcess(args, tmp_path / "broker.log") as p:
        line = p.wait_ready()
        assert f":{port}/metrics" in line
        pulled, pulls = asyncio.run(_traffic(broker_addr(args)))
        s = scrape_metrics(port)
        normal = {"topic": TOPIC, "message_type": "normal", "is_system": "false"}
        assert _get(s, "rocketmq_messages_in_total", **normal) == SENT
        # every message pulled once: bytes in (as stored) = bytes out = the records pulled
        assert _get(s, "rocketmq_throughput_in_total", **normal) == pulled
        assert _get(s, "rocketmq_message_size_count", **normal) == SENT
        out = {"topic": TOPIC, "consumer_group": "CG", "is_system": "false"}
        assert _get(s, "rocketmq_messages_out_total", **out) == SENT
        assert _get(s, "rocketmq_throughput_out_total", **out) == pulled
        lag = {"consumer_group": "CG", "topic": TOPIC, "is_retry": "false", "is_system": "false"}
        assert _get(s, "rocketmq_consumer_lag_messages", **lag) == SENT - COMMITTED
        assert _get(s, "rocketmq_consumer_inflight_messages", **lag) == SENT - COMMITTED
        assert _get(s, "rocketmq_consumer_ready_messages", **lag) == 0
        assert (_get(s, "rocketmq_consumer_lag_latency", **lag) or 0) > 0
        assert _get(s, "rocketmq_consumer_queueing_latency", **lag) == 0
        rpc = {"protocol_type": "remoting", "response_code": "0", "is_long_polling": "false",
               "result": "success"}
        # pulls are sampled: the first and every 8th timed, each standing for 8
        assert _get(s, "rocketmq_rpc_latency_count", request_code="11", **rpc) == \
            8 * ((pulls + 7) // 8)
        commits = _get(s, "rocketmq_rpc_latency_count", request_code="15", **rpc)
        assert commits == 1  # other requests: each one timed
        sends = _get(s, "rocketmq_rpc_latency_count", request_code="310", **rpc)
        assert sends is not None and 1 <= sends <= SENT  # one per run of sends read together
        assert (_get(s, "rocketmq_topic_number") or 0) >= 1
        assert (_get(s, "rocketmq_storage_size") or 0) > 0
        assert _get(s, "rocketmq_storage_dispatch_behind_bytes") == 0
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/nothing", timeout=10)
        assert e.value.code == 404
        e.value.close()
        assert p.stop() == 0, p.log()


def test_metrics_port_zero_serves_nothing(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("")
    args = [*start_args(tmp_path / "store", conf), "--metrics-port", "0"]
    with ServerProcess(args, tmp_path / "broker.log") as p:
        assert "/metrics" not in p.wait_ready()
        assert p.stop() == 0, p.log()


def test_rocketmq5s_metrics_key_in_broker_conf(tmp_path: Path) -> None:
    """``-c broker.conf`` with RocketMQ 5's ``metricsPromExporterPort``: /metrics is served there."""
    port = free_port()
    conf = tmp_path / "broker.conf"
    conf.write_text(f"metricsPromExporterPort={port}\n")
    args = start_args(tmp_path / "store", conf)
    with ServerProcess(args, tmp_path / "broker.log") as p:
        assert f":{port}/metrics" in p.wait_ready()
        assert _get(scrape_metrics(port), "rocketmq_topic_number") is not None
        assert p.stop() == 0, p.log()


def _prometheus_query(port: int, query: str) -> list[dict[str, object]]:
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": query})
    with urllib.request.urlopen(url, timeout=10) as r:
        body = json.loads(r.read())
    assert body["status"] == "success", body
    return list(body["data"]["result"])


def test_a_real_prometheus_scrapes_the_broker(tmp_path: Path) -> None:
    exe = shutil.which("prometheus")
    assert exe is not None, "Debian's prometheus is needed (apt-get install prometheus)"
    conf = tmp_path / "broker.conf"
    conf.write_text("")
    mport, pport = free_port(), free_port()
    args = [*start_args(tmp_path / "store", conf), "--metrics-port", str(mport)]
    (tmp_path / "prometheus.yml").write_text(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
        "scrape_configs:\n  - job_name: rocketlite\n    static_configs:\n"
        f"      - targets: ['127.0.0.1:{mport}']\n")
    with ServerProcess(args, tmp_path / "broker.log") as broker:
        broker.wait_ready()
        asyncio.run(_traffic(broker_addr(args)))
        log = (tmp_path / "prometheus.log").open("wb")
        prom = subprocess.Popen(
            [exe, f"--config.file={tmp_path / 'prometheus.yml'}",
             f"--storage.tsdb.path={tmp_path / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{pport}"],
            stdout=log, stderr=subprocess.STDOUT)
        try:
            wait_port(pport, 60)
            deadline = time.monotonic() + 60
            result: list[dict[str, object]] = []
            while time.monotonic() < deadline:
                try:
                    result = _prometheus_query(
                        pport, f'rocketmq_messages_in_total{{topic="{TOPIC}"}}')
                except (urllib.error.URLError, ConnectionError):
                    result = []  # still starting
                if result:
                    break
                time.sleep(0.5)
            assert result, (tmp_path / "prometheus.log").read_text()[-3000:]
            metric = result[0]["metric"]
            assert isinstance(metric, dict)
            assert metric["job"] == "rocketlite" and metric["cluster"] == "DefaultCluster"
            value = result[0]["value"]
            assert isinstance(value, list) and float(value[1]) == SENT
            lag = _prometheus_query(
                pport, f'rocketmq_consumer_lag_messages{{consumer_group="CG",topic="{TOPIC}"}}')
            assert [float(r["value"][1]) for r in lag  # type: ignore[index]
                    ] == [SENT - COMMITTED]
        finally:
            prom.terminate()
            try:
                prom.wait(30)
            except subprocess.TimeoutExpired:
                prom.kill()
                prom.wait(30)
            log.close()
        assert broker.stop() == 0, broker.log()
