"""What one small build costs as the store's trace index grows, with this otelcar and with
another checkout (``--baseline PATH``, e.g. a ``git worktree`` of an earlier commit), in the
same run.

For each index size N: a store whose ``derived/traces.parquet`` holds N synthetic traces, then
``--builds`` imports of one new trace each (the refund fixture's spans under a fresh trace
id: one record, one build, as a receiver's batches are). Prints the median wall ms per build of
each checkout and their ratio. Each checkout runs in its own subprocess
(``PYTHONPATH=<checkout>``) on its own copy of the store. Timings are printed, never asserted.

    git worktree add /tmp/before <commit>
    .venv/bin/python benchmarks/index_growth.py --baseline /tmp/before --sizes 1000,100000
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "fixtures" / "otlp" / "new_content.traces.jsonl"
TRACE = "c2b9546e0f0220f3edb7f1d5cbf15150"

# Runs inside each checkout: import each record file (one build each), CPU ms per build.
WORKER = """
import json, sys, time
from pathlib import Path
from otelcar import Store, import_files
store = Store(sys.argv[1])
times = []
for path in sorted(Path(sys.argv[2]).glob("*.jsonl")):
    start = time.perf_counter()
    import_files([path], store=store)
    times.append((time.perf_counter() - start) * 1000)
import otelcar
print(json.dumps({"ms": times, "traces": store.traces().height, "from": otelcar.__file__}))
"""


def _seed_store(root: Path, n: int) -> None:
    """A store whose trace index holds ``n`` synthetic traces (no raw records, no steps)."""
    import polars as pl

    from otelcar.schema import TRACES_SCHEMA
    from otelcar.store.derived import DerivedTables

    derived = DerivedTables(root / "derived")
    frame = pl.DataFrame(
        {
            "trace_id": [f"{(i * 0x9E3779B97F4A7C15) % (1 << 128):032x}" for i in range(n)],
            "service": ["svc"] * n,
            "root_name": ["agent"] * n,
            "start_ns": list(range(n)),
            "end_ns": list(range(1, n + 1)),
            **{c: [3] * n for c in ("n_spans", "n_steps", "n_llm", "n_tool")},
            **{c: [0] * n for c in ("n_agent", "n_errors", "n_logs", "n_unlinked_logs")},
            "n_issues": [0] * n,
            "dialects": [["otel-genai"]] * n,
            "content_captured": ["full"] * n,
            "build_id": [0] * n,
        },
        schema=TRACES_SCHEMA,
    )
    frame.write_parquet(derived.directory / "traces.parquet")
    derived.save_state()


def _records(folder: Path, builds: int) -> None:
    text = FIXTURE.read_text()
    for b in range(builds):
        fresh = f"{0xB0000000 + b:032x}"
        (folder / f"{b:04d}.jsonl").write_text(text.replace(TRACE, fresh))


def _run(checkout: Path, store: Path, records: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    done = subprocess.run(
        [sys.executable, "-c", WORKER, str(store), str(records)],
        env=env,
        cwd=store.parent,  # not this checkout: `-c` puts the working directory first
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--builds", type=int, default=40)
    parser.add_argument("--baseline", type=Path, help="another checkout to compare with")
    args = parser.parse_args()
    checkouts = {"this": ROOT} | ({"baseline": args.baseline} if args.baseline else {})
    print(
        f"| index traces | {' | '.join(f'{k} ms/build' for k in checkouts)} |"
        + (" baseline ÷ this |" if args.baseline else "")
    )
    print("|---" * (len(checkouts) + 1 + bool(args.baseline)) + "|")
    with tempfile.TemporaryDirectory() as tmp:
        records = Path(tmp) / "records"
        records.mkdir()
        _records(records, args.builds)
        for n in (int(s) for s in args.sizes.split(",")):
            seeded = Path(tmp) / f"seed-{n}"
            _seed_store(seeded, n)
            medians = {}
            for name, checkout in checkouts.items():
                store = Path(tmp) / f"{name}-{n}"
                shutil.copytree(seeded, store)
                result = _run(checkout, store, records)
                assert result["traces"] == n + args.builds, result
                assert result["from"].startswith(str(checkout.resolve())), result["from"]
                medians[name] = statistics.median(result["ms"])
                shutil.rmtree(store)
            cells = " | ".join(f"{medians[k]:.1f}" for k in checkouts)
            ratio = f" {medians['baseline'] / medians['this']:.1f} |" if args.baseline else ""
            print(f"| {n:,} | {cells} |{ratio}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
