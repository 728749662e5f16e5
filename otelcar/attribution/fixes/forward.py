"""``fix``'s forward validation as anytime-valid sequential tests (issue 37).

Each candidate's fix is rolled out through the rest of the run against the unfixed plan
(re-decide from the step on), rollout ``r`` of both with the same seeds of the stage
``fix.forward`` (paired; the unfixed arm is shared by the candidates, each rollout index
drawn once). A candidate runs in batches of pairs, each as large as the fewest pairs that
could complete its evidence (at most :data:`BATCH`), up to ``rollouts`` per plan, and stops
as soon as the evidence suffices or can no longer suffice:

- *fewer failures*: the e-value of the discordant pairs (the unfixed run failed and the fixed
  one did not, against the other way round; :func:`~otelcar.attribution.stats.
  discordant_e_value`), stopped once ``1/E ≤ alpha / K`` (K candidates: significant under
  Holm whatever the others show) or once that is out of reach within ``rollouts``;
- *a rate at most* ``max_rate`` (PASS only): the e-value that the fixed plan's failure rate
  is below ``max_rate`` (:func:`~otelcar.attribution.stats.rate_below_e_value`), shown once
  it reaches ``1/alpha``; sampling goes on after significance only while that is within reach.

*Validity under optional stopping*: both e-values are test supermartingales under their
nulls, so by Ville's inequality ``1/E`` read at any data-dependent stop is a valid p-value,
and "the rate is below ``max_rate``" claimed whenever its e-value reaches ``1/alpha`` is wrong
with probability at most ``alpha`` whenever the run stopped (a Wilson bound read at a
data-dependent stop would not be). The candidates' ``1/E`` are Holm-adjusted (valid under any
dependence, the shared unfixed arm included). PASS claims both (fewer failures, and a rate
below the bound), so a PASS whose either claim is false has probability at most ``alpha``;
PART claims only the first.
"""

from __future__ import annotations

from otelcar.attribution.experiment.contrast import Pairs
from otelcar.attribution.experiment.rollouts import RolloutArm
from otelcar.attribution.fixes.result import ForwardCheck
from otelcar.attribution.stats import (
    anytime_p_value,
    holm,
    pairs_to_reject,
    rate_below_e_value,
    trials_to_show_below,
)
from otelcar.outcome import Outcome
from otelcar.replay.harness import Environment
from otelcar.replay.plan import Plan
from otelcar.replay.recorded import RecordedRun

#: The most pairs a candidate adds before its evidence is read again.
BATCH = 4


def verdict(p_adjusted: float, below: bool, alpha: float) -> str:
    """PASS: fewer failures (Holm) and the rate shown below ``max_rate``; PART: fewer
    failures only; FAIL otherwise."""
    if p_adjusted > alpha:
        return "FAIL"
    return "PASS" if below else "PART"


def _check(
    fixed: RolloutArm, base: RolloutArm, max_rate: float, alpha: float, confidence: float
) -> ForwardCheck:
    """The evidence so far: pairs, the anytime p-value, whether the rate is shown below."""
    pairs = Pairs.of(fixed.failures, base.failures)  # B: fixed, A: unfixed
    judged = [f for f in fixed.failures.values() if f is not None]
    base_judged = [b for r, b in base.failures.items() if b is not None and r in fixed.failures]
    below = rate_below_e_value(sum(judged), len(judged), max_rate) >= 1 / alpha
    return ForwardCheck(
        failed=sum(judged),
        n=len(judged),
        base_failed=sum(base_judged),
        base_n=len(base_judged),
        pairs=(pairs.both, pairs.only_b, pairs.only_a, pairs.neither),
        p=anytime_p_value(pairs.only_a, pairs.only_b),
        errors=list(fixed.errors),
        confidence=confidence,
        rollouts=len(fixed.failures),
        below=below,
    )


async def validate_forward(
    run: RecordedRun,
    env: Environment,
    plans: list[Plan],
    unfixed: Plan,
    *,
    rollouts: int,
    seed: int,
    outcome: Outcome,
    concurrency: int,
    alpha: float,
    max_rate: float,
    confidence: float,
) -> tuple[list[ForwardCheck], list[str]]:
    """The forward checks of ``plans`` (Holm-adjusted, with verdicts) and the unfixed arm's
    errors; see the module docstring."""

    draw = {"seed": seed, "outcome": outcome, "concurrency": concurrency}
    base, arms = RolloutArm(), [RolloutArm() for _ in plans]
    each = alpha / max(1, len(plans))
    done = [False] * len(plans)
    while True:
        targets: dict[int, int] = {}
        for i, arm in enumerate(arms):
            if done[i]:
                continue
            upto = len(arm.failures)
            check = _check(arm, base, max_rate, alpha, confidence)
            left = rollouts - upto
            favourable, unfavourable = check.pairs[2], check.pairs[1]
            need = pairs_to_reject(favourable, unfavourable, each, most=rollouts)
            if need == 0:  # significant: go on only for the rate bound, while within reach
                need = trials_to_show_below(check.failed, check.n, max_rate, alpha, rollouts)
            if need == 0 or need > left:
                done[i] = True
                continue
            targets[i] = upto + min(need, BATCH, left)
        if not targets:
            break
        await base.extend(run, unfixed, env, upto=max(targets.values()), **draw)
        for i, upto in targets.items():
            await arms[i].extend(run, plans[i], env, upto=upto, **draw)
    checks = [_check(arm, base, max_rate, alpha, confidence) for arm in arms]
    for check, adjusted in zip(checks, holm([c.p for c in checks]), strict=True):
        check.p_adjusted = adjusted
        check.verdict = verdict(adjusted, check.below, alpha)
    return checks, base.errors
