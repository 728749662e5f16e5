"""``attribute``: which step caused the failure, with intervals, multiplicity control and cost.

Method (DESIGN.md §6; ``docs/attribution.md``):

1. **Preflight.** The factual replay must reproduce the recorded run and its failure
   (fidelity check); a passing run is refused unless ``credit=True`` (which step secured the
   success: the outcome is negated).
2. **Curve.** Plans ``P_{-1}..P_{n-1}`` (hold a prefix, re-decide the rest), the same seeds
   for rollout r of every plan. q_k with Wilson intervals; Δ_k from the pairs (McNemar exact,
   one-sided, Newcombe paired interval); Holm across steps.
3. **Adaptive stopping.** Rollouts are added in rounds at pre-declared looks (doubling up to
   ``max_rollouts``); each look tests at ``alpha / number_of_looks`` (Bonferroni alpha
   spending), so stopping at any look keeps the family-wise error at ``alpha``. A round stops
   sampling plans that only inform steps already ruled out; the run stops when the culprit's
   interval lies above every other step's, or at the last look, or when the budget is spent.
   ``rollouts=R`` gives the fixed-R design (one look, full alpha).
4. **Verdict.** The culprit is the significant step with the largest Δ, with the steps that
   cannot be told apart from it; the point of no return; "locked-in" when no step matters
   but the failure is (nearly) certain from the start.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from typing import Any

import polars as pl

from otelcar.attribution.curve import (
    PlanOutcomes,
    curve_plans,
    estimate,
    pick_culprit,
    point_of_no_return,
    separated,
)
from otelcar.attribution.result import AttributionResult
from otelcar.attribution.sampling import extend
from otelcar.attribution.shapley import shapley_values
from otelcar.attribution.stats import look_alpha, look_schedule, wilson
from otelcar.errors import OtelcarError
from otelcar.outcome import Outcome
from otelcar.policies.registry import PolicyRegistry
from otelcar.replay.fidelity import check_fidelity_async
from otelcar.replay.harness import Budget, Environment, Rollout
from otelcar.replay.recorded import RecordedRun


class AttributionError(OtelcarError):
    """Attribution cannot run on this trace (not failing, not reproducible, no decisions)."""


class Negated:
    """An outcome turned around: for ``credit`` (which step secured the success)."""

    def __init__(self, outcome: Outcome) -> None:
        self.inner = outcome

    def describe(self) -> str:
        return f"not ({self.inner.describe()})"

    async def failed(self, steps: pl.DataFrame) -> bool:
        return not await self.inner.failed(steps)


async def harmful_step(run: RecordedRun, outcome: Outcome) -> int | None:
    """The first decision after whose tool calls the recorded prefix already fails."""
    steps = run.steps.sort("step")
    for decision in run.decisions:
        last = decision.step
        tool_rows = steps.filter(pl.col("call_step") == decision.step)["step"].to_list()
        prefix = steps.filter(pl.col("step") <= max([last, *tool_rows]))
        try:
            if await outcome.failed(prefix):
                return decision.step
        except Exception:
            continue
    return None


async def attribute_async(
    run: RecordedRun,
    *,
    registry: PolicyRegistry,
    outcome: Outcome,
    confidence: float = 0.95,
    rollouts: int | None = None,
    first_look: int = 8,
    max_rollouts: int = 64,
    seed: int = 0,
    budget: Budget | None = None,
    concurrency: int = 8,
    credit: bool = False,
    on_rollout: Callable[[Rollout], None] | None = None,
    shapley: bool = False,
    shapley_pairs: int = 4,
    shapley_rollouts: int = 16,
    max_players: int = 8,
    mode: str = "auto",
    bisect_above: int = 40,
) -> AttributionResult:
    """Attribute the failure of ``run`` (see the module docstring for the method).

    ``rollouts``: fixed-R mode; otherwise adaptive with looks from ``first_look`` doubling to
    ``max_rollouts``. ``budget`` caps policy calls/tokens (the result then says so).
    ``shapley``: also Shapley values of the (at most ``max_players``) steps with the largest
    effects, with ``shapley_pairs`` antithetic permutation pairs of ``shapley_rollouts``
    rollouts per coalition.
    """
    started = time.perf_counter()
    if not run.decisions:
        raise AttributionError(f"trace {run.trace_id} has no LLM step to attribute")
    question = "success" if credit else "failure"
    judged = Negated(outcome) if credit else outcome
    fidelity = await check_fidelity_async(run, outcome=judged)
    if not fidelity.reproducible:
        bad = [
            f"step {s.step}: {'; '.join(s.reasons)}"
            for s in fidelity.steps
            if s.verdict == "unreproducible"
        ]
        detail = (
            "; ".join(bad)
            or fidelity.replay_error
            or (
                f"replayed outcome {fidelity.replayed_failed} != "
                f"recorded {fidelity.recorded_failed}"
            )
        )
        raise AttributionError(
            f"trace {run.trace_id} cannot be replayed faithfully: {detail} (see `otelcar replay`)"
        )
    if not fidelity.recorded_failed:
        hint = "" if credit else "; use --credit to ask which step secured its success"
        raise AttributionError(
            f"the recorded run did not {'succeed' if credit else 'fail'} "
            f"under the outcome '{outcome.describe()}'{hint}"
        )
    notes = [
        f"step {s.step}: {'; '.join(s.reasons)}" for s in fidelity.steps if s.verdict == "held-only"
    ]

    env = Environment(registry, budget or Budget())
    plans = curve_plans(run)
    outcomes = {k: PlanOutcomes() for k in plans}
    alpha = 1 - confidence
    looks = [rollouts] if rollouts is not None else look_schedule(first_look, max_rollouts)
    look_confidence = 1 - look_alpha(alpha, len(looks))
    needed = set(plans)
    done_looks: list[int] = []
    baseline = effects = None
    use_bisect = mode == "bisect" or (mode == "auto" and run.horizon > bisect_above)
    if use_bisect:
        found = await _bisect(
            run,
            plans,
            outcomes,
            env,
            rollouts=rollouts or max_rollouts,
            seed=seed,
            outcome=judged,
            concurrency=concurrency,
            confidence=confidence,
            on_rollout=on_rollout,
        )
        if found is not None:
            baseline, effects, searched = found
            done_looks = [rollouts or max_rollouts]
            looks = []
            notes.append(
                f"bisection: {searched} plans evaluated out of {len(plans)}; only the "
                "culprit's row has an effect estimate"
            )
        else:
            notes.append(
                "bisection found a non-monotone curve or a jump smaller than half the "
                "rise: fell back to the full curve"
            )
    for upto in looks:
        await extend(
            run,
            plans,
            outcomes,
            env,
            upto=upto,
            needed=needed,
            seed=seed,
            outcome=judged,
            concurrency=concurrency,
            on_rollout=on_rollout,
        )
        done_looks.append(upto)
        baseline, effects = estimate(run, outcomes, confidence=look_confidence)
        culprit, _ = pick_culprit(effects)
        if culprit is not None and separated(culprit, effects):
            break
        if env.budget.max_calls is not None and env.budget.calls >= env.budget.max_calls:
            notes.append(f"stopped by the budget of {env.budget.max_calls} policy calls")
            break
        if culprit is not None:  # keep sampling only the plans that inform contenders
            contenders = [
                e.index for e in effects if e is culprit or e.delta_ci.high >= culprit.delta_ci.low
            ]
            needed = {k for i in contenders for k in (i, i - 1)}
    assert baseline is not None and effects is not None
    culprit, ties = pick_culprit(effects)
    if culprit is not None:
        verdict = "culprit"
    elif baseline.q_ci.low >= 0.5:
        verdict = "locked-in"
    else:
        verdict = "undecided"
    errors = [e for o in outcomes.values() for e in o.errors]
    if errors:
        notes.append(f"{len(errors)} rollouts failed and were left out of the estimates")
    cost = {
        **env.accounting.to_dict(),
        "wall_s": round(time.perf_counter() - started, 3),
        "rollouts": sum(len(o.failures) for o in outcomes.values()),
    }
    shapley_result = None
    if shapley:
        ranked = sorted(effects, key=lambda e: -e.delta)
        players = sorted(e.index for e in ranked[:max_players])
        if len(effects) > max_players:
            notes.append(f"Shapley values over the {max_players} steps with the largest effects")
        shapley_result = await shapley_values(
            run,
            env,
            judged,
            players=players,
            pairs=shapley_pairs,
            rollouts=shapley_rollouts,
            seed=seed,
            confidence=confidence,
            concurrency=concurrency,
        )
        cost = {
            **env.accounting.to_dict(),
            "wall_s": round(time.perf_counter() - started, 3),
            "rollouts": cost["rollouts"],
        }
    return AttributionResult(
        shapley=shapley_result,
        trace_id=run.trace_id,
        outcome=judged.describe(),
        question=question,
        mode="bisect"
        if use_bisect and not looks
        else ("fixed" if rollouts is not None else "adaptive"),
        confidence=look_confidence,
        requested_confidence=confidence,
        verdict=verdict,
        baseline=baseline,
        steps=effects,
        culprit=culprit,
        ties=ties,
        point_of_no_return=point_of_no_return(effects, True),
        harmful_step=await harmful_step(run, judged),
        looks=done_looks,
        cost=cost,
        notes=notes,
        rollout_errors=errors,
    )


def attribute(run: RecordedRun, **options: Any) -> AttributionResult:
    """Synchronous :func:`attribute_async`."""
    from otelcar.replay.engine import run_sync

    return run_sync(attribute_async(run, **options))


async def _bisect(
    run: RecordedRun,
    plans: dict,
    outcomes: dict,
    env: Environment,
    *,
    rollouts: int,
    seed: int,
    outcome: Outcome,
    concurrency: int,
    confidence: float,
    on_rollout: Callable[[Rollout], None] | None,
) -> tuple[Any, list, int] | None:
    """Find the largest jump of a monotone commitment curve with O(log n) plans.

    The test of the jump found is Bonferroni-corrected for the number of plans evaluated.
    Returns ``None`` when the evaluated points are not monotone or the jump is not the
    largest possible (less than half of the total rise): the caller runs the full curve.
    """

    async def q(k: int) -> float:
        await extend(
            run,
            plans,
            outcomes,
            env,
            upto=rollouts,
            needed={k},
            seed=seed,
            outcome=outcome,
            concurrency=concurrency,
            on_rollout=on_rollout,
        )
        judged = outcomes[k].judged
        return sum(judged) / len(judged) if judged else float("nan")

    lo, hi = -1, run.horizon - 1
    q_lo, q_hi = await q(lo), await q(hi)
    evaluated = {lo: q_lo, hi: q_hi}
    target = (q_lo + q_hi) / 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        evaluated[mid] = await q(mid)
        if evaluated[mid] >= target:
            hi = mid
        else:
            lo = mid
    await q(hi - 1)
    points = sorted(evaluated)
    for a, b in itertools.pairwise(points):
        fa, fb = outcomes[a].judged, outcomes[b].judged
        if wilson(sum(fb), len(fb), confidence).high < wilson(sum(fa), len(fa), confidence).low:
            return None  # a clear decrease: not monotone
    searched = len(evaluated) + 1
    corrected = 1 - (1 - confidence) / searched
    baseline, effects = estimate(run, outcomes, confidence=corrected, only={hi})
    jump = effects[0]
    if (
        jump.delta < (q_hi_total := evaluated[run.horizon - 1] - evaluated[-1]) / 2
        or q_hi_total <= 0
    ):
        return None
    return baseline, effects, searched
