"""How deriving one trace's steps grows with the trace's length (issue 19's import goal).

A chat span of the OTel GenAI conventions carries the whole conversation so far, so a trace of
``n`` turns holds its first messages ``n`` times: its bytes grow with ``n²``. For each length
the script builds one agent run (``replay_overhead.synth_spans``: an ``invoke_agent`` root,
``n`` chat spans with the history in ``gen_ai.input.messages``, ``n - 1`` tool spans whose
results have ``--payload`` characters) and measures, CPU time in this process, best of
``--repeat``:

1. the floor: ``json.loads`` of every message attribute (each history decoded whole, as a
   reader that keeps no memo must);
2. ``build_trace`` (mapping and steps) as otelcar runs it, with one trace's content decoded
   once (:mod:`otelcar.conventions.memo`);
3. the same with the memo switched off (the path before it), up to ``--baseline-max`` steps;
4. the steps table from the rows as the store builds it (``tables.frame_of``: each distinct
   message converted once), and row by row (``pl.DataFrame``, the path before it), up to
   ``--baseline-max`` steps;
5. the bytes of the trace's spans and steps parts as the store writes them (Parquet, written
   to memory): kept whole (the layout before issue 40: every history again in each step and
   each chat span's attributes) and as the store keeps them now (messages once per build,
   contexts as references, big attributes left in the raw records: ``otelcar.store.refs``,
   ``otelcar.store.raw_spans``), with the write's CPU time; what the new parts read back as
   must equal the table built from the rows (exit 1 otherwise).

With and without the memo the rows must be equal, and both tables too (the script exits 1
otherwise). It prints
per-step costs, ratios and growth exponents between consecutive lengths (1.0 is linear in
the steps; the bytes themselves grow with exponent 2). Timings are printed, never asserted.

Run ``python benchmarks/import_growth.py`` (10, 100 and 300 steps, about a minute) or
``--sizes 10,100,1000``. See ``benchmarks/README.md``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import itertools
import json
import math
import platform
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parent))
import replay_overhead  # the same synthetic agent run as the replay benchmark

import otelcar.trajectory as trajectory
from otelcar.schema import SPANS_SCHEMA, STEPS_SCHEMA
from otelcar.store.raw_spans import SPANS_FILE_SCHEMA, span_file_rows
from otelcar.store.refs import STEPS_PART_SCHEMA, encode_steps, resolve_messages
from otelcar.store.tables import frame_of, span_rows

T = TypeVar("T")
MESSAGE_KEYS = ("gen_ai.input.messages", "gen_ai.output.messages")


def best_cpu(function: Callable[[], T], repeat: int) -> tuple[float, T]:
    """The least CPU time of ``repeat`` calls, and the last call's result."""
    best = math.inf
    result: Any = None
    for _ in range(repeat):
        start = time.process_time()
        result = function()
        best = min(best, time.process_time() - start)
    return best, result


def without_memo(spans: list) -> Any:
    """``build_trace`` with the per-trace memo switched off (the path before it)."""
    saved = trajectory.trace_memo
    trajectory.trace_memo = contextlib.nullcontext  # type: ignore[assignment]
    try:
        return trajectory.build_trace(replay_overhead.TRACE_ID, spans)
    finally:
        trajectory.trace_memo = saved


def _parquet_bytes(*frames: pl.DataFrame) -> int:
    """Bytes of ``frames`` written as Parquet with the store's settings (Polars' defaults)."""
    total = 0
    for frame in frames:
        buffer = io.BytesIO()
        frame.write_parquet(buffer)
        total += buffer.tell()
    return total


def parts_whole(spans: list, rows: list[dict[str, Any]]) -> int:
    """Bytes of the spans and steps parts of one trace kept whole (the layout before)."""
    steps = frame_of(rows, STEPS_PART_SCHEMA)
    return _parquet_bytes(pl.DataFrame(span_rows(spans), schema=SPANS_SCHEMA), steps)


def parts_now(spans: list, rows: list[dict[str, Any]]) -> tuple[int, Any]:
    """Bytes of the spans, steps and messages parts of one trace as the store writes them,
    and what the encoded steps and messages are."""
    encoded = encode_steps(rows)
    spans_part = pl.DataFrame(span_file_rows(spans), schema=SPANS_FILE_SCHEMA)
    return _parquet_bytes(spans_part, encoded.steps, encoded.messages), encoded


def check_read_back(rows: list[dict[str, Any]], encoded: Any, steps: int) -> None:
    """Exit 1 unless the encoded steps read back as the table built from the rows."""
    messages = encoded.messages["message"]
    read = resolve_messages(encoded.steps.lazy(), lambda builds: (messages, {0: 0})).collect()
    if not read.equals(frame_of(rows, STEPS_PART_SCHEMA)):
        raise SystemExit(f"FAILED: {steps} steps: the stored steps read back differently")


