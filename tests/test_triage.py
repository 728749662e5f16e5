"""Triage as traces arrive (issue 41): traces of a real instrumented agent (``tests/agents``
refund_loop under ``opentelemetry-instrumentation-openai-v2``, against the scripted model)
are judged when complete; failing ones are attributed within ``[triage]``'s limits, passing
ones get nothing but their state; nothing is spent without limits; a killed engine resumes.

The policies are the agent's own brain as a python policy (``tests.agents.refund_loop:decide``)
and its tools with a fresh state per rollout: never a real model. Seed 0 of the agent follows
the planted note (fails), seed 11 does not (passes); more failing traces are copies of the
seed-0 trace under new trace ids (the same spans, as a burst of one agent's runs would send).
"""

from __future__ import annotations

import asyncio
import http.client
import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from otelcar import Store, import_files
from otelcar.errors import OtelcarError
from otelcar.project_config import ConfigError, load_config, parse_config
from otelcar.receiver.child import start_collect
from otelcar.sync import run_sync
from otelcar.triage import engine as engine_module
from otelcar.triage.completion import CompletionWatcher
from otelcar.triage.engine import NO_LIMITS, TriageEngine
from otelcar.triage.ledger import Ledger
from otelcar.triage.queue import TriageQueue, new_state
from otelcar.triage.safety import refusal
from otelcar.triage.status import status_document, status_lines
from tests.agents import refund_loop
from tests.agents.model import ScriptedModel

ROOT = Path(__file__).resolve().parents[1]
FAILING_SEED, PASSING_SEED = 0, 11
#: What one analysis of the refund trace spends with ``rollouts = 4`` is below this.
PER_TRACE = 200

SLOW_POLICY = """
import time
from tests.agents.refund_loop import decide as _decide

def decide(request):
    time.sleep({delay})
    return _decide(request)
"""


def write_config(
    folder: Path,
    *,
    triage: dict[str, Any] | None = None,
    side_effects: str | None = "sandboxed",
    delay: float = 0.0,
) -> Path:
    """An otelcar.toml in ``folder``: the agent's brain as the LLM policy (slowed by
    ``delay`` seconds per decision), its tools per rollout, failure = refunding B-7."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "triage_policy.py").write_text(SLOW_POLICY.format(delay=delay))
    lines = ["[policies.llm]", 'type = "python"', 'function = "triage_policy:decide"', ""]
    lines += ['[policies."tool:*"]', 'type = "python"']
    lines += ['factory = "tests.agents.refund_loop:make_tools"']
    if side_effects is not None:
        lines.append(f'side_effects = "{side_effects}"')
    lines += ["", "[outcome]", 'type = "tool_called"', 'tool = "issue_refund"']
    lines += ['args = { order_id = "B-7" }', "", "[replay]", "rollouts = 4", ""]
    if triage is not None:
        lines.append("[triage]")
        lines += [f"{key} = {json.dumps(value)}" for key, value in triage.items()]
    path = folder / "otelcar.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def run_agent(seed: int, *, out: Path | None = None, endpoint: str | None = None) -> None:
    """Run refund_loop once with ``seed``, traced by openai-v2, its spans to the file ``out``
    or through the official OTLP/HTTP exporter to ``endpoint``."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "tests.agents.run", "refund_loop"]
    command += ["--instrument", "openai-v2", "--seed", str(seed)]
    if out is not None:
        command += ["--out", str(out)]
    if endpoint is not None:
        env["OTEL_EXPORTER_OTLP_ENDPOINT"] = endpoint
        env["OTEL_EXPORTER_OTLP_PROTOCOL"] = "http/protobuf"
    with ScriptedModel(refund_loop.brain) as model:
        command += ["--base-url", model.base_url]
        done = subprocess.run(
            command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
        )
    assert done.returncode == 0, done.stderr[-2000:]


