"""The replay harness with scripted stochastic policies: exact, known answers."""

from __future__ import annotations

import json
import random

import polars as pl
import pytest

from otelcar import STEPS_SCHEMA, read_otlp, read_whowhen
from otelcar.messages import Message, ToolCall
from otelcar.outcome import FinalAnswer, ToolCalled
from otelcar.policies import (
    CallableLLMPolicy,
    CallableToolPolicy,
    Decision,
    DecisionRequest,
    PolicyRegistry,
    StaticLLMPolicy,
)
from otelcar.replay import (
    Budget,
    Do,
    EditContext,
    Environment,
    Observe,
    Plan,
    Remove,
    RemoveMessage,
    ReplaceJsonItem,
    ReplaceText,
    Resample,
    SwapModel,
    check_fidelity,
    load_run,
    run_plan,
)
from otelcar.sync import run_sync
from otelcar.trajectory import build_trace
from tests.conftest import NEW_CONTENT, OTLP
from tests.synth import TRACE, calls, chat, responses, text, tool

SYSTEM = text("system", "You are a research agent.")
USER = text("user", "find x")


def branching_trace() -> pl.DataFrame:
    """d0 → search(q=a) → "A"; d1 → fetch(id=1) → "F1"; d2 → "done"."""
    c0 = [SYSTEM, USER]
    a0 = calls(("s1", "search", {"q": "a"}))
    c1 = [*c0, a0, responses(("s1", "A"))]
    a1 = calls(("f1", "fetch", {"id": 1}))
    c2 = [*c1, a1, responses(("f1", "F1"))]
    spans = [
        chat("c0", c0, [a0], start=0, end=10),
        tool("t0", "search", "s1", start=11, end=12),
        chat("c1", c1, [a1], start=20, end=30),
        tool("t1", "fetch", "f1", start=31, end=32),
        chat("c2", c2, [text("assistant", "done")], start=40, end=50),
    ]
    return pl.DataFrame(build_trace(TRACE, spans).steps, schema=STEPS_SCHEMA)


def _coin(request: DecisionRequest) -> Message:
    """A scripted stochastic policy: the seed decides between two searches, then fetch, then
    an answer naming what it saw."""
    tool_messages = [m for m in request.messages if m.role == "tool"]
    if not tool_messages:
        query = "a" if random.Random(request.seed).random() < 0.5 else "b"
        return Message("assistant", None, (ToolCall("search", {"q": query}, "s9"),))
    if len(tool_messages) == 1:
        return Message("assistant", None, (ToolCall("fetch", {"id": 1}, "f9"),))
    return Message("assistant", "saw " + ",".join(m.content or "" for m in tool_messages))


def _env(policy=_coin, **tools) -> Environment:
    registry = PolicyRegistry().register("llm", CallableLLMPolicy(policy, name="coin"))
    for name, function in tools.items():
        registry.register(f"tool:{name}", CallableToolPolicy(function, name=name))
    return Environment(registry)


def test_resampling_step_0_changes_the_tool_and_later_steps_follow_the_new_timeline():
    run = load_run(TRACE, branching_trace())
    env = _env(search=lambda r: "B-result")
    result = run_plan(
        run,
        Plan((Resample(0),)),
        env,
        rollouts=40,
        seed=3,
        outcome=FinalAnswer(contains="B-result"),
    )
    assert not result.errors
    steps = result.steps()
    for rollout in result.rollouts:
        query = rollout.decisions[0].action.tool_calls[0].arguments["q"]
        later = rollout.decisions[1]
        if query == "a":  # same call recurs: recording served, later steps held
            assert rollout.decisions[0].observations[0].origin == "cassette"
            assert later.origin == "recorded" and rollout.decisions[2].origin == "recorded"
            assert rollout.decisions[-1].action.content == "done"
        else:  # diverged: the new observation reaches the later contexts, they are re-decided
            assert rollout.decisions[0].observations[0].result == "B-result"
            assert later.origin == "policy:coin"
            assert [m.content for m in later.context if m.role == "tool"] == ["B-result"]
            assert rollout.decisions[-1].action.content == "saw B-result,F1"
    queries = steps.filter((pl.col("kind") == "tool") & (pl.col("tool_name") == "search"))
    n_b = sum('"b"' in a for a in queries["tool_args"].to_list())
    assert 5 < n_b < 35  # both branches happened
    assert result.n_failed_outcome == n_b


