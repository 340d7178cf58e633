"""``python -m tidemq.pipelines flights ...``: the pipeline commands without the ``tidemq`` entry point."""

from __future__ import annotations

import logging
import sys

from tidemq.pipelines.cli import pipeline_group

if __name__ == "__main__":
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    pipeline_group(prog_name="tidemq pipeline")
