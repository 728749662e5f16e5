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
from otelcar.messages import MESSAGE_DTYPE, Message, ToolCall, encode_arguments
from otelcar.outcome import AllOf, AnyOf, FinalAnswer, ToolCalled, events_of, judges_events
from otelcar.policies import (
    DecisionRequest,
)
from otelcar.policies.digest import MessageChain, messages_digest
from otelcar.replay import Plan, load_run, rollout_table
from otelcar.replay.contexts import ReplayedObservation, SharedContext
from otelcar.replay.harness import ReplayedDecision, Rollout, replay
from otelcar.replay.recorded import (
    ActionRef,
    ContextLink,
    Literal,
    ObsRef,
    RecordedDecision,
    RecordedObservation,
    RecordedRun,
    _context_links,
    _MessageReader,
    _read_contexts,
    _Templates,
)
from otelcar.replay.requests import _message_added_between_decisions
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
    """Both constructions (one dict per row for few context messages, columns gathered in
    Polars for more) give the plain table."""
    plain = _table_row_by_row(rollout)
    for most in (-1, 1 << 30):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(rollout_table, "ROW_BY_ROW_MOST", most)
            table = rollout_steps(rollout)
        assert table.schema == plain.schema, (where, most)
        assert table.equals(plain, null_equal=True), (where, most)


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


def _links_from_scratch(decisions: list[RecordedDecision]) -> list[ContextLink]:
    """The plain construction of the context links: every template read whole."""
    links: list[ContextLink] = []
    parent: RecordedDecision | None = None
    for d in decisions:
        observed = frozenset(i.decision for i in d.template if isinstance(i, ObsRef))
        link = ContextLink(None, 0, observed)
        if parent is not None and d.context is not None:
            shared, earlier = len(parent.template), links[parent.index].observed
            acted = [i.decision for i in parent.template if isinstance(i, ActionRef)]
            if d.template[:shared] == parent.template and all(
                (a in observed) == (a in earlier) for a in acted
            ):
                link = ContextLink(parent.index, shared, observed)
        links.append(link)
        parent = d if d.context is not None else parent
    return links


def _added_from_scratch(decisions: list[RecordedDecision]) -> str | None:
    """The plain reading of "the agent's code adds a message between decisions": every
    template read whole; the basis it gives, else ``None``."""
    for d in decisions[1:]:
        seen = False
        for item in d.template:
            seen |= isinstance(item, ActionRef | ObsRef)
            if seen and isinstance(item, Literal) and item.message.role in ("user", "system"):
                return (
                    f"adds a {item.message.role} message between decisions (before step {d.step})"
                )
    return None


def _assert_read_as_from_scratch(decisions: list[RecordedDecision], where: str) -> None:
    scratch = _Templates(decisions, reuse=False)
    assert [d.template for d in decisions] == [scratch.of(d) for d in decisions], where
    assert list(_context_links(decisions)) == _links_from_scratch(decisions), where
    added = _message_added_between_decisions(RecordedRun("t", decisions, pl.DataFrame()))
    expected = _added_from_scratch(decisions)
    assert (added is None) == (expected is None), where
    assert added is None or expected in added.basis, where


@pytest.mark.parametrize("folder", [FRAMEWORKS, EXTERNAL], ids=["frameworks", "external"])
def test_templates_links_and_structure_read_incrementally_are_read_whole(
    folder: Path, tmp_path: Path
) -> None:
    """A template that extends the previous one reuses its items; the links and the structure
    read only the new items: all equal the plain constructions, on every fixture."""
    need_data(folder)
    store = Store(tmp_path / "store")
    files = [p for p in sorted(folder.rglob("*")) if p.is_file() and p.suffix != ".md"]
    import_files([p for p in files if p.suffix not in (".py", ".txt")], store=store)
    for trace_id in store.traces()["trace_id"].to_list():
        _assert_read_as_from_scratch(load_run(trace_id, store.steps(trace_id)).decisions, trace_id)


def _decision(index: int, context: list[Message], action: Message, result: str) -> RecordedDecision:
    calls = action.tool_calls
    observations = [RecordedObservation(call, result, None) for call in calls]
    return RecordedDecision(
        index, 2 * index, None, "llm", context, action, observations, None, {}, None, None
    )


def _templates_of(decisions: list[RecordedDecision]) -> None:
    templates = _Templates(decisions)
    for d in decisions:
        d.template = templates.of(d)


