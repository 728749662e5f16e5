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

The interface (:class:`Executor`, its contract), :class:`LocalExecutor` and the executor of
the current context live in :mod:`otelcar.replay.execution`, re-exported here: the replay
layer never imports this package.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol

from otelcar.errors import OtelcarError
from otelcar.plugins.door import RegistryHook
from otelcar.replay.execution import (
    Executor,
    Judged,
    LocalExecutor,
    current_executor,
    replay_and_judge,
    use_executor,
)

#: The built-in executors (every registered one: :func:`executor_names`).
EXECUTORS = ("local", "ray")


class ExecutorError(OtelcarError):
    """The executor cannot run: Ray missing or unreachable, an environment that cannot be sent
    to or rebuilt on the workers."""


class WorkerLost(ExecutorError):
    """A worker died running a task and the retries were used up."""


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