def trace_id_of(path: Path) -> str:
    line = path.read_text().splitlines()[0]
    return json.loads(line)["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["traceId"]


def copies(path: Path, n: int) -> list[tuple[str, list[str]]]:
    """``n`` copies of the OTLP/JSON lines of ``path`` under new trace ids: ``(id, lines)``."""
    text = path.read_text()
    old = trace_id_of(path)
    out = []
    for _ in range(n):
        new = uuid.uuid4().hex
        out.append((new, text.replace(old, new).splitlines()))
    return out


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The agent's failing and passing traces (OTLP/JSON files, official file exporter)."""
    folder = tmp_path_factory.mktemp("triage_traces")
    paths = {"fail": folder / "fail.jsonl", "pass": folder / "pass.jsonl"}
    run_agent(FAILING_SEED, out=paths["fail"])
    run_agent(PASSING_SEED, out=paths["pass"])
    return paths


def store_with(tmp_path: Path, recorded: dict[str, Path], failing: int = 1) -> Store:
    """A store holding the passing trace and ``failing`` failing ones."""
    files = [recorded["pass"], recorded["fail"]]
    for number, (_, lines) in enumerate(copies(recorded["fail"], failing - 1)):
        extra = tmp_path / f"copy{number}.jsonl"
        extra.write_text("\n".join(lines) + "\n")
        files.append(extra)
    store = Store(tmp_path / "store", create=True)
    import_files(files, store=store)
    return store


def engine_for(store: Store, config_path: Path, lines: list[str] | None = None) -> TriageEngine:
    config = load_config(config_path)
    return TriageEngine(store, config, log=(lines.append if lines is not None else lambda _: None))


# -- configuration ---------------------------------------------------------------------------
def test_triage_config_parsed_and_validated() -> None:
    config = parse_config(
        {
            "triage": {
                "max_calls_per_trace": 300,
                "max_calls_per_day": 5000,
                "concurrency": 3,
                "services": ["refund_loop"],
                "quiet_s": 2.5,
                "why": True,
            }
        }
    )
    assert config.triage.limited
    assert config.triage.services == ("refund_loop",)
    assert (config.triage.concurrency, config.triage.quiet_s, config.triage.why) == (3, 2.5, True)
    assert not parse_config({}).triage.limited
    assert not parse_config({"triage": {"max_calls_per_trace": 10}}).triage.limited
    for bad in (
        {"max_calls_per_day": 0},
        {"concurrency": True},
        {"quiet_s": -1},
        {"services": "refund_loop"},
        {"why": "yes"},
        {"budget": 3},
    ):
        with pytest.raises(ConfigError, match=r"\[triage\]"):
            parse_config({"triage": bad})


def test_schema_has_triage() -> None:
    import jsonschema

    from otelcar.project_config import config_schema_document

    schema = config_schema_document()
    jsonschema.validate({"triage": {"max_calls_per_trace": 5, "services": ["a"]}}, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"triage": {"max_calls_per_trace": 0}}, schema)


# -- the parts ---------------------------------------------------------------------------------
def test_completion_by_root_or_quiet_time() -> None:
    now = [0.0]
    watcher = CompletionWatcher(quiet_s=5, clock=lambda: now[0])
    assert watcher.complete({"a": 3, "b": 2}, rooted={"a"}) == [("a", "root")]
    now[0] = 4
    assert watcher.complete({"b": 4}, rooted=()) == []  # it grew: the quiet time restarts
    now[0] = 8.9
    assert watcher.complete({"b": 4}, rooted=()) == []
    now[0] = 9
    assert watcher.complete({"b": 4}, rooted=()) == [("b", "quiet")]
    assert watcher.waiting == 0


def test_ledger_counts_across_instances(tmp_path: Path) -> None:
    Ledger(tmp_path).add(200, "2026-01-01")
    Ledger(tmp_path).add(-58, "2026-01-01")
    assert Ledger(tmp_path).spent("2026-01-01") == 142
    assert Ledger(tmp_path).spent("2026-01-02") == 0


def test_running_is_queued_again_on_resume(tmp_path: Path) -> None:
    queue = TriageQueue(tmp_path)
    trace = uuid.uuid4().hex
    queue.put(new_state(trace, "svc", state="running", attempts=1))
    assert queue.resume() == [trace]
    assert queue.get(trace)["state"] == "queued"


def test_refuses_live_replay_and_undeclared_side_effects(tmp_path: Path) -> None:
    config = load_config(write_config(tmp_path / "a", side_effects=None))
    assert "tool:*" in (refusal(config) or "")
    config = load_config(write_config(tmp_path / "b", side_effects="allowed"))
    assert "'allowed'" in (refusal(config) or "")
    config = load_config(write_config(tmp_path / "c"))
    assert refusal(config) is None
    from otelcar.project_config import with_agent_command

    with_agent_command(config, "python agent.py")
    assert "live replay" in (refusal(config) or "")


