"""Arms of seeded rollouts: plans run with rollouts added to chosen plans, outcomes kept by
rollout index (:class:`RolloutArm`; the curve's :class:`PlanOutcomes`, one arm per plan).

Rollout indexes continue across rounds (round 2 of a plan starts where round 1 stopped), so
the seeds, the pairing across plans and the request cache stay consistent however the
rollouts are spread over rounds.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import polars as pl

from otelcar.outcome import Outcome, RunEvent, judges_events
from otelcar.replay.engine import RolloutSet, run_plan_async
from otelcar.replay.execution import Judged, PlanKey, judge_rollout
from otelcar.replay.harness import Environment, Rollout, derive_seed
from otelcar.replay.plan import Plan
from otelcar.replay.recorded import RecordedRun, same_message
from otelcar.replay.rollout_table import rollout_events, rollout_failed, rollout_steps


@dataclass
class RolloutArm:
    """Seeded rollouts of one plan: each rollout's outcome by its index (None: the rollout
    failed or was not judged) and the errors. The one arm of rollouts that the curve, the
    refutation, ``fix``'s forward validation and ``pairs`` use.

    Rollout ``r`` draws with the seeds of ``(seed, r)``, so two arms of one run and seed pair
    by index, and :meth:`extend` draws each index once (round 2 starts where round 1
    stopped, from ``first`` on)."""

    failures: dict[int, bool | None] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    first: int = 0  # the index of this arm's first rollout

    @property
    def judged(self) -> list[bool]:
        """The outcomes of the judged rollouts (True: the run failed)."""
        return [f for f in self.failures.values() if f is not None]

    @property
    def n(self) -> int:
        """Judged rollouts."""
        return len(self.judged)

    @property
    def failed(self) -> int:
        """Judged rollouts that failed."""
        return sum(self.judged)

    @property
    def lost(self) -> int:
        """Rollouts drawn but not judged (an error, the budget, an outcome that raised)."""
        return sum(f is None for f in self.failures.values())

    def record(self, result: RolloutSet) -> None:
        """Keep ``result``'s outcomes (by rollout index) and its errors."""
        self.errors.extend(result.errors)
        for rollout, failed in zip(result.rollouts, result.failures, strict=True):
            self.failures[rollout.index] = failed

    async def extend(
        self,
        run: RecordedRun,
        plan: Plan,
        env: Environment,
        *,
        upto: int,
        seed: int,
        outcome: Outcome,
        concurrency: int,
        on_rollout: Callable[[Judged], None] | None = None,
    ) -> RolloutSet | None:
        """Bring the arm up to ``upto`` rollouts (indexes ``first … first + upto − 1``), each
        drawn once; the new rollouts (None when there were already as many)."""
        have = len(self.failures)
        if upto <= have:
            return None
        result = await run_plan_async(
            run,
            plan,
            env,
            rollouts=upto - have,
            seed=seed,
            outcome=outcome,
            concurrency=concurrency,
            first_rollout=self.first + have,
            on_rollout=on_rollout,
        )
        self.record(result)
        return result


@dataclass
class PlanOutcomes(RolloutArm):
    """A curve plan's arm: also whether decision ``k + 1`` (the first re-decided one)
    repeated its recorded action, and the factual plan's one replay, judged for every slot."""

    repeated_first: dict[int, bool] = field(default_factory=dict)
    factual: Rollout | None = None  # the factual plan's one rollout, re-judged for every slot
    #: the factual plan's rollout 0 replayed already (the fidelity check's): adopted as
    #: that rollout instead of replaying it again (:meth:`adopt`)
    preplayed: Rollout | None = None
    factual_steps: pl.DataFrame | None = None  # its steps table, built if an outcome needs it
    factual_events: list[RunEvent] | None = None  # its events, made if an outcome reads them

    async def adopt(
        self,
        env: Environment,
        outcome: Outcome,
        seed: int,
        on_rollout: Callable[[Judged], None] | None = None,
    ) -> None:
        """Take :attr:`preplayed` as this arm's first rollout at base seed ``seed`` (the
        factual replay is deterministic: its seeds are labels, :func:`reseeded`): judged,
        counted in ``env`` as if run there (a rollout, its tool results served from the
        recording) and passed to ``on_rollout`` as a rollout run here is."""
        assert self.preplayed is not None and self.preplayed.index == self.first
        assert not self.failures
        rollout, self.preplayed = reseeded(self.preplayed, seed), None
        judged = await judge_rollout(rollout, env, outcome)
        env.accounting.rollouts_run += 1
        env.accounting.cassette_hits += sum(
            o.origin == "cassette" for d in rollout.decisions for o in d.observations
        )
        env.accounting.rollouts_failed += rollout.status == "failed"
        self.failures[rollout.index] = judged.failed
        if not rollout.ok:
            self.errors.append(f"rollout {rollout.index}: {rollout.error}")
        if on_rollout is not None:
            on_rollout(judged)
        if rollout.ok:
            self.factual = rollout


