"""Scripted stochastic agents with a planted answer, for tests and accuracy benchmarks.

A :class:`Scenario` describes an agent of ``n`` decisions. Decision i calls the tool ``act``
with ``{"i": i, "v": choice}``; the recorded run took ``recorded[i]``; when re-decided, the
policy draws the choice from ``choices[i]`` (a list of ``(value, probability)``) with the
rollout's seed, so rollouts are reproducible. The run *fails* according to ``fails`` applied
to the choices made (e.g. "some step chose BAD"). The scenario's ``answer`` is the step
(index into the decisions) a correct attribution must name, or ``None`` (no culprit).

:func:`build` turns a scenario into a steps table (through the real trajectory builder), a
policy registry and an outcome, ready for :func:`otelcar.attribution.attribute`.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from otelcar.messages import Message, ToolCall
from otelcar.outcome import FunctionOutcome
from otelcar.policies.base import DecisionRequest
from otelcar.policies.python import CallableLLMPolicy, CallableToolPolicy, KeywordToolPolicy
from otelcar.policies.registry import PolicyRegistry
from otelcar.schema import STEPS_SCHEMA
from otelcar.testing.genai_spans import message_parts, span
from otelcar.trajectory import build_trace

TRACE_ID = "5c0e5c0e5c0e5c0e5c0e5c0e5c0e5c0e"
Choices = Sequence[tuple[str, float]]


@dataclass
class Scenario:
    """A planted-culprit agent (see the module docstring)."""

    name: str
    recorded: list[str]
    choices: list[Choices]
    fails: Callable[[list[str]], bool]
    answer: int | None
    notes: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    #: Choices whose tool call fails (the tool policy raises): a rollout that makes one is
    #: lost, as when a branch calls a tool the environment cannot serve.
    broken: frozenset[str] = frozenset()
    #: More arguments of every ``act`` call; when given, ``act`` is a real keyword tool
    #: function (:class:`~otelcar.policies.python.KeywordToolPolicy`) that must receive them.
    arguments: dict[str, Any] = field(default_factory=dict)

    @property
    def n(self) -> int:
        return len(self.recorded)


def _action(i: int, value: str, extra: dict[str, Any] | None = None) -> Message:
    arguments = {"i": i, "v": value, **(extra or {})}
    return Message("assistant", None, (ToolCall("act", arguments, f"call_{i}"),))


def tool_result(arguments: Any) -> str:
    """The environment of the scripted agent: deterministic."""
    return f"done {arguments['i']}:{arguments['v']}" if isinstance(arguments, dict) else "done"


def steps_table(scenario: Scenario) -> pl.DataFrame:
    """The recorded run as a steps table (built by the real trajectory builder)."""
    context = [Message("system", f"scripted agent {scenario.name}"), Message("user", "go")]
    spans = [
        span(
            TRACE_ID,
            1,
            "invoke_agent scripted",
            {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "scripted"},
            None,
            start_ns=0,
        )
    ]
    t = 10
    for i, value in enumerate(scenario.recorded):
        action = _action(i, value, scenario.arguments)
        spans.append(
            span(
                TRACE_ID,
                100 + i,
                "chat scripted",
                {
                    "gen_ai.operation.name": "chat",
                    "gen_ai.request.model": "scripted",
                    "gen_ai.request.temperature": 1.0,
                    "gen_ai.input.messages": json.dumps([message_parts(m) for m in context]),
                    "gen_ai.output.messages": json.dumps([message_parts(action)]),
                },
                1,
                start_ns=t,
            )
        )
        result = tool_result({"i": i, "v": value})
        called = {"i": i, "v": value, **scenario.arguments}
        spans.append(
            span(
                TRACE_ID,
                1000 + i,
                "execute_tool act",
                {
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": "act",
                    "gen_ai.tool.call.id": f"call_{i}",
                    "gen_ai.tool.call.arguments": json.dumps(called),
                    "gen_ai.tool.call.result": result,
                },
                1,
                start_ns=t + 6,
            )
        )
        context = [*context, action, Message("tool", result, tool_call_id=f"call_{i}")]
        t += 20
    final = Message("assistant", "finished")
    spans.append(
        span(
            TRACE_ID,
            9999,
            "chat scripted",
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": "scripted",
                "gen_ai.input.messages": json.dumps([message_parts(m) for m in context]),
                "gen_ai.output.messages": json.dumps([message_parts(final)]),
            },
            1,
            start_ns=t,
        )
    )
    return pl.DataFrame(build_trace(TRACE_ID, spans).steps, schema=STEPS_SCHEMA)


def _decide(scenario: Scenario) -> Callable[[DecisionRequest], Message]:
    def decide(request: DecisionRequest) -> Message:
        i = sum(1 for m in request.messages if m.role == "assistant")
        if i >= scenario.n:
            return Message("assistant", "finished")
        rng = random.Random(request.seed)
        draw, total = rng.random(), 0.0
        for value, probability in scenario.choices[i]:
            total += probability
            if draw < total:
                return _action(i, value, scenario.arguments)
        return _action(i, scenario.choices[i][-1][0], scenario.arguments)

    return decide


def _choices_made(steps: pl.DataFrame) -> list[str]:
    # Read as Python lists, not filtered in Polars: a rollout's table has a few rows, and the
    # grader runs once per rollout (a filter costs twenty times as much here).
    made = {}
    columns = (steps[name].to_list() for name in ("kind", "tool_name", "tool_args"))
    for kind, name, text in zip(*columns, strict=True):
        if kind == "tool" and name == "act":
            arguments = json.loads(text)
            made[arguments["i"]] = arguments["v"]
    return [made[i] for i in sorted(made)]


def build(scenario: Scenario) -> tuple[pl.DataFrame, PolicyRegistry, FunctionOutcome]:
    """Steps table, policies and outcome of a scenario."""
    registry = PolicyRegistry()
    registry.register("llm", CallableLLMPolicy(_decide(scenario), name="scripted"))

    def act(request: Any) -> str:
        if isinstance(request.arguments, dict) and request.arguments.get("v") in scenario.broken:
            raise RuntimeError(f"tool act failed on {request.arguments['v']!r}")
        return tool_result(request.arguments)

    if scenario.arguments:
        expected = set(scenario.arguments)

        def act_keywords(*, i: int, v: str, **named: Any) -> str:
            if set(named) != expected:
                raise TypeError(f"act got {sorted(named)}, not {sorted(expected)}")
            if v in scenario.broken:
                raise RuntimeError(f"tool act failed on {v!r}")
            return tool_result({"i": i, "v": v})

        registry.register("tool:act", KeywordToolPolicy(act_keywords, name="act"))
    else:
        registry.register("tool:act", CallableToolPolicy(act, name="act"))
    outcome = FunctionOutcome(
        lambda steps: scenario.fails(_choices_made(steps)), name=f"{scenario.name} fails"
    )
    return steps_table(scenario), registry, outcome


# -- a catalogue of scenarios ---------------------------------------------------------------
NOISE = [("ok", 0.6), ("ok2", 0.3), ("ok3", 0.1)]


def single_culprit(n: int, culprit: int, p_bad: float = 0.05) -> Scenario:
    """One step chose BAD (p_bad when re-decided); failure iff any step chose BAD."""
    recorded = ["ok"] * n
    recorded[culprit] = "BAD"
    choices: list[Choices] = [NOISE for _ in range(n)]
    choices[culprit] = [("BAD", p_bad), ("ok", 1 - p_bad)]
    return Scenario(f"single-{n}-{culprit}", recorded, choices, lambda c: "BAD" in c, culprit)


def self_correction_trap(n: int, culprit: int, fix_step: int, p_fix: float = 0.1) -> Scenario:
    """The real mistake at ``culprit``; a later step *could* repair it (p_fix), but in the
    recorded run it did not. Failure iff BAD and no FIX after it. The later step shows a small
    positive Δ too; a 'latest significant step' rule blames it."""
    recorded = ["ok"] * n
    recorded[culprit] = "BAD"
    choices: list[Choices] = [NOISE for _ in range(n)]
    choices[culprit] = [("BAD", 0.05), ("ok", 0.95)]
    choices[fix_step] = [("FIX", p_fix), ("ok", 1 - p_fix)]

    def fails(c: list[str]) -> bool:
        return "BAD" in c and "FIX" not in c[c.index("BAD") :]

    return Scenario(f"trap-{n}-{culprit}-{fix_step}", recorded, choices, fails, culprit)


def intermittent(n: int, culprit: int, p_bad: float = 0.3) -> Scenario:
    """The culprit step goes wrong 30% of the time when re-decided."""
    scenario = single_culprit(n, culprit, p_bad)
    scenario.name = f"intermittent-{n}-{culprit}"
    return scenario


def null_case(n: int) -> Scenario:
    """No step matters: the run fails whatever is chosen (the right answer: no culprit)."""
    return Scenario(f"null-{n}", ["ok"] * n, [NOISE for _ in range(n)], lambda c: True, None)


def and_case(n: int, a: int, b: int) -> Scenario:
    """Failure needs BAD at both ``a`` and ``b`` (credit shared: Shapley splits it)."""
    recorded = ["ok"] * n
    recorded[a] = recorded[b] = "BAD"
    choices: list[Choices] = [NOISE for _ in range(n)]
    choices[a] = choices[b] = [("BAD", 0.05), ("ok", 0.95)]
    return Scenario(
        f"and-{n}-{a}-{b}",
        recorded,
        choices,
        lambda c: c[a] == "BAD" and c[b] == "BAD",
        b,
        extra={"players": (a, b)},
    )


def or_case(n: int, a: int, b: int) -> Scenario:
    """Failure when either ``a`` or ``b`` is BAD."""
    recorded = ["ok"] * n
    recorded[a] = recorded[b] = "BAD"
    choices: list[Choices] = [NOISE for _ in range(n)]
    choices[a] = choices[b] = [("BAD", 0.05), ("ok", 0.95)]
    return Scenario(
        f"or-{n}-{a}-{b}",
        recorded,
        choices,
        lambda c: c[a] == "BAD" or c[b] == "BAD",
        a,
        extra={"players": (a, b)},
    )


def lost_branch(
    n: int = 5,
    culprit: int = 1,
    smaller: int = 3,
    *,
    p_bad: float = 0.3,
    p_ok: float = 0.15,
    p_smaller: float = 0.7,
) -> Scenario:
    """Lost rollouts that bias the culprit's effect down (issue 37, point 1).

    Failure needs BAD at ``culprit`` and BAD2 at the later step ``smaller``. Re-decided, the
    culprit repeats BAD with ``p_bad``, takes the good branch ``ok`` with ``p_ok`` and
    otherwise ``alt``, whose tool call fails (the rollout is lost); ``smaller`` repeats BAD2
    with ``p_smaller``. True effects: Δ_culprit = p_smaller · (1 − p_bad) (0.49),
    Δ_smaller = 1 − p_smaller (0.3). On the surviving pairs the culprit's effect is
    p_ok · p_smaller / (p_bad + p_ok) (0.23): judged on the survivors alone, the smaller step
    looks like the culprit. The right answer is the culprit, or a refusal (the lost pairs
    could change which step is named); naming ``smaller`` is wrong.
    """
    recorded = ["ok"] * n
    recorded[culprit], recorded[smaller] = "BAD", "BAD2"
    choices: list[Choices] = [NOISE for _ in range(n)]
    choices[culprit] = [("BAD", p_bad), ("ok", p_ok), ("alt", 1 - p_bad - p_ok)]
    choices[smaller] = [("BAD2", p_smaller), ("ok", 1 - p_smaller)]
    return Scenario(
        f"lost-branch-{n}-{culprit}-{smaller}",
        recorded,
        choices,
        lambda c: c[culprit] == "BAD" and c[smaller] == "BAD2",
        culprit,
        extra={"smaller": smaller},
        broken=frozenset({"alt"}),
    )


def weak_locked_in(
    n: int = 5, culprit: int = 2, p_bad: float = 0.7, p_early: float = 0.7
) -> Scenario:
    """A weak culprit under a failure that looks locked in (issue 37, point 4).

    The run fails when the culprit chose BAD (re-decided: ``p_bad``) or step 0 chose Y
    (re-decided: ``p_early``; recorded: ok). q_{-1} = p_early + (1 − p_early) · p_bad (0.91):
    re-deciding everything nearly always fails, yet the culprit's Δ is 1 − p_bad (0.3). The
    right answer is the culprit, or undecided; "locked-in" (no step matters) is wrong.
    """
    recorded = ["ok"] * n
    recorded[culprit] = "BAD"
    choices: list[Choices] = [NOISE for _ in range(n)]
    choices[0] = [("Y", p_early), ("ok", 1 - p_early)]
    choices[culprit] = [("BAD", p_bad), ("ok", 1 - p_bad)]
    return Scenario(
        f"weak-locked-{n}-{culprit}",
        recorded,
        choices,
        lambda c: c[culprit] == "BAD" or c[0] == "Y",
        culprit,
    )


#: Argument names otelcar's own call paths use (``call_user(function, role, *, args,
#: kwargs)``, methods' ``self``, a request's ``seed`` and ``step``): a tool may use them too.
INTERNAL_NAMES: dict[str, Any] = {
    "role": "admin",
    "function": "grant",
    "args": ["--force"],
    "kwargs": {"scope": "all"},
    "self": "me",
    "seed": 7,
    "step": 2,
    "name": "act",
    "request": "r-1",
}


def internal_names(n: int = 5, culprit: int = 2, p_bad: float = 0.05) -> Scenario:
    """A single culprit whose tool takes arguments named like otelcar's internals
    (:data:`INTERNAL_NAMES`), called as keywords by a real tool function (issue 37: a tool
    argument named ``role`` broke every rollout)."""
    scenario = single_culprit(n, culprit, p_bad)
    scenario.name = f"internal-names-{n}-{culprit}"
    scenario.arguments = dict(INTERNAL_NAMES)
    return scenario


def tie_case(n: int, a: int, b: int) -> Scenario:
    """Two equal culprits (issue 37, point 3). Steps ``a < b`` chose BAD (p 0.05 each when
    re-decided); the last decision is a fair coin (``heads``/``tails``). The run fails when
    both are BAD, or when one is and the coin came up heads. q_{-1} ≈ 0.05, holding ``a``
    gives ≈ 0.525, holding ``b`` too gives 1: Δ_a ≈ Δ_b ≈ 0.475. The right answer names one
    and lists the other as a tie (``answer`` is ``a``; ``extra["tie"]`` is ``b``)."""
    coin = n - 1
    if not 0 <= a < b < coin:
        raise ValueError(f"tie_case needs 0 <= a < b < n - 1, got a={a}, b={b}, n={n}")
    recorded = ["ok"] * n
    recorded[a] = recorded[b] = "BAD"
    recorded[coin] = "tails"
    choices: list[Choices] = [NOISE for _ in range(n)]
    choices[a] = choices[b] = [("BAD", 0.05), ("ok", 0.95)]
    choices[coin] = [("heads", 0.5), ("tails", 0.5)]

    def fails(c: list[str]) -> bool:
        bad = (c[a] == "BAD") + (c[b] == "BAD")
        return bad == 2 or (bad == 1 and c[coin] == "heads")

    return Scenario(f"tie-{n}-{a}-{b}", recorded, choices, fails, a, extra={"tie": b})