# -- the engine on stored traces ----------------------------------------------------------------
def test_failing_attributed_passing_not(tmp_path: Path, recorded: dict[str, Path]) -> None:
    store = store_with(tmp_path, recorded)
    path = write_config(
        tmp_path, triage={"max_calls_per_trace": PER_TRACE, "max_calls_per_day": 1000}
    )
    lines: list[str] = []
    run_sync(engine_for(store, path, lines).run(once=True))
    states = {s["trace_id"]: s for s in TriageQueue(store.root).all()}
    failing, passing = states[trace_id_of(recorded["fail"])], states[trace_id_of(recorded["pass"])]
    assert failing["state"] == "done" and failing["verdict"] == "fail"
    assert failing["complete"] == "root"
    assert failing["culprit"]["step"] == failing["attribution"]["culprit"]
    assert failing["attribution"]["verdict"] == "culprit"
    assert 0 < failing["calls"] <= PER_TRACE
    assert passing["state"] == "passed" and passing["calls"] == 0
    assert passing["attribution"] is None
    assert Ledger(store.root).spent() == failing["calls"]  # the reservation is settled
    assert not any("Traceback" in line for line in lines)
    document = status_document(store.root, load_config(path).triage)
    assert document["counts"]["done"] == 1 and document["counts"]["passed"] == 1
    assert document["today"] == {
        "day": document["today"]["day"],
        "calls": failing["calls"],
        "limit": 1000,
    }


def test_why_on_the_culprit_within_the_same_budget(
    tmp_path: Path, recorded: dict[str, Path]
) -> None:
    store = store_with(tmp_path, recorded)
    limits = {"max_calls_per_trace": 600, "max_calls_per_day": 1000, "why": True}
    run_sync(engine_for(store, write_config(tmp_path, triage=limits)).run(once=True))
    (failing,) = [s for s in TriageQueue(store.root).all() if s["verdict"] == "fail"]
    assert failing["state"] == "done" and failing["reason"] is None
    assert failing["why"]["step"] == failing["culprit"]["step"]
    assert failing["why"]["headline"]
    assert failing["calls"] <= 600 and Ledger(store.root).spent() == failing["calls"]
    lines = status_lines(
        status_document(store.root, load_config(write_config(tmp_path, triage=limits)).triage)
    )
    assert any("culprit step" in line for line in lines)


def test_complete_after_quiet_time_without_a_root(
    tmp_path: Path, recorded: dict[str, Path]
) -> None:
    """A trace whose root span never came is judged once no span arrived for quiet_s."""
    lines = []
    for line in recorded["fail"].read_text().splitlines():
        body = json.loads(line)
        for resource in body["resourceSpans"]:
            for scope in resource["scopeSpans"]:
                scope["spans"] = [s for s in scope["spans"] if s.get("parentSpanId")]
        lines.append(json.dumps(body))
    rootless = tmp_path / "rootless.jsonl"
    rootless.write_text("\n".join(lines) + "\n")
    store = Store(tmp_path / "store", create=True)
    import_files([rootless], store=store)
    assert store.rooted([trace_id_of(recorded["fail"])]) == set()
    path = write_config(tmp_path, triage={"quiet_s": 0.5})  # no limits: judged, not analysed
    run_sync(engine_for(store, path).run(once=True))
    (state,) = TriageQueue(store.root).all()
    assert (state["complete"], state["verdict"], state["state"]) == ("quiet", "fail", "queued")


def test_other_services_are_not_looked_at(tmp_path: Path, recorded: dict[str, Path]) -> None:
    store = store_with(tmp_path, recorded)
    limits = {"max_calls_per_trace": PER_TRACE, "max_calls_per_day": 1000, "services": ["x"]}
    run_sync(engine_for(store, write_config(tmp_path, triage=limits)).run(once=True))
    assert TriageQueue(store.root).all() == [] and Ledger(store.root).spent() == 0


