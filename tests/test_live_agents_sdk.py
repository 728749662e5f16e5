"""Live replay of an OpenAI Agents SDK agent through the Responses endpoint (issue 43).

``tests/agents/agents_sdk.py``: a triage agent (``lookup_order``) that hands off to a billing
agent (``issue_refund``, ``close_ticket``) with the SDK's own handoff, on its default
``OpenAIResponsesModel``, traced by ``openinference-instrumentation-openai-agents`` and
exported by the official OTLP/JSON file exporter, against the scripted model's
``POST /v1/responses``. Recorded once as the SDK's defaults write it (no ``tool_choice`` sent,
a handoff without arguments) and once with an explicit ``tool_choice="auto"`` and a handoff
that takes a ``reason``; then:

- the trace maps to decisions of both agents, with the tools the SDK offered (its handoff
  tool ``transfer_to_billing`` too);
- a held live replay makes every recorded request again, of the explicit agent and of the
  SDK's defaults (no tool choice sent: the API's default; a handoff without arguments, which
  OpenInference leaves out);
- a resampled billing refund is sent the agent's own tools and tool choice;
- ``why`` on the live agent names the planted sentence.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import otelcar
from otelcar.analyses import why_run
from otelcar.live import AgentCommand, LiveExecutor
from otelcar.live.check import LiveCheck, check_live
from otelcar.outcome import outcome_from_config
from otelcar.policies.registry import PolicyRegistry
from otelcar.project_config import ProjectConfig
from otelcar.replay import Environment, Plan, Resample, load_run, run_plan
from otelcar.sync import run_sync
from tests.agents import agents_sdk
from tests.agents.model import ScriptedModel, offered
from tests.helpers.agents import Seeing

ROOT = Path(__file__).resolve().parents[1]
SEED = 7
OUTCOME = {"type": "tool_called", "tool": "issue_refund", "args": {"order_id": "Z-9"}}
#: The agent as the SDK's defaults write it, and with an explicit tool choice and a handoff
#: that takes arguments (what otelcar reproduces today).
VARIANTS = {"default": [], "explicit": ["--tool-choice", "auto", "--handoff-reason"]}
ACTIONS = ["lookup_order", "transfer_to_billing", "issue_refund", "close_ticket", None]


def command(variant: str, **options: Any) -> AgentCommand:
    line = [sys.executable, "-m", "tests.agents.run", "agents_sdk", "--seed", str(SEED)]
    return AgentCommand.parse([*line, *VARIANTS[variant]], cwd=ROOT, **options)


class Recorded:
    """The agent run once against the scripted model's Responses route, traced."""

    def __init__(self, variant: str, out: Path) -> None:
        path = out / f"agents_sdk.{variant}.traces.jsonl"
        with ScriptedModel(agents_sdk.brain) as model:
            line = [sys.executable, "-m", "tests.agents.run", "agents_sdk", *VARIANTS[variant]]
            line += ["--base-url", model.base_url, "--out", str(path)]
            line += ["--instrument", "openinference", "--seed", str(SEED)]
            done = subprocess.run(line, cwd=ROOT, capture_output=True, text=True, timeout=120)
            assert done.returncode == 0, done.stderr[-2000:]
        self.requests = model.requests
        self.live_tools = [offered(body.get("tools")) for body in model.requests]
        self.steps = otelcar.read_otlp(path)

    def run(self) -> Any:
        return load_run(self.steps["trace_id"][0], self.steps)


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Recorded]:
    out = tmp_path_factory.mktemp("agents_sdk")
    return {variant: Recorded(variant, out) for variant in VARIANTS}


def held_check(case: Recorded, variant: str) -> tuple[Any, LiveCheck]:
    run = case.run()
    registry = PolicyRegistry().register("llm", Seeing("agents_sdk"))
    outcome = outcome_from_config(OUTCOME, registry)
    return run, run_sync(check_live(run, command(variant), Environment(registry), outcome=outcome))


@pytest.fixture(scope="module")
def default_check(traces: dict[str, Recorded]) -> tuple[Any, LiveCheck]:
    return held_check(traces["default"], "default")


