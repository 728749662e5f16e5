"""The rollout engine: R rollouts of a plan, concurrently, seeded, cached, budgeted.

Rollout ``r`` of every plan uses the seeds derived from (seed, r, decision), so comparing two
plans rollout by rollout pairs them (common random numbers). Rollouts run concurrently
(``concurrency``), each policy bounded by its own ``max_concurrency``; a request cache keyed by
(policy, request, seed) serves repeats for free; a :class:`~otelcar.replay.harness.Budget`
stops cleanly with partial results; a failed rollout is counted and reported. Once more than
half of a command's rollouts have failed (from :data:`MIN_ROLLOUTS_FOR_FAILURE_CHECK` on,
counted over every plan run in the environment), :class:`RolloutsFailed` stops it: no estimate
from what is left would mean anything, and the message says what the failures were.

Where the rollouts run is the executor's business (:mod:`otelcar.executors`): in this process
by default, on a Ray cluster with :class:`~otelcar.executors.ray_executor.RayExecutor`; the
results are the same for the same seeds.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import polars as pl

from otelcar.errors import OtelcarError
from otelcar.outcome import Outcome
from otelcar.replay.execution import Judged, current_executor
from otelcar.replay.harness import Environment, Rollout
from otelcar.replay.plan import Plan
from otelcar.replay.recorded import RecordedRun
from otelcar.replay.rollout_table import ROLLOUT_SCHEMA, rollout_steps
from otelcar.sync import run_sync

if TYPE_CHECKING:
    from otelcar.replay.execution import Executor

#: Rollouts a command runs before the share of failed ones is checked.
MIN_ROLLOUTS_FOR_FAILURE_CHECK = 8
#: The share of failed rollouts above which a command stops.
MAX_FAILED_SHARE = 0.5


class RolloutsFailed(OtelcarError):
    """More than :data:`MAX_FAILED_SHARE` of a command's rollouts failed; the message counts
    them and quotes the most common reasons."""


@dataclass
class RolloutSet:
    """The rollouts of one plan, their outcomes and what they cost."""

    plan: Plan
    rollouts: list[Rollout]
    failures: list[bool | None]  # per rollout: outcome (True = failed), None when not judged
    wall_s: float
    cost: dict[str, int] = field(default_factory=dict)

    @property
    def judged(self) -> list[bool]:
        return [f for f in self.failures if f is not None]

    @property
    def n_failed_outcome(self) -> int:
        return sum(self.judged)

    @property
    def errors(self) -> list[str]:
        return [f"rollout {r.index}: {r.error}" for r in self.rollouts if not r.ok]

    def steps(self) -> pl.DataFrame:
        """All rollouts as one table (column ``rollout`` tells them apart)."""
        frames = [rollout_steps(r) for r in self.rollouts]
        return pl.concat(frames) if frames else pl.DataFrame(schema=ROLLOUT_SCHEMA)

    def summary(self) -> dict[str, Any]:
        judged = self.judged
        return {
            "plan": self.plan.to_dict(),
            "rollouts": len(self.rollouts),
            "judged": len(judged),
            "failed": sum(judged),
            "errors": self.errors,
            "status": {
                s: sum(r.status == s for r in self.rollouts)
                for s in sorted({r.status for r in self.rollouts})
            },
            "wall_s": round(self.wall_s, 3),
            "cost": self.cost,
        }


async def run_plan_async(
    run: RecordedRun,
    plan: Plan,
    env: Environment,
    *,
    rollouts: int,
    seed: int = 0,
    outcome: Outcome | None = None,
    concurrency: int = 8,
    first_rollout: int = 0,
    on_rollout: Callable[[Judged], None] | None = None,
    executor: Executor | None = None,
    stop_when_most_fail: bool = True,
) -> RolloutSet:
    """Run ``rollouts`` rollouts of ``plan`` (indexes ``first_rollout``…) and judge them, on
    ``executor`` (default: :func:`otelcar.replay.execution.current_executor`).

    Raises :class:`RolloutsFailed` when most of the rollouts run in ``env`` so far failed
    (:func:`check_failed_share`), unless ``stop_when_most_fail`` is false: then the failed
    rollouts come back with their reasons, as every other failed rollout does."""

    start = time.perf_counter()
    before = env.accounting.to_dict()
    done = await (executor or current_executor()).run_rollouts(
        run,
        plan,
        env,
        indexes=range(first_rollout, first_rollout + rollouts),
        seed=seed,
        outcome=outcome,
        concurrency=concurrency,
        on_rollout=on_rollout,
    )
    rollouts_done = [j.rollout for j in done]
    env.accounting.rollouts_run += len(rollouts_done)
    env.accounting.rollouts_failed += sum(r.status == "failed" for r in rollouts_done)
    if stop_when_most_fail:
        check_failed_share(env, rollouts_done)
    after = env.accounting.to_dict()
    return RolloutSet(
        plan,
        rollouts_done,
        [j.failed for j in done],
        time.perf_counter() - start,
        {k: after[k] - before[k] for k in after},
    )


def check_failed_share(env: Environment, latest: list[Rollout]) -> None:
    """Raise :class:`RolloutsFailed` when more than :data:`MAX_FAILED_SHARE` of the rollouts
    run in ``env`` failed (once at least :data:`MIN_ROLLOUTS_FOR_FAILURE_CHECK` ran); the
    reasons quoted are those of ``latest``."""
    raise_if_mostly_failed(
        env.accounting.rollouts_run,
        env.accounting.rollouts_failed,
        [r.error for r in latest if r.status == "failed"],
        what="rollouts",
    )


def raise_if_mostly_failed(total: int, failed: int, errors: list[str | None], *, what: str) -> None:
    """Raise :class:`RolloutsFailed` ("12 of 16 {what} failed …: the most common of
    ``errors``") when ``failed`` > :data:`MAX_FAILED_SHARE` · ``total`` and ``total`` ≥
    :data:`MIN_ROLLOUTS_FOR_FAILURE_CHECK`."""
    if total < MIN_ROLLOUTS_FOR_FAILURE_CHECK or failed <= MAX_FAILED_SHARE * total:
        return
    reasons = Counter(re.sub(r"\s+", " ", (e or "unknown error").strip())[:300] for e in errors)
    common = "; ".join(f"{reason} ({n}×)" for reason, n in reasons.most_common(3))
    raise RolloutsFailed(
        f"{failed} of {total} {what} failed, too many for any result to mean something"
        + (f": {common}" if common else "")
    )


def run_plan(run: RecordedRun, plan: Plan, env: Environment, **options: Any) -> RolloutSet:
    """Synchronous :func:`run_plan_async` (for scripts and the CLI)."""
    return run_sync(run_plan_async(run, plan, env, **options))