def test_a_template_is_read_whole_where_reuse_would_explain_it_otherwise() -> None:
    """A call id used again (the shared tool message then answers the later call) and a
    message in a shared context that a later decision produces (an assistant example the
    model then repeats): the templates are read from scratch there, not reused."""
    system, user = Message("system", "s"), Message("user", "u")

    def act(n: int, call_id: str | None = "c") -> Message:
        return Message("assistant", None, (ToolCall("f", {"n": n}, call_id),))

    def answer(text: str, call_id: str | None = "c") -> Message:
        return Message("tool", text, tool_call_id=call_id)

    reused = [system, user, act(0), answer("r0")]
    cases = {
        "call id used again": [
            _decision(0, [system, user], act(0), "r0"),
            _decision(1, reused, act(1), "r1"),
            _decision(2, [*reused, act(1), answer("r1")], act(2), "r2"),
        ],
        "example repeated": [
            _decision(
                0, [system, Message("assistant", "ok"), user], Message("assistant", "ok"), ""
            ),
            _decision(
                1,
                [system, Message("assistant", "ok"), user, Message("assistant", "ok"), user],
                act(1),
                "r",
            ),
        ],
        "no call ids": [
            _decision(0, [system, user], act(0, None), "r0"),
            _decision(1, [system, user, act(0, None), answer("r0", None)], act(1, None), "r1"),
            _decision(
                2,
                [
                    system,
                    user,
                    act(0, None),
                    answer("r0", None),
                    act(1, None),
                    answer("r1", None),
                    user,
                ],
                act(2, None),
                "r2",
            ),
        ],
    }
    cases["an action's results referenced later"] = [
        _decision(0, [system, user], act(0, "c0"), "r0"),
        _decision(1, [system, user, act(0, "c0")], act(1, "c1"), "r1"),
        _decision(
            2,
            [system, user, act(0, "c0"), answer("r0", "c0"), act(1, "c1"), answer("r1", "c1")],
            act(2, "c2"),
            "r2",
        ),
    ]
    for where, decisions in cases.items():
        _templates_of(decisions)
        _assert_read_as_from_scratch(decisions, where)
    first, later = cases["call id used again"][1:]
    assert first.template[3] == ObsRef(0, 0, answer("r0")) and later.template[3] == ObsRef(
        1, 0, answer("r0")
    )
    assert isinstance(cases["example repeated"][1].template[1], ActionRef)
    linked = _context_links(cases["an action's results referenced later"])
    assert [link.parent for link in linked] == [None, 0, None]


def test_a_context_is_read_as_the_previous_one_only_when_it_starts_with_it() -> None:
    """Each context reads as its own row; one that starts with the previous row's messages
    shares their objects. A message whose only difference is a missing against an empty
    text, a rewritten history and an uncaptured row in between are not taken as the same."""

    def row(role: str, content: str | None) -> dict[str, Any]:
        return {
            "role": role,
            "content": content,
            "tool_calls": [],
            "tool_call_id": None,
            "name": None,
            "reasoning": None,
        }

    contexts = [
        [row("system", "s"), row("user", None)],
        [row("system", "s"), row("user", None), row("assistant", "a")],
        [row("system", "s"), row("user", ""), row("assistant", "a")],
        [row("system", "s"), row("user", ""), row("assistant", "a"), row("user", "more")],
        [row("system", "rewritten"), row("user", "")],
        [row("system", "rewritten"), row("user", ""), row("user", "again")],
        None,
        [row("system", "rewritten"), row("user", ""), row("user", "again"), row("user", "x")],
    ]
    captured = [True, True, True, True, True, False, True, True]
    llm = pl.DataFrame(
        {"input_messages": contexts, "content_captured": captured},
        schema={"input_messages": pl.List(MESSAGE_DTYPE), "content_captured": pl.Boolean},
    )
    read = _read_contexts(llm, _MessageReader())
    for got, rows, kept in zip(read, contexts, captured, strict=True):
        expected = None if rows is None or not kept else [Message.from_row(m) for m in rows]
        assert got == expected
    assert read[1] is not None and read[0] is not None and read[1][1] is read[0][1]
    assert read[2] is not None and read[2][1].content == "" and read[3][:3] == read[2]
    assert read[5] is None and read[7] is not None and read[7][2].content == "again"
