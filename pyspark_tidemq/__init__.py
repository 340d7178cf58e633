"""PySpark's automatic discovery hook for the ``tidemq`` data source (SPARK-45917).

PySpark 4 lists the installed top-level modules whose name starts with ``pyspark_`` (in the Python
worker it starts, with ``pkgutil.iter_modules``) and registers each one's ``DefaultSource``. With
tidemq installed in the interpreter Spark uses (``PYSPARK_PYTHON``), ``spark.read.format("tidemq")``
therefore works without calling :func:`tidemq.spark.register`.
"""

from __future__ import annotations

from tidemq.spark import TideMQDataSource as DefaultSource

__all__ = ["DefaultSource"]