def test_seeds_reproduce_and_are_shared_across_plans():
    run = load_run(TRACE, branching_trace())
    env = _env(search=lambda r: "B")
    first = run_plan(run, Plan((Resample(0),)), env, rollouts=12, seed=5)
    again = run_plan(run, Plan((Resample(0),)), _env(search=lambda r: "B"), rollouts=12, seed=5)
    assert first.steps().equals(again.steps())
    other_seed = run_plan(
        run, Plan((Resample(0),)), _env(search=lambda r: "B"), rollouts=12, seed=6
    )
    assert not first.steps().equals(other_seed.steps())
    # Common random numbers: rollout r of another plan gets the same seed at decision 0.
    other = run_plan(
        run, Plan((Resample(0), Resample(2))), _env(search=lambda r: "B"), rollouts=12, seed=5
    )
    assert [r.decisions[0].seed for r in other.rollouts] == [
        r.decisions[0].seed for r in first.rollouts
    ]
    # The request cache: the same plan again in the same environment costs nothing.
    repeat = run_plan(run, Plan((Resample(0),)), env, rollouts=12, seed=5)
    assert repeat.cost["llm_calls"] == 0 and repeat.cost["cache_hits"] >= 12


def test_unrecorded_tool_call_without_a_tool_policy_fails_that_rollout_only():
    run = load_run(TRACE, branching_trace())
    result = run_plan(run, Plan((Resample(0),)), _env(), rollouts=30, seed=3)
    failed = [r for r in result.rollouts if r.status == "failed"]
    assert failed and len(failed) < 30
    assert all("no tool policy is registered" in r.error for r in failed)
    assert all(r.decisions[0].action.tool_calls[0].arguments == {"q": "b"} for r in failed)


def test_budget_stops_cleanly_with_partial_results():
    run = load_run(TRACE, branching_trace())
    env = _env(search=lambda r: "B")
    env.budget = Budget(max_calls=3)
    result = run_plan(run, Plan.resample_from(0, [0, 2, 4]), env, rollouts=6, seed=1, concurrency=1)
    statuses = [r.status for r in result.rollouts]
    assert "budget" in statuses and "final" in statuses
    assert env.accounting.llm_calls == 3


def test_a_crashing_policy_is_isolated():
    def flaky(request: DecisionRequest) -> Message:
        if request.seed % 2:
            raise RuntimeError("model server exploded")
        return Message("assistant", "ok")

    run = load_run(TRACE, branching_trace())
    result = run_plan(run, Plan((Resample(4),)), _env(flaky), rollouts=10, seed=2)
    assert {r.status for r in result.rollouts} == {"failed", "final"}
    assert all("model server exploded" in e for e in result.errors)


def _fixture_run():
    steps = read_otlp([OTLP / "new_content.traces.jsonl"])
    return load_run(NEW_CONTENT, steps)


class Recorder:
    """An LLM policy that records every request and answers with a fixed text."""

    def __init__(self, answer: str = "final answer") -> None:
        self.requests: list[DecisionRequest] = []
        self.answer = answer
        self.name = f"recorder:{answer}"
        self.max_concurrency = 4

    async def decide(self, request: DecisionRequest) -> Decision:
        self.requests.append(request)
        return Decision(Message("assistant", self.answer), policy=self.name)


def _one(plan: Plan, policy: Recorder | None = None, **extra):
    run = _fixture_run()
    policy = policy or Recorder()
    registry = PolicyRegistry().register("llm", policy)
    for key, value in extra.items():
        registry.register(key, value)
    result = run_plan(run, plan, Environment(registry), rollouts=1, seed=0)
    assert result.rollouts[0].ok, result.errors
    return result.rollouts[0], policy


