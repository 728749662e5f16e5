"""``attribute``: which step caused the failure, with intervals, multiplicity control and cost.

Method (DESIGN.md §6; ``docs/attribution.md``):

1. **Preflight.** The factual replay must reproduce the recorded run and its failure
   (fidelity check); a passing run is refused unless ``credit=True`` (which step secured the
   success: the outcome is negated).
2. **Curve.** Plans ``P_{-1}..P_{n-1}`` (hold a prefix, re-decide the rest), the same seeds
   for rollout r of every plan. q_k with Wilson intervals; Δ_k from the pairs (McNemar exact,
   one-sided, Newcombe paired interval); Holm across steps.
3. **Adaptive stopping.** Rollouts are added in rounds at pre-declared looks (doubling up to
   ``max_rollouts``). Alpha is spent over the looks (union bound), none on looks too small to
   reject anything (:func:`~otelcar.attribution.stats.spending_schedule`); each step is tested
   at the alpha of the look its pairs belong to, so stopping at any look, and giving more
   rollouts to some plans than to others, keeps the family-wise error at ``alpha``. After a
   look only the open steps' plans get more rollouts: not Δ = 0 by construction (their
   re-decisions repeated the recorded action in every rollout so far), not told apart from
   the culprit (paired contrasts), and with a chance of at least ``futility`` of becoming
   significant (conditional power under an optimistic trend). The run stops when no step is
   open (a culprit separated from every step that can still become significant, or a futility
   stop with no culprit), at the last look, or when the budget is spent. Futility only ever
   stops without a rejection, so it cannot raise the error rate. ``rollouts=R`` gives the
   fixed-R design (one look, full alpha). By default (``curve_test="e"``) each step is
   instead tested by the anytime-valid p-value ``1/E`` of its e-value on the discordant pairs
   (:func:`~otelcar.attribution.stats.anytime_p_value`), Holm at the full alpha, at looks
   every ``first_look // 2`` rollouts from the probe: by Ville's inequality a true null's
   p-value is valid whatever look the run stopped at, so no alpha is spent over looks and the
   run can stop between the doubling looks (measured: the same error and power on 400
   common-random-number nulls, a quarter fewer calls; ``docs/attribution.md``).
4. **Verdict.** The culprit is the significant step with the largest Δ, with the steps that
   cannot be told apart from it; the point of no return; "locked-in" when no step matters
   but the failure is (nearly) certain from the start.
"""

from __future__ import annotations

import re
import time
from bisect import bisect_left, bisect_right
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any

import polars as pl

from otelcar.attribution.experiment.floor import CallFloor, refuse_small_budget
from otelcar.attribution.experiment.rollouts import PlanOutcomes, extend
from otelcar.attribution.experiment.seeds import SeedSpace
from otelcar.attribution.stats import (
    look_schedule,
    rejection_chance,
    spending_schedule,
    step_schedule,
)
from otelcar.attribution.steps.bisection import bisect
from otelcar.attribution.steps.curve import (
    Baseline,
    StepEffect,
    bound_closes,
    curve_plans,
    detectable_effect,
    estimate,
    pick_culprit,
    point_of_no_return,
    separation_futile,
    told_apart,
)
from otelcar.attribution.steps.equivalence import (
    DEFAULT_MARGIN,
    detectable,
    upper_bound,
    within_margin,
)
from otelcar.attribution.steps.losses import losses_could_change, lost_pairs
from otelcar.attribution.steps.policy_check import check_stage
from otelcar.attribution.steps.refute import refute
from otelcar.attribution.steps.result import AttributionResult
from otelcar.attribution.steps.shapley import shapley_values
from otelcar.config_checks import outcome_hints
from otelcar.errors import OtelcarError
from otelcar.notes import Note, note
from otelcar.outcome import (
    Outcome,
    RunEvent,
    events_of,
    judges_events,
    judges_exit,
    judges_process,
)
from otelcar.policies.registry import PolicyRegistry
from otelcar.replay.engine import RolloutsFailed
from otelcar.replay.execution import Judged, current_executor
from otelcar.replay.fidelity import check_fidelity_async
from otelcar.replay.harness import Budget, Environment, Rollout
from otelcar.replay.recorded import RecordedRun
from otelcar.sync import synchronous


class AttributionError(OtelcarError):
    """Attribution cannot run on this trace (not failing, not reproducible, no decisions)."""


