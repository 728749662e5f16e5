"""Incremental contexts, digest chains and event-judged rollouts give exactly what the plain
constructions give (expansion from scratch, the rollout's steps table).

The harness builds each decision's context from the previous one and continues its digest
(:mod:`otelcar.replay.contexts`). These tests replay the framework fixtures (real
instrumentations: multi-agent views, rewritten histories, user follow-ups) under random plans
twice — with the context links, and with every link cut so each context is expanded from its
template alone — and require the same contexts, actions and origins, and every request's
digest equal to the digest computed from its messages.
"""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from otelcar import Store, import_files
from otelcar.attribution.steps.attribute import Negated
from otelcar.messages import Message, ToolCall, encode_arguments
from otelcar.outcome import AllOf, AnyOf, FinalAnswer, ToolCalled, events_of, judges_events
from otelcar.policies import (
    DecisionRequest,
)
from otelcar.policies.digest import MessageChain, messages_digest
from otelcar.replay import Plan, load_run
from otelcar.replay.contexts import ReplayedObservation, SharedContext
from otelcar.replay.harness import ReplayedDecision, Rollout, replay
from otelcar.replay.recorded import ContextLink, RecordedRun
from otelcar.replay.rollout_table import (
    ROLLOUT_SCHEMA,
    rollout_events,
    rollout_failed,
    rollout_steps,
)
from otelcar.sync import run_sync
from tests.helpers.frameworks import CASES, FRAMEWORKS, random_env, random_plans, runs_in
from tests.parts import EXTERNAL, need_data


def _unlinked(run: RecordedRun) -> RecordedRun:
    """The same run with every context link cut: each context expanded from scratch."""
    links = tuple(ContextLink(None, 0, link.observed) for link in run.context_links())
    return dataclasses.replace(run, _links=links)


def _check_same_as_from_scratch(run: RecordedRun, rng: random.Random, where: str) -> None:
    for plan in random_plans(run, rng, 6):
        for rollout in range(2):
            seen_fast: list[DecisionRequest] = []
            seen_slow: list[DecisionRequest] = []
            fast = run_sync(replay(run, plan, random_env(seen_fast), rollout=rollout))
            slow = run_sync(replay(_unlinked(run), plan, random_env(seen_slow), rollout=rollout))
            assert (fast.status, fast.error) == (slow.status, slow.error)
            assert len(fast.decisions) == len(slow.decisions)
            for a, b in zip(fast.decisions, slow.decisions, strict=True):
                assert a.context == b.context, (where, plan.describe(), a.index)
                assert (a.action, a.origin, a.observations) == (
                    b.action,
                    b.origin,
                    b.observations,
                )
            assert [r.messages for r in seen_fast] == [r.messages for r in seen_slow]
            for request in seen_fast:
                fresh = dataclasses.replace(request)  # the digest is not carried over
                assert request.cache_key("p") == fresh.cache_key("p"), where


@pytest.mark.parametrize("name", CASES)
def test_incremental_contexts_equal_contexts_from_scratch(name: str, tmp_path: Path) -> None:
    runs = runs_in(FRAMEWORKS / name, tmp_path)
    if not runs:
        pytest.skip(f"{name}: no trace with two decisions")
    rng = random.Random(name)
    for run in runs:
        _check_same_as_from_scratch(run, rng, name)


def test_incremental_contexts_on_third_party_traces(tmp_path: Path) -> None:
    need_data(EXTERNAL)
    runs = runs_in(EXTERNAL, tmp_path)
    assert runs, "no third-party trace with two decisions"
    rng = random.Random(7)
    for run in runs:
        _check_same_as_from_scratch(run, rng, run.trace_id)


def test_long_run_links_every_context_and_replays_alike() -> None:
    from otelcar.testing.scenarios import single_culprit, steps_table

    steps = steps_table(single_culprit(30, 11))
    run = load_run(steps["trace_id"][0], steps)
    links = run.context_links()
    assert [link.parent for link in links] == [None, *range(run.horizon - 1)]
    _check_same_as_from_scratch(run, random.Random(3), "synthetic")