def test_observe_mocks_one_of_two_parallel_results_in_place():
    rollout, policy = _one(Plan((Observe(1, "NO SUCH POLICY", call=1),)))
    context = policy.requests[0].messages  # step 4 was re-decided: its context diverged
    assert [(m.role, m.tool_call_id) for m in context[-2:]] == [
        ("tool", "call_lookup_1"),
        ("tool", "call_policy_1"),
    ]
    assert context[-1].content == "NO SUCH POLICY"
    assert context[-2].content.startswith('{"order_id": "A-1001"')
    assert [d.origin for d in rollout.decisions] == ["recorded", "policy:recorder:final answer"]


def test_do_remove_and_edits_shape_the_next_context():
    final = Message("assistant", "Sorry, no refund.")
    rollout, policy = _one(Plan((Do(4, final),)))
    assert [d.action for d in rollout.decisions][-1] == final and not policy.requests

    rollout, policy = _one(Plan((Remove(1),)))
    roles = [m.role for m in policy.requests[0].messages]
    assert roles == ["system", "user"]  # step 1's action and both results are gone

    rollout, policy = _one(Plan((EditContext(4, RemoveMessage(3)),)))
    assert [m.tool_call_id for m in policy.requests[0].messages if m.role == "tool"] == [
        "call_policy_1"
    ]
    rollout, policy = _one(Plan((EditContext(4, ReplaceText(4, "30 days", "7 days")),)))
    assert "7 days" in policy.requests[0].messages[4].content
    rollout, policy = _one(Plan((EditContext(4, ReplaceJsonItem(3, ("amount",), 5.0)),)))
    assert json.loads(policy.requests[0].messages[3].content)["amount"] == 5.0


def test_swap_model_uses_the_named_policy_from_that_step_on():
    other = Recorder("from the big model")
    rollout, default = _one(Plan((SwapModel("llm:big", start=4),)), **{"llm:big": other})
    assert not default.requests and len(other.requests) == 1
    assert rollout.decisions[-1].action.content == "from the big model"


def test_plans_round_trip_through_json():
    plan = Plan(
        (
            Resample(1),
            Do(4, Message("assistant", None, (ToolCall("f", {"a": 1}, "x"),))),
            Remove(6),
            Observe(1, "obs", call=1),
            EditContext(4, ReplaceJsonItem(3, ("amount",), 5.0)),
            EditContext(4, RemoveMessage(2)),
            SwapModel("llm:big", steps=(4, 6)),
        )
    )
    assert Plan.from_json(plan.to_json()) == plan
    assert "swap_model(steps [4, 6] → llm:big)" in plan.describe()


def test_fidelity_on_every_committed_fixture():
    cases = {
        "new_content": ("yes", "ok"),
        "legacy_content": ("yes", "ok"),
        "new_nocontent": ("no", "unreproducible"),
        "legacy_nocontent": ("no", "unreproducible"),
    }
    outcome = ToolCalled("issue_refund")
    for name, (reproducible, verdict) in cases.items():
        files = [OTLP / f"{name}.traces.jsonl", OTLP / f"{name}.logs.jsonl"]
        steps = read_otlp(files)
        report = check_fidelity(load_run(steps["trace_id"][0], steps), outcome=outcome)
        assert report.reproducible == (reproducible == "yes"), (name, report.to_dict())
        assert {s.verdict for s in report.steps} == {verdict}, name
        if verdict == "unreproducible":
            assert all("not captured" in " ".join(s.reasons) for s in report.steps)
        else:
            assert report.recorded_failed is True and report.replayed_failed is True


def test_static_policy_counts_and_outcome_rates():
    run = _fixture_run()
    registry = PolicyRegistry().register("llm", StaticLLMPolicy(["No refund, sorry."]))
    result = run_plan(
        run,
        Plan((Resample(4),)),
        Environment(registry),
        rollouts=5,
        seed=0,
        outcome=ToolCalled("issue_refund"),
    )
    assert result.n_failed_outcome == 0 and len(result.judged) == 5
    factual = run_plan(
        run,
        Plan(),
        Environment(registry),
        rollouts=3,
        seed=0,
        outcome=ToolCalled("issue_refund", {"amount": "re:129\\.99"}),
    )
    assert factual.n_failed_outcome == 3 and factual.cost["llm_calls"] == 0