@dataclass(frozen=True)
class Negated:
    """An outcome turned around: for ``credit`` (which step secured the success)."""

    inner: Outcome

    def describe(self) -> str:
        return f"not ({self.inner.describe()})"

    @property
    def judges_events(self) -> bool:
        return judges_events(self.inner)

    @property
    def judges_process(self) -> bool:
        return judges_process(self.inner)

    @property
    def judges_exit(self) -> bool:
        return judges_exit(self.inner)

    def failed_on_process(self, process: Any) -> bool:
        return not self.inner.failed_on_process(process)  # type: ignore[attr-defined]

    async def failed(self, steps: pl.DataFrame) -> bool:
        return not await self.inner.failed(steps)

    async def failed_on(self, events: list[RunEvent]) -> bool:
        return not await self.inner.failed_on(events)  # type: ignore[attr-defined]


async def harmful_step(run: RecordedRun, outcome: Outcome) -> int | None:
    """The first decision after whose tool calls the recorded prefix already fails; ``None``
    when the prefix before any decision fails already (no decision made it fail: a null
    trace), or none does. An outcome that judges events is given slices of the run's events
    (read from the table once); any other gets each prefix of the steps table."""
    steps = run.steps.sort("step")
    judge = _prefix_judge(steps, outcome)
    if run.decisions:
        try:
            if await judge(run.decisions[0].step, inclusive=False):
                return None
        except Exception:
            pass
    for decision in run.decisions:
        last = decision.step
        tool_rows = steps.filter(pl.col("call_step") == decision.step)["step"].to_list()
        try:
            if await judge(max([last, *tool_rows]), inclusive=True):
                return decision.step
        except Exception:
            continue
    return None


