"""The rebuilt agent is the user's agent, on agents the project never saw (issue 35).

Three agents (``tests/agents``: a fixed workflow with a tool-less final step, a tool loop, a
two-agent handoff), each written with the plain ``openai`` client, each run once against a
scripted model on 127.0.0.1 and traced by two real instrumentations: one that records no tool
definitions (``opentelemetry-instrumentation-openai-v2``) and one that records them
(``openinference-instrumentation-openai``). On each trace:

- every part of a re-decided request is recorded, declared or reported as inferred;
- the rebuilt agent never offers a tool the agent did not offer at that decision, and offers
  exactly the agent's tools where the trace records them or the user declares them;
- every rollout takes only actions the real agent could take: the agent itself is run live
  along the rollout's actions (the scripted model answers with them, in order), and every
  action must call only tools the agent's live request offered, and the agent must make
  exactly as many model calls as the rollout made decisions;
- tool state never leaks between rollouts;
- ``attribute`` names the decision the planted text misleads, and ``why`` the planted sentence.

The model's answers come from each agent's seeded ``brain``, which also re-decides for otelcar
(:class:`BrainPolicy`), so the rebuilt agent and the live one face the same model.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import otelcar
from otelcar.messages import Message, ToolCall
from otelcar.outcome import outcome_from_config
from otelcar.policies.base import Decision, DecisionRequest
from otelcar.policies.registry import PolicyRegistry
from otelcar.replay import Do, Environment, Plan, Resample, replay
from otelcar.replay.requests import AgentDeclaration
from otelcar.report.notes import word, worded
from otelcar.report.prose import headline
from otelcar.sync import run_sync
from tests.agents.kit import Hooks
from tests.agents.model import ScriptedModel, offered
from tests.helpers.agents import CULPRIT_TOOL, OUTCOMES, SEED, Recorded, agent_module

ROOT = Path(__file__).resolve().parents[1]
AGENTS = ("cleanup", "refund_loop", "handoff")
INSTRUMENTATIONS = ("openai-v2", "openinference")
RECORDS_TOOLS = {"openai-v2": False, "openinference": True}


class BrainPolicy:
    """otelcar's LLM policy: the agent's brain on the re-decided request (its messages and
    tools in OpenAI's format, its seed), refusing a call of a tool the request does not
    offer, as the scripted model does (``tests.agents.model.decide_with``)."""

    max_concurrency = 64

    def __init__(self, agent: str) -> None:
        self.decide_message = agent_module(agent).decide
        self.name = f"brain:{agent}"

    async def decide(self, request: DecisionRequest) -> Decision:
        return Decision(self.decide_message(request), policy=self.name)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], Recorded]:
    out = tmp_path_factory.mktemp("agents")
    return {(a, i): Recorded(a, i, out) for a in AGENTS for i in INSTRUMENTATIONS}


def declaration(agent: str) -> AgentDeclaration:
    """What a user who knows the agent's code declares in otelcar.toml (per agent, as the
    code offers them: the workflow per step, the loops per agent)."""
    module = agent_module(agent)

    def definitions(tools: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            t["function"]["name"]: {
                "description": t["function"]["description"],
                "parameters": t["function"]["parameters"],
            }
            for t in tools
        }

    if agent == "cleanup":
        tools = definitions([module.LIST, module.INFO, module.DELETE, module.KEEP])
        decisions = [
            {"key": f"cleanup#{n + 1}", "tools": [t["function"]["name"] for t in step[1] or ()]}
            | ({"tool_choice": step[2]} if step[2] else {})
            for n, step in enumerate(module.STEPS)
        ]
        table = {"structure": "workflow", "tools": tools, "decision": decisions}
    elif agent == "refund_loop":
        table = {"structure": "loop", "tool_choice": "auto", "tools": definitions(module.TOOLS)}
    else:
        table = {
            "structure": "loop",
            "tool_choice": "auto",
            "tools": definitions(module.TRIAGE_TOOLS + module.BILLING_TOOLS),
            "decision": [
                {"agent": "triage", "tools": ["lookup_order", "transfer_to_billing"]},
                {"agent": "billing", "tools": ["issue_refund", "close_ticket"]},
            ],
        }
    return AgentDeclaration.from_config(table)


def registry(agent: str) -> PolicyRegistry:
    """The brain re-decides; each tool runs the agent's own code on a fresh state per
    rollout (a python tool policy with a factory, declared sandboxed)."""
    module = agent_module(agent)
    tools = {
        f"tool:{name}": {
            "type": "python",
            "factory": f"tests.agents.{agent}:make_tools",
            "side_effects": "sandboxed",
        }
        for name in _tool_names(module)
    }
    built = PolicyRegistry.from_config(tools)
    built.register("llm", BrainPolicy(agent))
    return built


def _tool_names(module: ModuleType) -> list[str]:
    tools = getattr(module, "TOOLS", None) or []
    for name in ("LIST", "INFO", "DELETE", "KEEP"):
        tools = [*tools, *([getattr(module, name)] if hasattr(module, name) else [])]
    tools += getattr(module, "TRIAGE_TOOLS", []) + getattr(module, "BILLING_TOOLS", [])
    return [t["function"]["name"] for t in tools]


CASES = [(a, i) for a in AGENTS for i in INSTRUMENTATIONS]


@pytest.mark.parametrize(("agent", "instrumentation"), CASES)
def test_every_part_of_a_request_is_recorded_declared_or_reported(
    recorded: dict[tuple[str, str], Recorded], agent: str, instrumentation: str
) -> None:
    case = recorded[agent, instrumentation]
    run = case.run()
    assert len(run.decisions) == len(case.live_tools)
    sources = {spec.tools.source for spec in run.requests.decisions}
    if RECORDS_TOOLS[instrumentation]:
        with_tools = [s for s, live in zip(run.requests.decisions, case.live_tools, strict=True)]
        assert all(
            s.tools.source == ("recorded" if live else "inferred")
            for s, live in zip(with_tools, case.live_tools, strict=True)
        )
    else:
        assert sources == {"inferred"}
    inferred_note = run.requests.note()
    summary = None if inferred_note is None else word(inferred_note)
    inferred = [
        spec
        for spec in run.requests.decisions
        if "inferred" in (spec.tools.source, spec.tool_choice.source)
    ]
    assert (summary is not None) == bool(inferred or run.requests.structure.source == "inferred")
    for spec in inferred:
        assert f"{spec.step}" in summary  # type: ignore[operator]
    fidelity = otelcar.replay.check_fidelity(run)
    assert fidelity.reproducible and summary in worded(fidelity.notes)
    # declared from the agent's code, nothing is left to infer about tools or structure
    declared = case.run(declaration(agent)).requests
    assert declared.structure.source == "declared"
    assert all(s.tools.source in ("declared", "recorded") for s in declared.decisions)


@pytest.mark.parametrize(("agent", "instrumentation"), CASES)
def test_the_rebuilt_agent_offers_what_the_agent_offered(
    recorded: dict[tuple[str, str], Recorded], agent: str, instrumentation: str
) -> None:
    case = recorded[agent, instrumentation]
    rebuilt = [[t["name"] for t in s.tools.value] for s in case.run().requests.decisions]
    for mine, live in zip(rebuilt, case.live_tools, strict=True):
        assert set(mine) <= set(live)  # never a tool the agent did not offer there
    if RECORDS_TOOLS[instrumentation]:
        assert rebuilt == case.live_tools
        # the tool choice too, read from the trace (OpenInference's invocation parameters)
        specs = case.run().requests.decisions
        for spec, choice, live in zip(specs, case.live_choice, case.live_tools, strict=True):
            if live:
                assert spec.tool_choice.value == choice
                assert spec.tool_choice.source == ("recorded" if choice else "inferred")
    declared = case.run(declaration(agent)).requests
    assert [[t["name"] for t in s.tools.value] for s in declared.decisions] == case.live_tools
    for spec, choice in zip(declared.decisions, case.live_choice, strict=True):
        if spec.tools.value:
            assert spec.tool_choice.value == (choice or "auto")


def _live_along(agent: str, actions: list[Message]) -> ScriptedModel:
    """Run the agent itself with the model answering ``actions`` in order."""
    module = agent_module(agent)
    import openai

    with ScriptedModel(module.brain) as model:
        model.forced = [
            {
                "content": a.content,
                "tool_calls": [{"name": c.name, "arguments": c.arguments} for c in a.tool_calls],
            }
            for a in actions
        ]
        # plain HTTP on 127.0.0.1: no certificates to load (0.04 s of CPU a client otherwise)
        http = openai.DefaultHttpxClient(verify=False)
        client = openai.OpenAI(
            base_url=model.base_url, api_key="not-a-key", max_retries=0, http_client=http
        )
        module.run(client, Hooks(), seed=SEED)
        client.close()
    return model


@pytest.mark.parametrize("declared", [False, True], ids=["from-the-trace", "declared"])
@pytest.mark.parametrize(("agent", "instrumentation"), CASES)
def test_every_rollout_takes_only_actions_the_agent_could_take(
    recorded: dict[tuple[str, str], Recorded], agent: str, instrumentation: str, declared: bool
) -> None:
    case = recorded[agent, instrumentation]
    run = case.run(declaration(agent) if declared else None)
    env = Environment(registry(agent))
    paths: dict[tuple[str, ...], Any] = {}
    for decision in run.decisions:
        for r in range(3):
            rollout = run_sync(
                replay(run, Plan((Resample(decision.step),)), env, rollout=r, base_seed=11)
            )
            assert rollout.ok, rollout.error
            actions = [d.action for d in rollout.decisions]
            paths.setdefault(
                tuple(json.dumps(a.to_row(), sort_keys=True) for a in actions), rollout
            )
    assert len(paths) > len(run.decisions)  # the re-decisions did diverge
    for rollout in paths.values():
        actions = [d.action for d in rollout.decisions]
        live = _live_along(agent, actions)
        offered_live = [offered(body.get("tools")) for body in live.requests]
        where = f"{agent}/{instrumentation}, rollout {[describe(a) for a in actions]}"
        assert live.extra == 0, f"{where}: the agent asked for more decisions than it made"
        assert len(live.requests) == len(actions), f"{where}: the agent ended earlier"
        for k, (action, tools) in enumerate(zip(actions, offered_live, strict=True)):
            called = {c.name for c in action.tool_calls}
            assert called <= set(tools), f"{where}: decision {k} called {called}, offered {tools}"


def describe(action: Message) -> str:
    if action.tool_calls:
        return ", ".join(f"{c.name}({json.dumps(c.arguments)})" for c in action.tool_calls)
    return f"say {action.content!r}"


def test_tool_state_never_leaks_between_rollouts(recorded: dict[tuple[str, str], Recorded]):
    """Every rollout deletes the scratch log (a call the recording lacks, so the agent's own
    tool code runs) from a workspace of its own: "deleted", never "no such file"."""
    run = recorded["cleanup", "openai-v2"].run()
    act = next(d for d in run.decisions if d.action and d.action.tool_calls[:1]
               and d.action.tool_calls[0].name == "delete_file")  # fmt: skip
    scratch = Message("assistant", None, (ToolCall("delete_file", {"name": "tmp.log"}, "d1"),))
    env = Environment(registry("cleanup"))
    results = []
    for r in range(12):
        rollout = run_sync(replay(run, Plan((Do(act.step, scratch),)), env, rollout=r))
        assert rollout.ok, rollout.error
        results += [
            o.result
            for d in rollout.decisions
            for o in d.observations
            if o.origin.startswith("tool:")
        ]
    assert results == ["deleted tmp.log"] * 12
    assert env.accounting.tool_calls == 12  # the tool code ran once per rollout


@pytest.mark.parametrize(("agent", "instrumentation"), CASES)
def test_attribute_and_why_name_the_planted_culprit_and_sentence(
    recorded: dict[tuple[str, str], Recorded], agent: str, instrumentation: str
) -> None:
    case = recorded[agent, instrumentation]
    run = case.run()
    tools = registry(agent)
    outcome = outcome_from_config(OUTCOMES[agent], tools)
    culprit = next(
        d
        for d in run.decisions
        if d.action and any(c.name == CULPRIT_TOOL[agent] for c in d.action.tool_calls)
    )
    result = otelcar.attribute(run, registry=tools, outcome=outcome, seed=1)
    assert result.culprit is not None and result.culprit.step == culprit.step, headline(result)
    inferred = run.requests.note() is not None
    assert any("partly inferred" in n for n in worded(result.notes)) == inferred
    why = otelcar.why(run, step=culprit.step, registry=tools, outcome=outcome, seed=1)
    planted = agent_module(agent).PLANTED
    assert why.headline is not None and planted in why.headline.text, why.headline


def test_the_trial_rerun_gives_a_fix_in_plain_words(recorded: dict[tuple[str, str], Recorded]):
    """The cleanup trial: a guard that names the call as a developer would (the tool and the
    file, never the outcome's pattern) prevents the failure, validated on fresh draws."""
    run = recorded["cleanup", "openai-v2"].run()
    tools = registry("cleanup")
    spec = {**OUTCOMES["cleanup"], "args": {"name": "re:^(q3-revenue|budget-\\d+)\\.xlsx$"}}
    outcome = outcome_from_config(spec, tools)
    act = next(d for d in run.decisions if d.action and d.action.tool_calls[:1]
               and d.action.tool_calls[0].name == "delete_file")  # fmt: skip
    result = otelcar.fix(run, step=act.step, registry=tools, outcome=outcome, seed=1)
    guard = next(c for c in result.candidates if c.kind == "guard")
    assert guard.rule is not None and "re:" not in guard.rule and "\\" not in guard.rule
    assert 'delete_file with name "q3-revenue.xlsx"' in guard.rule
    assert guard.verdict == "PASS"
    assert result.best is not None


def test_attribute_says_when_an_undeclared_live_tool_reused_results(
    recorded: dict[tuple[str, str], Recorded],
):
    """Without side_effects the agent's own delete_file runs once per distinct call and its
    result is reused, and the attribution's notes say so (its result is what users read)."""
    run = recorded["cleanup", "openinference"].run()
    tools = PolicyRegistry.from_config(
        {"tool:*": {"type": "python", "factory": "tests.agents.cleanup:make_tools"}}
    )
    tools.register("llm", BrainPolicy("cleanup"))
    outcome = outcome_from_config(OUTCOMES["cleanup"], tools)
    result = otelcar.attribute(run, registry=tools, outcome=outcome, seed=1)
    notes = worded(result.notes)
    assert any("side effects undeclared" in note for note in notes), notes


def test_why_and_fix_read_a_saved_attribution_instead_of_attributing_again(
    recorded: dict[tuple[str, str], Recorded], tmp_path: Path
) -> None:
    case = recorded["refund_loop", "openai-v2"]
    config = tmp_path / "otelcar.toml"
    config.write_text(
        '[policies.llm]\ntype = "python"\nfunction = "tests.agents.refund_loop:decide"\n'
        '[policies."tool:*"]\ntype = "python"\nfactory = "tests.agents.refund_loop:make_tools"\n'
        'side_effects = "sandboxed"\n'
        '[outcome]\ntype = "tool_called"\ntool = "issue_refund"\nargs = { order_id = "B-7" }\n'
    )
    from click.testing import CliRunner

    from otelcar.cli import cli

    runner = CliRunner()
    store = ["--store", str(tmp_path / "store")]
    imported = runner.invoke(cli, [*store, "import", str(case.path)])
    assert imported.exit_code == 0, imported.output
    trace = case.trace_id[:12]
    saved = tmp_path / "attribution.json"
    done = runner.invoke(cli, [*store, "attribute", trace, "-c", str(config), "--json", str(saved)])
    assert done.exit_code == 0, done.output
    culprit = json.loads(saved.read_text())["culprit"]
    assert culprit is not None
    why = tmp_path / "why.json"
    args = [trace, "-c", str(config), "--attribution", str(saved), "--json", str(why)]
    done = runner.invoke(cli, [*store, "why", *args])
    assert done.exit_code == 0, done.output
    data = json.loads(why.read_text())
    assert data["step"] == culprit and "saved attribution" in data["step_reason"]
    assert agent_module("refund_loop").PLANTED in (data["cause"] or {}).get("text", "")
    # an attribution of another trace is refused, not used
    other = tmp_path / "other.json"
    other.write_text(json.dumps({**json.loads(saved.read_text()), "trace_id": "0" * 32}))
    args = [trace, "-c", str(config), "--attribution", str(other)]
    refused = runner.invoke(cli, [*store, "fix", *args])
    assert refused.exit_code == 2 and "is of trace 000" in refused.output
