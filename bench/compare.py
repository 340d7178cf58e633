"""tidemq against Redis Streams, the same shapes in one run, ratios that survive a noisy machine.

Every repetition runs each side once, interleaved (tidemq, Redis, tidemq, Redis, ...), each on a
fresh server with a temp directory on a free loopback port: ``tidemq serve`` in a subprocess with
tidemq's own sync client, and ``redis-server`` (Debian's package) through redis-py + hiredis. The
figures are medians over the repetitions; only the ratios within one run mean anything on a shared
machine, whose absolute speed drifts by several times between runs.

Durability pairs: tidemq ``ASYNC_FLUSH`` against Redis AOF ``appendfsync everysec``, and
``SYNC_FLUSH`` (acknowledged after fsync, group commit) against AOF ``appendfsync always``.

Shapes (1 KiB bodies; ``--messages`` messages, 200,000 by default):

* ``send_single``: one message per round trip (``Producer.send`` vs ``XADD``), ``--single``
  messages (20,000 by default);
* ``send_batch32``: batches of 32 (``Producer.send_batch`` vs 32 pipelined ``XADD``);
* ``push_batch32``: a ``PushConsumer`` with batches of 32 vs ``XREADGROUP COUNT 32`` + ``XACK``;
* ``lite_pull``: ``PullConsumer.poll()`` + ``commit_sync()`` per poll vs the same Redis loop;
* ``latency``: one sync producer paced at ``--rate`` msg/s (2,000) for ``--latency-messages``
  messages while a consumer receives: produce-to-consume p50 / p90 / p99 / max (ms), the achieved
  rate and the producer's worst lag behind its schedule.

Without ``redis-server`` or redis-py one line says so and only tidemq's figures are printed.

Also printed: the interpreter (its build matters to pure-Python code) and a bare loopback
ping-pong's round trip before and after the run (:func:`bench.loopback_round_trip_us`), which tells
how expensive waking another process was: on the 2-vCPU VM of the README's tables it moves 5x with
how idle the machine is, and every shape that waits for a peer moves with it. The JSON line also
carries ``serve_args`` (``--serve-arg``, e.g. ``--serve-arg=--idle-poll-us --serve-arg=0`` for an
A/B of idle polling) and ``serve_idle_poll_us``, the idle polling ``tidemq serve`` ran with (runs
before 2026-11-26's had none). The paced p99 of each repetition is printed too (JSON:
``latency.p99_ms_per_rep``): on that VM the host's CPU steal comes and goes within a run, and one
repetition's p99 can be 0.6 ms and the next 10 ms.

Run: ``python -m bench.compare [--messages N] [--single N] [--reps N] [--flush async sync]
[--only SHAPE ...]``. Prints a table, then one JSON line with every figure.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

from bench import interpreter, loopback_round_trip_us
from bench.client_throughput import SHAPES, redis_available, redis_shapes, run
from tidemq.remoting.busy_poll import SERVE_IDLE_POLL_US

FLUSH_PAIRS = {"async": "everysec", "sync": "always"}
"""tidemq ``--flush`` mode -> the Redis ``appendfsync`` policy it is compared with."""

RATE_SHAPES = tuple(s for s in SHAPES if s != "latency")
LATENCY_KEYS = ("achieved_msgs_per_s", "p50_ms", "p90_ms", "p99_ms", "max_ms", "max_send_lag_ms")


def _median(values: list[float]) -> float:
    return round(statistics.median(values), 3) if values else float("nan")


def _collect(reps: list[dict[str, Any]], shapes: tuple[str, ...]) -> dict[str, Any]:
    """Medians over repetitions of one side: ``{shape: msgs/s, "latency": {key: value}}``; the
    latency also keeps each repetition's p99 (``p99_ms_per_rep``, in run order): a calm stretch and
    a noisy one differ there by several times, which a median hides."""
    out: dict[str, Any] = {}
    for shape in shapes:
        if shape == "latency":
            lats = [r["latency"] for r in reps if "latency" in r]
            if lats:
                out["latency"] = {k: _median([lat[k] for lat in lats]) for k in LATENCY_KEYS}
                out["latency"]["p99_ms_per_rep"] = [lat["p99_ms"] for lat in lats]
        else:
            key = f"{shape}_msgs_per_s"
            out[shape] = _median([r[key] for r in reps if key in r])
    return out


def compare(args: argparse.Namespace) -> dict[str, Any]:
    """Run every repetition of every flush pair; returns ``{flush: {"tidemq": ..., "redis": ...}}``."""
    shapes = tuple(args.only or SHAPES)
    why_not = "--no-redis given" if args.no_redis else redis_available()
    if why_not is not None:
        print(f"Redis rows skipped: {why_not}")
    result: dict[str, Any] = {}
    for flush in args.flush:
        ours: list[dict[str, Any]] = []
        theirs: list[dict[str, Any]] = []
        for rep in range(args.reps):
            t0 = time.monotonic()
            ours.append(run(args, flush=flush, single=args.single))
            print(
                f"  [{flush}] rep {rep + 1}/{args.reps}: tidemq done in {time.monotonic() - t0:.0f}s",
                flush=True,
            )
            if why_not is None:
                t0 = time.monotonic()
                theirs.append(
                    redis_shapes(args, b"x" * args.body, FLUSH_PAIRS[flush], shapes, single=args.single)
                )
                print(
                    f"  [{flush}] rep {rep + 1}/{args.reps}: redis done in {time.monotonic() - t0:.0f}s",
                    flush=True,
                )
        result[flush] = {
            "tidemq": _collect(ours, shapes),
            "redis": _collect(theirs, shapes) if theirs else None,
        }
    return result


def _fmt(value: float) -> str:
    return "-" if value != value else f"{value:,.0f}" if value >= 100 else f"{value:.2f}"


def print_table(result: dict[str, Any]) -> None:
    """One row per shape and durability pair: tidemq, Redis, tidemq / Redis."""
    print(f"\n{'shape':27} {'durability':18} {'tidemq':>10} {'redis':>10} {'tidemq/redis':>13}")
    for flush, sides in result.items():
        ours, theirs = sides["tidemq"], sides["redis"] or {}
        pair = f"{flush} vs {FLUSH_PAIRS[flush]}"
        for shape in RATE_SHAPES:
            if shape not in ours:
                continue
            a, b = ours[shape], theirs.get(shape, float("nan"))
            ratio = f"{a / b:.2f}" if b == b and b else "-"
            print(f"{shape:27} {pair:18} {_fmt(a):>10} {_fmt(b):>10} {ratio:>13}")
        lat_a, lat_b = ours.get("latency"), theirs.get("latency", {})
        if lat_a:
            for key in LATENCY_KEYS:
                b = lat_b.get(key, float("nan"))
                print(f"{'latency.' + key:27} {pair:18} {_fmt(lat_a[key]):>10} {_fmt(b):>10} {'':>13}")
            reps_a = " / ".join(map(_fmt, lat_a["p99_ms_per_rep"]))
            reps_b = " / ".join(map(_fmt, lat_b.get("p99_ms_per_rep", [])))
            print(f"{'latency.p99_ms, each rep':27} {pair:18} tidemq {reps_a}; redis {reps_b or '-'}")


def idle_poll_of(serve_args: list[str]) -> int | str:
    """The ``--idle-poll-us`` that ``tidemq serve`` runs with given ``serve_args`` (its default when
    not among them; the text as given when it is not a number)."""
    value: str | None = None
    for i, arg in enumerate(serve_args):
        if arg == "--idle-poll-us" and i + 1 < len(serve_args):
            value = serve_args[i + 1]
        elif arg.startswith("--idle-poll-us="):
            value = arg.split("=", 1)[1]
    if value is None:
        return SERVE_IDLE_POLL_US
    return int(value) if value.strip().isdigit() else value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--messages", type=int, default=200_000, help="messages per throughput shape")
    parser.add_argument("--single", type=int, default=20_000, help="messages for send_single")
    parser.add_argument("--latency-messages", type=int, default=10_000, help="paced sends (5 s at 2,000/s)")
    parser.add_argument("--rate", type=float, default=2000.0, help="paced send rate, msg/s")
    parser.add_argument("--body", type=int, default=1024, help="body bytes")
    parser.add_argument("--reps", type=int, default=2, help="interleaved repetitions per side")
    parser.add_argument("--flush", nargs="+", choices=sorted(FLUSH_PAIRS), default=["async", "sync"])
    parser.add_argument("--only", nargs="*", choices=SHAPES, help="shapes to run (default all)")
    parser.add_argument("--no-redis", action="store_true", help="tidemq rows only")
    parser.add_argument(
        "--serve-arg",
        dest="serve_args",
        action="append",
        default=[],
        metavar="ARG",
        help="one more argument for `tidemq serve` (repeat; e.g. --serve-arg=--idle-poll-us --serve-arg=0)",
    )
    args = parser.parse_args()
    python = interpreter()
    print(f"Python {python['python']} at {python['executable']} ({python['build']}, {python['compiler']})")
    rtt_before = loopback_round_trip_us()
    result = compare(args)
    rtt_after = loopback_round_trip_us()
    print_table(result)
    print(
        f"\nloopback ping-pong between two processes, before / after: p50 {rtt_before['p50_us']:.0f} / "
        f"{rtt_after['p50_us']:.0f} us, p99 {rtt_before['p99_us']:.0f} / {rtt_after['p99_us']:.0f} us"
    )
    print(
        json.dumps(
            {
                "bench": "compare",
                "messages": args.messages,
                "single": args.single,
                "body_bytes": args.body,
                "reps": args.reps,
                "interpreter": python,
                "loopback_rtt_us": {"before": rtt_before, "after": rtt_after},
                "serve_args": args.serve_args,
                "serve_idle_poll_us": idle_poll_of(args.serve_args),
                "results": result,
            }
        )
    )


if __name__ == "__main__":
    main()