def _prefix_judge(steps: pl.DataFrame, outcome: Outcome) -> Callable[..., Awaitable[bool]]:
    """``judge(limit, inclusive=…)``: whether the steps before ``limit`` (through it when
    ``inclusive``) fail by ``outcome``, exactly as ``outcome.failed`` on that prefix of
    ``steps`` (sorted by step) says."""
    if not judges_events(outcome):

        async def by_table(limit: int, *, inclusive: bool) -> bool:
            kept = pl.col("step") <= limit if inclusive else pl.col("step") < limit
            return bool(await outcome.failed(steps.filter(kept)))

        return by_table
    events = events_of(steps)  # the LLM and tool steps, in step order
    event_steps = steps.filter(pl.col("kind").is_in(["llm", "tool"]))["step"].sort().to_list()

    async def by_events(limit: int, *, inclusive: bool) -> bool:
        end = (bisect_right if inclusive else bisect_left)(event_steps, limit)
        return bool(await outcome.failed_on(events[:end]))  # type: ignore[attr-defined]

    return by_events


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
    on_rollout: Callable[[Judged], None] | None = None,
    shapley: bool = False,
    shapley_pairs: int = 4,
    shapley_rollouts: int = 16,
    max_players: int = 8,
    mode: str = "auto",
    bisect_above: int = 40,
    futility: float = 0.2,
    margin: float = DEFAULT_MARGIN,
    env: Environment | None = None,
    refutation: bool = True,
    refute_rollouts: int = 32,
    policy_check: int = 8,
    curve_test: str = "e",
) -> AttributionResult:
    """Attribute the failure of ``run`` (see the module docstring for the method).

    ``refutation``: with a culprit, run its placebo and fresh-seed recheck
    (:mod:`.refute`, ``refute_rollouts`` rollouts per plan, on seeds of their own).
    ``curve_test``: ``"e"`` (default) tests the adaptive curve's steps by their
    anytime-valid e-values (:func:`~otelcar.attribution.stats.anytime_p_value`, Holm at the
    full alpha, looks every ``first_look // 2`` rollouts); ``"exact"``: exact McNemar with
    alpha spent over the doubling looks (fixed-R and bisection always use it).
    ``policy_check``: with a culprit, re-decide it (and the harmful step when it differs)
    this many times on its recorded context (:func:`.policy_check.check_stage`: the culprit
    on the refutation's seeds, the harmful step on the curve's, so the re-decisions their
    rollouts made there are reused; 0: none).
    ``env``: an environment to run in (its cache and accounting, shared with the command that
    asked: the result's cost is what this attribution spent in it).
    ``rollouts``: fixed-R mode; otherwise adaptive with looks from ``first_look`` doubling to
    ``max_rollouts``. ``budget`` caps policy calls/tokens (the result then says so).
    ``shapley``: also Shapley values of the (at most ``max_players``) steps with the largest
    effects, with ``shapley_pairs`` antithetic permutation pairs of ``shapley_rollouts``
    rollouts per coalition. ``futility``: an adaptive run stops sampling a step (and stops
    with no culprit when no step is left) once its chance of becoming significant at a later
    look, under an optimistic current trend, is below this (0 turns futility off).
    ``margin``: "locked-in" needs every step's upper bound on Δ below it (an equivalence:
    :mod:`.equivalence`); while the failure looks locked in, a step whose bound is not yet
    below it keeps getting rollouts.
    """
    started = time.perf_counter()
    if not run.decisions:
        raise AttributionError(f"trace {run.trace_id} has no LLM step to attribute")
    env = env or Environment(registry, budget or Budget())
    floor = call_floor(
        run, rollouts=rollouts, first_look=first_look, max_rollouts=max_rollouts, mode=mode,
        bisect_above=bisect_above,
    )  # fmt: skip
    refuse_small_budget(env.budget, floor)  # before the fidelity check (a judge's calls)
    spent_before = env.accounting.to_dict()  # a shared env (why/fix --step culprit) counts on
    judged = env.bind(Negated(outcome) if credit else outcome)  # a judge's calls counted too
    notes, factual = await preflight(run, outcome, judged, env, registry, credit=credit)
    design = Design.of(
        run, confidence=confidence, rollouts=rollouts, first_look=first_look,
        max_rollouts=max_rollouts, use_bisect=bisects(run, mode, bisect_above),
        curve_test=curve_test,
    )  # fmt: skip
    design.outcomes[run.horizon - 1].preplayed = factual  # the factual replay runs once
    sample = arm_sampler(run, design, env, judged, concurrency, on_rollout)
    curve = await sample_curve(
        run, design, sample, env, seed=seed, futility=futility, margin=margin, notes=notes
    )
    culprit, ties = pick_culprit(curve.effects, curve.read_from, curve.confidence)
    verdict = decide_verdict(run, design, curve, culprit, margin, notes)
    arms = [*design.outcomes.values(), *design.confirm.values()]
    errors = [e for o in arms for e in o.errors]
    if errors:
        check_losses(
            run, errors, design, curve, culprit, verdict, env, futility=futility, margin=margin,
            notes=notes,
        )  # fmt: skip
    refutations = []
    if refutation and culprit is not None and culprit.index >= 0:
        refutations = await refute_stage(
            run, env, judged, culprit, design, curve, seed=seed, rollouts=refute_rollouts,
            concurrency=concurrency, notes=notes,
        )  # fmt: skip
    harmful = await harmful_step(run, judged)  # a judge's calls, before the cost is read
    checked = await check_stage(
        run, env, culprit=None if culprit is None else culprit.step, harmful=harmful,
        samples=policy_check, seed=seed,
    )  # fmt: skip
    notes.extend(checked.notes)
    shapley_result = None
    if shapley:
        shapley_result = await shapley_stage(
            run, env, judged, curve.effects, max_players=max_players, pairs=shapley_pairs,
            rollouts=shapley_rollouts, seed=seed, confidence=confidence,
            concurrency=concurrency, notes=notes,
        )  # fmt: skip
    cost = _cost(
        env, spent_before, started, arms, refutations, shapley_result, checked.calls
        if checked.check is not None else None,
    )  # fmt: skip
    return _result(
        run, judged, design, curve, verdict=verdict, culprit=culprit, ties=ties,
        harmful=harmful, refutations=refutations, checked=checked, shapley=shapley_result,
        cost=cost, notes=[*notes, *(n for n in registry.notes() if n not in notes)],
        errors=errors, credit=credit, confidence=confidence, fixed=rollouts is not None,
        margin=margin,
    )  # fmt: skip


def _result(
    run: RecordedRun,
    judged: Outcome,
    design: Design,
    curve: Curve,
    *,
    verdict: str,
    culprit: StepEffect | None,
    ties: list[int],
    harmful: int | None,
    refutations: list[Any],
    checked: Any,
    shapley: Any,
    cost: dict[str, Any],
    notes: list[Note],
    errors: list[Any],
    credit: bool,
    confidence: float,
    fixed: bool,
    margin: float,
) -> AttributionResult:
    """The stages' results, put together as the :class:`AttributionResult`."""
    return AttributionResult(
        shapley=shapley,
        trace_id=run.trace_id,
        outcome=judged.describe(),
        question="success" if credit else "failure",
        mode=curve.mode(design, fixed=fixed),
        confidence=curve.confidence,
        requested_confidence=confidence,
        verdict=verdict,
        baseline=curve.baseline,
        steps=curve.effects,
        culprit=culprit,
        ties=ties,
        # an undecided curve has no point of no return to report, only intervals to widen
        point_of_no_return=None
        if verdict == "undecided"
        else point_of_no_return(curve.effects, True),
        harmful_step=harmful,
        margin=margin,
        detectable=None if culprit is not None else detectable(curve.effects, run.horizon),
        refutations=refutations,
        policy_check=checked.check,
        looks=curve.done_looks,
        stop_reason=curve.reported_stop(fixed=fixed),
        cost=cost,
        notes=notes,
        rollout_errors=errors,
    )


