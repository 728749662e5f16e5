"""The peers' attribution method, rebuilt on otelcar's replay engine, as a benchmark baseline.

``reference/peers.md`` describes the method both public peers (agent_replay and car) share:

1. for each decision ``i``, hold the decisions before ``i`` at their recorded actions and
   re-decide ``i`` and everything after it, ``R`` rollouts (``Plan.resample_from``);
2. ``score_i = P(fail | kept) − P(fail | ablated)``: here ``P(fail | hold ≤ i) −
   P(fail | hold < i)``. "Ablated" is the rollouts of plan ``i``; "kept" (``kept="next"``) is
   the rollouts of plan ``i + 1`` (the same prefix plus decision ``i`` held), or, for the last
   decision, the factual replay (everything held, one rollout: it is deterministic).
   ``kept="factual"`` compares every plan with the single factual outcome instead, which is
   what the peers' "bootstrap CI vs a size-1 factual sample" amounts to;
3. a percentile bootstrap interval of each score (independent resampling of the two samples,
   ``bootstrap`` resamples, seeded);
4. culprit = the latest decision whose interval lies above zero ("point of commitment"); no
   multiplicity control across the ``n`` intervals.

Like the peers, the rollouts of different plans are independent: every plan gets its own base
seed, so otelcar's request cache (keyed by request and seed) never serves one plan's call to
another, and no pairing (common random numbers) is used. Policy calls are counted by the
:class:`~otelcar.replay.Environment`'s accounting, as for otelcar's own ``attribute``; use a
fresh environment per attribution.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from otelcar.outcome import Outcome
from otelcar.policies.registry import PolicyRegistry
from otelcar.replay import Environment, Plan, RecordedRun, run_plan_async

KEPT_CHOICES = ("next", "factual")


def plan_seed(seed: int, decision: int) -> int:
    """The base seed of the plan that re-decides from ``decision`` (independent per plan)."""
    digest = hashlib.sha256(f"peers:{seed}:{decision}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


def bootstrap_interval(
    kept: list[bool],
    ablated: list[bool],
    *,
    resamples: int,
    confidence: float,
    rng: np.random.Generator,
) -> tuple[float, float]:
    """Percentile bootstrap interval of ``mean(kept) − mean(ablated)`` (both resampled with
    replacement, independently). ``(0, 0)`` when either sample is empty."""
    if not kept or not ablated:
        return 0.0, 0.0
    a = np.asarray(kept, dtype=float)
    b = np.asarray(ablated, dtype=float)
    means_a = a[rng.integers(0, a.size, size=(resamples, a.size))].mean(axis=1)
    means_b = b[rng.integers(0, b.size, size=(resamples, b.size))].mean(axis=1)
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(means_a - means_b, [tail, 100 - tail])
    return float(low), float(high)


@dataclass(frozen=True)
class PeerStep:
    """One decision's row: the two samples, the score and its bootstrap interval."""

    index: int
    step: int
    kept_n: int
    kept_fails: int
    ablated_n: int
    ablated_fails: int
    score: float
    ci_low: float
    ci_high: float

    @property
    def significant(self) -> bool:
        """The interval excludes zero on the side of blame (score > 0)."""
        return self.ci_low > 0

    def to_row(self) -> list[Any]:
        return [self.index, round(self.score, 4), round(self.ci_low, 4), round(self.ci_high, 4)]


@dataclass
class PeerResult:
    """The baseline's verdict and what it cost."""

    culprit: int | None  # decision index, or None when no interval excludes zero
    steps: list[PeerStep]
    cost: dict[str, Any] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    @property
    def verdict(self) -> str:
        return "culprit" if self.culprit is not None else "none"


async def peers_attribute_async(
    run: RecordedRun,
    *,
    registry: PolicyRegistry,
    outcome: Outcome,
    rollouts: int = 60,
    seed: int = 0,
    bootstrap: int = 1000,
    confidence: float = 0.95,
    kept: str = "next",
    concurrency: int = 8,
) -> PeerResult:
    """Attribute the failure of ``run`` with the peers' method (see the module docstring)."""
    if kept not in KEPT_CHOICES:
        raise ValueError(f"kept must be one of {KEPT_CHOICES}, not {kept!r}")
    started = time.perf_counter()
    env = Environment(registry)
    steps = [d.step for d in run.decisions]
    factual = await run_plan_async(
        run, Plan(), env, rollouts=1, seed=seed, outcome=outcome, concurrency=concurrency
    )
    errors = list(factual.errors)
    ablated: list[list[bool]] = []
    total_rollouts = len(factual.rollouts)
    for i, step in enumerate(steps):
        result = await run_plan_async(
            run,
            Plan.resample_from(step, steps),
            env,
            rollouts=rollouts,
            seed=plan_seed(seed, i),
            outcome=outcome,
            concurrency=concurrency,
        )
        errors.extend(f"plan {i}: {e}" for e in result.errors)
        ablated.append(result.judged)
        total_rollouts += len(result.rollouts)
    rng = np.random.default_rng([seed, 20260101])
    rows: list[PeerStep] = []
    for i, step in enumerate(steps):
        last = kept == "factual" or i + 1 == len(steps)
        kept_sample = factual.judged if last else ablated[i + 1]
        low, high = bootstrap_interval(
            kept_sample, ablated[i], resamples=bootstrap, confidence=confidence, rng=rng
        )
        mean_kept = sum(kept_sample) / len(kept_sample) if kept_sample else 0.0
        mean_ablated = sum(ablated[i]) / len(ablated[i]) if ablated[i] else 0.0
        rows.append(
            PeerStep(
                index=i,
                step=step,
                kept_n=len(kept_sample),
                kept_fails=sum(kept_sample),
                ablated_n=len(ablated[i]),
                ablated_fails=sum(ablated[i]),
                score=mean_kept - mean_ablated,
                ci_low=low,
                ci_high=high,
            )
        )
    significant = [r.index for r in rows if r.significant]
    cost = {
        **env.accounting.to_dict(),
        "wall_s": round(time.perf_counter() - started, 3),
        "rollouts": total_rollouts,
    }
    return PeerResult(
        culprit=max(significant) if significant else None, steps=rows, cost=cost, errors=errors
    )
