"""The words of the estimators' results (:mod:`otelcar.report.prose` dispatches here):
attribution (with its policy check and refutations), why, fix, aggregate and each trace's
verdict. Loaded on the first such result :mod:`otelcar.report.prose` is asked about."""

from __future__ import annotations

from typing import Any

from otelcar.attribution.aggregate import AggregateResult, TraceVerdict
from otelcar.attribution.context.result import WhyResult
from otelcar.attribution.fixes.result import FixResult
from otelcar.attribution.stats import wilson
from otelcar.attribution.steps.equivalence import POWER, largest_upper
from otelcar.attribution.steps.policy_check import PolicyCheck
from otelcar.attribution.steps.refute import Refutation
from otelcar.attribution.steps.result import AttributionResult
from otelcar.cost import policy_calls_text
from otelcar.report.notes import policy_reason
from otelcar.report.prose import (
    document,
    headline,
    headline_after,
    with_headline,
    worded_data,
)


# -- attribution ------------------------------------------------------------------------------
@document.register
def _(result: AttributionResult) -> dict[str, Any]:
    data = with_headline(worded_data(result), headline(result), after="verdict")
    if result.policy_check is not None:
        data["policy_check"] = document(result.policy_check)
    return data


@headline.register
def _(result: AttributionResult) -> str:
    calls = policy_calls_text(result.cost)
    if result.verdict == "culprit" and result.culprit is not None:
        return _culprit_headline(result, calls)
    if result.verdict == "locked-in":
        target = (
            f" The harmful call was made at step {result.harmful_step}; run "
            f"`otelcar why --step {result.harmful_step}`."
            if result.harmful_step is not None
            else ""
        )
        most = largest_upper(result.steps)
        margin = f", below the margin {result.margin:g}" if result.margin is not None else ""
        return (
            f"Locked in: re-deciding every step still ends in {result.question} "
            f"(q_start={result.baseline.q:.2f} [{result.baseline.q_ci.low:.2f}, "
            f"{result.baseline.q_ci.high:.2f}]), and no step's effect was significant at "
            f"{result.confidence:.1%} with {_rollouts_text(result)}: every step's upper bound "
            f"is Δ ≤ {most:+.2f}{margin}; {_seen(result)}.{target} Cost: {calls}."
        )
    return _undecided_headline(result, calls)


def _culprit_headline(result: AttributionResult, calls: str) -> str:
    c = result.culprit
    assert c is not None
    where = f"step {c.step} ({c.name}" + (f", agent {c.agent}" if c.agent else "") + ")"
    tie = f"; cannot be told apart from steps {list(result.ties)}" if result.ties else ""
    checks = ""
    if result.refutations:
        passed = all(r.passed for r in result.refutations)
        names = " and ".join(r.name for r in result.refutations)
        checks = (
            f" Refutation ({names}): passed."
            if passed
            else " Refutation FAILED: "
            + "; ".join(refutation_summary(r) for r in result.refutations if not r.passed)
            + "."
        )
    return (
        f"Step {c.step} caused the {result.question}: committing {where} raised "
        f"P({result.question}) by {c.delta:+.2f} "
        f"[{c.delta_ci.low:+.2f}, {c.delta_ci.high:+.2f}] "
        f"({result.confidence:.1%} CI, p_adj={c.p_adjusted:.2g}, {c.pairs} paired "
        f"rollouts){tie}.{checks}{_policy_warning(result)} Cost: {calls}."
    )


def _undecided_headline(result: AttributionResult, calls: str) -> str:
    unmeasured = result.unmeasured()
    bounded = [e for e in result.steps if e.repeats_recorded and e.n > 0]
    tail = (
        f"; the re-decisions of steps {[e.step for e in bounded]} always repeated the "
        "recorded action, so their effects are only bounded (up to "
        f"±{max(e.delta_ci.high for e in bounded):.2f})"
        if bounded
        else ""
    )
    if unmeasured:
        cause = (
            "the budget ran out"
            if result.stop_reason == "budget"
            else "every rollout of some plans failed"
        )
        return (
            f"Undecided: {cause} before every step was measured — q at "
            f"{', '.join(unmeasured)} {'has' if len(unmeasured) == 1 else 'have'} no "
            "judged rollout, so the effects there are "
            f"unknown; among the steps measured, none was significant at "
            f"{result.confidence:.1%}{tail}. "
            f"Cost: {calls}."
        )
    above = (
        f"; not locked in: the largest upper bound, Δ ≤ {largest_upper(result.steps):+.2f}, "
        f"is not below the margin {result.margin:g}"
        if result.margin is not None
        and result.baseline.q_ci.low >= 0.5
        and largest_upper(result.steps) >= result.margin
        else ""
    )
    return (
        f"Undecided: no step's effect was significant at {result.confidence:.1%} with "
        f"{_rollouts_text(result)}{tail}{above}; {_seen(result)}. Cost: {calls}."
    )