def test_multi_agent_conversation_replays_and_carries_a_new_message_to_other_agents():
    from tests.parts import WHOWHEN, need_data

    steps = read_whowhen([need_data(WHOWHEN / "hand-crafted" / "1.json")])
    run = load_run(steps["trace_id"][0], steps)
    report = check_fidelity(run)
    assert report.reproducible and report.propagates
    agents = [d.agent for d in run.decisions]
    assert len(set(agents)) > 1
    first = run.decisions[0]
    later = next(d for d in run.decisions[1:] if d.agent != first.agent)
    seen: list[DecisionRequest] = []

    def speak(request: DecisionRequest) -> Message:
        seen.append(request)
        return Message("assistant", "PLANTED MESSAGE")

    registry = PolicyRegistry().register("llm", CallableLLMPolicy(speak, name="speak"))
    result = run_plan(run, Plan((Resample(first.step),)), Environment(registry), rollouts=1, seed=0)
    rollout = result.rollouts[0]
    assert rollout.ok, rollout.error
    # Every later decision was re-decided, each seeing the planted message in its own context.
    assert len(rollout.decisions) == run.horizon
    other = next(d for d in rollout.decisions if d.recorded_step == later.step)
    planted = [m for m in other.context if m.content == "PLANTED MESSAGE"]
    assert planted and {m.role for m in planted} == {first.agent}  # another agent's turns
    assert first.action.content not in [m.content for m in other.context]
    own = next(d for d in rollout.decisions[1:] if d.agent == first.agent)
    assert any(m.role == "assistant" and m.content == "PLANTED MESSAGE" for m in own.context)


def test_repeated_messages_are_matched_to_decisions_in_order():
    """Two decisions say the same thing: a later context refers to each in its own place."""
    from otelcar.replay.recorded import ActionRef

    same = calls(("s1", "search", {"q": "a"}))
    c0 = [SYSTEM, USER]
    c1 = [*c0, same, responses(("s1", "A"))]
    again = calls(("s2", "search", {"q": "a"}))
    c2 = [*c1, again, responses(("s2", "A"))]
    spans = [
        chat("c0", c0, [same], start=0, end=10),
        chat("c1", c1, [again], start=20, end=30),
        chat("c2", c2, [text("assistant", "done")], start=40, end=50),
    ]
    steps = pl.DataFrame(build_trace(TRACE, spans).steps, schema=STEPS_SCHEMA)
    run = load_run(TRACE, steps)
    refs = [i.decision for i in run.decisions[2].template if isinstance(i, ActionRef)]
    assert refs == [0, 1]


def test_identical_requests_in_flight_are_made_once_and_a_failure_is_not_shared():
    import asyncio
    import dataclasses

    from otelcar.policies.base import DecisionRequest, PolicyError

    made: list[int] = []
    outcomes = iter([PolicyError("server down"), None])

    async def slow(request: DecisionRequest) -> Message:
        made.append(request.seed)
        await asyncio.sleep(0.01)
        failure = next(outcomes, None) if request.seed == 3 else None
        if failure is not None:
            raise failure
        return Message("assistant", f"seed {request.seed}")

    policy = CallableLLMPolicy(slow, name="slow")
    env = Environment(PolicyRegistry())
    request = DecisionRequest((Message("user", "hi"),), None, {}, None, seed=1, step=0)

    async def at_once(*requests: DecisionRequest) -> list:
        calls = (env.decide(policy, r) for r in requests)
        return await asyncio.gather(*calls, return_exceptions=True)

    other = dataclasses.replace(request, seed=2)
    results = asyncio.run(at_once(request, request, other))
    assert made == [1, 2] and [cached for _, cached in results] == [False, True, False]
    assert results[0][0] == results[1][0]
    assert (env.accounting.llm_calls, env.accounting.cache_hits, env.budget.calls) == (2, 1, 2)
    flaky = dataclasses.replace(request, seed=3)
    first, second = asyncio.run(at_once(flaky, flaky))
    assert isinstance(first, PolicyError) and second[1] is False  # the waiter called itself
    assert made == [1, 2, 3, 3]


