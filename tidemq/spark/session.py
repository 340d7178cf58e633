"""Settings of a local SparkSession that cut the fixed cost of each streaming query and micro-batch.

Without Hadoop's native library (``libhadoop.so``, which PyPI's PySpark does not ship), Spark's
default checkpoint writer (``FileContextBasedCheckpointFileManager``) has Hadoop start a ``readlink``
or ``chmod`` process for most steps of writing a checkpoint file on local disk (``RawLocalFileSystem``
falls back to shell commands for link status and permissions): about 8 process starts from the JVM
per checkpoint file, so 16 per micro-batch (its offsets and commit files) and 33 for a query of one
batch; measured on PySpark 4.3, local[2]: the batch's walCommit + commitOffsets 90 ms -> 25 ms. Spark's other
writer, ``FileSystemBasedCheckpointFileManager`` (Hadoop's ``FileSystem`` API: write a temporary
file, then rename it), does the same work with plain system calls. On a local or HDFS path it gives
the same guarantee: the rename is atomic, and a file that is already there is refused, as with
``FileContext`` (there too the check and the rename are two steps on a local disk).
"""

from __future__ import annotations

from typing import Any

__all__ = ["CHECKPOINT_FILE_MANAGER_CONF", "use_filesystem_checkpoints"]

CHECKPOINT_FILE_MANAGER_CONF = "spark.sql.streaming.checkpointFileManagerClass"
"""The (internal) Spark SQL setting naming the class that writes streaming checkpoint files."""

_FILESYSTEM_MANAGER = (
    "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager",  # 4.1+
    "org.apache.spark.sql.execution.streaming.FileSystemBasedCheckpointFileManager",  # before
)


def use_filesystem_checkpoints(spark: Any) -> bool:
    """Have ``spark`` write streaming checkpoints with Spark's ``FileSystemBasedCheckpointFileManager``
    (see the module docstring) unless the session already names a checkpoint file manager.

    Meant for a session whose checkpoints are on local disk (tidemq's session builders call it for
    ``local`` masters); it is a runtime SQL setting, so it can be set on a running session and
    applies to queries started after the call.

    Returns:
        True if the setting is now that class; False when the session names another manager, or
        the class cannot be found in its JVM (then nothing is changed: Spark keeps its default), or
        the session has no JVM of its own (Spark Connect).
    """
    current = spark.conf.get(CHECKPOINT_FILE_MANAGER_CONF, None)
    if current:
        return current in _FILESYSTEM_MANAGER
    jvm = getattr(getattr(spark, "sparkContext", None), "_jvm", None)
    if jvm is None:
        return False
    for name in _FILESYSTEM_MANAGER:
        try:
            jvm.java.lang.Class.forName(name)
        except Exception:
            continue
        spark.conf.set(CHECKPOINT_FILE_MANAGER_CONF, name)
        return True
    return False
