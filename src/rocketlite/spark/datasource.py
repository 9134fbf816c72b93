"""The Spark data sources: ``format("rocketmq")`` (topics through the brokers) and
``format("rocketmq-store")`` (a store directory's files, read-only).

This module only wires Spark's ``DataSource`` entry points to the classes that do the work:

* ``rocketlite.spark.topic_source``: ``TopicBatchReader`` and ``TopicStreamReader``;
* ``rocketlite.spark.topic_sink``: ``TopicBatchWriter`` and ``TopicStreamWriter``;
* ``rocketlite.spark.store_source``: ``StoreBatchReader``.

Spark hands options over as a case-insensitive dict whose keys arrive lower-cased; each class
parses them with ``rocketlite.spark.options``.
"""

from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from rocketlite.spark.rows import SCHEMA_DDL


class RocketMQDataSource(DataSource):
    """``spark.read/readStream/write/writeStream.format("rocketmq")``: topics via a NameServer."""

    @classmethod
    def name(cls) -> str:
        return "rocketmq"

    def schema(self) -> str:
        return SCHEMA_DDL

    def reader(self, schema: StructType) -> DataSourceReader:
        from rocketlite.spark.topic_source import TopicBatchReader

        return TopicBatchReader(dict(self.options), schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        from rocketlite.spark.topic_source import TopicStreamReader

        return TopicStreamReader(dict(self.options), schema)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from rocketlite.spark.topic_sink import TopicBatchWriter

        return TopicBatchWriter(dict(self.options), schema, overwrite)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from rocketlite.spark.topic_sink import TopicStreamWriter

        return TopicStreamWriter(dict(self.options), schema, overwrite)


class RocketMQStoreDataSource(DataSource):
    """``spark.read.format("rocketmq-store").load(STORE_DIR)``: CommitLog segments scanned in
    parallel, up to the flushed offset, without a broker."""

    @classmethod
    def name(cls) -> str:
        return "rocketmq-store"

    def schema(self) -> str:
        return SCHEMA_DDL

    def reader(self, schema: StructType) -> DataSourceReader:
        from rocketlite.spark.store_source import StoreBatchReader

        return StoreBatchReader(dict(self.options), schema)