def arm_sampler(
    run: RecordedRun,
    design: Design,
    env: Environment,
    judged: Outcome,
    concurrency: int,
    on_rollout: Callable[[Judged], None] | None,
) -> Sampler:
    """The sampling stage's one way to draw: bring the plans ``needed`` of an outcome arm to
    ``upto`` rollouts on a seed's draws, judged by ``judged``, in ``env``."""

    async def sample(
        target: dict[int, PlanOutcomes], arm_seed: int, upto: int, needed: set[int]
    ) -> None:
        stage = "curve" if target is design.outcomes else "confirm"
        await extend(
            run,
            design.plans,
            target,
            env,
            upto=upto,
            needed=needed,
            seed=arm_seed,
            outcome=judged,
            concurrency=concurrency,
            on_rollout=on_rollout,
            stage=stage,
        )

    return sample


async def refute_stage(
    run: RecordedRun,
    env: Environment,
    judged: Outcome,
    culprit: StepEffect,
    design: Design,
    curve: Curve,
    *,
    seed: int,
    rollouts: int,
    concurrency: int,
    notes: list[Note],
) -> list[Any]:
    """The refutation stage (:func:`.refute.refute`: the placebo and the fresh-seed recheck
    of ``culprit``); a note when the culprit did not survive it."""
    refutations = await refute(
        run,
        env,
        judged,
        culprit,
        seed=seed,
        rollouts=rollouts,
        alpha=design.alpha,
        confidence=curve.confidence,
        concurrency=concurrency,
    )
    failed_checks = [r.name for r in refutations if not r.passed]
    if failed_checks:
        notes.append(note("refutation_failed", checks=failed_checks))
    return refutations


async def shapley_stage(
    run: RecordedRun,
    env: Environment,
    judged: Outcome,
    effects: list[StepEffect],
    *,
    max_players: int,
    pairs: int,
    rollouts: int,
    seed: int,
    confidence: float,
    concurrency: int,
    notes: list[Note],
) -> Any:
    """Shapley values of the (at most ``max_players``) steps with the largest effects."""
    ranked = sorted(effects, key=lambda e: -e.delta)
    players = sorted(e.index for e in ranked[:max_players])
    if len(effects) > max_players:
        notes.append(note("shapley_subset", players=max_players))
    return await shapley_values(
        run,
        env,
        judged,
        players=players,
        pairs=pairs,
        rollouts=rollouts,
        seed=seed,
        confidence=confidence,
        concurrency=concurrency,
    )


async def preflight(
    run: RecordedRun,
    outcome: Outcome,
    judged: Outcome,
    env: Environment,
    registry: PolicyRegistry,
    *,
    credit: bool,
) -> tuple[list[Note], Rollout | None]:
    """The preflight stage: the factual replay must reproduce the recorded run and its
    failure (success with ``credit``), else :class:`AttributionError` says why. Returns the
    notes the result starts with (held-only steps, inferred requests, tools no policy
    covers) and that replay, the factual plan's rollout 0 (``None`` where the rollouts run
    the user's agent instead: live replay)."""
    fidelity = await check_fidelity_async(run, outcome=judged, env=env)
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
        unused = [] if credit else outcome_hints(run, outcome)  # the outcome names unused here
        if unused:
            hint = f" ({'; '.join(unused)}){hint}"
        raise AttributionError(
            f"the recorded run did not {'succeed' if credit else 'fail'} "
            f"under the outcome '{outcome.describe()}'{hint}"
        )
    notes = [
        note("held_only", step=s.step, reasons=list(s.reasons))
        for s in fidelity.steps
        if s.verdict == "held-only"
    ]
    if (inferred := run.requests.note()) is not None:
        notes.append(inferred)
    uncovered = tools_without_policy(run, registry)
    live = getattr(current_executor(), "runs_agent_tools", False)
    if uncovered and not live:
        notes.append(note("tools_without_policy", tools=list(uncovered)))
    return notes, None if live else fidelity.replay