def _rollouts_text(result: AttributionResult) -> str:
    """``"up to N rollouts per plan"`` (the last look)."""
    most = result.looks[-1] if result.looks else max((e.n for e in result.steps), default=0)
    return f"up to {most} rollouts per plan"


def _seen(result: AttributionResult) -> str:
    """The clause a verdict without a culprit ends with: which effects it would have seen."""
    rollouts = _rollouts_text(result)
    if result.detectable is None:
        return (
            f"no step's effect could have been significant with {rollouts} (a step was tested "
            "only at a look that spends no alpha)"
        )
    return (
        f"any step with Δ ≥ {result.detectable:.2f} would have been found with {POWER:.0%} "
        f"power with {rollouts} (an effect whose pairs all favour it)"
    )


def _policy_warning(result: AttributionResult) -> str:
    """A sentence when the policy check found the policy rarely reproduces the recorded
    action at a step the verdict names (empty otherwise)."""
    check = result.policy_check
    if check is None:
        return ""
    named = {result.culprit.step if result.culprit else None, result.harmful_step}
    flagged = [d for d in check.unfaithful() if d.step in named]
    if not flagged:
        return ""
    shown = ", ".join(f"step {d.step} ({d.reproduced}/{d.n})" for d in flagged)
    differences = sorted({x for d in flagged for x in d.differences or ()})
    why = (
        "its request differs from the recorded one (" + "; ".join(differences) + ")"
        if differences
        else "it was recorded at temperature 0"
    )
    return (
        f" The policy rarely reproduces the recorded action at {shown} and {why}: these "
        "counterfactuals may describe another agent than the one that ran."
    )


def refutation_summary(refutation: Refutation) -> str:
    """One refutation check in a clause: verdict, Δ with its interval, p, pairs, power."""
    r = refutation
    verdict = "passed" if r.passed else "FAILED"
    if not r.passed and r.underpowered:
        verdict = "not confirmed (underpowered)"
    power = (
        f"; finds Δ ≥ {r.detectable:.2f} with 80 % power in {r.max_pairs} pairs"
        if r.detectable is not None
        else ""
    )
    return (
        f"{r.name} {verdict}: Δ {r.delta:+.2f} [{r.delta_ci.low:+.2f}, "
        f"{r.delta_ci.high:+.2f}], p={r.p_value:.2g} (e-value {r.e_value:.3g}), "
        f"{r.pairs} pairs{power}"
    )


# -- the policy check -------------------------------------------------------------------------
@headline.register
def _(check: PolicyCheck) -> str:
    checked = [d for d in check.decisions if d.n]
    bad = check.unfaithful()
    greedy = [d for d in checked if d.greedy and d.reproduced < d.n]
    parts = [
        f"policy check of trace {check.trace_id}: {len(checked)} decision(s) re-decided "
        f"{check.samples}× on their recorded contexts"
    ]
    rare = [d for d in check.decisions if d.rare(check.min_rate)]
    for d in bad:
        parts.append(
            f"the policy rarely reproduces the recorded action at step {d.step} "
            f"({d.reproduced}/{d.n}, {check.confidence:.0%} upper bound below "
            f"{check.min_rate:.0%}) and {policy_reason(d.differences)}: counterfactuals "
            "there may describe another agent"
        )
    if rare:
        steps = ", ".join(f"{d.step} ({d.reproduced}/{d.n})" for d in rare)
        parts.append(
            f"step(s) {steps} reproduced below {check.min_rate:.0%} with the recorded "
            "request and temperature: consistent with an intermittent decision of the "
            "agent that ran"
        )
    if not bad and not rare:
        parts.append(
            f"no decision is shown to be reproduced less than {check.min_rate:.0%} of the time"
        )
    if greedy:
        parts.append(
            f"{len(greedy)} decision(s) recorded at temperature 0 differed on re-decision "
            "(residual nondeterminism)"
        )
    return "; ".join(parts) + f". Cost: {policy_calls_text(check.cost)}."


