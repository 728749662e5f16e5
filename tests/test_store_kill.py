"""``kill -9`` during ``otelcar import`` and during derivation loses nothing (#15).

``otelcar import`` runs in a child process on a generated OTLP/JSON-lines dump big enough to
take a few seconds, and is killed with SIGKILL at chosen moments: while the raw segments are
being appended (``raw/appending.json`` exists), while a build's derived tables are being
written (a part file of the build is there, ``state.json`` not yet advanced), and at random
times over the whole run. After each kill the store must open and ``otelcar traces`` must
work; re-running the import must complete; at the end the store must hold exactly what a
clean import of the same file holds (the same records with the same status, the same spans,
each once, the same traces and steps), also after ``otelcar reindex``. ``reindex`` is killed
the same way in the slow variant.

:func:`kill_cycle` is also what ``benchmarks/hostile_inputs.py`` runs, many times over.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from otelcar import Store, import_files

ROOT = Path(__file__).resolve().parents[1]
MS = 1_000_000
EPOCH_NS = 1_795_945_625_000_000_000
TOOLS = ("lookup_order", "get_refund_policy", "issue_refund", "search_docs", "send_email")


# ------------------------------------------------------------------------------------------
# The input: OTLP/JSON lines of GenAI agent runs (our own generator)
# ------------------------------------------------------------------------------------------


def _kv(key: str, value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"key": key, "value": {"boolValue": value}}
    if isinstance(value, int):
        return {"key": key, "value": {"intValue": str(value)}}
    if isinstance(value, float):
        return {"key": key, "value": {"doubleValue": value}}
    return {"key": key, "value": {"stringValue": value}}


def _filler(rng: random.Random, n: int) -> str:
    words = ("order", "refund", "policy", "the", "customer", "item", "broken", "days", "ok")
    return " ".join(rng.choice(words) for _ in range(n // 6))


def agent_run(rng: random.Random, index: int) -> list[dict[str, Any]]:
    """One agent run: an ``invoke_agent`` root, 2..4 ``chat`` spans with the conversation so
    far, and 1..2 ``execute_tool`` spans after each chat but the last."""
    trace_id = rng.getrandbits(128).to_bytes(16, "big").hex()
    root = rng.getrandbits(64).to_bytes(8, "big").hex()
    start = EPOCH_NS + index * 10_000 * MS
    spans: list[dict[str, Any]] = []

    def span(name: str, kind: int, attrs: list[dict[str, Any]], t0: int, t1: int) -> None:
        spans.append(
            {
                "traceId": trace_id,
                "spanId": rng.getrandbits(64).to_bytes(8, "big").hex(),
                "parentSpanId": root,
                "name": name,
                "kind": kind,
                "startTimeUnixNano": str(t0),
                "endTimeUnixNano": str(t1),
                "attributes": attrs,
                "status": {},
            }
        )

    conversation: list[dict[str, Any]] = [
        {"role": "system", "parts": [{"type": "text", "content": _filler(rng, 400)}]},
        {"role": "user", "parts": [{"type": "text", "content": _filler(rng, 120)}]},
    ]
    now = start + MS
    chats = rng.randint(2, 4)
    for turn in range(chats):
        last = turn == chats - 1
        calls = [] if last else [(f"call_{rng.getrandbits(40):x}", rng.choice(TOOLS))]
        calls += [] if last or rng.random() < 0.6 else [(f"call_{rng.getrandbits(40):x}", "x")]
        output = (
            [{"role": "assistant", "parts": [{"type": "text", "content": _filler(rng, 200)}]}]
            if last
            else [
                {
                    "role": "assistant",
                    "parts": [
                        {"type": "tool_call", "id": cid, "name": name, "arguments": {"q": cid}}
                        for cid, name in calls
                    ],
                }
            ]
        )
        span(
            "chat gpt-4o-mini",
            3,
            [
                _kv("gen_ai.operation.name", "chat"),
                _kv("gen_ai.provider.name", "openai"),
                _kv("gen_ai.request.model", "gpt-4o-mini"),
                _kv("gen_ai.response.model", "gpt-4o-mini-2024-07-18"),
                _kv("gen_ai.input.messages", json.dumps(conversation)),
                _kv("gen_ai.output.messages", json.dumps(output)),
                _kv("gen_ai.usage.input_tokens", rng.randint(100, 4000)),
                _kv("gen_ai.usage.output_tokens", rng.randint(5, 300)),
                _kv("gen_ai.request.temperature", 0.2),
            ],
            now,
            now + 200 * MS,
        )
        now += 210 * MS
        conversation = [*conversation, *output]
        for cid, name in calls:
            result = _filler(rng, rng.randint(200, 1500))
            span(
                f"execute_tool {name}",
                1,
                [
                    _kv("gen_ai.operation.name", "execute_tool"),
                    _kv("gen_ai.tool.name", name),
                    _kv("gen_ai.tool.call.id", cid),
                    _kv("gen_ai.tool.call.arguments", json.dumps({"q": cid})),
                    _kv("gen_ai.tool.call.result", result),
                ],
                now,
                now + 20 * MS,
            )
            now += 25 * MS
            conversation.append(
                {
                    "role": "tool",
                    "parts": [{"type": "tool_call_response", "id": cid, "response": result}],
                }
            )
    spans.insert(
        0,
        {
            "traceId": trace_id,
            "spanId": root,
            "name": "invoke_agent support",
            "kind": 1,
            "startTimeUnixNano": str(start),
            "endTimeUnixNano": str(now + MS),
            "attributes": [
                _kv("gen_ai.operation.name", "invoke_agent"),
                _kv("gen_ai.agent.name", "support"),
            ],
            "status": {},
        },
    )
    return spans


def write_dump(path: Path, n_spans: int, *, seed: int = 7, batch: int = 64) -> int:
    """Write agent runs as OTLP/JSON lines (one export request of up to ``batch`` spans a
    line; runs straddle lines) until ``n_spans``; returns the spans written."""
    rng = random.Random(seed)
    resource = {"attributes": [_kv("service.name", "kill-test")]}
    scope = {"name": "opentelemetry.util.genai.handler", "version": "1.1b0"}
    pending: list[dict[str, Any]] = []
    written = index = 0
    with path.open("w", encoding="utf-8") as out:

        def flush(spans: list[dict[str, Any]]) -> None:
            request = {
                "resourceSpans": [
                    {"resource": resource, "scopeSpans": [{"scope": scope, "spans": spans}]}
                ]
            }
            out.write(json.dumps(request, separators=(",", ":")) + "\n")

        while written + len(pending) < n_spans:
            pending.extend(agent_run(rng, index))
            index += 1
            while len(pending) >= batch:
                flush(pending[:batch])
                written += batch
                pending = pending[batch:]
        if pending:
            flush(pending)
            written += len(pending)
    return written


# ------------------------------------------------------------------------------------------
# Running, killing and comparing
# ------------------------------------------------------------------------------------------


def otelcar(store: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "otelcar.cli", "--store", str(store), *args]


def run_cli(store: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        otelcar(store, *args), capture_output=True, text=True, timeout=timeout, cwd=ROOT
    )
    assert done.returncode == 0, (
        f"otelcar {' '.join(args)}: {done.returncode}\n{done.stderr[-3000:]}"
    )
    return done


def _fresh(path: Path, since_ns: int) -> bool:
    """``path`` exists and was written at or after ``since_ns`` (what an earlier, killed run
    left behind does not count)."""
    try:
        return path.stat().st_mtime_ns >= since_ns
    except FileNotFoundError:
        return False


def _appending(store: Path, since_ns: int) -> bool:
    """Raw records are being appended: ``raw/appending.json`` names the append in progress
    (it is removed once the frames are fsync-ed)."""
    return _fresh(store / "raw" / "appending.json", since_ns)


def _building(store: Path, since_ns: int) -> bool:
    """A build's derived tables are being written: a part file of a build was written since
    the command started (``reindex`` builds into ``derived.new``, which exists only
    meanwhile), before ``state.json`` moved past it."""
    rebuilt = store / "derived.new"
    try:
        if any(_fresh(p, since_ns) for p in rebuilt.glob("*/build-*.parquet")):
            return True
    except FileNotFoundError:  # the rebuild finished (renamed into place) while we looked
        pass
    derived = store / "derived"
    try:
        state = json.loads((derived / "state.json").read_text())
        next_build = int(state["next_build"])
    except (OSError, ValueError, KeyError):
        next_build = 1
    name = f"build-{next_build:06d}.parquet"
    return any(_fresh(derived / table / name, since_ns) for table in ("records", "spans", "steps"))


#: Moments to kill at: a predicate on the store directory and the command's start time,
#: polled every millisecond.
PHASES: dict[str, Callable[[Path, int], bool]] = {
    "raw append": _appending,
    "derivation": _building,
}


@dataclass
class KillResult:
    """What one kill did."""

    phase: str
    killed_after_s: float
    killed: bool  # False: the command finished before the moment came
    quarantined: int = 0
    notes: list[str] = field(default_factory=list)


def run_and_kill(
    store: Path, args: list[str], *, phase: str, delay_s: float = 0.0, timeout_s: float = 120
) -> KillResult:
    """Start ``otelcar ARGS``; SIGKILL it ``delay_s`` after ``phase`` is seen (``"random"``:
    after ``delay_s`` from the start)."""
    since_ns = time.time_ns()
    child = subprocess.Popen(
        otelcar(store, *args),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=ROOT,
        start_new_session=True,
    )
    started = time.monotonic()
    try:
        if phase != "random":
            seen = PHASES[phase]
            while child.poll() is None and not seen(store, since_ns):
                if time.monotonic() - started > timeout_s:
                    raise AssertionError(f"{phase} never came within {timeout_s} s")
                time.sleep(0.001)
        deadline = time.monotonic() + delay_s
        while child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.001)
        killed = child.poll() is None
        if killed:
            os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=30)
        return KillResult(phase, time.monotonic() - started, killed)
    finally:
        if child.poll() is None:
            os.kill(child.pid, signal.SIGKILL)
            child.wait()


def snapshot(store_path: Path) -> dict[str, Any]:
    """What a store holds, without what differs between equal imports (build ids, sequence
    numbers, arrival times, segment offsets)."""
    store = Store(store_path, create=False)
    records = store.records()
    spans = store.derived.scan("spans").collect()
    traces = store.traces().drop("build_id").sort("trace_id")
    steps = store.steps().sort("trace_id", "step")
    return {
        "records": sorted(
            records.select(
                "record_id", "status", "reason", "n_spans", "n_logs", "n_rejected"
            ).rows()
        ),
        "spans": sorted(spans.select("trace_id", "span_id", "record_id", "start_ns").rows()),
        "traces": traces.to_dicts(),
        "steps": steps.select("trace_id", "step", "span_id", "kind", "name", "tool_name").rows(),
    }


def assert_same(got: dict[str, Any], want: dict[str, Any]) -> None:
    """``got`` holds exactly ``want``: nothing lost, nothing duplicated."""
    for key in ("records", "spans"):
        lost = _multiset_minus(want[key], got[key])
        extra = _multiset_minus(got[key], want[key])
        assert not lost and not extra, (
            f"{key}: {len(lost)} lost {lost[:3]}, {len(extra)} extra {extra[:3]}"
        )
    assert got["traces"] == want["traces"]
    assert got["steps"] == want["steps"]


def _multiset_minus(a: list[Any], b: list[Any]) -> list[Any]:
    return list((Counter(a) - Counter(b)).elements())


def losses(got: dict[str, Any], want: dict[str, Any]) -> dict[str, int]:
    """Counts of records and spans lost and duplicated (for the benchmark's report)."""
    return {
        "records lost": len(_multiset_minus(want["records"], got["records"])),
        "records extra": len(_multiset_minus(got["records"], want["records"])),
        "spans lost": len(_multiset_minus(want["spans"], got["spans"])),
        "spans duplicated": len(_multiset_minus(got["spans"], want["spans"])),
        "traces differ": int(got["traces"] != want["traces"]),
        "steps differ": int(got["steps"] != want["steps"]),
    }


def clean_import(dump: Path, store: Path) -> dict[str, Any]:
    report = import_files([dump], store=Store(store))
    assert report.ok and not report.unparsed and not report.partial
    return snapshot(store)


def check_after_kill(store: Path, *, cli: bool = True) -> None:
    """The store opens and lists its traces (with ``cli``: ``otelcar traces`` does, in a
    child process)."""
    Store(store, create=False).traces()
    if cli:
        listed = json.loads(run_cli(store, "traces", "--json").stdout)
        assert isinstance(listed, list)


def kill_cycle(
    dump: Path,
    store: Path,
    want: dict[str, Any],
    kills: list[tuple[str, str, float]],
    *,
    on_kill: Callable[[KillResult], None] | None = None,
    cli_every_kill: bool = True,
) -> dict[str, int]:
    """Import ``dump`` into ``store`` (fresh), killing it at each ``(command, phase, delay)``
    of ``kills`` in turn (command ``import`` or ``reindex``), checking the store after each
    (``otelcar traces`` after each, or with ``cli_every_kill=False`` after the last only: a
    child process costs seconds on a small machine); then finish the import, compare with
    ``want``, reindex and compare again. Returns the loss counts (all zero when nothing was
    lost or duplicated)."""
    for number, (command, phase, delay) in enumerate(kills, start=1):
        args = ["import", str(dump)] if command == "import" else ["reindex"]
        result = run_and_kill(store, args, phase=phase, delay_s=delay)
        if on_kill:
            on_kill(result)
        if (store / "STORE").exists():
            check_after_kill(store, cli=cli_every_kill or number == len(kills))
    run_cli(store, "import", str(dump))
    got = snapshot(store)
    counts = losses(got, want)
    if any(counts.values()):
        return counts
    run_cli(store, "reindex")
    again = losses(snapshot(store), want)
    return {key: max(counts[key], again[key]) for key in counts}


# ------------------------------------------------------------------------------------------
# The tests
# ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def dumps(tmp_path_factory: pytest.TempPathFactory) -> Callable[[int], tuple[Path, dict]]:
    """``dumps(n)``: a dump of about ``n`` spans and the snapshot of its clean import."""
    made: dict[int, tuple[Path, dict[str, Any]]] = {}

    def make(n: int) -> tuple[Path, dict[str, Any]]:
        if n not in made:
            folder = tmp_path_factory.mktemp(f"kill{n}")
            write_dump(folder / "agents.jsonl", n)
            made[n] = (
                folder / "agents.jsonl",
                clean_import(folder / "agents.jsonl", folder / "clean"),
            )
        return made[n]

    return make


def test_kill_during_raw_append_and_during_derivation(dumps, tmp_path: Path):
    """The fast variant: one import killed while it appends raw records, the re-run killed
    while it writes derived tables, then a complete run."""
    dump, want = dumps(2000)
    results: list[KillResult] = []
    counts = kill_cycle(
        dump,
        tmp_path / "store",
        want,
        [("import", "raw append", 0.0), ("import", "derivation", 0.05)],
        on_kill=results.append,
        cli_every_kill=False,
    )
    assert [r.killed for r in results] == [True, True], results
    assert not any(counts.values()), counts
    assert_same(snapshot(tmp_path / "store"), want)


@pytest.mark.slow
def test_kill_at_random_moments_many_times(dumps, tmp_path: Path):
    """The long variant: kills at random moments over the whole import (and reindex), many
    in a row on one store, and at random delays into each phase."""
    dump, want = dumps(8000)
    rng = random.Random(15)
    for cycle in range(4):
        kills = [
            ("import", "random", rng.uniform(0.3, 4.0)),
            ("import", "raw append", rng.uniform(0, 0.05)),
            ("import", "derivation", rng.uniform(0, 1.0)),
            ("reindex", "random", rng.uniform(0.3, 3.0)),
            ("reindex", "derivation", rng.uniform(0, 0.5)),
        ]
        rng.shuffle(kills)
        kills.sort(key=lambda kill: kill[1] != "raw append")  # appends end once all is in
        counts = kill_cycle(dump, tmp_path / f"store{cycle}", want, kills)
        assert not any(counts.values()), (cycle, kills, counts)


def test_generated_dump_is_what_it_says(tmp_path: Path):
    """The generator writes whole, valid OTLP/JSON lines of agent runs."""
    path = tmp_path / "d.jsonl"
    written = write_dump(path, 200, batch=32)
    assert 200 <= written < 215  # whole runs
    lines = path.read_text().splitlines()
    assert len(lines) == -(-written // 32)
    spans = [
        s for line in lines for s in json.loads(line)["resourceSpans"][0]["scopeSpans"][0]["spans"]
    ]
    assert len(spans) == written
    frame = pl.DataFrame({"name": [s["name"] for s in spans]})
    assert frame["name"].str.starts_with("chat").sum() > 0
