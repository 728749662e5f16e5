"""Running a plan's rollouts: the :class:`Executor` interface, the one in this process
(:class:`LocalExecutor`), and the executor of the current context.

The rollout engine (:func:`otelcar.replay.engine.run_plan_async`) hands every batch of
rollouts to an executor: the one passed to it, else the one set for the current context with
:func:`use_executor` (the CLI does that for ``--executor``), else a :class:`LocalExecutor`.
Other executors (Ray, a plugin's) live in :mod:`otelcar.executors`, which builds them by
name; they implement this interface, so the replay layer never imports them.

Contract of :meth:`Executor.run_rollouts`: one :class:`Judged` per index, in index order —
the rollout replayed with the seeds derived from (seed, index, decision) and its judged
outcome, so the same seeds give the same rollouts whatever the executor. A rollout that could
not run (a failing policy, a worker lost for good) comes back with status ``failed`` and the
reason, never dropped. ``on_rollout`` is called once per rollout with it and its outcome
(:class:`Judged`), in this process, as each
finishes. The environment's accounting and budget end up charged with exactly what the
rollouts spent, and never more policy calls than the budget allows are made.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, NamedTuple, Protocol

from otelcar.outcome import Outcome
from otelcar.replay.harness import Environment, Rollout, replay
from otelcar.replay.plan import Plan
from otelcar.replay.recorded import RecordedRun
from otelcar.replay.rollout_table import rollout_failed

#: Which of an analysis's plans a rollout belongs to, as the analysis names it: the stage
#: (``"curve"``: the commitment curve; ``"confirm"``: bisection's confirmation arm) and the
#: first re-decided decision step of the plan (``None``: the factual replay).
PlanKey = tuple[str, int | None]


class Judged(NamedTuple):
    """One rollout and its outcome (``True``: failed; ``None``: not judged), with the key
    of the plan it ran where the analysis that drew it gave one (``None`` otherwise): a
    consumer (the report's sampler) reads which plan a rollout belongs to from the key,
    never from the plan's shape."""

    rollout: Rollout
    failed: bool | None
    plan_key: PlanKey | None = None


async def replay_and_judge(
    run: RecordedRun,
    plan: Plan,
    env: Environment,
    *,
    index: int,
    seed: int,
    outcome: Outcome | None,
) -> Judged:
    """Rollout ``index`` of ``plan`` and its outcome; never raises for a failing policy or
    outcome (the rollout then has status ``failed`` and the reason). Every executor runs
    rollouts through this function, in whichever process."""
    return await judge_rollout(
        await replay(run, plan, env, rollout=index, base_seed=seed), env, outcome
    )


async def judge_rollout(rollout: Rollout, env: Environment, outcome: Outcome | None) -> Judged:
    """``rollout`` with its outcome (the judging half of :func:`replay_and_judge`, for a
    rollout replayed already); an outcome that raises marks the rollout ``failed`` with the
    reason."""
    failed = None
    if outcome is not None and rollout.ok:
        try:
            failed = await rollout_failed(env.bind(outcome), rollout)
        except Exception as exc:
            rollout.status, rollout.error = "failed", f"outcome: {exc}"
    return Judged(rollout, failed)


class Executor(Protocol):
    """Runs the rollouts of a plan (see the module docstring for the contract)."""

    name: str
    trace_concurrency: int  # how many traces of an ``aggregate`` to attribute at once
    trace_tasks: bool  # whether ``aggregate`` sends each trace's attribution as one task

    async def run_rollouts(
        self,
        run: RecordedRun,
        plan: Plan,
        env: Environment,
        *,
        indexes: Sequence[int],
        seed: int,
        outcome: Outcome | None,
        concurrency: int,
        on_rollout: Callable[[Judged], None] | None,
    ) -> list[Judged]: ...

    async def call(self, function: Callable[..., Awaitable[Any]], /, *args: Any) -> Any:
        """``await function(*args)`` wherever this executor runs work (a worker of the
        cluster for Ray): the result, or the exception ``function`` raised."""
        ...

    def close(self) -> None: ...


class LocalExecutor:
    """Today's behaviour: rollouts as asyncio tasks in this process, at most ``concurrency``
    of one plan at once, sharing the environment's request cache, budget and accounting."""

    name = "local"
    trace_concurrency = 1
    trace_tasks = False

    async def run_rollouts(
        self,
        run: RecordedRun,
        plan: Plan,
        env: Environment,
        *,
        indexes: Sequence[int],
        seed: int,
        outcome: Outcome | None,
        concurrency: int,
        on_rollout: Callable[[Judged], None] | None,
    ) -> list[Judged]:
        gate = asyncio.Semaphore(max(1, concurrency))

        async def one(index: int) -> Judged:
            async with gate:
                judged = await replay_and_judge(
                    run, plan, env, index=index, seed=seed, outcome=outcome
                )
            if on_rollout is not None:
                on_rollout(judged)
            return judged

        return list(await asyncio.gather(*(one(i) for i in indexes)))

    async def call(self, function: Callable[..., Awaitable[Any]], /, *args: Any) -> Any:
        return await function(*args)

    def close(self) -> None:
        pass


_CURRENT: ContextVar[Executor | None] = ContextVar("otelcar_executor", default=None)


def current_executor() -> Executor:
    """The executor set with :func:`use_executor` for this context, else a local one."""
    return _CURRENT.get() or LocalExecutor()


@contextmanager
def use_executor(executor: Executor) -> Iterator[Executor]:
    """Run the rollouts started in this context (and the asyncio tasks it creates) on
    ``executor``."""
    token = _CURRENT.set(executor)
    try:
        yield executor
    finally:
        _CURRENT.reset(token)