@dataclass
class Design:
    """The design stage's choices, fixed before any rollout: the plans and their outcome
    arms (the curve's and bisection's confirmation arm), alpha, the looks, the alpha spent
    at each and the intervals' level, the curve's test, and whether it bisects."""

    plans: dict[int, Any]
    outcomes: dict[int, PlanOutcomes]
    confirm: dict[int, PlanOutcomes]
    alpha: float
    looks: list[int]
    spend: list[float]
    confidence: float
    test: str
    use_bisect: bool

    @classmethod
    def of(
        cls,
        run: RecordedRun,
        *,
        confidence: float,
        rollouts: int | None,
        first_look: int,
        max_rollouts: int,
        use_bisect: bool,
        curve_test: str,
    ) -> Design:
        plans = curve_plans(run)
        alpha = 1 - confidence
        looks = [rollouts] if rollouts is not None else look_schedule(first_look, max_rollouts)
        # Bisection and its fallback to the full curve test on the same rollouts, and which
        # of the two tests is made depends on the data: each gets half of alpha (union bound).
        curve_alpha = alpha / 2 if use_bisect else alpha
        spend = spending_schedule(curve_alpha, looks, run.horizon)
        look_confidence = 1 - max(spend)
        # The adaptive curve's test (not fixed-R's one look, nor bisection's fallback, which
        # tests at its half of alpha over the doubling looks): e-values spend no alpha per
        # look, so it looks every half first look, its intervals at the doubling schedule's
        # level.
        test = "e" if curve_test == "e" and rollouts is None and not use_bisect else "exact"
        if test == "e":
            looks = step_schedule(first_look, max_rollouts, max(1, first_look // 2))
            spend = [max(spend)] * len(looks)
        return cls(
            plans,
            {k: PlanOutcomes() for k in plans},
            {k: PlanOutcomes() for k in plans},
            alpha,
            looks,
            spend,
            look_confidence,
            test,
            use_bisect,
        )


@dataclass(frozen=True)
class Curve:
    """What the sampling stage estimated: the baseline and every step's effect, the arm they
    were read from, the looks done (``looks``: the curve's looks still planned, empty after a
    bisection that answered), the intervals' level and why sampling stopped."""

    baseline: Baseline
    effects: list[StepEffect]
    read_from: dict[int, PlanOutcomes]
    done_looks: list[int]
    looks: list[int]
    confidence: float
    stop_reason: str

    def mode(self, design: Design, *, fixed: bool) -> str:
        """How the effects were estimated: ``bisect`` when bisection answered, else
        ``fixed`` (one look of R rollouts) or ``adaptive``."""
        if design.use_bisect and not self.looks:
            return "bisect"
        return "fixed" if fixed else "adaptive"

    def reported_stop(self, *, fixed: bool) -> str:
        """Why sampling stopped, as the result says it: a fixed-R run's one look is
        ``fixed`` unless the budget or bisection ended it."""
        if not fixed or self.stop_reason in ("budget", "bisection"):
            return self.stop_reason
        return "fixed"


#: ``sample(arm, seed, upto, needed)``: bring the plans ``needed`` of ``arm`` to ``upto``
#: rollouts on ``seed``'s draws.
Sampler = Callable[[dict[int, PlanOutcomes], int, int, set[int]], Awaitable[None]]


async def sample_curve(
    run: RecordedRun,
    design: Design,
    sample: Sampler,
    env: Environment,
    *,
    seed: int,
    futility: float,
    margin: float,
    notes: list[Note],
) -> Curve:
    """The sampling and estimation stage: bisection when the design asks for it (on a
    confirmation arm of its own seeds), and the sequential curve when it did not answer;
    what each says about how it went is appended to ``notes``."""
    looks, done_looks = design.looks, []
    look_confidence, stop_reason = design.confidence, "last-look"
    baseline = effects = None
    read_from = design.outcomes  # the outcomes the effects were estimated from
    if design.use_bisect:
        confirm_seed = SeedSpace(seed).stage("bisect.confirm")
        found = await bisect(
            run,
            design.outcomes,
            lambda k, upto: sample(design.outcomes, seed, upto, {k}),
            design.confirm,
            lambda k, upto: sample(design.confirm, confirm_seed, upto, {k}),
            looks=looks,
            alpha=design.alpha / 2,
        )
        if isinstance(found, str):
            notes.append(note("bisection_fell_back", reason=found))
        else:
            baseline, effects, read_from = found.baseline, found.effects, found.outcomes
            done_looks, look_confidence = found.looks, found.confidence
            looks = []
            stop_reason = "bisection"
            tested = [e.step for e in effects]
            notes.append(
                note("bisection", searched=found.searched, plans=len(design.plans), tested=tested)
            )
    if looks:

        def spent() -> bool:
            return env.budget.max_calls is not None and env.budget.calls >= env.budget.max_calls

        baseline, effects, done_looks, stop_reason = await sequential(
            run,
            design.outcomes,
            lambda upto, needed: sample(design.outcomes, seed, upto, needed),
            alpha=design.alpha,
            looks=looks,
            spend=design.spend,
            futility=futility,
            out_of_budget=spent,
            margin=margin,
            test=design.test,
        )
        if stop_reason == "budget":
            notes.append(note("budget_stop", max_calls=env.budget.max_calls))
        if stop_reason == "futility":
            notes.append(note("futility_stop", rollouts=done_looks[-1], futility=futility))
    assert baseline is not None and effects is not None
    return Curve(baseline, effects, read_from, done_looks, looks, look_confidence, stop_reason)


def decide_verdict(
    run: RecordedRun,
    design: Design,
    curve: Curve,
    culprit: StepEffect | None,
    margin: float,
    notes: list[Note],
) -> str:
    """The verdict stage: ``culprit`` with one; ``locked-in`` on positive evidence
    (re-deciding everything still fails, and every step had the rollouts to show an effect
    the design can detect, its upper bound below ``margin``); else ``undecided``, with a note
    naming the steps whose re-decisions all repeated their recorded action."""
    floor = detectable_effect(
        curve.done_looks or [0],
        (design.alpha if design.test == "e" else design.spend[-1]) / max(1, run.horizon),
        design.test,
    )
    unexplored = [
        e.step for e in curve.effects if e.repeats_recorded and not bound_closes(e, floor)
    ]
    if culprit is not None:
        verdict = "culprit"
    elif curve.baseline.q_ci.low >= 0.5 and not unexplored and within_margin(curve.effects, margin):
        verdict = "locked-in"
    else:
        verdict = "undecided"
    if culprit is None and unexplored:
        notes.append(note("effects_bounded", steps=unexplored))
    return verdict


def check_losses(
    run: RecordedRun,
    errors: list[Any],
    design: Design,
    curve: Curve,
    culprit: StepEffect | None,
    verdict: str,
    env: Environment,
    *,
    futility: float,
    margin: float,
    notes: list[Note],
) -> None:
    """The loss stage: failed rollouts are left out of the estimates (a note counts the pairs
    lost per step); when some assignment of the lost pairs could change the verdict
    (:func:`~otelcar.attribution.steps.losses.losses_could_change`), raise
    :class:`~otelcar.replay.engine.RolloutsFailed` with the commonest reasons and the remedy."""
    effects, alpha = curve.effects, design.alpha
    lost = lost_pairs(effects, curve.read_from, curve.done_looks)
    by_step = [{"step": e.step, "pairs": lost[e.index]} for e in effects if lost[e.index]]
    notes.append(note("rollouts_lost", failed=len(errors), lost=by_step))
    horizon = max(1, run.horizon)
    changing = losses_could_change(
        culprit,
        effects,
        lost,
        alpha,
        looks=() if curve.stop_reason == "budget" else curve.looks,  # the budget leaves none
        thresholds=[(alpha if design.test == "e" else s) / horizon for s in design.spend],
        futility=futility,
        margin=margin if verdict == "locked-in" else None,
    )
    if not changing:
        return
    reasons = Counter(re.sub(r"^rollout \d+: ", "", str(e))[:200] for e in errors).most_common(2)
    remedy = (
        "Register the policies they lacked ([policies] in otelcar.toml), or fix what made them fail"
    )
    if env.budget.max_calls is not None and env.budget.calls >= env.budget.max_calls:
        remedy = (  # rollouts the budget cut are not a policy's fault
            f"The budget of {env.budget.max_calls} policy calls ran out before the look "
            "was complete: raise --budget ([replay] max_calls)"
        )
    raise RolloutsFailed(
        f"{len(errors)} rollouts failed ({'; '.join(f'{r} ({n}×)' for r, n in reasons)})"
        f", and {changing}: no verdict. {remedy}"
    )


def bisects(run: RecordedRun, mode: str, bisect_above: int) -> bool:
    """Whether ``attribute`` bisects the curve: ``mode="bisect"``, or ``"auto"`` on a run of
    more than ``bisect_above`` decisions."""
    return mode == "bisect" or (mode == "auto" and run.horizon > bisect_above)


def call_floor(
    run: RecordedRun,
    *,
    rollouts: int | None = None,
    first_look: int = 8,
    max_rollouts: int = 64,
    mode: str = "auto",
    bisect_above: int = 40,
) -> CallFloor:
    """The fewest policy calls with which :func:`attribute_async` (with these options) can
    reach any verdict on ``run``: its first look complete.

    The full curve's first look gives each of the ``n`` plans ``P_{-1}..P_{n-2}`` (the
    factual plan costs nothing) ``L`` rollouts, and rollout r of ``P_k`` re-decides decision
    ``k+1`` on its recorded context with seed (r, k+1): ``L × n`` requests no two of which
    are the same, so the cache serves none (any later call only adds). Bisection evaluates
    ``P_{-1}`` and at least ``⌊log2 n⌋`` midpoints at its search look ``S``, then confirms on
    at least the first confirmation look ``C`` of fresh rollouts of ``P_{hi-1}``:
    ``S × (1 + ⌊log2 n⌋) + C``. A judge outcome's calls come on top."""
    n = run.horizon
    looks = [rollouts] if rollouts is not None else look_schedule(first_look, max_rollouts)
    if not bisects(run, mode, bisect_above):
        calls = looks[0] * n
        return CallFloor(
            calls,
            f"the first look needs at least {calls}: {looks[0]} rollouts per plan × {n} "
            "decisions re-decided",
        )
    search = looks[min(1, len(looks) - 1)]
    plans = 1 + max(0, n.bit_length() - 1)  # P_{-1} and floor(log2 n) midpoints
    confirm = min(upto for upto in looks if upto >= search)
    calls = search * plans + confirm
    return CallFloor(
        calls,
        f"bisection needs at least {calls}: {search} rollouts × {plans} searched plans, then "
        f"{confirm} confirmation rollouts",
    )


async def sequential(
    run: Any,
    outcomes: dict[int, PlanOutcomes],
    sample: Callable[[int, set[int]], Awaitable[None]],
    *,
    alpha: float,
    looks: list[int],
    spend: list[float],
    futility: float,
    out_of_budget: Callable[[], bool] = lambda: False,
    margin: float | None = None,
    test: str = "exact",
) -> tuple[Baseline, list[StepEffect], list[int], str]:
    """The adaptive design: sample, estimate and review at each look until the culprit is
    decided, no step is left open, the budget is spent or the last look is done.

    ``sample(upto, needed)`` brings the plans in ``needed`` to ``upto`` rollouts. After each
    look the open steps are the ones not told apart from the culprit (when there is one) and
    whose chance of becoming significant at a later look
    (:func:`~otelcar.attribution.stats.rejection_chance`, thresholds ``spend[t] / m``) is at
    least ``futility`` — or, for a step whose re-decisions all repeated its recorded action
    (no pair could show anything yet), whose bound on |Δ| is not yet below the smallest
    effect the last look can detect; only their plans get more rollouts. No open step: stop,
    "separated" with a culprit, "futility" without. With ``margin``, while no step is
    significant and the failure looks locked in (``q_{-1}``'s lower bound at least 0.5), a step
    whose upper bound on Δ is not below it stays open too: "locked-in" needs them all below
    (:mod:`.equivalence`). Validity does not depend on any of these choices
    (see :func:`~otelcar.attribution.steps.curve.estimate`). Returns the last estimates, the looks
    done and why it stopped.
    """
    confidence = 1 - max(spend)
    hypotheses = len(run.decisions)
    # test="e": anytime-valid e-value p-values at the full alpha (curve.estimate)
    thresholds = [alpha if test == "e" else level for level in spend]
    detectable = detectable_effect(looks, thresholds[-1] / max(1, hypotheses), test)
    needed = set(outcomes)
    done: list[int] = []
    baseline = effects = None
    futile: set[int] = set()
    reason = "last-look"
    for stage, upto in enumerate(looks):
        await sample(upto, needed)
        cut = test == "e" and out_of_budget()
        if cut and done:
            # The budget cut this look short: its rollouts are left out, so the estimates
            # stay those of the last complete look (a fixed set of rollouts, valid for any
            # stop) and a rollout the budget cut is not counted as a lost pair.
            _drop_from(outcomes, done[-1])
            reason = "budget"
            break
        done.append(upto)
        baseline, effects = estimate(
            run, outcomes, alpha=alpha, looks=looks, spend=spend, confidence=confidence, test=test
        )
        if cut:  # the first look, cut short: measured, not tested (as the exact design's probe)
            effects = [
                replace(e, p_adjusted=1.0, significant=False, test_alpha=0.0) for e in effects
            ]
        culprit, _ = pick_culprit(effects, outcomes, confidence)
        last = stage == len(looks) - 1
        future = [(looks[t], thresholds[t] / hypotheses) for t in range(stage + 1, len(looks))]
        contenders, futile, tied = _review(
            effects, culprit, outcomes, baseline, last=last, future=future, most=looks[-1],
            confidence=confidence, futility=futility, detectable=detectable, margin=margin,
            test=test,
        )  # fmt: skip
        if culprit is not None and not contenders:
            # separated from every step that can still become significant, but for the steps
            # left beside it as ties
            reason = "tied" if tied else "separated"
            break
        if out_of_budget():
            reason = "budget"
            break
        if last:
            break
        if culprit is None and not contenders:
            reason = "futility"
            break
        if culprit is not None:
            contenders.append(culprit)
        needed = {k for e in contenders for k in (e.index, e.index - 1)}
    assert baseline is not None and effects is not None
    if futile and reason in ("futility", "separated", "tied"):
        effects = [replace(e, futile=e.index in futile) for e in effects]
    return baseline, effects, done, reason


def _review(
    effects: list[StepEffect],
    culprit: StepEffect | None,
    outcomes: dict[int, PlanOutcomes],
    baseline: Baseline,
    *,
    last: bool,
    future: list[tuple[int, float]],
    most: int,
    confidence: float,
    futility: float,
    detectable: float,
    margin: float | None,
    test: str,
) -> tuple[list[StepEffect], set[int], set[int]]:
    """One look's review (:func:`sequential`): the steps still open (contenders), the ones
    dropped as futile, and the ones left beside ``culprit`` as ties."""
    futile: set[int] = set()
    tied: set[int] = set()
    contenders = []
    for e in effects:
        if e is culprit:
            continue
        if culprit is not None and told_apart(culprit, e, outcomes, confidence):
            continue
        if (
            culprit is not None
            and not last
            and separation_futile(
                culprit, e, outcomes, most=most, confidence=confidence, futility=futility
            )
        ):
            tied.add(e.index)  # listed beside the culprit: more rollouts would not part them
            continue
        if e.repeats_recorded:
            # No pair could tell yet: in play until its bound on |Δ| is below what the
            # design can detect (absence of evidence is not a zero effect).
            if not bound_closes(e, detectable):
                contenders.append(e)
            continue
        chance = rejection_chance(e.only_now, e.only_before, e.pairs, future, test)
        if not last and chance < futility:
            futile.add(e.index)
        else:
            contenders.append(e)
    if culprit is None and margin is not None and baseline.q_ci.low >= 0.5:
        contenders += [  # locked-in is not shown yet: their bounds reach the margin
            e for e in effects if e not in contenders and upper_bound(e) >= margin
        ]
    return contenders, futile, tied


def _drop_from(outcomes: dict[int, PlanOutcomes], upto: int) -> None:
    """Forget every plan's rollouts from index ``upto`` on."""
    for plan in outcomes.values():
        for results in (plan.failures, plan.repeated_first):
            for r in [r for r in results if r >= upto]:
                del results[r]


def _cost(
    env: Environment,
    before: dict[str, int],
    started: float,
    arms: list[PlanOutcomes],
    refutations: list[Any],
    shapley: Any,
    policy_check_calls: int | None,
) -> dict[str, Any]:
    """The cost stage: what the attribution spent in ``env`` since ``before`` (every call:
    the fidelity check, the curve, the refutation, the policy check, Shapley), its wall time
    since ``started`` and its rollouts, by stage."""
    return {
        **_spent(env, before),
        "wall_s": round(time.perf_counter() - started, 3),
        "rollouts": sum(len(o.failures) for o in arms)
        + sum(r.rollouts for r in refutations)
        + (shapley.rollouts if shapley is not None else 0),
        **({"shapley_rollouts": shapley.rollouts} if shapley is not None else {}),
        "refutation_rollouts": sum(r.rollouts for r in refutations),
        **({"policy_check_calls": policy_check_calls} if policy_check_calls is not None else {}),
    }


def _spent(env: Environment, before: dict[str, int]) -> dict[str, int]:
    """What ``env`` spent since ``before`` (its accounting then)."""
    return {k: v - before.get(k, 0) for k, v in env.accounting.to_dict().items()}


def tools_without_policy(run: RecordedRun, registry: PolicyRegistry) -> list[str]:
    """The tools the trace calls (or offers) that no registered policy covers: they fall to
    the default, which serves recorded calls only."""
    names = {
        call.name
        for d in run.decisions
        for call in (d.action.tool_calls if d.action else ())
        if call.name
    } | {t["name"] for t in run.tool_definitions() if t.get("name")}
    return sorted(n for n in names if registry.tool_for(n) is registry.default_tool)


attribute = synchronous(attribute_async, name="attribute")