def test_a_plan_aimed_at_what_the_run_does_not_have_is_an_error():
    # Before: `rollout --resample <tool step>` ran the unchanged replay and reported it.
    from otelcar.replay import PlanError
    from otelcar.replay.harness import check_plan

    run = load_run(TRACE, branching_trace())
    decisions = [d.step for d in run.decisions]
    tool = run.steps.filter(pl.col("kind") == "tool").row(0, named=True)
    env = _env(search=lambda r: "B-result")
    with pytest.raises(
        PlanError,
        match=rf"step {tool['step']} .* tool step called by decision step {tool['call_step']}",
    ):
        run_plan(run, Plan((Resample(tool["step"]),)), env, rollouts=2, seed=0)
    with pytest.raises(PlanError, match="is not a step of"):
        check_plan(run, Plan((Do(999, Message("assistant", "x")),)))
    with pytest.raises(PlanError, match="no call 5 to observe"):
        check_plan(run, Plan((Observe(decisions[0], "mocked", call=5),)))
    with pytest.raises(PlanError, match="not a decision"):
        check_plan(run, Plan((SwapModel("other", steps=(tool["step"],)),)))
    check_plan(run, Plan((Resample(decisions[0]), Observe(decisions[0], "ok", call=0))))


def test_a_plan_is_checked_once_per_run_and_a_bad_plan_fails_every_time(monkeypatch):
    # Every rollout of a plan replays the same run: the check runs once per (run, plan).
    import otelcar.replay.harness as harness
    from otelcar.replay import PlanError

    checks: list[tuple[object, object]] = []
    real = harness.check_plan

    def counting(run, plan):
        checks.append((run, plan))
        real(run, plan)

    monkeypatch.setattr(harness, "check_plan", counting)
    run = load_run(TRACE, branching_trace())
    other = load_run(TRACE, branching_trace())
    env = _env(search=lambda r: "B-result")
    plan = Plan((Resample(run.decisions[0].step),))
    for index in range(3):
        run_sync(harness.replay(run, plan, env, rollout=index))
    assert checks == [(run, plan)]
    run_sync(harness.replay(other, plan, env))  # another run: checked again
    assert checks == [(run, plan), (other, plan)]
    bad = Plan((Do(999, Message("assistant", "x")),))
    for _ in range(2):
        with pytest.raises(PlanError, match="is not a step of"):
            run_sync(harness.replay(run, bad, env))
    assert len(checks) == 4


def test_an_outcome_is_bound_once_per_environment():
    from otelcar.outcome import ToolCalled

    env = _env(search=lambda r: "B-result")
    outcome = ToolCalled("search")
    assert env.bind(outcome) is env.bind(outcome)
    assert env.bind(ToolCalled("search")) == env.bind(outcome)


def test_replay_slack_from_the_budget_bounds_a_diverged_rollout():
    # `[replay] slack` was parsed and ignored: every rollout got the default 4.
    from otelcar.replay.harness import replay

    def endless(request: DecisionRequest) -> Message:  # never answers: always searches
        return Message("assistant", None, (ToolCall("search", {"q": "z"}, "z1"),))

    run = load_run(TRACE, branching_trace())
    lengths = {}
    for slack in (0, 2, 5):
        registry = PolicyRegistry().register("llm", CallableLLMPolicy(endless, name="loop"))
        registry.register("tool:search", CallableToolPolicy(lambda r: "Z", name="search"))
        env = Environment(registry, Budget(slack=slack))
        rollout = run_sync(replay(run, Plan((Resample(run.decisions[0].step),)), env))
        # Cut before a final answer: its own status, not judged as a complete run.
        assert rollout.status == "truncated" and not rollout.ok and "slack" in rollout.error
        lengths[slack] = len(rollout.decisions)
    assert lengths == {s: run.horizon + s for s in (0, 2, 5)}
