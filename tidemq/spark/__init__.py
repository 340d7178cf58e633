"""tidemq.spark: the ``tidemq`` data source for PySpark (>= 4.2) -- batch and streaming source and sink.

PySpark finds the format on its own through the ``pyspark_tidemq`` package shipped with tidemq
(``DefaultSource``); :func:`register` does the same explicitly, for sessions whose Python workers
cannot see installed packages. Example::

    df = (spark.readStream.format("tidemq")
          .option("namesrv", "127.0.0.1:9876").option("topic", "Orders")
          .option("startingOffsets", "earliest").load())
    tidemq.spark.attach_offset_committer(spark, namesrv="127.0.0.1:9876", group="orders-etl")

For a local session, ``os.environ["PYSPARK_PYTHON"] = tidemq.spark.python_launcher()`` before building it
saves about 0.4 s of every Python process Spark starts (each streaming query starts one for the
source's driver side): they import the installed PySpark instead of compiling ``pyspark.zip`` again,
and each streaming query's source process after the first is forked from a zygote that has imported
it already (:mod:`tidemq.spark.launcher`); :func:`use_filesystem_checkpoints` (``tidemq.spark.session``)
saves 60-100 ms of each micro-batch's checkpoint writes on local disk.

See docs/spark.md for the options, the schema and the sink's columns.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader
from pyspark.sql.types import StructType

from tidemq.spark.arrow import (
    ARROW_SCHEMA,
    ARROW_SCHEMA_NO_PROPERTIES,
    SOURCE_SCHEMA_DDL,
    SOURCE_SCHEMA_DDL_NO_PROPERTIES,
)
from tidemq.spark.conn import DataLossError
from tidemq.spark.launcher import python_launcher
from tidemq.spark.listener import OffsetCommitter, attach_offset_committer
from tidemq.spark.options import OptionError, SinkOptions, SourceOptions, _bool
from tidemq.spark.save_mode import install as _install_save_mode_hint
from tidemq.spark.session import use_filesystem_checkpoints
from tidemq.spark.source import TideMQBatchReader, TideMQStreamReader

if TYPE_CHECKING:
    from tidemq.spark.sink import TideMQArrowWriter, TideMQStreamArrowWriter
    from tidemq.spark.tx_sink import TideMQTxArrowWriter, TideMQTxStreamArrowWriter

# tidemq.spark.sink (it brings the producer, 40 ms) is imported by writer() / streamWriter(): every
# streaming query's source runs in a new Python process that imports this package and never writes.

__all__ = [
    "ARROW_SCHEMA",
    "SOURCE_SCHEMA_DDL",
    "DataLossError",
    "OffsetCommitter",
    "OptionError",
    "TideMQDataSource",
    "attach_offset_committer",
    "projection",
    "python_launcher",
    "register",
    "transaction_checker",
    "use_filesystem_checkpoints",
]


def projection(schema: StructType, include_headers: bool = True) -> tuple[str, ...] | None:
    """The columns a reader must produce for ``schema``: None when it is the source's own schema,
    else the names of a schema given with ``spark.read.schema(...)``, in its order.

    A given schema selects columns: any subset of the source's columns, each with the source's
    type (the data source API cannot prune columns by itself, so this is how a query that needs a
    few columns skips decoding and converting the others).

    Raises:
        OptionError: a column the source does not have, a different type, or a name given twice
            (the message lists the source's schema).
    """
    from pyspark.sql.pandas.types import to_arrow_schema

    base = ARROW_SCHEMA if include_headers else ARROW_SCHEMA_NO_PROPERTIES
    given = to_arrow_schema(schema, timezone="UTC")
    names = tuple(given.names)
    if names == tuple(base.names):
        return None
    ddl = SOURCE_SCHEMA_DDL if include_headers else SOURCE_SCHEMA_DDL_NO_PROPERTIES
    problems = []
    for field, spark_field in zip(given, schema.fields, strict=True):
        if field.name not in base.names:
            problems.append(f"{field.name}: no such column")
        elif not field.type.equals(base.field(field.name).type):
            problems.append(f"{field.name}: {spark_field.dataType.simpleString()} is not the source's type")
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        problems.append(f"given twice: {twice}")
    if problems:
        raise OptionError(
            "the schema given to the tidemq source must be a subset of its columns with their types ("
            + "; ".join(problems)
            + f"). The source's schema is: {ddl}"
        )
    return names


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

    def _source_options(self, schema: StructType) -> SourceOptions:
        opts = SourceOptions.parse(self.options)
        return dataclasses.replace(opts, columns=projection(schema, opts.include_headers))

    def reader(self, schema: StructType) -> DataSourceReader:
        """Batch reader of the source's columns, or of those of a schema given with ``.schema(...)``
        (:func:`projection`); raises :class:`OptionError` for bad options or a bad schema."""
        return TideMQBatchReader(self._source_options(schema))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        """Streaming reader (columns as :meth:`reader`); raises :class:`OptionError` for bad options
        or a bad schema."""
        return TideMQStreamReader(self._source_options(schema))

    def writer(self, schema: StructType, overwrite: bool) -> TideMQArrowWriter | TideMQTxArrowWriter:
        """Batch Arrow writer (save mode append only, as Spark's Kafka sink).

        Raises:
            OptionError: ``mode("overwrite")`` (a topic cannot be truncated), bad options or columns.
            Spark itself refuses ``errorifexists`` (its default) and ``ignore`` for Python data sources.
        """
        if overwrite:
            from tidemq.spark.save_mode import OVERWRITE_REFUSED

            raise OptionError(OVERWRITE_REFUSED)
        from tidemq.spark.sink import TideMQArrowWriter, check_sink_schema

        opts = SinkOptions.parse(self.options)
        check_sink_schema(schema, opts)
        if opts.transactional:  # exactly-once: tidemq.spark.tx_sink
            from tidemq.spark.tx_sink import TideMQTxArrowWriter

            return TideMQTxArrowWriter(opts)
        return TideMQArrowWriter(opts)

    def streamWriter(
        self, schema: StructType, overwrite: bool
    ) -> TideMQStreamArrowWriter | TideMQTxStreamArrowWriter:
        """Streaming Arrow writer; raises :class:`OptionError` for bad options or columns."""
        from tidemq.spark.sink import TideMQStreamArrowWriter, check_sink_schema

        opts = SinkOptions.parse(self.options)
        check_sink_schema(schema, opts)
        if opts.transactional:  # exactly-once: tidemq.spark.tx_sink
            from tidemq.spark.tx_sink import TideMQTxStreamArrowWriter

            return TideMQTxStreamArrowWriter(opts)
        return TideMQStreamArrowWriter(opts)


def transaction_checker(namesrv: str, topics: Any, producer_group: str | None = None) -> Any:
    """A started :class:`~tidemq.client.producer.transaction.TransactionProducer` that answers the
    broker's checks of the transactional sink's half messages to ``topics`` (a name or a list)
    from the checkpoint, for the driver process (``shutdown()`` it when done); ``producer_group``
    defaults to the sink's (``tidemq-spark-tx-writer``). See
    :func:`tidemq.spark.tx_sink.transaction_checker`."""
    from tidemq.spark.options import DEFAULT_TX_PRODUCER_GROUP
    from tidemq.spark.tx_sink import transaction_checker as start

    return start(namesrv, topics, producer_group or DEFAULT_TX_PRODUCER_GROUP)


_registered: set[int] = set()
"""``id()`` of the JVM sessions :func:`register` has registered the format with."""

_DATA_SOURCE_LOGGER = "org.apache.spark.sql.execution.datasources.DataSourceManager"


def register(spark: Any) -> None:
    """Register the ``tidemq`` format with ``spark`` (``spark.dataSource.register``), once per
    session: a second call does nothing.

    PySpark 4 also finds the format by itself (``pyspark_tidemq``, see docs/spark.md), but a
    format only discovered that way runs its streaming source runners without the launcher's
    zygote (``tidemq.spark.launcher``): measured, the suite's zygote test took 81-94 s that way
    against 26 s registered. So the session builders register it, and the warning Spark logs when
    a registration replaces a discovered format ("replaced a statically registered data source")
    is kept out of the log for that one call.
    """
    key = id(getattr(spark, "_jsparkSession", spark))
    if key in _registered:
        return
    with _quiet_jvm_logger(spark, _DATA_SOURCE_LOGGER):
        spark.dataSource.register(TideMQDataSource)
    _registered.add(key)


@contextlib.contextmanager
def _quiet_jvm_logger(spark: Any, name: str) -> Iterator[None]:
    """Raise the JVM's log4j logger ``name`` to ERROR for the ``with`` block (nothing on Spark
    Connect or another layout)."""
    try:
        jvm = spark._jvm
        old = jvm.org.apache.logging.log4j.LogManager.getLogger(name).getLevel()
        configurator = jvm.org.apache.logging.log4j.core.config.Configurator
        configurator.setLevel(name, jvm.org.apache.logging.log4j.Level.ERROR)
    except Exception:
        yield
        return
    try:
        yield
    finally:
        with contextlib.suppress(Exception):
            configurator.setLevel(name, old)


_install_save_mode_hint()
