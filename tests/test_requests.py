"""The request a re-decision sends: recorded, declared or inferred, and where a rollout ends
(otelcar.replay.requests, DESIGN.md §5).

The runs are built through the real trajectory builder from GenAI spans
(:func:`otelcar.testing.conversation_steps`), once as an instrumentation that omits tool
definitions records them (opentelemetry-instrumentation-openai-v2) and once as one that
records them (``gen_ai.tool.definitions`` on every chat span).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from otelcar.messages import Message
from otelcar.policies.base import Decision, DecisionRequest
from otelcar.policies.openai_compat import OpenAICompatiblePolicy
from otelcar.policies.registry import PolicyRegistry
from otelcar.project_config import ConfigError, parse_config
from otelcar.replay import Environment, Plan, Resample, check_fidelity, replay
from otelcar.replay.requests import AgentDeclaration, RequestError
from otelcar.report.notes import word, worded
from tests.helpers.workspace import (
    DEFINITIONS,
    tool_call,
    workspace_run,
)


class Recording:
    """An LLM policy that keeps every request and calls a tool only when one is offered."""

    name = "recording"
    max_concurrency = 4

    def __init__(self, call: str | None = "delete_file") -> None:
        self.call = call
        self.requests: list[DecisionRequest] = []

    async def decide(self, request: DecisionRequest) -> Decision:
        self.requests.append(request)
        names = [t["name"] for t in request.tools or ()]
        if self.call in names:
            message = tool_call(self.call, f"n{len(self.requests)}", {"name": "tmp.log"})
        else:
            message = Message("assistant", "All tidy.")
        return Decision(message, policy=self.name)


def _resample(step: int) -> Plan:
    return Plan((Resample(step),))


def _env(policy: Any) -> Environment:
    registry = PolicyRegistry().register("llm", policy)
    registry.register("tool:delete_file", _Tool())
    return Environment(registry)


class _Tool:
    name = "tool"
    max_concurrency = 4

    async def run(self, request: Any) -> str:
        return f"deleted {request.arguments.get('name')}"


def test_omitted_definitions_in_a_workflow_offer_each_decision_what_it_called() -> None:
    run = workspace_run()
    requests = run.requests
    assert requests.structure.value == "workflow"
    assert requests.structure.source == "inferred"
    assert "user message" in requests.structure.basis
    names = [[t["name"] for t in spec.tools.value] for spec in requests.decisions]
    assert names == [["list_files"], ["file_info"], ["delete_file"], []]
    assert all(spec.tools.source == "inferred" for spec in requests.decisions)
    inferred = requests.note()
    assert inferred is not None
    summary = word(inferred)
    assert "structure workflow" in summary and "tools at steps" in summary
    assert "otelcar init" in summary
    # the inferred schema carries no enum: only the recorded call's argument types
    delete = requests.decisions[2].tools.value[0]
    assert delete["parameters"] == {"type": "object", "properties": {"name": {"type": "string"}}}


def test_the_tool_less_final_decision_is_re_decided_without_tools() -> None:
    run = workspace_run()
    final = run.decisions[-1]
    policy = Recording()
    rollout = asyncio.run(replay(run, _resample(final.step), _env(policy)))
    assert rollout.status == "final"
    assert [r.tools for r in policy.requests] == [None]
    assert policy.requests[0].tool_choice is None
    assert rollout.decisions[-1].action is not None
    assert not rollout.decisions[-1].action.tool_calls  # it could not delete anything


def test_a_workflow_rollout_neither_stops_early_nor_runs_past_its_end() -> None:
    run = workspace_run()
    # re-decide the inspect step with a policy that answers in text (file_info is offered,
    # delete_file is not): a workflow's code goes on to its next decision anyway
    policy = Recording(call="delete_file")
    plan = _resample(run.decisions[1].step)
    rollout = asyncio.run(replay(run, plan, _env(policy)))
    assert rollout.status == "final"
    assert len(rollout.decisions) == run.horizon  # never more, never fewer
    offered = [[t["name"] for t in r.tools or ()] for r in policy.requests]
    assert offered == [["file_info"], ["delete_file"], []]
    # the delete step, re-decided after the divergence, deleted tmp.log; the report step
    # offered nothing, so nothing else was deleted
    third = rollout.decisions[2].action
    assert third is not None and third.tool_calls[0].arguments == {"name": "tmp.log"}
    assert not rollout.decisions[3].action.tool_calls


def test_a_loop_offers_every_tool_and_may_go_past_the_horizon() -> None:
    run = workspace_run(workflow=False)
    requests = run.requests
    assert requests.structure.value == "loop"
    names = {t["name"] for t in requests.decisions[-1].tools.value}
    assert names == {"list_files", "file_info", "delete_file"}
    assert requests.beyond is not None
    # a policy that keeps calling a tool: cut after the slack, counted, not judged
    policy = Recording(call="delete_file")
    env = _env(policy)
    env.budget.slack = 2
    rollout = asyncio.run(replay(run, _resample(run.decisions[-1].step), env))
    assert rollout.status == "truncated"
    assert not rollout.ok
    assert len(rollout.decisions) == run.horizon + 2


def test_recorded_definitions_are_recorded_and_the_empty_list_offers_none() -> None:
    run = workspace_run(recorded_tools=True)
    requests = run.requests
    assert [spec.tools.source for spec in requests.decisions] == ["recorded"] * 4
    assert requests.decisions[-1].tools.value == ()
    # different tools at different decisions read as a workflow, even without messages
    assert workspace_run(workflow=False, recorded_tools=True).requests.structure.value == "workflow"
    delete = requests.decisions[2].tools.value[0]
    assert delete["parameters"]["properties"]["name"]["enum"] == ["tmp.log", "q3.xlsx"]
    inferred = requests.note()
    summary = "" if inferred is None else word(inferred)
    assert "; tools at" not in summary and ": tools at" not in summary  # tools all recorded


def test_a_declaration_settles_every_part_and_the_request_carries_it() -> None:
    steps = [d.step for d in workspace_run().decisions]
    declared = AgentDeclaration.from_config(
        {
            "structure": "workflow",
            "tool_choice": "required",
            "tools": {
                name: {"description": d["description"], "parameters": d["parameters"]}
                for name, d in DEFINITIONS.items()
            },
            "decision": [
                {"step": steps[0], "tools": ["list_files"]},
                {"key": "scripted#2", "tools": ["file_info", "list_files"], "tool_choice": "auto"},
                {"step": steps[2], "tools": ["delete_file", "file_info"]},
                {"step": steps[3], "tools": []},
            ],
        }
    )
    run = workspace_run(agent=declared)
    requests = run.requests
    assert requests.structure.source == "declared"
    assert [spec.tools.source for spec in requests.decisions] == ["declared"] * 4
    assert requests.decisions[1].tool_choice.value == "auto"
    assert requests.decisions[2].tool_choice.value == "required"
    assert requests.note() is None  # nothing left to infer
    policy = Recording()
    asyncio.run(replay(run, _resample(steps[2]), _env(policy)))
    first = policy.requests[0]
    assert [t["name"] for t in first.tools or ()] == ["delete_file", "file_info"]
    assert first.tool_choice == "required"
    enum = first.tools[0]["parameters"]["properties"]["name"]["enum"]  # type: ignore[index]
    assert enum == ["tmp.log", "q3.xlsx"]


def test_declarations_that_do_not_fit_the_trace_say_what_does() -> None:
    with pytest.raises(
        RequestError, match=r"step 99 is not a decision .*its decisions: 1, 3, 5, 7"
    ):
        workspace_run(agent=AgentDeclaration.from_config({"decision": [{"step": 99, "tools": []}]}))
    with pytest.raises(RequestError, match=r"did you mean 'scripted#2'"):
        workspace_run(
            agent=AgentDeclaration.from_config({"decision": [{"key": "scripted#22", "tools": []}]})
        )
    step = workspace_run().decisions[0].step
    with pytest.raises(RequestError, match=r"tool 'delete_files' .* did you mean 'delete_file'"):
        workspace_run(
            agent=AgentDeclaration.from_config(
                {"decision": [{"step": step, "tools": ["delete_files"]}]}
            )
        )
    with pytest.raises(RequestError, match="structure = 'graph'"):
        AgentDeclaration.from_config({"structure": "graph"})
    with pytest.raises(RequestError, match="exactly one of step"):
        AgentDeclaration.from_config({"decision": [{"tools": []}]})


def test_otelcar_toml_agent_section() -> None:
    config = parse_config({"agent": {"structure": "loop", "tools": {"x": {"description": "an x"}}}})
    assert config.agent.structure == "loop"
    assert config.agent.tools["x"]["parameters"] == {"type": "object", "properties": {}}
    with pytest.raises(ConfigError, match=r"\[agent\]: unknown key\(s\) tool"):
        parse_config({"agent": {"tool": {}}})


def test_the_fidelity_report_says_what_is_inferred() -> None:
    report = check_fidelity(workspace_run())
    assert report.reproducible
    assert any("partly inferred" in note for note in worded(report.notes))
    assert report.requests["structure"]["value"] == "workflow"
    keys = [d["key"] for d in report.requests["decisions"]]
    assert keys == ["scripted#1", "scripted#2", "scripted#3", "scripted#4"]


def test_tool_choice_reaches_the_wire_and_the_cache_key() -> None:
    base = DecisionRequest(
        messages=(Message("user", "hi"),),
        tools=(DEFINITIONS["list_files"],),
        params={},
        model="m",
        seed=1,
        step=1,
    )
    forced = DecisionRequest(
        messages=base.messages,
        tools=base.tools,
        params={},
        model="m",
        seed=1,
        step=1,
        tool_choice="required",
    )
    assert base.cache_key("p") != forced.cache_key("p")
    policy = OpenAICompatiblePolicy(model="m")
    assert "tool_choice" not in policy.request_body(base)
    assert policy.request_body(forced)["tool_choice"] == "required"
    # the policy's own option applies where the request declares none
    assert (
        OpenAICompatiblePolicy(model="m", tool_choice="auto").request_body(base)["tool_choice"]
        == "auto"
    )