async def _judge_factual(
    outcome: Outcome, target: PlanOutcomes, r: int, base_seed: int
) -> bool | None:
    """The outcome of factual slot ``r``, judged on the factual replay (from its events when
    the outcome reads events, else from its steps table as slot ``r`` would have produced
    it); an outcome that raises leaves the slot unjudged and is counted in
    ``target.errors`` like any failed rollout (it used to vanish uncounted)."""
    assert target.factual is not None
    try:
        if target.factual.process is not None or target.factual.trace is not None:
            # a live rollout: a run of the agent, judged on its own trace or process
            return await rollout_failed(outcome, target.factual)
        if judges_events(outcome):
            if target.factual_events is None:
                target.factual_events = rollout_events(target.factual)
            return await outcome.failed_on(target.factual_events)  # type: ignore[attr-defined]
        if target.factual_steps is None:
            target.factual_steps = rollout_steps(target.factual)
        return await outcome.failed(as_rollout(target.factual_steps, r, base_seed))
    except Exception as exc:
        target.errors.append(f"rollout {r}: outcome: {exc}")
        return None


def reseeded(rollout: Rollout, base_seed: int) -> Rollout:
    """``rollout`` of the factual plan as it is at base seed ``base_seed``: every decision
    is held, so only its seeds (derived from the base seed, the rollout and the decision)
    differ."""
    decisions = [
        replace(d, seed=derive_seed(base_seed, rollout.index, d.index)) for d in rollout.decisions
    ]
    return replace(rollout, seed=base_seed, decisions=decisions)


def as_rollout(steps: pl.DataFrame, rollout: int, base_seed: int) -> pl.DataFrame:
    """The factual replay's steps table as rollout ``rollout`` of the factual plan would have
    produced it: the replay holds every decision, so only the rollout index and the seeds
    (derived from the base seed, the rollout and the decision) differ. An outcome that looks
    at those columns (a grader keyed by its run) then sees each slot as its own run."""
    first = int(steps["rollout"][0]) if steps.height else rollout
    if first == rollout:
        return steps
    old = {derive_seed(base_seed, first, k): k for k in range(steps.height)}
    fresh = [
        None if seed is None or seed not in old else derive_seed(base_seed, rollout, old[seed])
        for seed in steps["seed"].to_list()
    ]
    return steps.with_columns(
        pl.lit(rollout, dtype=pl.Int64).alias("rollout"),
        pl.Series("seed", fresh, dtype=pl.Int64),
    )


async def extend(
    run: RecordedRun,
    plans: dict[int, Plan],
    outcomes: dict[int, PlanOutcomes],
    env: Environment,
    *,
    upto: int,
    needed: set[int],
    seed: int,
    outcome: Outcome,
    concurrency: int,
    on_rollout: Callable[[Judged], None] | None = None,
    stage: str = "curve",
) -> None:
    """Bring every plan in ``needed`` up to ``upto`` rollouts (a judge's calls, too, go
    through ``env``); each rollout reaches ``on_rollout`` with its plan's key
    (:func:`curve_plan_key`, under ``stage``)."""
    outcome = env.bind(outcome)
    factual = run.horizon - 1

    async def one(k: int) -> None:
        tagged = keyed(on_rollout, (stage, curve_plan_key(run, k)))
        if k == factual and outcomes[k].preplayed is not None and upto > 0:
            await outcomes[k].adopt(env, outcome, seed, tagged)
        have = len(outcomes[k].failures)
        if have >= upto:
            return
        if k == factual and have and outcomes[k].factual is not None:
            # The factual replay is deterministic: one rollout serves every slot, but the
            # outcome is judged again for each (a grader may itself be stochastic).
            for r in range(have, upto):
                outcomes[k].failures[r] = await _judge_factual(outcome, outcomes[k], r, seed)
            return
        target = outcomes[k]
        result = await target.extend(
            run,
            plans[k],
            env,
            upto=have + 1 if k == factual else upto,
            seed=seed,
            outcome=outcome,
            concurrency=concurrency,
            on_rollout=tagged,
        )
        assert result is not None  # have < upto
        first = k + 1
        if first < run.horizon:
            recorded = run.decisions[first].action
            for rollout in result.rollouts:
                if first < len(rollout.decisions):
                    action = rollout.decisions[first].action
                    target.repeated_first[rollout.index] = (
                        recorded is not None
                        and action is not None
                        and same_message(action, recorded)
                    )
        if k == factual and result.rollouts and result.rollouts[0].ok:
            target.factual = result.rollouts[0]
            for r in range(have + 1, upto):
                target.failures[r] = await _judge_factual(outcome, target, r, seed)

    await asyncio.gather(*(one(k) for k in sorted(needed)))


def curve_plan_key(run: RecordedRun, k: int) -> int | None:
    """The first re-decided decision step of curve plan ``k`` (decision ``k + 1``'s step;
    ``None``: plan ``horizon − 1``, the factual replay)."""
    first = k + 1
    return run.decisions[first].step if first < run.horizon else None


def keyed(
    on_rollout: Callable[[Judged], None] | None, key: PlanKey
) -> Callable[[Judged], None] | None:
    """``on_rollout`` given each rollout with its plan's ``key``."""
    if on_rollout is None:
        return None
    return lambda judged: on_rollout(judged._replace(plan_key=key))