def test_digest_chain_is_order_and_boundary_sensitive() -> None:
    a, b = Message("user", "ab"), Message("user", "c")
    a2, b2 = Message("user", "a"), Message("user", "bc")
    assert messages_digest([a, b]) != messages_digest([a2, b2])
    assert messages_digest([a, b]) != messages_digest([b, a])
    assert messages_digest([]) != messages_digest([Message("user", "")])
    chain = MessageChain().extended([a])
    fork = chain.extended([b])
    assert fork.hexdigest() == messages_digest([a, b])  # computed through the parent
    assert chain.hexdigest() == messages_digest([a])
    assert chain.extended([]) is chain


def test_replaced_request_never_keeps_a_stale_digest() -> None:
    request = DecisionRequest(
        messages=(Message("user", "one"),), tools=None, params={}, model=None, seed=1, step=0
    ).knowing(MessageChain().extended([Message("user", "one")]))
    other = dataclasses.replace(request, messages=(Message("user", "two"),))
    assert other.cache_key("p") != request.cache_key("p")
    assert other.cache_key("p") == DecisionRequest(
        messages=(Message("user", "two"),), tools=None, params={}, model=None, seed=1, step=0
    ).cache_key("p")


@pytest.mark.parametrize("name", CASES)
def test_rollout_events_are_what_the_table_reads(name: str, tmp_path: Path) -> None:
    """Judging a rollout from its events (no table) sees exactly what the table shows."""
    rng = random.Random(name)
    for run in runs_in(FRAMEWORKS / name, tmp_path):
        tools = sorted(
            {c.name for d in run.decisions for c in (d.action.tool_calls if d.action else ())}
            | {"search", "lookup"}
        )
        outcomes = [
            *(ToolCalled(t) for t in tools),
            ToolCalled("search", {"q": 1}),
            ToolCalled("lookup", {"q": "re:[0-2]"}, negate=True),
            FinalAnswer(contains="answer"),
            FinalAnswer(pattern=r"\d$", negate=True),
        ]
        outcomes += [AnyOf(tuple(outcomes[:2])), AllOf(tuple(outcomes[-3:])), Negated(outcomes[0])]
        for plan in random_plans(run, rng, 4):
            rollout = run_sync(replay(run, plan, random_env([]), rollout=1))
            if not rollout.ok:
                continue
            table = rollout_steps(rollout)
            assert rollout_events(rollout) == events_of(table), (name, plan.describe())
            for outcome in outcomes:
                assert judges_events(outcome)
                by_events = run_sync(rollout_failed(outcome, rollout))
                assert by_events == run_sync(outcome.failed(table)), (name, outcome.describe())


def _table_row_by_row(rollout: Rollout) -> pl.DataFrame:
    """The plain construction of a rollout's table: one dict per row, every context's
    messages converted where they appear."""
    rows: list[dict[str, Any]] = []
    for d in rollout.decisions:
        context = None if d.context is None else [m.to_row() for m in d.context]
        output = None if d.action is None else d.action.to_row()
        llm = (len(rows), d.recorded_step, "llm", d.name, context, output, None, None, None)
        rows.append(dict(zip(_ROW_KEYS, (*llm, None, None, d.origin), strict=True)))
        for o in d.observations:
            args = encode_arguments(o.call.arguments)
            tool = (len(rows), None, "tool", o.call.name, None, None, o.call.name, o.call.id, args)
            rows.append(dict(zip(_ROW_KEYS, (*tool, o.result, o.error, o.origin), strict=True)))
    for row, d in zip(rows, _row_decisions(rollout), strict=True):
        row.update(rollout=rollout.index, agent_name=d.agent, seed=d.seed)
    return pl.DataFrame(rows, schema=ROLLOUT_SCHEMA)


_ROW_KEYS = (
    "step",
    "recorded_step",
    "kind",
    "name",
    "input_messages",
    "output",
    "tool_name",
    "tool_call_id",
    "tool_args",
    "tool_result",
    "error",
    "origin",
)


def _row_decisions(rollout: Rollout) -> list[ReplayedDecision]:
    return [d for d in rollout.decisions for _ in range(1 + len(d.observations))]


def _assert_same_table(rollout: Rollout, where: str) -> None:
    table, plain = rollout_steps(rollout), _table_row_by_row(rollout)
    assert table.schema == plain.schema, where
    assert table.equals(plain, null_equal=True), where


