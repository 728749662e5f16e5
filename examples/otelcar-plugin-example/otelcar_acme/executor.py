"""``--executor acme-counting``: the local executor, counting what it ran.

It runs every rollout exactly as :class:`otelcar.executors.LocalExecutor` does (it delegates
to one), and when the command is done (``close``) prints one line on stderr: how many
rollouts and batches it ran. A real plugin would send the rollouts elsewhere (a job queue, a
cluster); the contract (:class:`otelcar.executors.Executor`) stays this one.
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from typing import Any

from otelcar.executors import ExecutorError, Judged, LocalExecutor


class CountingExecutor:
    """Delegates to a :class:`LocalExecutor`; counts rollouts and batches."""

    name = "acme-counting"
    trace_concurrency = 1
    trace_tasks = False

    def __init__(self) -> None:
        self._local = LocalExecutor()
        self.rollouts = 0
        self.batches = 0

    async def run_rollouts(self, run: Any, plan: Any, env: Any, **options: Any) -> list[Judged]:
        results = await self._local.run_rollouts(run, plan, env, **options)
        self.rollouts += len(results)
        self.batches += 1
        return results

    async def call(self, function: Callable[..., Awaitable[Any]], /, *args: Any) -> Any:
        return await self._local.call(function, *args)

    def close(self) -> None:
        self._local.close()
        print(
            f"acme-counting executor: {self.rollouts} rollouts in {self.batches} batches",
            file=sys.stderr,
        )


def counting_executor(*, address: str | None, concurrency: int) -> CountingExecutor:
    """The executor factory (``address``: ``--ray-address``, which it does not take)."""
    del concurrency  # the engine passes each plan's concurrency to run_rollouts
    if address:
        raise ExecutorError("the acme-counting executor runs locally: it takes no address")
    return CountingExecutor()


__all__ = ["CountingExecutor", "counting_executor"]
