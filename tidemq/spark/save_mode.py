"""What to use when a tidemq write has no save mode.

Spark answers ``df.write.format("tidemq").save()`` (save mode ErrorIfExists, its default) with
``UNSUPPORTED_DATA_SOURCE_SAVE_MODE ... Please use either the "Append" or "Overwrite" mode``,
before the data source is asked, while the tidemq sink refuses Overwrite (a topic cannot be
truncated). :func:`install` (run when the driver imports ``tidemq.spark``) makes that one error,
for format ``tidemq`` only, say what works: :data:`SAVE_MODE_HINT`. Every other error passes
through untouched, except that an :class:`OptionError` the sink raised in the driver (a bad
option, an invalid topic name, mode overwrite) comes out as that one line instead of Spark's
``PYTHON_DATA_SOURCE_ERROR`` with the Python worker's traceback.
"""

from __future__ import annotations

import re
from typing import Any

from tidemq.spark.options import OptionError

__all__ = ["OVERWRITE_REFUSED", "SAVE_MODE_HINT", "SaveModeError", "install"]

SAVE_MODE_HINT = (
    'the tidemq sink appends to a topic: use df.write.format("tidemq").mode("append") '
    "(Spark's own message also offers Overwrite, but a topic cannot be overwritten or truncated)"
)
OVERWRITE_REFUSED = (
    "save mode overwrite is not allowed for the tidemq sink: a topic cannot be truncated. "
    'Use append: df.write.format("tidemq").mode("append") (Spark\'s error for a write without '
    "a mode lists Overwrite too; the tidemq sink takes Append only)"
)


class SaveModeError(OptionError):
    """A tidemq write without ``.mode("append")`` (Spark's ErrorIfExists or Ignore)."""


def install() -> None:
    """Wrap ``DataFrameWriter.format`` / ``save`` once so the save-mode error of a tidemq write says
    to use append. Idempotent; a PySpark without those methods is left alone."""
    from pyspark.sql.readwriter import DataFrameWriter

    if getattr(DataFrameWriter, "_tidemq_save_mode", False):
        return
    original_format, original_save = DataFrameWriter.format, DataFrameWriter.save

    def format(self: Any, source: str) -> Any:
        self._tidemq_sink = str(source).lower() == "tidemq"
        return original_format(self, source)

    def save(self: Any, path: Any = None, format: Any = None, *args: Any, **kwargs: Any) -> Any:
        try:
            return original_save(self, path, format, *args, **kwargs)
        except Exception as exc:
            tidemq = getattr(self, "_tidemq_sink", False) or str(format or "").lower() == "tidemq"
            if tidemq and "UNSUPPORTED_DATA_SOURCE_SAVE_MODE" in str(exc):
                raise SaveModeError(SAVE_MODE_HINT) from None
            refused = re.search(r"OptionError: (.+)", str(exc)) if tidemq else None
            if refused:  # the sink refused an option in the driver: its one line, not the traceback
                raise OptionError(refused.group(1).strip()) from None
            raise

    format.__doc__, save.__doc__ = original_format.__doc__, original_save.__doc__
    DataFrameWriter.format = format  # type: ignore[method-assign]
    DataFrameWriter.save = save  # type: ignore[method-assign]
    DataFrameWriter._tidemq_save_mode = True  # type: ignore[attr-defined]
