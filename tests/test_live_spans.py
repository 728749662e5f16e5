"""A live rollout's own trace is its timeline (issue 43, DESIGN.md §5b).

The agent's spans reach otelcar's receiver (:mod:`otelcar.live.spans`) through the official
OTLP exporters configured from the environment otelcar gives the agent, tagged with the
rollout; the outcome judges each rollout on its own trace, built as an imported trace is.

Unit tests export spans in-process with the official SDK; the end-to-end tests run the
unmodified ``openai`` agents of ``tests/agents`` traced by the official openai-v2
instrumentation, exporting over OTLP/HTTP and OTLP/gRPC.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
    OTLPSpanExporter as GrpcSpanExporter,
)
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from otelcar.live import AgentCommand, LiveExecutor
from otelcar.live.check import check_live
from otelcar.live.spans import RolloutTrace
from otelcar.outcome import outcome_from_config
from otelcar.policies.registry import PolicyRegistry
from otelcar.replay import Environment, Plan, Resample, run_plan
from otelcar.report.prose import headline
from otelcar.sync import run_sync
from tests.helpers.agents import OUTCOMES, Recorded, Seeing

ROOT = Path(__file__).resolve().parents[1]


def _export(exporter: Any, names: list[str], resource: dict[str, str] | None = None) -> None:
    """One trace per name: a root span with one GenAI chat span under it."""
    provider = TracerProvider(resource=Resource.create(resource or {"service.name": "agent"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("test")
    for name in names:
        with tracer.start_as_current_span(name), tracer.start_as_current_span("chat m") as span:
            span.set_attribute("gen_ai.operation.name", "chat")
            span.set_attribute("gen_ai.request.model", "m")
            span.set_attribute("gen_ai.provider.name", "openai")
    provider.shutdown()


def test_each_rollout_receives_its_own_spans_over_http_or_grpc() -> None:
    """Two rollouts' receivers: each keeps what was sent to it, over the transport the
    agent's environment chose, with no resource attribute needed to tell them apart."""
    one, two = RolloutTrace(), RolloutTrace()
    one.start()
    two.start()
    try:
        http = one.environment({})
        grpc = two.environment({"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"})
        assert http["OTEL_EXPORTER_OTLP_PROTOCOL"] == "http/protobuf"
        assert http["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"].endswith("/v1/traces")
        assert grpc["OTEL_EXPORTER_OTLP_ENDPOINT"] == grpc["OTELCAR_OTLP_GRPC_ENDPOINT"]
        assert "OTEL_EXPORTER_OTLP_PROTOCOL" not in grpc  # the agent's own choice stays
        _export(OTLPSpanExporter(endpoint=http["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"]), ["x"])
        _export(
            GrpcSpanExporter(endpoint=grpc["OTEL_EXPORTER_OTLP_ENDPOINT"], insecure=True),
            ["first", "second"],
        )
        first, second = one.steps(), two.steps()
    finally:
        one.stop()
        two.stop()
    assert first is not None and second is not None
    assert first["trace_id"].n_unique() == 1 and second["trace_id"].n_unique() == 2
    assert set(first["trace_id"]).isdisjoint(second["trace_id"])
    # two traces of one rollout: one after the other, steps numbered on
    assert second["step"].to_list() == list(range(second.height))
    assert second.filter(second["kind"] == "llm").height == 2