# -- why --------------------------------------------------------------------------------------
@headline.register
def _(result: WhyResult) -> str:
    calls = policy_calls_text(result.cost)
    base = wilson(result.base_bad, result.base_n, result.confidence)
    rate = (
        f"{result.base_bad}/{result.base_n} = {result.base_rate:.0%} "
        f"[{base.low:.0%}, {base.high:.0%}]"
    )
    if result.verdict == "not-reproduced":
        return (
            f"Step {result.step}: the decision ({result.decision}) did not recur in "
            f"{result.base_n} re-decisions of its unchanged context: nothing to attribute. "
            f"Cost: {calls}."
        )
    if result.verdict == "too-rare":
        return (
            f"Step {result.step}: the decision recurs in only {rate} of re-decisions of its "
            f"unchanged context: too rare to attribute. Cost: {calls}."
        )
    cause = result.headline
    if cause is None:
        what = (
            "only prerequisites were confirmed (the agent re-fetches, asks or stops without them)"
            if result.verdict == "prerequisites-only"
            else "no piece of the context was confirmed as a cause"
        )
        return (
            f"Step {result.step} ({result.decision}, {rate} on its unchanged context): {what}. "
            f"{len(result.tests)} tests. Cost: {calls}."
        )
    test = cause.test
    ci = wilson(test.bad, test.n, test.confidence)
    d = test.effect_ci
    together = " (only together)" if cause.joint else ""
    instead = f"; what the agent did instead: {test.alternative}" if test.alternative else ""
    return (
        f'Step {result.step} ({result.decision}) was caused by "{cause.text}" '
        f"[{cause.label}]{together}: the decision rate falls from {rate} to "
        f"{test.bad}/{test.n} = {test.rate:.0%} [{ci.low:.0%}, {ci.high:.0%}] without it "
        f"(difference {test.effect:+.2f} [{d.low:+.2f}, {d.high:+.2f}], one-sided Fisher "
        f"p = {test.p:.2g} at level {test.level:.2g}){instead}. "
        f"Cost: {calls}."
    )


# -- fix --------------------------------------------------------------------------------------
@headline.register
def _(result: FixResult) -> str:
    calls = policy_calls_text(result.cost)
    base = f"{result.base_bad}/{result.base_n}"
    if result.best is None:
        return (
            f"Step {result.step} ({result.decision}): no candidate fix passed (bad-decision "
            f"rate significantly below the unfixed {base} and its upper "
            f"{result.confidence:.0%} bound ≤ {result.max_rate:.0%}). Cost: {calls}."
        )
    best = result.candidate(result.best)
    text = f"Step {result.step} ({result.decision}): best fix '{best.name}' ({best.description})"
    if best.decision is not None:
        d = best.decision
        text += (
            f": {d.bad}/{d.n} bad re-decisions [{d.ci.low:.0%}, {d.ci.high:.0%}] vs "
            f"{d.base_bad}/{d.base_n} unfixed (Holm-adjusted Fisher p = {d.p_adjusted:.2g})"
        )
    if best.forward is not None:
        f = best.forward
        text += (
            f"; forward: the run fails in {f.failed}/{f.n} rollouts vs "
            f"{f.base_failed}/{f.base_n} unfixed (p = {f.p_adjusted:.2g})"
        )
    return f"{text}. Cost: {calls}."


# -- aggregate --------------------------------------------------------------------------------
@document.register
def _(result: AggregateResult) -> dict[str, Any]:
    data = with_headline(worded_data(result), headline(result), after="confidence")
    data["traces"] = [document(t) for t in result.traces]
    return data


@document.register
def _(verdict: TraceVerdict) -> dict[str, Any]:
    data: dict[str, Any] = dict(verdict.to_dict())
    if verdict.attribution is not None:
        data["headline"] = headline(verdict.attribution)
    return data


@headline.register
def _(result: AggregateResult) -> str:
    n = len(result.attributed)
    counts = result.counts()
    calls = policy_calls_text(result.cost())
    tail = (
        f" ({counts['attributed']} failing traces attributed, {counts['passed']} passed, "
        f"{counts['skipped']} skipped; {calls})"
    )
    if not n:
        return "No failing trace could be attributed" + tail + "."
    flaws = [s for s in result.steps if s.classification == "design flaw"]
    if flaws:
        s = flaws[0]
        effect = ""
        if s.mean_delta is not None:
            effect = f", mean Δ {s.mean_delta:+.2f}"
            if s.mean_delta_ci:
                effect += f" [{s.mean_delta_ci[0]:+.2f}, {s.mean_delta_ci[1]:+.2f}]"
        return (
            f"Design flaw: '{s.identity}' was the culprit in {s.culprit} of {n} failing "
            f"traces ({s.share:.0%} [{s.share_ci[0]:.0%}, {s.share_ci[1]:.0%}]; "
            f"{s.expected:.1f} expected by chance, p_adj={s.p_adjusted:.2g}){effect}" + tail + "."
        )
    blamed = [s for s in result.steps if s.culprit]
    if not blamed:
        return "No trace had a culprit step (locked-in or undecided)" + tail + "."
    return (
        f"No systematic weak step: the culprits look like bad luck (most often "
        f"'{blamed[0].identity}', {blamed[0].culprit} of {n} traces, not significantly "
        f"above chance)" + tail + "."
    )


headline_after(PolicyCheck, "unfaithful_steps")
headline_after(WhyResult, "verdict")
headline_after(FixResult, "base")