def test_nothing_spent_without_limits(tmp_path: Path, recorded: dict[str, Path]) -> None:
    store = store_with(tmp_path, recorded, failing=2)
    for triage in (None, {"max_calls_per_trace": PER_TRACE}, {"max_calls_per_day": 1000}):
        path = write_config(tmp_path / "cfg", triage=triage)
        run_sync(engine_for(store, path).run(once=True))
        queued = [s for s in TriageQueue(store.root).all() if s["verdict"] == "fail"]
        assert len(queued) == 2
        assert all(s["state"] == "queued" and s["reason"] == NO_LIMITS for s in queued)
        assert all(s["calls"] == 0 for s in queued)
        assert Ledger(store.root).spent() == 0


def test_unsafe_tools_skip_with_reason(tmp_path: Path, recorded: dict[str, Path]) -> None:
    store = store_with(tmp_path, recorded)
    limits = {"max_calls_per_trace": PER_TRACE, "max_calls_per_day": 1000}
    path = write_config(tmp_path, triage=limits, side_effects=None)
    run_sync(engine_for(store, path).run(once=True))
    (failing,) = [s for s in TriageQueue(store.root).all() if s["verdict"] == "fail"]
    assert failing["state"] == "skipped" and "side_effects undeclared" in failing["reason"]
    assert failing["calls"] == 0 and Ledger(store.root).spent() == 0


def test_per_trace_limit_holds(tmp_path: Path, recorded: dict[str, Path]) -> None:
    store = store_with(tmp_path, recorded)
    path = write_config(tmp_path, triage={"max_calls_per_trace": 30, "max_calls_per_day": 1000})
    run_sync(engine_for(store, path).run(once=True))
    (failing,) = [s for s in TriageQueue(store.root).all() if s["verdict"] == "fail"]
    assert failing["calls"] <= 30
    if failing["state"] == "skipped":
        assert "budget" in failing["reason"]
    assert Ledger(store.root).spent() == failing["calls"]


