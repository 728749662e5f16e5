"""``fix``: candidate fixes of a decision, each validated on the exact failed context (and,
with ``forward=True``, by full rollouts through the rest of the run against the outcome).

Candidates (in this order; each only when it applies):

1. ``untrusted`` — append to the system prompt a rule that tool results are data, never
   instructions (when the cause ``why`` found lies in a tool result, or ``why`` found none);
2. ``guard`` — append a rule forbidding that specific call unless the user's own message
   asks for it, in words: the tool and the recorded bad call's argument values (the ones the
   same-decision rule is about), never the outcome's patterns
   (:func:`~otelcar.attribution.fixes.candidates.guard_rule`);
3. ``both`` rules;
4. ``source`` — the cause's text removed (what filtering or correcting the content upstream
   would achieve), with the pieces' own removal edits; when ``why`` confirmed no cause, the
   piece whose removal lowered the rate most in its tests, said to be unconfirmed
   (:func:`~otelcar.attribution.fixes.candidates.source_of`);
5. ``forced`` — the most common good alternative the agent took (without the cause, else in
   the base arm) forced at the step (:class:`~otelcar.replay.Do`): a diagnosis ("had it done
   this, would the run succeed?"), validated forward only.

**Decision-level validation.** Each edited context is re-decided ``samples`` times (the base
arm's size when the decision is intermittent) on fresh draws — the seeds of the stage
``fix.validate`` (:class:`~otelcar.attribution.experiment.seeds.SeedSpace`), never the
samples ``why`` chose the cause on — and the bad-decision count is compared with an unfixed
base arm drawn with those same fresh seeds by a one-sided Fisher exact test, Holm-adjusted
across the candidates (strong family-wise control at ``alpha``). **PASS**: significant and the
upper Wilson bound of the fixed rate ≤ ``max_rate``; **PART**: significant only; **FAIL**.

**Forward validation** (``forward=True``, needs an outcome): rollouts of the fix (the edits at
the step and at every later decision whose context carries the same message — the system
prompt or the source text stay fixed downstream — everything from the step on re-decided)
paired with rollouts that only re-decide from the step, the same seeds rollout by rollout
(the stage ``fix.forward``'s, not the attribution's; each rollout index drawn once), run as
anytime-valid sequential tests in batches, at most ``rollouts`` per plan
(:mod:`~otelcar.attribution.fixes.forward`): the e-value on the discordant pairs, Holm across
candidates; PASS also needs the e-value that the fixed failure rate is below ``max_rate``
(not a Wilson bound, which would not hold at a data-dependent stop).

**Best fix**: a candidate that passes (and passes forward when forward was run), preferring
prompt rules, then source fixes, then a forced action; then the lower rate; then the order
above.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from otelcar.attribution.context.decisions import decision_sampler, same_decision
from otelcar.attribution.context.result import WhyResult
from otelcar.attribution.context.why import WhyError, why_async
from otelcar.attribution.context.why import call_floor as why_floor
from otelcar.attribution.experiment.contrast import unpaired
from otelcar.attribution.experiment.floor import CallFloor, refuse_small_budget
from otelcar.attribution.experiment.lost_samples import refusal
from otelcar.attribution.experiment.redecisions import (
    Arm,
    SameDecision,
    Sample,
    Sampler,
    describe_action,
)
from otelcar.attribution.experiment.seeds import SeedSpace
from otelcar.attribution.fixes.candidates import UNTRUSTED_RULE, forced, guard_rule, propose
from otelcar.attribution.fixes.forward import validate_forward
from otelcar.attribution.fixes.forward import verdict as forward_verdict
from otelcar.attribution.fixes.lost import decision_could_change, forward_could_change
from otelcar.attribution.fixes.result import (
    DecisionCheck,
    FixCandidate,
    FixResult,
)
from otelcar.attribution.stats import (
    anytime_p_value,
    holm,
    rate_below_e_value,
    trials_to_show_below,
)
from otelcar.errors import OtelcarError
from otelcar.messages import Message
from otelcar.notes import Note, note
from otelcar.outcome import Outcome
from otelcar.policies.registry import PolicyRegistry
from otelcar.replay.harness import Budget, Environment
from otelcar.replay.plan import EditContext, Plan, Resample
from otelcar.replay.recorded import RecordedDecision, RecordedRun
from otelcar.sync import synchronous

KIND_GROUP = {"untrusted": 0, "guard": 0, "both": 0, "source": 1, "forced": 2}
VERDICT_RANK = {"PASS": 0, "PART": 1, "FAIL": 2, "UNTESTED": 3}
__all__ = ["UNTRUSTED_RULE", "FixError", "fix", "fix_async", "guard_rule", "propose"]


class FixError(OtelcarError):
    """No fix can be proposed or validated for this decision."""


async def _alternative(sampler: Sampler, why: WhyResult) -> Message | None:
    """The most common good action seen: without the cause, else in the base arm (drawn
    again through the environment's cache when ``why`` ran in it)."""
    if why.headline is not None:
        test = why.headline.test
        plan = Plan.from_dict(test.plan)
        edits = [i.edit for i in plan.interventions if isinstance(i, EditContext)]
        arm = await sampler.ensure(edits, test.n, why.headline.parts)
        if (action := arm.alternative()) is not None:
            return action
    arm = await sampler.ensure([], why.base_n)
    return arm.alternative()


def _verdict(p_adjusted: float, upper: float, alpha: float, max_rate: float) -> str:
    if p_adjusted > alpha:
        return "FAIL"
    return "PASS" if upper <= max_rate else "PART"


def call_floor(
    run: RecordedRun,
    *,
    step: int | str,
    samples: int,
    why: WhyResult | None = None,
    attribution: Mapping[str, Any] | None = None,
) -> CallFloor:
    """The fewest policy calls with which :func:`fix_async` can reach any verdict: ``why``'s
    (:func:`otelcar.attribution.context.why.call_floor`; none when ``why`` is given), then
    the validation's unfixed base arm and the arm of at least one candidate (the action
    guard is always proposed), ``samples`` re-decisions each on seeds of their own."""
    own = CallFloor(
        2 * samples,
        f"validating a fix needs {2 * samples} re-decisions ({samples} unfixed, {samples} fixed)",
    )
    if why is not None:
        return own
    return why_floor(run, step=step, samples=samples, attribution=attribution) + own


async def fix_async(
    run: RecordedRun,
    *,
    registry: PolicyRegistry,
    step: int | str = "culprit",
    why: WhyResult | None = None,
    same: str = "outcome",
    outcome: Outcome | None = None,
    samples: int = 10,
    seed: int = 0,
    alpha: float = 0.05,
    confidence: float = 0.95,
    max_rate: float = 0.3,
    forward: bool = False,
    rollouts: int = 20,
    concurrency: int = 8,
    budget: Budget | None = None,
    env: Environment | None = None,
    on_sample: Callable[[Sample], None] | None = None,
    why_options: dict[str, Any] | None = None,
    attribution: Mapping[str, Any] | None = None,
) -> FixResult:
    """Propose and validate fixes of the decision ``why`` explains (run ``why`` first when
    ``why`` is not given; see the module docstring for the method and the verdicts).
    ``attribution``: a saved attribution of this trace that ``step="culprit"`` reads."""
    started = time.perf_counter()
    env = env or Environment(registry, budget or Budget())
    refuse_small_budget(
        env.budget,
        call_floor(run, step=step, samples=samples, why=why, attribution=attribution),
    )
    before = env.accounting.to_dict()
    if why is None:
        why = await why_async(
            run, step=step, registry=registry, same=same, outcome=outcome, samples=samples,
            seed=seed, alpha=alpha, confidence=confidence, env=env, on_sample=on_sample,
            attribution=attribution, **(why_options or {}),
        )  # fmt: skip
    if why.verdict in ("not-reproduced", "too-rare"):
        recurred = (
            "did not recur" if why.verdict == "not-reproduced" else f"recurs in only {why.base_bad}"
        )
        raise FixError(
            f"nothing to fix: step {why.step}'s decision ({why.decision}) {recurred} in "
            f"{why.base_n} re-decisions of its unchanged context"
        )
    if forward and outcome is None:
        raise FixError("--forward needs an outcome ([outcome] in otelcar.toml)")
    decision = run.decision_at_step(why.step)
    assert decision.action is not None
    try:
        rule = same_decision(why.same_spec, decision.action, registry, outcome=outcome)
    except OtelcarError as exc:
        raise WhyError(str(exc)) from None
    seeds = SeedSpace(seed)
    sampler = decision_sampler(
        run, decision, env, rule, seed=seeds.stage("why"), on_sample=on_sample
    )
    candidates, proposed = propose(run, decision, why, rule)
    inferred = run.requests.note()
    notes: list[Note] = [*([inferred] if inferred else []), *proposed]
    alternative = await _alternative(sampler, why)
    if alternative is not None:
        candidates.append(forced(run, decision, alternative))
    n = max(samples, why.base_n) if why.intermittent else samples
    # Validation on fresh draws: its own seeds and its own unfixed base arm, never the
    # samples that chose the cause (the source fix would otherwise be served from the cache).
    validator = decision_sampler(
        run, decision, env, rule, seed=seeds.stage("fix.validate"), on_sample=on_sample
    )
    base_arm = await validator.ensure([], n)
    await _validate_decisions(
        validator, base_arm, candidates, n=n, alpha=alpha, max_rate=max_rate,
        confidence=confidence, notes=notes,
    )  # fmt: skip
    if forward:
        assert outcome is not None
        await _forward_stage(
            run, env, decision, candidates, outcome=outcome, rollouts=rollouts,
            seed=seeds.stage("fix.forward"), concurrency=concurrency, alpha=alpha,
            max_rate=max_rate, confidence=confidence, notes=notes,
        )  # fmt: skip
    elif alternative is not None:
        notes.append(note("forced_needs_forward"))
    best = _best(candidates, forward)
    after = env.accounting.to_dict()
    cost: dict[str, Any] = {k: after[k] - before[k] for k in after}
    cost["wall_s"] = round(time.perf_counter() - started, 3)
    notes += [n for n in env.registry.notes() if n not in notes]
    return _result(
        run, decision, why, rule, base_arm, candidates, best=best, max_rate=max_rate,
        alpha=alpha, samples=n, outcome=outcome, cost=cost, notes=notes, confidence=confidence,
    )  # fmt: skip


def _result(
    run: RecordedRun,
    decision: RecordedDecision,
    why: WhyResult,
    rule: SameDecision,
    base_arm: Arm,
    candidates: list[FixCandidate],
    **fields: Any,
) -> FixResult:
    """The finished result: ``fields`` (best, max_rate, alpha, samples, cost, notes,
    confidence) as given, ``outcome`` described, and what the decision, the explanation and
    the unfixed base arm every candidate was tested against say."""
    outcome = fields.pop("outcome")
    return FixResult(
        trace_id=run.trace_id,
        step=decision.step,
        decision=describe_action(decision.action),
        same=rule.describe(),
        same_spec=why.same_spec,
        cause=why.headline.text if why.headline else None,
        cause_label=why.headline.label if why.headline else None,
        base_bad=base_arm.bad,
        base_n=base_arm.n,
        why_base_bad=why.base_bad,
        why_base_n=why.base_n,
        candidates=candidates,
        outcome=outcome.describe() if outcome is not None else None,
        why=why,
        **fields,
    )


async def _validate_decisions(
    validator: Any,
    base_arm: Any,
    candidates: list[FixCandidate],
    *,
    n: int,
    alpha: float,
    max_rate: float,
    confidence: float,
    notes: list[Note],
) -> None:
    """The decision-level validation stage: every candidate but a forced action is re-decided
    ``n`` times with its edits on the validator's fresh draws, against the unfixed
    ``base_arm``; one-sided tests, Holm across candidates, a verdict each (set on the
    candidate). Lost re-decisions are noted, or refused when they could change a verdict."""
    checks: list[tuple[FixCandidate, DecisionCheck]] = []
    for candidate in candidates:
        if candidate.kind == "forced":
            continue
        plan = Plan.from_dict(candidate.plan)
        edits = [i.edit for i in plan.interventions if isinstance(i, EditContext)]
        arm = await validator.ensure(edits, n)
        check = DecisionCheck(
            bad=arm.bad,
            n=arm.n,
            base_bad=base_arm.bad,
            base_n=base_arm.n,
            p=unpaired(base_arm.bad, base_arm.n, arm.bad, arm.n).p_less,
            instead=dict(arm.instead()),
            alternative=describe_action(alt) if (alt := arm.alternative()) else None,
            confidence=confidence,
            alternative_action=alt,
            lost=len(arm.errors),
            base_lost=len(base_arm.errors),
        )
        candidate.decision = check
        checks.append((candidate, check))
    for (_, check), adjusted in zip(checks, holm([c.p for _, c in checks]), strict=True):
        check.p_adjusted = adjusted
        check.verdict = _verdict(adjusted, check.ci.high, alpha, max_rate)
    errors = [e for a in validator.arms.values() for e in a.errors]
    if errors:
        changing = decision_could_change(
            checks, lambda p, upper: _verdict(p, upper, alpha, max_rate)
        )
        if changing:
            raise refusal(errors, changing, what="validation re-decisions")
        notes.append(note("validation_lost", failed=len(errors)))


async def _forward_stage(
    run: RecordedRun,
    env: Environment,
    decision: Any,
    candidates: list[FixCandidate],
    *,
    outcome: Outcome,
    rollouts: int,
    seed: int,
    concurrency: int,
    alpha: float,
    max_rate: float,
    confidence: float,
    notes: list[Note],
) -> None:
    """The forward stage: every candidate's forward plan against the unfixed re-decision of
    everything from ``decision`` on, ``rollouts`` each on ``seed``'s draws, judged by
    ``outcome`` (:func:`validate_forward`; set on the candidates). Lost rollouts are refused
    when they could change a verdict."""
    later = [d.step for d in run.decisions if d.index >= decision.index]
    plans = []
    for candidate in candidates:
        assert candidate.forward_plan is not None
        plans.append(Plan.from_dict(candidate.forward_plan))
    forwards, base_errors = await validate_forward(
        run,
        env,
        plans,
        Plan(tuple(Resample(s) for s in later)),
        rollouts=rollouts,
        seed=seed,
        outcome=outcome,
        concurrency=concurrency,
        alpha=alpha,
        max_rate=max_rate,
        confidence=confidence,
    )
    if base_errors:
        notes.append(note("unfixed_failed", failed=len(base_errors), first=str(base_errors[0])))
    fewest = trials_to_show_below(0, 0, max_rate, alpha, rollouts)
    if fewest > rollouts:
        needed = trials_to_show_below(0, 0, max_rate, alpha, 10_000)
        notes.append(note("forward_too_few", rollouts=rollouts, max_rate=max_rate, needed=needed))
    for candidate, check in zip(candidates, forwards, strict=True):
        candidate.forward = check

    def judged_again(p: float, failed: int, n: int) -> str:
        return forward_verdict(p, rate_below_e_value(failed, n, max_rate) >= 1 / alpha, alpha)

    changing = forward_could_change(
        [(c, c.forward) for c in candidates if c.forward is not None],
        judged_again,
        lambda pairs: anytime_p_value(pairs.only_a, pairs.only_b),  # the forward test
    )
    if changing:
        lost = [e for c in candidates if c.forward is not None for e in c.forward.errors]
        raise refusal([*base_errors, *lost], changing, what="forward rollouts")


def _best(candidates: list[FixCandidate], forward: bool) -> str | None:
    def passes(c: FixCandidate) -> bool:
        decided = c.decision is None or c.decision.verdict == "PASS"
        forwarded = not forward or (c.forward is not None and c.forward.verdict == "PASS")
        return decided and forwarded and c.verdict == "PASS"

    passing = [c for c in candidates if passes(c)]
    if not passing:
        return None
    order = {c.name: i for i, c in enumerate(candidates)}
    passing.sort(
        key=lambda c: (
            KIND_GROUP[c.kind],
            c.decision.rate if c.decision else 0.0,
            c.forward.rate if c.forward else 0.0,
            order[c.name],
        )
    )
    return passing[0].name


fix = synchronous(fix_async, name="fix")
