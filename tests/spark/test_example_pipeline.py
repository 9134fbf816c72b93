"""The README's example pipeline (examples/spark_pipeline.py) runs end to end: events produced,
a Structured Streaming query over the topic, per-window aggregates in Parquet and in a topic."""

from __future__ import annotations

import importlib.util
import json
from collections import Counter
from pathlib import Path
from types import ModuleType
from typing import Any

from conftest import BrokerThread

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "spark_pipeline.py"
MINUTE = 60_000


def load_example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("spark_pipeline", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_example_pipeline_windows_reach_parquet_and_topic(spark: Any, broker: BrokerThread,
                                                          tmp_path: Path) -> None:
    example = load_example()
    start = 1_700_000_040_000 - 1_700_000_040_000 % MINUTE  # a minute boundary
    broker.create_topic(example.EVENTS_TOPIC, 2)
    broker.create_topic(example.STATS_TOPIC, 2)
    example.produce_events(broker.ns_addr, 600, start_ms=start, span_ms=6 * MINUTE)

    example.run_pipeline(spark, broker.ns_addr, tmp_path, batch=200)

    # what the events hold, recomputed here from the topic's bodies
    events = [json.loads(r.body) for r in spark.read.format("rocketmq")
              .option("nameserver", broker.ns_addr).option("subscribe", example.EVENTS_TOPIC).load()
              .select("body").collect()]
    assert len(events) == 600
    want: Counter[tuple[int, str]] = Counter()
    for e in events:
        want[(e["ts"] - e["ts"] % MINUTE, e["action"])] += 1

    rows = spark.read.parquet(str(tmp_path / "windows")).collect()
    got = {(int(r.window_start.timestamp() * 1000), r.action): r.events for r in rows}
    # append mode emits a window, final, once the watermark (max event time seen in earlier
    # batches - 30 s) passes its end. Three batches of 200 cover about 2 minutes of events each,
    # so the windows of the first 3 minutes were closed by the time the last batch ran
    assert len(rows) == len(got)  # each window written once
    assert all(got[k] == want[k] for k in got)
    closed = {k for k in want if k[0] + MINUTE <= start + 3 * MINUTE}
    assert closed and closed <= set(got)

    results = (spark.read.format("rocketmq").option("nameserver", broker.ns_addr)
               .option("subscribe", example.STATS_TOPIC).load().select("body", "tags", "keys").collect())
    assert len(results) == len(rows)
    for r in results:
        doc = json.loads(r.body)
        assert r.tags == "window" and r.keys == [doc["action"]]
        assert doc["events"] == got[(int(_parse_ts(doc["window_start"])), doc["action"])]


def _parse_ts(text: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000