@pytest.mark.parametrize("name", CASES)
def test_rollout_table_is_the_row_by_row_table(name: str, tmp_path: Path) -> None:
    """The table built column by column (each distinct message converted once, contexts
    gathered in Polars) equals the plain row-by-row construction, on every fixture under
    random plans."""
    rng = random.Random(name)
    for run in runs_in(FRAMEWORKS / name, tmp_path):
        for plan in random_plans(run, rng, 4):
            _assert_same_table(run_sync(replay(run, plan, random_env([]), rollout=1)), name)


def test_rollout_table_keeps_null_empty_shared_and_repeated_contexts() -> None:
    """Null and empty contexts, a shared context extended in place, a plain list repeating a
    message, actions reused as context messages, tool rows and an empty rollout."""
    system, user = Message("system", "s"), Message("user", "u")
    act = Message("assistant", None, (ToolCall("f", {"x": 1.5, "y": [1, "é"]}, "c1"),))
    obs = ReplayedObservation(ToolCall("f", {"x": 1.5}, "c1"), "r", None, "cassette")
    failed = ReplayedObservation(ToolCall("g", "not json", None), None, "boom", "tool:t")
    first = SharedContext([system, user], owner="o")
    second = first.extended([act, obs.message("c1")], "o")
    decisions = [
        ReplayedDecision(0, 0, "a", "llm", first, act, [obs], "recorded", 5),
        ReplayedDecision(1, 1, None, "llm", None, None, [], "policy:p", 6),
        ReplayedDecision(2, 2, "a", "llm", [], Message("assistant", "done"), [], "recorded", 7),
        ReplayedDecision(3, 3, "a", "llm", second, system, [obs, failed], "recorded", 7),
        ReplayedDecision(4, None, "b", "llm", [user, user, system], act, [], "do", 8),
        ReplayedDecision(5, 5, "a", "llm", first, user, [], "recorded", 9),  # shorter again
    ]
    for chosen in (decisions, decisions[1:3], decisions[1:2], [], decisions[3:]):
        rollout = Rollout(3, 1, Plan(), chosen)
        _assert_same_table(rollout, repr([d.index for d in chosen]))
    assert second.starts_with(first) and not first.starts_with(second)
    assert not second.starts_with([system, user]) and not second.starts_with(None)


def test_a_function_outcome_still_gets_the_steps_table() -> None:
    from otelcar.outcome import FunctionOutcome
    from otelcar.testing.scenarios import single_culprit, steps_table

    steps = steps_table(single_culprit(4, 1))
    run = load_run(steps["trace_id"][0], steps)
    seen = []
    outcome = FunctionOutcome(lambda table: seen.append(table.columns) or False)
    rollout = run_sync(replay(run, Plan(), random_env([])))
    assert not judges_events(outcome) and not judges_events(AnyOf((ToolCalled("x"), outcome)))
    assert run_sync(rollout_failed(outcome, rollout)) is False
    assert seen and "input_messages" in seen[0]


@pytest.mark.parametrize("folder", [FRAMEWORKS, EXTERNAL], ids=["frameworks", "external"])
def test_load_run_reads_each_message_as_the_table_holds_it(folder: Path, tmp_path: Path) -> None:
    """``load_run`` shares one object per distinct message (histories repeat theirs): every
    context and action must still equal the row read on its own, shared or not."""
    need_data(folder)
    store = Store(tmp_path / "store")
    files = [p for p in sorted(folder.rglob("*")) if p.is_file() and p.suffix != ".md"]
    import_files([p for p in files if p.suffix not in (".py", ".txt")], store=store)
    decisions = 0
    for trace_id in store.traces()["trace_id"].to_list():
        steps = store.steps(trace_id)
        run = load_run(trace_id, steps)
        rows = {r["step"]: r for r in steps.to_dicts()}
        for decision in run.decisions:
            row = rows[decision.step]
            if decision.context is not None:
                assert decision.context == [Message.from_row(m) for m in row["input_messages"]]
            if row["output"] is not None:
                assert decision.action == Message.from_row(row["output"])
            decisions += 1
    assert decisions > 0