def measure(steps: int, payload: int, repeat: int, baseline_max: int) -> dict[str, Any]:
    spans = replay_overhead.synth_spans(replay_overhead.Case(steps, payload), seed=1)
    texts = [s.attributes[k] for s in spans for k in MESSAGE_KEYS if k in s.attributes]
    chars = sum(len(v) for s in spans for v in s.attributes.values() if isinstance(v, str))
    floor, _ = best_cpu(lambda: [json.loads(t) for t in texts], repeat)
    memo, build = best_cpu(lambda: trajectory.build_trace(replay_overhead.TRACE_ID, spans), repeat)
    plain = None
    if steps <= baseline_max:
        plain, unmemoized = best_cpu(lambda: without_memo(spans), 1)
        if unmemoized.steps != build.steps:
            raise SystemExit(f"FAILED: {steps} steps: rows differ with and without the memo")
    table, frame = best_cpu(lambda: frame_of(build.steps, STEPS_SCHEMA), repeat)
    row_by_row = None
    if steps <= baseline_max:
        row_by_row, plain_frame = best_cpu(
            lambda: pl.DataFrame(build.steps, schema=STEPS_SCHEMA), 1
        )
        if not plain_frame.equals(frame):
            raise SystemExit(f"FAILED: {steps} steps: frame_of differs from the row-by-row frame")
    rows = [{**row, "build_id": 0} for row in build.steps]
    whole_s, whole = best_cpu(lambda: parts_whole(spans, rows), 1)
    now_s, (now, encoded) = best_cpu(lambda: parts_now(spans, rows), repeat)
    check_read_back(rows, encoded, steps)
    return {
        "steps": steps,
        "rows": frame.height,
        "mb": chars / 1e6,
        "floor": floor,
        "memo": memo,
        "plain": plain,
        "table": table,
        "row_by_row": row_by_row,
        "whole_mb": whole / 1e6,
        "whole_s": whole_s,
        "now_mb": now / 1e6,
        "now_s": now_s,
    }


def _exponent(a: dict, b: dict, key: str) -> str:
    if a[key] is None or b[key] is None or a[key] <= 0:
        return "-"
    return f"{math.log(b[key] / a[key]) / math.log(b['steps'] / a['steps']):.2f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10,100,300", help="trace lengths (chat turns)")
    parser.add_argument("--payload", type=int, default=1024, help="tool result characters")
    parser.add_argument("--repeat", type=int, default=3, help="best of this many runs")
    parser.add_argument(
        "--baseline-max", type=int, default=300, help="longest trace also built without memo"
    )
    args = parser.parse_args(argv)
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    print(f"date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; commit {commit}")
    python = platform.python_version()
    print(f"machine: {platform.platform()}; Python {python}; polars {pl.__version__}")
    results = []
    for size in (int(s) for s in args.sizes.split(",")):
        print(f"{size} steps …", file=sys.stderr, flush=True)
        results.append(measure(size, args.payload, args.repeat, args.baseline_max))
    print()
    print(
        "| steps | rows | attribute MB | json.loads floor s | build_trace s | µs/step "
        "| × floor | without memo s | memo speed-up | steps table s | row by row s |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in results:
        plain = "-" if r["plain"] is None else f"{r['plain']:.2f}"
        gain = "-" if r["plain"] is None else f"{r['plain'] / r['memo']:.1f}×"
        rows = "-" if r["row_by_row"] is None else f"{r['row_by_row']:.3f}"
        print(
            f"| {r['steps']} | {r['rows']} | {r['mb']:.1f} | {r['floor']:.3f} | "
            f"{r['memo']:.3f} | {1e6 * r['memo'] / r['steps']:.0f} | "
            f"{r['memo'] / r['floor']:.2f} | {plain} | {gain} | {r['table']:.3f} | {rows} |"
        )
    print()
    print("| steps | parts kept whole MB | write s | parts now MB | write s | bytes whole ÷ now |")
    print("| --- | --- | --- | --- | --- | --- |")
    for r in results:
        print(
            f"| {r['steps']} | {r['whole_mb']:.2f} | {r['whole_s']:.3f} | {r['now_mb']:.3f} | "
            f"{r['now_s']:.3f} | {r['whole_mb'] / r['now_mb']:.1f}× |"
        )
    print()
    print("growth exponents (time ∝ steps^k between consecutive lengths):")
    for a, b in itertools.pairwise(results):
        print(
            f"  {a['steps']} → {b['steps']}: build_trace {_exponent(a, b, 'memo')}, "
            f"without memo {_exponent(a, b, 'plain')}, floor {_exponent(a, b, 'floor')}, "
            f"steps table {_exponent(a, b, 'table')}, row by row {_exponent(a, b, 'row_by_row')}; "
            f"bytes kept whole {_exponent(a, b, 'whole_mb')}, now {_exponent(a, b, 'now_mb')}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
