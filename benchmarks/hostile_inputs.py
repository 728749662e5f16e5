"""Hostile inputs at size: the fuzzing of every decoder and mapper, and ``kill -9`` cycles.

What ``tests/test_fuzz_decoders.py`` and ``tests/test_store_kill.py`` establish, run larger:

1. **Fuzzing.** Every property test of ``tests/test_fuzz_decoders.py`` with its example
   count multiplied by ``--scale`` (hypothesis, seeded by ``--seed``): random and mutated
   OTLP protobuf and OTLP/JSON, LangSmith, Langfuse and Who&When shapes, the committed
   fixtures and the real files under ``../shared/data`` mutated, and mixes of good and bad
   records imported into fresh stores. It counts the inputs tried per target (each decoder
   entry point) and the tests that failed (a decoder raised something other than
   ``FormatError``, a decoded record did not fit the store, a record went missing without a
   reason, or the store stopped importing).
2. **Kills.** ``--kill-cycles`` times: a fresh store, ``otelcar import`` of a generated dump
   (``--kill-spans`` spans of agent runs, our own generator in ``tests/test_store_kill.py``)
   killed with SIGKILL ``--kills-per-cycle`` times (while raw records are appended, while a
   build's derived tables are written, at random moments; also ``otelcar reindex``), with
   ``otelcar traces`` run after each kill; then the import completed, ``reindex`` run, and the
   store compared with a clean import of the same dump: records, spans, traces and steps.

It prints the cases tried per target, the failures, the kills delivered and survived, and
the records and spans lost or duplicated. It exits with 1 (``FAILED: …``) when a fuzz test
fails, a store does not survive a kill, or anything is lost or duplicated. See
``benchmarks/README.md``.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import shutil
import sys
import tempfile
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


@dataclass
class FuzzRun:
    name: str
    seconds: float
    cases: Counter[str]
    outcome: str  # "passed" | "skipped: …" | "FAILED: …"


@dataclass
class KillStats:
    attempted: Counter[str] = field(default_factory=Counter)
    delivered: Counter[str] = field(default_factory=Counter)
    survived: int = 0
    cycles: int = 0
    losses: Counter[str] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)
    records: int = 0
    spans: int = 0
    seconds: float = 0.0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=float, default=3.0, help="fuzz examples × this")
    parser.add_argument("--seed", type=int, default=15, help="hypothesis and kill-time seed")
    parser.add_argument("--kill-cycles", type=int, default=5, help="fresh stores to kill into")
    parser.add_argument("--kills-per-cycle", type=int, default=4, help="kills before finishing")
    parser.add_argument("--kill-spans", type=int, default=4000, help="spans in the dump")
    parser.add_argument("--skip-fuzz", action="store_true", help="only the kill cycles")
    parser.add_argument("--skip-kills", action="store_true", help="only the fuzzing")
    parser.add_argument("--workdir", type=Path, default=None, help="parent of the run's files")
    parser.add_argument("--keep", action="store_true", help="keep the run's files")
    return parser.parse_args(argv)


# -- fuzzing ---------------------------------------------------------------------------------
def run_fuzz(scale: float, seed: int) -> list[FuzzRun]:
    os.environ["OTELCAR_FUZZ_SCALE"] = str(scale)
    os.environ.pop("OTELCAR_FUZZ_EXAMPLES", None)
    import hypothesis
    import pytest

    from tests import test_fuzz_decoders as fuzz

    runs = []
    for name in sorted(n for n in dir(fuzz) if n.startswith("test_")):
        test = hypothesis.seed(seed)(getattr(fuzz, name))
        before = Counter(fuzz.CASES)
        started = time.perf_counter()
        try:
            test()
            outcome = "passed"
        except pytest.skip.Exception as exc:
            outcome = f"skipped: {exc}"
        except BaseException as exc:  # a failing property: report it, run the rest
            if isinstance(exc, KeyboardInterrupt):
                raise
            last = traceback.format_exception_only(type(exc), exc)[-1].strip()
            outcome = f"FAILED: {last[:300]}"
        seconds = time.perf_counter() - started
        cases = Counter(fuzz.CASES)
        cases.subtract(before)
        runs.append(FuzzRun(name, seconds, +cases, outcome))
        print(f"  {name}: {outcome.split(':')[0]} in {seconds:.1f} s", flush=True)
    return runs


def fuzz_tables(runs: list[FuzzRun]) -> str:
    lines = ["| test | inputs tried | seconds | outcome |", "| --- | ---: | ---: | --- |"]
    for run in runs:
        lines.append(
            f"| `{run.name}` | {sum(run.cases.values()):,} | {run.seconds:.1f} | {run.outcome} |"
        )
    per_target: Counter[str] = Counter()
    failed_targets: Counter[str] = Counter()
    for run in runs:
        per_target.update(run.cases)
        if run.outcome.startswith("FAILED"):
            failed_targets.update(dict.fromkeys(run.cases, 1))
    lines += ["", "| target | cases tried | failing tests |", "| --- | ---: | ---: |"]
    for target, count in sorted(per_target.items(), key=lambda kv: (-kv[1], kv[0])):
        lines.append(f"| {target} | {count:,} | {failed_targets[target]} |")
    lines.append(f"| **all targets** | **{sum(per_target.values()):,}** | |")
    return "\n".join(lines)


# -- kills -----------------------------------------------------------------------------------
def run_kills(args: argparse.Namespace, workdir: Path) -> KillStats:
    from tests import test_store_kill as kill

    stats = KillStats()
    dump = workdir / "agents.jsonl"
    spans = kill.write_dump(dump, args.kill_spans)
    want = kill.clean_import(dump, workdir / "clean")
    print(
        f"  dump: {spans:,} spans in {len(want['records']):,} records, "
        f"{dump.stat().st_size / 1e6:.1f} MB; clean import done",
        flush=True,
    )
    rng = random.Random(args.seed)
    choices = [
        ("import", "raw append", lambda: rng.uniform(0, 0.03)),
        ("import", "derivation", lambda: rng.uniform(0, 1.5)),
        ("import", "random", lambda: rng.uniform(0.5, 5.0)),
        ("reindex", "derivation", lambda: rng.uniform(0, 1.0)),
        ("reindex", "random", lambda: rng.uniform(0.5, 4.0)),
    ]
    started = time.perf_counter()
    for cycle in range(args.kill_cycles):
        picks = [rng.choice(choices) for _ in range(args.kills_per_cycle)]
        # Raw appends happen only until every record is in: kill there first.
        picks.sort(key=lambda pick: pick[1] != "raw append")
        kills = [(command, phase, delay()) for command, phase, delay in picks]
        store = workdir / f"store{cycle}"
        results: list[Any] = []
        try:
            counts = kill.kill_cycle(dump, store, want, kills, on_kill=results.append)
        except Exception as exc:  # a store that did not survive: report, go on
            stats.failures.append(f"cycle {cycle} {kills}: {type(exc).__name__}: {exc}"[:600])
            continue
        finally:
            for (command, phase, _), result in zip(kills, results, strict=False):
                stats.attempted[f"{command}: {phase}"] += 1
                stats.delivered[f"{command}: {phase}"] += result.killed
        delivered = [r for r in results if r.killed]
        stats.cycles += 1
        stats.losses.update(counts)
        stats.records += len(want["records"])
        stats.spans += len(want["spans"])
        if not any(counts.values()):
            stats.survived += len(delivered)
        else:
            stats.failures.append(f"cycle {cycle} {kills}: {counts}")
        print(f"  cycle {cycle}: {[(c, p, round(d, 2)) for c, p, d in kills]} → {counts}")
        shutil.rmtree(store, ignore_errors=True)
    stats.seconds = time.perf_counter() - started
    return stats


def kill_table(stats: KillStats) -> str:
    lines = [
        "| command: kill moment | attempted | delivered (process still running) |",
        "| --- | ---: | ---: |",
    ]
    for phase in sorted(stats.attempted):
        lines.append(f"| {phase} | {stats.attempted[phase]} | {stats.delivered[phase]} |")
    delivered = sum(stats.delivered.values())
    lines += [
        "",
        f"kills delivered: {delivered} of {sum(stats.attempted.values())}; kills survived "
        f"(store opened, `otelcar traces` worked, the finished import equalled a clean one, "
        f"also after `reindex`): {stats.survived}",
        f"cycles completed: {stats.cycles}; records compared: {stats.records:,}; spans "
        f"compared: {stats.spans:,}; {stats.seconds:.0f} s",
        "records lost: {records lost}, records extra: {records extra}, spans lost: "
        "{spans lost}, spans duplicated: {spans duplicated}, traces differing: "
        "{traces differ}, steps differing: {steps differ}".format_map(
            {k: stats.losses.get(k, 0) for k in _LOSS_KEYS}
        ),
    ]
    return "\n".join(lines)


_LOSS_KEYS = (
    "records lost",
    "records extra",
    "spans lost",
    "spans duplicated",
    "traces differ",
    "steps differ",
)


def machine() -> str:
    import polars

    return (
        f"{platform.system()} {platform.release()} {platform.machine()}, {os.cpu_count()} CPUs; "
        f"Python {platform.python_version()}, polars {polars.__version__}, "
        f"load average {os.getloadavg()[0]:.1f}"
    )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    workdir = Path(tempfile.mkdtemp(prefix="otelcar-hostile-", dir=args.workdir))
    problems: list[str] = []
    print(f"hostile inputs: {machine()}")
    started = time.perf_counter()
    try:
        if not args.skip_fuzz:
            print(f"fuzzing (examples × {args.scale:g}, seed {args.seed}):", flush=True)
            runs = run_fuzz(args.scale, args.seed)
            print()
            print(fuzz_tables(runs))
            print()
            problems += [f"{r.name}: {r.outcome}" for r in runs if r.outcome.startswith("FAILED")]
        if not args.skip_kills:
            print(f"kill -9 cycles ({args.kill_cycles} × {args.kills_per_cycle} kills):")
            stats = run_kills(args, workdir)
            print()
            print(kill_table(stats))
            problems += stats.failures
            lost = sum(stats.losses.values())
            if lost:
                problems.append(f"{lost} records/spans/traces lost, duplicated or different")
    finally:
        if args.keep:
            print(f"kept {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    print(f"\nwhole run: {time.perf_counter() - started:.0f} s")
    for problem in problems:
        print(f"FAILED: {problem}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
