"""The commitment curve and the step effects (DESIGN.md §6).

For decisions 0..n-1 of a failing run, plan ``P_k`` holds decisions 0..k at their recorded
actions and re-decides every later one; ``P_{-1}`` re-decides everything, ``P_{n-1}`` is the
factual replay. ``q_k = P(fail | P_k)``; the step effect of decision k is
``Δ_k = q_k − q_{k−1}``: how much committing its recorded action raised the failure
probability. The Δ's telescope to ``q_{n−1} − q_{−1}``.

Rollout r of every plan uses the same seeds, so ``P_{k−1}`` and ``P_k`` are compared pair by
pair (a paired design: McNemar's exact test, Newcombe's paired interval). When decision k's
resample repeats its recorded action, the two plans' rollouts are identical from there on (the
request cache serves the same request with the same seed), so such a step costs one policy
call per rollout and shows Δ = 0 exactly.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from otelcar.attribution.stats import (
    Interval,
    holm,
    mcnemar_exact_greater,
    newcombe_paired,
    wilson,
)
from otelcar.replay.plan import Plan
from otelcar.replay.recorded import RecordedRun, same_message


def curve_plans(run: RecordedRun) -> dict[int, Plan]:
    """``P_k`` for k = -1..n-1 (keys are decision indexes; -1 re-decides everything)."""
    steps = [d.step for d in run.decisions]
    plans = {-1: Plan.resample_from(steps[0], steps)} if steps else {}
    for k in range(len(steps)):
        plans[k] = Plan.resample_from(steps[k + 1], steps) if k + 1 < len(steps) else Plan()
    return plans


@dataclass
class PlanOutcomes:
    """Outcomes of one plan by rollout index (None: the rollout failed or was not judged),
    and whether decision ``k + 1`` (the first re-decided one) repeated its recorded action."""

    failures: dict[int, bool | None] = field(default_factory=dict)
    repeated_first: dict[int, bool] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    factual_steps: Any = None  # the factual plan's one rollout, re-judged for every slot

    @property
    def judged(self) -> list[bool]:
        return [f for f in self.failures.values() if f is not None]


@dataclass(frozen=True)
class StepEffect:
    """One decision's row: q_k and the step effect Δ_k with its test."""

    index: int
    step: int
    agent: str | None
    name: str
    n: int
    fails: int
    q: float
    q_ci: Interval
    pairs: int
    only_now: int  # pairs failing with the step held, not when it was re-decided
    only_before: int
    delta: float
    delta_ci: Interval
    p_value: float
    p_adjusted: float = 1.0
    significant: bool = False
    repeats_recorded: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "step": self.step,
            "agent": self.agent,
            "name": self.name,
            "rollouts": self.n,
            "failures": self.fails,
            "q": self.q,
            "q_ci": [self.q_ci.low, self.q_ci.high],
            "pairs": self.pairs,
            "discordant": {
                "fail_only_when_held": self.only_now,
                "fail_only_when_redecided": self.only_before,
            },
            "delta": self.delta,
            "delta_ci": [self.delta_ci.low, self.delta_ci.high],
            "p_value": self.p_value,
            "p_adjusted": self.p_adjusted,
            "significant": self.significant,
            "repeats_recorded_action": self.repeats_recorded,
        }


@dataclass(frozen=True)
class Baseline:
    """q_{-1}: the failure rate when every decision is re-decided."""

    n: int
    fails: int
    q: float
    q_ci: Interval

    def to_dict(self) -> dict[str, Any]:
        return {
            "rollouts": self.n,
            "failures": self.fails,
            "q": self.q,
            "q_ci": [self.q_ci.low, self.q_ci.high],
        }


def estimate(
    run: RecordedRun,
    outcomes: dict[int, PlanOutcomes],
    *,
    confidence: float,
    only: set[int] | None = None,
) -> tuple[Baseline, list[StepEffect]]:
    """q and Δ for every decision (or those in ``only``, whose plan and predecessor plan were
    run) from the plans' outcomes, Holm-adjusted at ``confidence``."""
    base = outcomes[-1].judged
    baseline = Baseline(
        len(base),
        sum(base),
        sum(base) / len(base) if base else float("nan"),
        wilson(sum(base), len(base), confidence),
    )
    effects: list[StepEffect] = []
    for decision in run.decisions:
        k = decision.index
        if only is not None and k not in only:
            continue
        now, before = outcomes[k], outcomes[k - 1]
        judged = now.judged
        fails = sum(judged)
        counts = {(True, True): 0, (False, True): 0, (True, False): 0, (False, False): 0}
        for r, failed in now.failures.items():
            previous = before.failures.get(r)
            if failed is None or previous is None:
                continue
            counts[(previous, failed)] += 1
        both, only_now = counts[(True, True)], counts[(False, True)]
        only_before, neither = counts[(True, False)], counts[(False, False)]
        pairs = both + only_now + only_before + neither
        repeated = before.repeated_first
        effects.append(
            StepEffect(
                index=k,
                step=decision.step,
                agent=decision.agent,
                name=decision.name,
                n=len(judged),
                fails=fails,
                q=fails / len(judged) if judged else float("nan"),
                q_ci=wilson(fails, len(judged), confidence),
                pairs=pairs,
                only_now=only_now,
                only_before=only_before,
                delta=(only_now - only_before) / pairs if pairs else 0.0,
                delta_ci=newcombe_paired(both, only_now, only_before, neither, confidence),
                p_value=mcnemar_exact_greater(only_now, only_before),
                repeats_recorded=bool(repeated) and all(repeated.values()),
            )
        )
    adjusted = holm([e.p_value for e in effects])
    alpha = 1 - confidence
    return baseline, [
        _with(e, p_adjusted=p, significant=p <= alpha)
        for e, p in zip(effects, adjusted, strict=True)
    ]


def _with(effect: StepEffect, **changes: Any) -> StepEffect:
    from dataclasses import replace

    return replace(effect, **changes)


def pick_culprit(effects: list[StepEffect]) -> tuple[StepEffect | None, list[int]]:
    """The significant step with the largest Δ, and every step whose Δ interval overlaps its
    own (they cannot be told apart from it at this confidence)."""
    significant = [e for e in effects if e.significant]
    if not significant:
        return None, []
    culprit = max(significant, key=lambda e: (e.delta, -e.p_adjusted))
    ties = [
        e.step
        for e in effects
        if e is not culprit and e.delta_ci.high >= culprit.delta_ci.low and e.delta > 0
    ]
    return culprit, ties


def separated(culprit: StepEffect, effects: list[StepEffect]) -> bool:
    """Whether the culprit's Δ interval lies above every other step's."""
    return all(e.delta_ci.high < culprit.delta_ci.low for e in effects if e is not culprit)


def point_of_no_return(effects: list[StepEffect], factual_failed: bool) -> int | None:
    """The first step after which q stays at the failure level: every later q interval
    contains the factual outcome (1 for a failing run)."""
    level = 1.0 if factual_failed else 0.0
    for index, effect in enumerate(effects):
        if all(e.q_ci.contains(level) for e in effects[index:]):
            return effect.step
    return None


def repeated_recorded(run: RecordedRun, decision_index: int, action: Any) -> bool:
    """Whether ``action`` equals the recorded action of decision ``decision_index``."""
    recorded = run.decisions[decision_index].action
    return recorded is not None and action is not None and same_message(action, recorded)