def test_day_limit_and_concurrency_hold(
    tmp_path: Path, recorded: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Five failing traces, two analyses at once at most, a day that pays for three."""
    store = store_with(tmp_path, recorded, failing=5)
    limits = {
        "max_calls_per_trace": PER_TRACE,
        "max_calls_per_day": 3 * PER_TRACE,
        "concurrency": 2,
    }
    path = write_config(tmp_path, triage=limits)
    in_flight, most = [0], [0]
    real = engine_module.analyse

    async def counted(*args: Any, **kwargs: Any) -> Any:
        in_flight[0] += 1
        most[0] = max(most[0], in_flight[0])
        try:
            await asyncio.sleep(0.05)
            return await real(*args, **kwargs)
        finally:
            in_flight[0] -= 1

    monkeypatch.setattr(engine_module, "analyse", counted)
    run_sync(engine_for(store, path).run(once=True))
    states = [s for s in TriageQueue(store.root).all() if s["verdict"] == "fail"]
    done = [s for s in states if s["state"] == "done"]
    waiting = [s for s in states if s["state"] == "queued"]
    assert most[0] == 2
    assert len(done) >= 3 and len(done) + len(waiting) == 5
    spent = Ledger(store.root).spent()
    assert spent == sum(s["calls"] for s in states) <= limits["max_calls_per_day"]
    assert all(s["reason"].startswith("daily limit") for s in waiting)


def test_one_engine_per_store(tmp_path: Path, recorded: dict[str, Path]) -> None:
    store = store_with(tmp_path, recorded)
    path = write_config(
        tmp_path, triage={"max_calls_per_trace": PER_TRACE, "max_calls_per_day": 1000}
    )

    async def both() -> None:
        first = engine_for(store, path)
        task = asyncio.create_task(first.run())
        await asyncio.sleep(0.3)
        with pytest.raises(OtelcarError, match="another triage engine"):
            await engine_for(store, path).run(once=True)
        first.stop()
        await task

    run_sync(both())


# -- otelcar collect --triage, with the official OTLP exporter -----------------------------------
def _states(store: Path) -> dict[str, dict[str, Any]]:
    return {s["trace_id"]: s for s in TriageQueue(store).all()}


def _wait_for(check: Any, timeout_s: float, what: str) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def _stop(process: subprocess.Popen[Any]) -> str:
    process.send_signal(signal.SIGTERM)
    output, _ = process.communicate(timeout=60)
    assert process.returncode == 0, output
    return output


def test_collect_triage_with_the_sdk_exporter_and_a_kill(tmp_path: Path) -> None:
    """Two failing runs and a passing one exported live; the triage process is killed with
    SIGKILL mid-analysis, started again by collect, and resumes: every failing trace gets its
    attribution, the passing one none, and intake never stopped."""
    store = tmp_path / "store"
    limits = {"max_calls_per_trace": PER_TRACE, "max_calls_per_day": 2000, "quiet_s": 30}
    path = write_config(tmp_path / "project", triage=limits, delay=0.03)
    process, ports = start_collect(
        store,
        tmp_path / "ready.json",
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        options=["--triage", "-c", str(path)],
    )
    try:
        endpoint = f"http://127.0.0.1:{ports['http_port']}"
        run_agent(FAILING_SEED, endpoint=endpoint)
        running = _wait_for(
            lambda: [s for s in _states(store).values() if s["state"] == "running"],
            120,
            "an analysis to start",
        )
        engine = json.loads((store / "triage" / "engine.json").read_text())
        os.kill(engine["pid"], signal.SIGKILL)  # mid-analysis
        killed = running[0]["trace_id"]
        assert _states(store)[killed]["state"] == "running"  # as the kill left it
        run_agent(FAILING_SEED + 1, endpoint=endpoint)  # intake goes on meanwhile
        run_agent(PASSING_SEED, endpoint=endpoint)

        def settled() -> dict[str, dict[str, Any]] | None:
            states = _states(store)
            finished = [s for s in states.values() if s["state"] in ("done", "passed")]
            return states if len(states) == 3 and len(finished) == 3 else None

        states = _wait_for(settled, 240, "three traces triaged")
    finally:
        output = _stop(process)
    assert "restarting" in output and "Traceback" not in output
    by_verdict: dict[str, list[dict[str, Any]]] = {}
    for state in states.values():
        by_verdict.setdefault(state["verdict"], []).append(state)
    assert len(by_verdict["fail"]) == 2 and len(by_verdict["pass"]) == 1
    for state in by_verdict["fail"]:
        assert state["state"] == "done" and state["culprit"] is not None
        assert state["attribution"]["trace_id"] == state["trace_id"]
        assert 0 < state["calls"] <= PER_TRACE
    assert states[killed]["attempts"] == 2
    assert by_verdict["pass"][0]["attribution"] is None
    # the killed attempt stays counted at its reservation: never too low
    assert Ledger(store).spent() >= sum(s["calls"] for s in states.values())
    assert Ledger(store).spent() <= limits["max_calls_per_day"]
    status = subprocess.run(
        [sys.executable, "-m", "otelcar.cli", "--store", str(store), "triage", "status", "--json"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=True,
    )
    assert json.loads(status.stdout)["counts"]["done"] == 2


def _post_json(port: int, line: str) -> int:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    connection.request(
        "POST", "/v1/traces", body=line.encode(), headers={"Content-Type": "application/json"}
    )
    status = connection.getresponse().status
    connection.close()
    return status


@pytest.mark.parametrize(
    "burst", [pytest.param(8, id="8"), pytest.param(200, id="200", marks=pytest.mark.slow)]
)
def test_limits_hold_under_a_burst(tmp_path: Path, recorded: dict[str, Path], burst: int) -> None:
    """``burst`` failing traces at once: every one gets a state, at most ``concurrency``
    analyses run at any look, no trace spends past its limit and the day's calls stay within
    the day's limit (the rest wait, saying so)."""
    store = tmp_path / "store"
    pays_for = 3 if burst < 20 else 12
    limits = {
        "max_calls_per_trace": PER_TRACE,
        "max_calls_per_day": pays_for * PER_TRACE,
        "concurrency": 2,
        "quiet_s": 30,
    }
    path = write_config(tmp_path / "project", triage=limits)
    process, ports = start_collect(
        store,
        tmp_path / "ready.json",
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        options=["--triage", "-c", str(path)],
    )
    most = 0
    try:
        sent = copies(recorded["fail"], burst)
        for _, lines in sent:
            for line in lines:
                assert _post_json(ports["http_port"], line) == 200

        def settled() -> bool:
            nonlocal most
            states = _states(store).values()
            most = max(most, sum(s["state"] == "running" for s in states))
            waiting = [s for s in states if s["state"] == "queued"]
            return (
                len(states) == burst
                and not any(s["state"] == "running" for s in states)
                and all((s["reason"] or "").startswith("daily limit") for s in waiting)
            )

        _wait_for(settled, 120 + 3 * burst, f"{burst} traces triaged")
    finally:
        _stop(process)
    states = list(_states(store).values())
    assert {s["trace_id"] for s in states} == {trace for trace, _ in sent}
    assert most <= 2
    done = [s for s in states if s["state"] == "done"]
    assert len(done) >= pays_for - 1
    assert all(0 < s["calls"] <= PER_TRACE for s in done)
    spent = Ledger(store).spent()
    assert spent == sum(s["calls"] for s in states) <= limits["max_calls_per_day"]


def test_each_result_goes_to_the_users_backend_as_a_span_linked_to_its_trace(
    tmp_path: Path, recorded: dict[str, Path]
) -> None:
    """``[triage] export``: the result reaches an OTLP/HTTP backend (here otelcar's own
    receiver on another store) as one span of service otelcar-triage, linked to the failing
    trace's root span, with the culprit and the headline as attributes."""
    import json as _json

    from otelcar.receiver import Receiver, ReceiverConfig

    backend = Store(tmp_path / "backend", create=True)
    receiver = Receiver(backend, ReceiverConfig(grpc_port=None, http_port=0, derive="thread"))
    receiver.start()
    try:
        store = store_with(tmp_path, recorded)
        export = f"http://127.0.0.1:{receiver.http_port}"
        limits = {"max_calls_per_trace": PER_TRACE, "max_calls_per_day": 1000, "export": export}
        path = write_config(tmp_path, triage=limits)
        lines: list[str] = []
        run_sync(engine_for(store, path, lines).run(once=True))  # closing flushes the span
    finally:
        receiver.stop()
    failing = TriageQueue(store.root).get(trace_id_of(recorded["fail"]))
    assert failing is not None and failing["state"] == "done"
    with Store(tmp_path / "backend") as received:
        traces = received.traces()
        assert traces["service"].to_list() == ["otelcar-triage"], lines
        (span,) = received.spans(traces["trace_id"][0]).iter_rows(named=True)
    attributes = _json.loads(span["attributes"])
    assert span["name"] == "otelcar triage"
    (link,) = _json.loads(span["links"])
    assert link["trace_id"] == failing["trace_id"]
    roots = store.spans(failing["trace_id"]).filter(pl.col("parent_span_id").is_null())
    assert link["span_id"] == roots["span_id"][0]
    assert attributes["otelcar.culprit.step"] == failing["culprit"]["step"]
    assert attributes["otelcar.triage.trace_id"] == failing["trace_id"]
    assert attributes["otelcar.headline"] == failing["headline"]


def test_the_weekly_report_names_the_weak_step_per_service_and_week(
    tmp_path: Path, recorded: dict[str, Path]
) -> None:
    """``otelcar triage report``: the attributed failures of a service and week aggregated
    as ``otelcar aggregate`` does, with no policy call."""
    from click.testing import CliRunner

    from otelcar.cli import cli

    store = store_with(tmp_path, recorded, failing=3)
    limits = {"max_calls_per_trace": PER_TRACE, "max_calls_per_day": 5000}
    path = write_config(tmp_path, triage=limits)
    run_sync(engine_for(store, path).run(once=True))
    done = [s for s in TriageQueue(store.root).all() if s["state"] == "done"]
    assert len(done) == 3
    spent = Ledger(store.root).spent()
    ran = CliRunner().invoke(cli, ["--store", str(store.root), "triage", "report", "--json"])
    assert ran.exit_code == 0, ran.output
    (week,) = json.loads(ran.output)["weeks"]
    assert week["service"] == done[0]["service"] and re.fullmatch(r"\d{4}-W\d\d", week["week"])
    aggregate = week["aggregate"]
    assert aggregate["counts"]["attributed"] == 3
    assert aggregate["steps"][0]["traces"] == 3  # the same step in each of the three
    assert Ledger(store.root).spent() == spent  # no call
    text = CliRunner().invoke(cli, ["--store", str(store.root), "triage", "report"])
    assert text.exit_code == 0 and week["week"] in text.output