def refund_step(run: Any) -> int:
    return next(d.step for d in run.decisions if d.action and d.action.tool_calls
                and d.action.tool_calls[0].name == "issue_refund")  # fmt: skip


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_the_trace_maps_to_decisions_of_both_agents(
    traces: dict[str, Recorded], variant: str
) -> None:
    case = traces[variant]
    run = case.run()
    assert [d.agent for d in run.decisions] == ["triage"] * 2 + ["billing"] * 3
    actions = [d.action.tool_calls[0].name if d.action.tool_calls else None for d in run.decisions]
    assert actions == ACTIONS
    assert run.decisions[2].action.tool_calls[0].arguments == {"order_id": "Z-9"}  # misled
    # the tools the SDK offered, its handoff tool among them, recorded per decision
    assert case.live_tools[0] == ["lookup_order", "transfer_to_billing"]
    assert [[t["name"] for t in d.tools or ()] for d in run.decisions] == case.live_tools
    assert [d.context[0].content for d in run.decisions] == [agents_sdk.TRIAGE] * 2 + [
        agents_sdk.BILLING
    ] * 3


def test_a_held_live_replay_of_the_sdk_agent_makes_every_recorded_request_again(
    traces: dict[str, Recorded],
) -> None:
    case = traces["explicit"]
    run, check = held_check(case, "explicit")
    assert check.reproduced, check.first_difference()
    assert check.made == run.horizon and check.recorded_failed and check.replayed_failed
    assert [r.tools for r in check.requests] == case.live_tools
    assert [r.tool_choice for r in check.requests] == ["auto"] * run.horizon
    # the handoff tool's schema as the SDK sent it, read from the agent's own request
    transfer = check.captured[run.decisions[0].step]["tools"][1]
    assert transfer["name"] == "transfer_to_billing"
    assert list(transfer["parameters"]["properties"]) == ["reason"]


def test_a_held_live_replay_of_the_sdk_defaults_reproduces(
    default_check: tuple[Any, LiveCheck],
) -> None:
    """The SDK's defaults send no tool_choice (the API's default, auto, which OpenInference
    records from the Response's echo) and a handoff with arguments "{}" (which OpenInference
    leaves out): both are the recorded request, and the replay reproduces."""
    run, check = default_check
    assert check.reproduced, check.first_difference()
    assert check.made == run.horizon and check.recorded_failed and check.replayed_failed


def test_a_resampled_billing_refund_is_sent_the_agents_own_tools(
    traces: dict[str, Recorded],
) -> None:
    run = traces["explicit"].run()
    policy = Seeing("agents_sdk")
    registry = PolicyRegistry().register("llm", policy)
    refund = refund_step(run)
    result = run_plan(
        run,
        Plan((Resample(refund),)),
        Environment(registry),
        rollouts=4,
        outcome=outcome_from_config(OUTCOME, registry),
        executor=LiveExecutor(command("explicit", concurrency=2)),
    )
    assert result.summary()["status"] == {"final": 4}
    refunds = [r for r in policy.requests if r.step == refund]
    assert len(refunds) == 4
    for request in refunds:
        assert request.agent == "billing"
        assert [t["name"] for t in request.tools or ()] == ["issue_refund", "close_ticket"]
        assert request.tools[0]["parameters"]["properties"]["order_id"]["type"] == "string"
        assert request.tool_choice == "auto"
        assert request.messages[0].content == agents_sdk.BILLING
        assert any(agents_sdk.PLANTED in (m.content or "") for m in request.messages)
    assert {r.seed for r in refunds} != {SEED}  # the rollouts' seeds, not the agent's
    assert all(len(r.decisions) == run.horizon for r in result.rollouts)


def test_live_why_names_the_planted_sentence(traces: dict[str, Recorded]) -> None:
    run = traces["explicit"].run()
    registry = PolicyRegistry().register("llm", Seeing("agents_sdk"))
    config = ProjectConfig(registry, outcome_from_config(OUTCOME, registry))
    config.agent_command = command("explicit", concurrency=2)
    why = run_sync(why_run(run, config, step=refund_step(run), seed=1))
    assert why.headline is not None
    assert agents_sdk.PLANTED in why.headline.text
