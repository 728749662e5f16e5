"""The worker side of the Ray executor: one actor per worker process.

A worker rebuilds what a rollout needs from picklable specs sent by the driver, never from
live objects: the policy registry (one per driver-side :class:`Environment`), the recorded run
and the outcome (one per job). Each is unpickled once per worker and kept (least recently used
first out). The request cache and the policies' concurrency limits live per environment *in
the worker*; the driver routes every rollout index of an environment to the same worker, so
the repeats the cache serves in a local run (the same rollout index under neighbouring plans)
are served here too. The budget of a rollout is the share the driver reserved for it; the
worker reports what it spent and the accounting of the rollout, which the driver merges.

This module imports no Ray: the driver wraps :class:`RolloutWorker` with ``ray.remote``.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from otelcar.errors import OtelcarError
from otelcar.executors import Judged, LocalExecutor, replay_and_judge, use_executor
from otelcar.policies.registry import PolicyRegistry
from otelcar.replay.harness import Budget, Environment
from otelcar.replay.plan import Plan

WORKER_ENVIRONMENTS = 64  # environments (request caches) a worker keeps
WORKER_JOBS = 256  # (run, outcome) specs a worker keeps


class WorkerSetupError(OtelcarError):
    """A spec could not be rebuilt on a worker (a module the policies need is not importable
    there, a different otelcar version): every rollout would fail the same way."""


@dataclass(frozen=True)
class Payload:
    """A value pickled on the driver, and the import paths the worker adds before loading it
    (so policies loaded from the config's folder resolve on a worker of the same machine)."""

    blob: bytes
    paths: tuple[str, ...]

    def load(self) -> Any:
        from ray import cloudpickle

        for path in self.paths:
            if path not in sys.path and os.path.isdir(path):
                sys.path.append(path)
        try:
            return cloudpickle.loads(self.blob)
        except Exception as exc:
            raise WorkerSetupError(
                f"cannot rebuild on Ray worker (pid {os.getpid()}): {type(exc).__name__}: {exc}"
                "; the policies' modules must be importable on every worker (docs/ray.md)"
            ) from None


def pack(value: Any, what: str) -> Payload:
    """``value`` as a :class:`Payload`; :class:`WorkerSetupError` names ``what`` when it
    cannot be pickled (a live client, a lock, an in-process model)."""
    from ray import cloudpickle

    try:
        blob = cloudpickle.dumps(value)
    except Exception as exc:
        raise WorkerSetupError(
            f"{what} cannot be sent to Ray workers: {type(exc).__name__}: {exc}"
        ) from None
    paths = tuple(dict.fromkeys(p or os.getcwd() for p in sys.path))
    return Payload(blob, paths)


@dataclass
class SharedEnvironment:
    """What the rollouts of one driver-side environment share on a worker."""

    registry: PolicyRegistry
    cache: dict[str, Any] = field(default_factory=dict)
    semaphores: dict[str, asyncio.Semaphore] = field(default_factory=dict)
    pending: dict[str, list[asyncio.Future[None]]] = field(default_factory=dict)  # in flight


@dataclass(frozen=True)
class RolloutReply:
    """A rollout, its outcome, its accounting, what it took from its budget share, and the
    policy answers it added to the worker's request cache (``made``: the driver adds them to
    its own, so what the driver asks later — the policy check at the culprit — is served as
    a local run serves it)."""

    judged: Judged
    accounting: dict[str, int]
    calls: int
    tokens: int
    made: dict[str, Any] = field(default_factory=dict)


class RecordingCache:
    """A worker's shared request cache, seen by one rollout: what the rollout adds is also
    kept in :attr:`made`."""

    def __init__(self, shared: dict[str, Any]) -> None:
        self.shared = shared
        self.made: dict[str, Any] = {}

    def get(self, key: str) -> Any:
        return self.shared.get(key)

    def __setitem__(self, key: str, value: Any) -> None:
        self.shared[key] = value
        self.made[key] = value


class RolloutWorker:
    """A Ray actor (async: it runs up to its ``max_concurrency`` rollouts at once)."""

    def __init__(self) -> None:
        self._environments: OrderedDict[str, asyncio.Future[Any]] = OrderedDict()
        self._jobs: OrderedDict[str, asyncio.Future[Any]] = OrderedDict()

    def pid(self) -> int:
        return os.getpid()

    @staticmethod
    async def _load(
        table: OrderedDict[str, asyncio.Future[Any]],
        key: str,
        box: list,
        capacity: int,
        build: Callable[[Any], Any] = lambda value: value,
    ) -> Any:
        """``build(spec)`` for the spec ``key`` (from ``box[0]``, an ObjectRef that Ray left
        unresolved because it is nested), made once per worker; concurrent first uses share
        it."""
        future = table.get(key)
        if future is None:
            future = asyncio.ensure_future(_fetch(box[0], build))
            table[key] = future
            while len(table) > capacity:
                table.popitem(last=False)
        else:
            table.move_to_end(key)
        return await future

    async def rollout(
        self,
        env_key: str,
        env_box: list,
        job_key: str,
        job_box: list,
        plan: Plan,
        index: int,
        seed: int,
        budget: Budget,
    ) -> RolloutReply:
        """Rollout ``index`` of ``plan`` within ``budget`` (the driver's reservation)."""
        shared: SharedEnvironment = await self._load(
            self._environments, env_key, env_box, WORKER_ENVIRONMENTS, SharedEnvironment
        )
        run, outcome = await self._load(self._jobs, job_key, job_box, WORKER_JOBS)
        cache = RecordingCache(shared.cache)
        env = Environment(
            shared.registry,
            budget,
            cache=cache,  # type: ignore[arg-type]
            _semaphores=shared.semaphores,
            _pending=shared.pending,
        )
        calls, tokens = budget.calls, budget.tokens
        judged = await replay_and_judge(run, plan, env, index=index, seed=seed, outcome=outcome)
        return RolloutReply(
            judged,
            env.accounting.to_dict(),
            budget.calls - calls,
            budget.tokens - tokens,
            cache.made,
        )

    async def call(self, payload: Payload) -> Any:
        """``await function(*args)`` from the payload, its own rollouts run in this worker."""
        function: Callable[..., Awaitable[Any]]
        function, args = payload.load()
        with use_executor(LocalExecutor()):
            return await function(*args)


async def _fetch(ref: Any, build: Callable[[Any], Any]) -> Any:
    payload: Payload = await ref
    return build(payload.load())
