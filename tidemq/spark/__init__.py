"""tidemq.spark: the ``tidemq`` data source for PySpark (>= 4.2) -- batch and streaming source and sink.

PySpark finds the format on its own through the ``pyspark_tidemq`` package shipped with tidemq
(``DefaultSource``); :func:`register` does the same explicitly, for sessions whose Python workers
cannot see installed packages. Example::

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

from tidemq.spark.arrow import ARROW_SCHEMA, SOURCE_SCHEMA_DDL, SOURCE_SCHEMA_DDL_NO_PROPERTIES
from tidemq.spark.conn import DataLossError
from tidemq.spark.listener import OffsetCommitter, attach_offset_committer
from tidemq.spark.options import OptionError, SinkOptions, SourceOptions, _bool
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
        """The source's schema (DDL): :data:`SOURCE_SCHEMA_DDL`, without ``properties`` when
        ``includeHeaders=false``."""
        return (
            SOURCE_SCHEMA_DDL
            if _bool(self.options, "includeHeaders", True)
            else SOURCE_SCHEMA_DDL_NO_PROPERTIES
        )

    def reader(self, schema: StructType) -> DataSourceReader:
        """Batch reader; raises :class:`OptionError` for bad options."""
        return TideMQBatchReader(SourceOptions.parse(self.options))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        """Streaming reader; raises :class:`OptionError` for bad options."""
        return TideMQStreamReader(SourceOptions.parse(self.options))

    def writer(self, schema: StructType, overwrite: bool) -> TideMQArrowWriter:
        """Batch Arrow writer (save mode append only, as Spark's Kafka sink).

        Raises:
            OptionError: ``mode("overwrite")`` (a topic cannot be truncated), bad options or columns.
            Spark itself refuses ``errorifexists`` (its default) and ``ignore`` for Python data sources.
        """
        if overwrite:
            raise OptionError(
                "save mode overwrite is not allowed for the tidemq sink: a topic cannot be truncated. "
                'The allowed save mode is append: df.write.format("tidemq").mode("append")'
            )
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
