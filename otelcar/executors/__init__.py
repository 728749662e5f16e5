"""Where rollouts run: in this process (:class:`LocalExecutor`) or on a Ray cluster
(:class:`otelcar.executors.ray_executor.RayExecutor`, ``docs/ray.md``).

The rollout engine (:func:`otelcar.replay.engine.run_plan_async`) hands every batch of
rollouts to an executor, and attribution, ``why``, ``fix`` and ``aggregate`` all run their
rollouts through the engine, so none of them knows where the rollouts run. The executor used is
the one passed to the engine, else the one set for the current context with
:func:`use_executor` (the CLI does that for ``--executor``), else a :class:`LocalExecutor`.

Executors are a registry by name (:func:`register_executor`), filled through the
``register_executors`` plugin hook (:mod:`otelcar.plugins`) the first time it is consulted:
the built-ins ``local`` and ``ray`` come in through it exactly as a third party's do, and
``--executor`` / ``[replay] executor`` accept every registered name.

Contract of :meth:`Executor.run_rollouts`: one :class:`Judged` per index, in index order —
the rollout replayed with the seeds derived from (seed, index, decision) and its judged
outcome, so the same seeds give the same rollouts whatever the executor. A rollout that could
not run (a failing policy, a worker lost for good) comes back with status ``failed`` and the
reason, never dropped. ``on_rollout`` is called once per rollout, in this process, as each
finishes. The environment's accounting and budget end up charged with exactly what the
rollouts spent, and never more policy calls than the budget allows are made.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, NamedTuple, Protocol

from otelcar.errors import OtelcarError
from otelcar.outcome import Outcome
from otelcar.plugins.door import RegistryHook
from otelcar.replay.harness import Environment, Rollout, replay
from otelcar.replay.plan import Plan
from otelcar.replay.recorded import RecordedRun
from otelcar.replay.rollout_table import rollout_failed

#: The built-in executors (every registered one: :func:`executor_names`).
EXECUTORS = ("local", "ray")


class ExecutorError(OtelcarError):
    """The executor cannot run: Ray missing or unreachable, an environment that cannot be sent
    to or rebuilt on the workers."""


class WorkerLost(ExecutorError):
    """A worker died running a task and the retries were used up."""


class Judged(NamedTuple):
    """One rollout and its outcome (``True``: failed; ``None``: not judged)."""

    rollout: Rollout
    failed: bool | None


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
    result = await replay(run, plan, env, rollout=index, base_seed=seed)
    failed = None
    if outcome is not None and result.ok:
        try:
            failed = await rollout_failed(env.bind(outcome), result)
        except Exception as exc:
            result.status, result.error = "failed", f"outcome: {exc}"
    return Judged(result, failed)


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
        on_rollout: Callable[[Rollout], None] | None,
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
        on_rollout: Callable[[Rollout], None] | None,
    ) -> list[Judged]:
        gate = asyncio.Semaphore(max(1, concurrency))

        async def one(index: int) -> Judged:
            async with gate:
                judged = await replay_and_judge(
                    run, plan, env, index=index, seed=seed, outcome=outcome
                )
            if on_rollout is not None:
                on_rollout(judged.rollout)
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


class ExecutorFactory(Protocol):
    """Builds an executor: ``address`` is where to run (``--ray-address``; ``None`` unless
    given), ``concurrency`` the rollouts each worker runs at once. Raises
    :class:`ExecutorError` when it cannot run."""

    def __call__(self, *, address: str | None, concurrency: int) -> Executor: ...


_FACTORIES: dict[str, ExecutorFactory] = {}


def _add(name: str, factory: ExecutorFactory) -> None:
    if not callable(factory):
        raise ExecutorError(f"executor {name!r}: the factory is not callable")
    _FACTORIES[name] = factory


_PLUGINS = RegistryHook("register_executors", _add)


def register_executor(name: str, factory: ExecutorFactory) -> None:
    """Make ``--executor <name>`` and ``[replay] executor = "<name>"`` usable; replaces an
    executor of the same name (the plugins' executors are registered first)."""
    _PLUGINS.ensure()
    _add(name, factory)


def executor_names() -> list[str]:
    """The registered executors, in registration order."""
    _PLUGINS.ensure()
    return list(_FACTORIES)


def make_executor(
    name: str = "local", *, address: str | None = None, concurrency: int = 8
) -> Executor:
    """The registered executor ``name``: ``local``, ``ray`` connected to ``address``
    (``ray://host:port``, ``auto``, or ``None``: a local cluster started here), or one a
    plugin registered; each worker runs ``concurrency`` rollouts at once. Raises
    :class:`ExecutorError` for an unknown name or one that cannot run (``ray`` missing)."""
    _PLUGINS.ensure()
    factory = _FACTORIES.get(name)
    if factory is None:
        raise ExecutorError(f"unknown executor {name!r}; known: {', '.join(_FACTORIES)}")
    return factory(address=address, concurrency=concurrency)


def _local(*, address: str | None, concurrency: int) -> Executor:
    del concurrency  # the engine passes the concurrency of each plan
    if address:
        raise ExecutorError("a Ray address was given but the executor is 'local'")
    return LocalExecutor()


def _ray(*, address: str | None, concurrency: int) -> Executor:
    from otelcar.executors.ray_executor import RayExecutor

    return RayExecutor(address, concurrency=concurrency)


#: The built-in executors ``(name, factory)``, registered by the built-in plugin.
BUILTIN_EXECUTORS: tuple[tuple[str, ExecutorFactory], ...] = (("local", _local), ("ray", _ray))


@contextmanager
def executor_scope(
    name: str = "local", *, address: str | None = None, concurrency: int = 8
) -> Iterator[Executor]:
    """:func:`make_executor` in force for the block (:func:`use_executor`), closed after it
    (a Ray cluster started here is shut down; one connected to is left running)."""
    executor = make_executor(name, address=address, concurrency=concurrency)
    try:
        with use_executor(executor):
            yield executor
    finally:
        executor.close()


__all__ = [
    "EXECUTORS",
    "Executor",
    "ExecutorError",
    "ExecutorFactory",
    "Judged",
    "LocalExecutor",
    "WorkerLost",
    "current_executor",
    "executor_names",
    "executor_scope",
    "make_executor",
    "register_executor",
    "replay_and_judge",
    "use_executor",
]
