"""``tidemq pipeline flights``: the shipped pipelines on the command line.

The lead adds :data:`pipeline_group` to the ``tidemq`` click group (``main.add_command``).
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from types import FrameType

import click

from tidemq.errors import TideMQError

__all__ = ["flights_command", "pipeline_group"]


def _interrupt(signum: int, frame: FrameType | None) -> None:
    """SIGTERM stops the pipeline like Ctrl-C: the finally blocks shut everything down in order."""
    raise KeyboardInterrupt


@click.group("pipeline")
def pipeline_group() -> None:
    """Run the shipped data pipelines."""


@pipeline_group.command("flights")
@click.option(
    "--workdir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("."),
    show_default=True,
    help="Base directory: broker store and checkpoint under .tidemq/, results under out/flights/.",
)
@click.option("--namesrv", default=None, help="Use this cluster (host:port) instead of an embedded broker.")
@click.option("--master", default="local[*]", show_default=True, help="Spark master URL.")
@click.option(
    "--limit", type=click.IntRange(min=1), default=None, help="Only the first N flights (departure order)."
)
@click.option(
    "--max-offsets-per-trigger",
    type=click.IntRange(min=1),
    default=50_000,
    show_default=True,
    help="Messages per Spark micro-batch.",
)
@click.option("--no-progress", is_flag=True, help="No progress bar.")
@click.option(
    "--fail-after-batch", type=int, default=None, hidden=True, help="Test hook: SIGKILL after batch N."
)
def flights_command(
    workdir: Path,
    namesrv: str | None,
    master: str,
    limit: int | None,
    max_offsets_per_trigger: int,
    no_progress: bool,
    fail_after_batch: int | None,
) -> None:
    """Publish the NYC 2013 flights to tidemq and analyse them with Spark Structured Streaming.

    Restartable: interrupt it and run it again; it resumes from the topic's offsets and the
    Spark checkpoint, and the results equal one uninterrupted run.
    """
    from tidemq.pipelines.flights import FlightsConfig, run_flights_pipeline

    cfg = FlightsConfig(
        workdir=workdir.resolve(),
        namesrv=namesrv,
        master=master,
        limit=limit,
        max_offsets_per_trigger=max_offsets_per_trigger,
        progress=not no_progress,
        fail_after_batch=fail_after_batch,
    )
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        run_flights_pipeline(cfg, echo=click.echo)
    except (TideMQError, FileNotFoundError, RuntimeError) as exc:
        click.echo(f"tidemq pipeline flights: error: {exc}", err=True)
        sys.exit(1)
    except KeyboardInterrupt:
        click.echo("interrupted; run the same command again to resume", err=True)
        sys.exit(130)