def test_a_rollout_whose_spans_hold_no_step_of_the_run_has_no_trace() -> None:
    own = RolloutTrace()
    own.start()
    try:
        env = own.environment({})
        provider = TracerProvider()
        exporter = OTLPSpanExporter(endpoint=env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"])
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        with provider.get_tracer("t").start_as_current_span("GET /health"):
            pass
        provider.shutdown()
        assert own.steps() is None  # nothing to judge: not an empty "pass"
    finally:
        own.stop()


def traced(agent: str, **options: Any) -> AgentCommand:
    """The agent traced by openai-v2, exporting over OTLP where its environment says."""
    line = [sys.executable, "-m", "tests.agents.run", agent, "--seed", "7"]
    return AgentCommand.parse([*line, "--instrument", "openai-v2"], cwd=ROOT, **options)


@pytest.fixture(scope="module")
def cleanup(tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    return Recorded("cleanup", "openai-v2", tmp_path_factory.mktemp("live-spans"))


def test_every_rollout_is_judged_on_its_own_trace(cleanup: Recorded) -> None:
    """Three resampled rollouts, two at once, of an agent whose environment points its
    exporter at the user's own backend: each rollout's spans reach otelcar instead, each
    rollout's trace is its own, and the outcome is judged on it."""
    run = cleanup.run()
    registry = PolicyRegistry().register("llm", Seeing("cleanup"))
    outcome = outcome_from_config(OUTCOMES["cleanup"], registry)
    executor = LiveExecutor(
        traced(
            "cleanup",
            concurrency=2,
            env={"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"},  # never reached
        )
    )
    act = run.decisions[2].step
    result = run_plan(
        run,
        Plan((Resample(act),)),
        Environment(registry),
        rollouts=3,
        outcome=outcome,
        executor=executor,
    )
    assert result.summary()["status"] == {"final": 3}
    assert executor.judged_on == {"trace": 3, "requests": 0, "process": 0}
    trace_ids = set()
    for rollout, failed in zip(result.rollouts, result.failures, strict=True):
        trace = rollout.trace
        assert trace is not None
        assert trace["trace_id"].n_unique() == 1
        trace_ids |= set(trace["trace_id"])
        assert trace.filter(trace["kind"] == "llm").height == len(rollout.decisions)
        # the agent's own tool spans (execute_tool), which the endpoint never sees
        tools = trace.filter(trace["kind"] == "tool")
        assert tools.height >= 1 and set(tools["tool_result"]) - {None}
        assert failed == run_sync(outcome.failed(trace))
    assert len(trace_ids) == 3


def test_the_live_check_says_what_the_outcome_is_judged_on(cleanup: Recorded) -> None:
    run = cleanup.run()
    registry = PolicyRegistry().register("llm", Seeing("cleanup"))
    outcome = outcome_from_config(OUTCOMES["cleanup"], registry)
    env = {"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}  # the gRPC exporter, as the agent chose
    check = run_sync(
        check_live(run, traced("cleanup", env=env), Environment(registry), outcome=outcome)
    )
    assert check.reproduced, check.first_difference()
    assert check.judged_on == "trace" and "the agent's own trace" in headline(check)
    silent = AgentCommand.parse(
        [sys.executable, "-m", "tests.agents.run", "cleanup", "--seed", "7"], cwd=ROOT
    )
    check = run_sync(check_live(run, silent, Environment(registry), outcome=outcome))
    assert check.reproduced and check.judged_on == "requests"
    assert "sent no spans" in headline(check)


def test_a_kept_live_timeline_keeps_each_rollouts_own_trace(
    cleanup: Recorded, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``rollout --agent … --save NAME`` keeps the rollouts' own traces; ``show --timeline
    NAME --own-trace`` shows one as a trace is shown (text and JSON, the trace schema)."""
    from click.testing import CliRunner

    from otelcar.cli import cli
    from tests.helpers.schemas import validator

    store = tmp_path / "store"
    runner = CliRunner()
    done = runner.invoke(cli, ["--store", str(store), "import", str(cleanup.path)])
    assert done.exit_code == 0, done.output
    config = tmp_path / "otelcar.toml"
    config.write_text(
        '[policies.llm]\ntype = "python"\nfunction = "tests.agents.cleanup:decide"\n'
        f"[outcome]\n{_inline(OUTCOMES['cleanup'])}\n"
    )
    monkeypatch.chdir(ROOT)  # --agent runs where otelcar runs
    run = cleanup.run()
    agent = f"{sys.executable} -m tests.agents.run cleanup --seed 7 --instrument openai-v2"
    base = ["--store", str(store)]
    act = str(run.decisions[2].step)
    done = runner.invoke(
        cli,
        [*base, "rollout", run.trace_id, "--resample", act, "-n", "2", "--config", str(config),
         "--agent", agent, "--save", "live"],
    )  # fmt: skip
    assert done.exit_code == 0, done.output
    show = [*base, "show", run.trace_id, "--timeline", "live", "--rollout", "1"]
    done = runner.invoke(cli, show)
    assert done.exit_code == 0, done.output
    assert "add --own-trace" in done.output
    done = runner.invoke(cli, [*show, "--own-trace", "--json"])
    assert done.exit_code == 0, done.output
    document = json.loads(done.output)
    validator("show.schema.json").validate(document)
    kinds = [s["kind"] for s in document["steps"]]
    assert kinds.count("llm") == run.horizon and "tool" in kinds
    assert document["trace"]["service"] == "rollout live#1"
    done = runner.invoke(cli, [*show, "--own-trace"])
    assert done.exit_code == 0 and "rollout live#1" in done.output, done.output
    assert "list_files" in done.output
    # the console lists the rollouts' own traces with the timeline and shows one as a trace
    from starlette.testclient import TestClient

    from tests.helpers.console import app_for

    with TestClient(app_for(store, config)) as client:
        page = client.get(f"/traces/{run.trace_id}")
        links = re.findall(r'class="own-trace" href="([^"]+)"', page.text)
        assert len(links) == 2, page.text[-3000:]
        own = client.get(links[1])
        assert own.status_code == 200 and 'id="rollout-of"' in own.text
        assert 'id="run-form"' not in own.text  # no analysis starts on a rollout's trace
        assert own.text.count('class="bar"') == document["trace"]["n_steps"]
        assert client.get(links[1].replace("/rollouts/1", "/rollouts/7")).status_code == 400


def _inline(outcome: dict[str, Any]) -> str:
    return "\n".join(f"{k} = {json.dumps(v)}" for k, v in outcome.items() if k != "args") + (
        "\nargs = { "
        + ", ".join(f"{k} = {json.dumps(v)}" for k, v in outcome["args"].items())
        + " }"
    )
