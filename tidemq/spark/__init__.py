"""tidemq.spark: the ``tidemq`` data source for PySpark (>= 4.2) -- batch and streaming source and sink.

Example::

    import tidemq.spark

    tidemq.spark.register(spark)
    df = (spark.readStream.format("tidemq")
          .option("namesrv", "127.0.0.1:9876").option("topic", "Orders")
          .option("startingOffsets", "earliest").load())
    tidemq.spark.attach_offset_committer(spark, namesrv="127.0.0.1:9876", group="orders-etl")

See docs/spark.md for the options, the schema and the sink's columns.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader
from pyspark.sql.types import StructType

from tidemq.spark.arrow import ARROW_SCHEMA, SOURCE_SCHEMA_DDL
from tidemq.spark.conn import DataLossError
from tidemq.spark.listener import OffsetCommitter, attach_offset_committer
from tidemq.spark.options import OptionError, SinkOptions, SourceOptions
from tidemq.spark.sink import TideMQArrowWriter, TideMQStreamArrowWriter, check_sink_schema
from tidemq.spark.source import TideMQBatchReader, TideMQStreamReader

__all__ = [
    "ARROW_SCHEMA",
    "SOURCE_SCHEMA_DDL",
    "DataLossError",
    "OffsetCommitter",
    "OptionError",
    "TideMQDataSource",
    "attach_offset_committer",
    "register",
]


class TideMQDataSource(DataSource):  # type: ignore[misc]
    """The ``tidemq`` format: ``spark.read/readStream/write/writeStream.format("tidemq")``."""

    @classmethod
    def name(cls) -> str:
        """The format name, ``"tidemq"``."""
        return "tidemq"

    def schema(self) -> str:
        """The source's fixed schema (DDL), see :data:`SOURCE_SCHEMA_DDL`."""
        return SOURCE_SCHEMA_DDL

    def reader(self, schema: StructType) -> DataSourceReader:
        """Batch reader; raises :class:`OptionError` for bad options."""
        return TideMQBatchReader(SourceOptions.parse(self.options))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        """Streaming reader; raises :class:`OptionError` for bad options."""
        return TideMQStreamReader(SourceOptions.parse(self.options))

    def writer(self, schema: StructType, overwrite: bool) -> TideMQArrowWriter:
        """Batch Arrow writer; raises :class:`OptionError` for bad options or columns."""
        opts = SinkOptions.parse(self.options)
        check_sink_schema(schema, opts)
        return TideMQArrowWriter(opts)

    def streamWriter(self, schema: StructType, overwrite: bool) -> TideMQStreamArrowWriter:
        """Streaming Arrow writer; raises :class:`OptionError` for bad options or columns."""
        opts = SinkOptions.parse(self.options)
        check_sink_schema(schema, opts)
        return TideMQStreamArrowWriter(opts)


def register(spark: Any) -> None:
    """Register the ``tidemq`` format with ``spark`` (``spark.dataSource.register``)."""
    spark.dataSource.register(TideMQDataSource)
