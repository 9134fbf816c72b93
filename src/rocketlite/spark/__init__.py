"""rocketlite on Apache Spark (``pip install rocketlite[spark]``: pyspark 4 and pyarrow).

Python data sources (Spark 4's Data Source API, no JVM jar):

* ``format("rocketmq")``: read topics in batch or streaming, write DataFrames to topics;
* ``format("rocketmq-store")``: scan a store directory's CommitLog without a broker.

``register(spark)`` makes both formats known to a session. Only ``rows`` and the pure modules
(``options``, ``offsets``) load without pyspark.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def register(spark: SparkSession) -> None:
    """Register ``rocketmq`` and ``rocketmq-store`` with ``spark``."""
    from rocketlite.spark.datasource import RocketMQDataSource, RocketMQStoreDataSource

    spark.dataSource.register(RocketMQDataSource)
    spark.dataSource.register(RocketMQStoreDataSource)
