"""Rollouts on a Ray cluster (``--executor ray``; ``docs/ray.md``).

The driver (this process) keeps what must stay exact: the :class:`Budget`, the
:class:`Accounting`, the order of results and the progress callbacks. Workers
(:class:`otelcar.executors.ray_worker.RolloutWorker` actors, one per CPU of the cluster unless
told otherwise) run rollouts: each rebuilds the environment from picklable specs — the policy
registry, the recorded run, the outcome — and replays with the seeds derived from
(seed, rollout, decision), so a rollout is the same wherever it runs.

- **Routing.** Rollout ``r`` of an environment always goes to the same worker, which keeps
  that environment's request cache: the cache hits of a local run (rollout ``r`` under
  neighbouring plans) happen there too. The answers a rollout added come back with it into
  the driver's cache, so a call the driver makes itself (the policy check at the culprit,
  which reuses the refutation's re-decisions) is served as in a local run.
- **Budget.** Before a rollout is sent, the driver reserves the most policy calls it can make
  (its horizon plus the slack); the worker cannot exceed its reservation and reports what it
  spent, the rest is returned. A reservation smaller than that waits for rollouts in flight to
  return theirs, so a rollout stops for budget only when the budget is really spent, and the
  total never exceeds ``max_calls``.
- **Whole traces.** :meth:`RayExecutor.call` runs a coroutine function on a worker, whose
  own rollouts then run in that worker; ``aggregate`` sends each trace's attribution that way
  (``trace_tasks``), which costs the driver far less per rollout than one task per rollout.
- **Failures.** A worker process that dies is restarted by Ray and its rollouts are retried
  (``max_retries`` times; a rollout is a pure function of its seeds, so a retry gives the same
  result). A rollout still lost after that is reported as a failed rollout with the reason;
  its reservation stays charged to the budget (the calls it made are unknown).
"""

from __future__ import annotations

import asyncio
import uuid
import zlib
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from otelcar.executors import ExecutorError, Judged, WorkerLost
from otelcar.executors.ray_worker import (
    Payload,
    RolloutReply,
    RolloutWorker,
    WorkerSetupError,
    pack,
)
from otelcar.outcome import Outcome
from otelcar.replay.harness import Budget, Environment, Rollout
from otelcar.replay.plan import Plan
from otelcar.replay.recorded import RecordedRun

DRIVER_ENVIRONMENTS = 1024  # environments / jobs whose specs stay in the object store


def import_ray() -> Any:
    """The ``ray`` module, or :class:`ExecutorError` naming the extra that installs it."""
    try:
        import ray
    except ImportError:
        raise ExecutorError(
            "the Ray executor needs the 'ray' package: pip install 'otelcar[ray]'"
        ) from None
    return ray


@dataclass
class _Ledger:
    """The driver's side of an environment's budget while rollouts are in flight."""

    budget: Budget
    loop: asyncio.AbstractEventLoop
    in_flight: int = 0
    changed: asyncio.Condition = field(default_factory=asyncio.Condition)

    async def reserve(self, bound: int) -> int | None:
        """Reserve up to ``bound`` policy calls (``None``: no call cap); waits while less
        than ``bound`` is left and other rollouts may still return some."""
        budget = self.budget
        async with self.changed:
            while (
                budget.max_calls is not None
                and budget.max_calls - budget.calls < bound
                and self.in_flight
            ):
                await self.changed.wait()
            self.in_flight += 1
            if budget.max_calls is None:
                return None
            grant = max(0, min(bound, budget.max_calls - budget.calls))
            budget.calls += grant
            return grant

    def share(self, grant: int | None) -> Budget:
        """The budget a worker gets: the caps, with only ``grant`` calls left."""
        b = self.budget
        calls = 0 if grant is None or b.max_calls is None else b.max_calls - grant
        return Budget(b.max_calls, b.max_tokens, calls, b.tokens, b.slack)

    async def settle(self, grant: int | None, calls: int | None, tokens: int) -> None:
        """A rollout came back having spent ``calls`` (``None``: unknown, all kept)."""
        async with self.changed:
            self.in_flight -= 1
            if calls is not None:  # else a lost rollout: its whole reservation stays spent
                self.budget.calls += calls - (grant or 0)
            self.budget.tokens += tokens
            self.changed.notify_all()


@dataclass
class _Spec:
    """A spec put into the object store once, under a key unique to this executor."""

    owner: Any  # kept alive so that its id() is not reused while the entry exists
    key: str
    ref: Any
    ledger: _Ledger | None = None


class RayExecutor:
    """Runs rollouts on a Ray cluster (see the module docstring).

    ``address``: ``ray://host:port`` (Ray client), ``auto`` (the cluster this machine belongs
    to), or ``None`` (a local cluster started here, shut down by :meth:`close`; or the one
    ``RAY_ADDRESS`` names). When Ray is already initialized in this process it is used as it
    is. ``concurrency``: rollouts each worker runs at once (policy calls are mostly waiting).
    ``workers``: worker actors, each holding ``worker_cpus`` CPUs (default: as many as the
    cluster's free CPUs allow). ``max_retries``: retries of a rollout whose worker died.
    ``trace_concurrency``: traces of an ``aggregate`` attributed at once (default: twice the
    workers); ``trace_tasks``: ``aggregate`` sends each trace's whole attribution to a worker
    as one task rather than each rollout (measured: ``benchmarks/README.md``).
    :class:`ExecutorError` when the workers cannot start within ``start_timeout_s`` (a cluster
    without free CPUs), rather than waiting for them forever.
    """

    name = "ray"

    def __init__(
        self,
        address: str | None = None,
        *,
        concurrency: int = 8,
        workers: int | None = None,
        worker_cpus: float = 1.0,
        max_retries: int = 2,
        trace_concurrency: int | None = None,
        trace_tasks: bool = True,
        init_options: dict[str, Any] | None = None,
        start_timeout_s: float = 120.0,
    ) -> None:
        ray = import_ray()
        self.address = address
        self.max_retries = max_retries
        self.trace_tasks = trace_tasks
        self._owns_cluster = False
        self._workers: list[Any] = []
        self._environments: OrderedDict[int, _Spec] = OrderedDict()
        self._jobs: OrderedDict[tuple[int, int], _Spec] = OrderedDict()
        self._next = 0
        if not ray.is_initialized():
            options: dict[str, Any] = {"log_to_driver": False, **(init_options or {})}
            if address is None:
                options.setdefault("include_dashboard", False)
            try:
                ray.init(address=address, **options)
            except Exception as exc:
                raise ExecutorError(
                    f"cannot start or reach Ray at {address or 'a new local cluster'}: {exc}"
                ) from None
            self._owns_cluster = True
        free = ray.available_resources().get("CPU", 0)
        count = workers or max(1, int(free / worker_cpus))
        actor = ray.remote(RolloutWorker).options(
            num_cpus=worker_cpus,
            max_concurrency=max(1, concurrency),
            max_restarts=-1,
            max_task_retries=max_retries,
        )
        self._workers = [actor.remote() for _ in range(count)]
        ready, _ = ray.wait(
            [w.pid.remote() for w in self._workers], num_returns=count, timeout=start_timeout_s
        )
        if len(ready) < count:
            self.close()
            raise ExecutorError(
                f"only {len(ready)} of {count} Ray workers started within {start_timeout_s:g} s "
                f"(each needs {worker_cpus:g} free CPU; the cluster has {free:g} free)"
            )
        self.trace_concurrency = trace_concurrency or 2 * count

    @property
    def workers(self) -> int:
        return len(self._workers)

    def worker_pids(self) -> list[int]:
        """The process id of every worker (for tests and diagnostics)."""
        ray = import_ray()
        return ray.get([w.pid.remote() for w in self._workers])

    # -- specs --------------------------------------------------------------------------------
    def _spec(
        self, table: OrderedDict, key: Any, owner: Any, value: Callable[[], Any], what: str
    ) -> _Spec:
        spec = table.get(key)
        if spec is not None and spec.owner is owner:
            table.move_to_end(key)
            return spec
        try:
            payload = pack(value(), what)
        except WorkerSetupError as exc:
            raise ExecutorError(str(exc)) from None
        spec = _Spec(owner, uuid.uuid4().hex, import_ray().put(payload))
        table[key] = spec
        while len(table) > DRIVER_ENVIRONMENTS:
            table.popitem(last=False)
        return spec

    def _environment(self, env: Environment) -> _Spec:
        return self._spec(
            self._environments, id(env), env, lambda: env.registry, "the policy registry"
        )

    def _job(self, run: RecordedRun, outcome: Outcome | None) -> _Spec:
        return self._spec(
            self._jobs,
            (id(run), id(outcome)),
            (run, outcome),
            lambda: (run, outcome),
            f"trace {run.trace_id} or its outcome",
        )

    @staticmethod
    def _ledger(spec: _Spec, env: Environment) -> _Ledger:
        loop = asyncio.get_running_loop()
        if spec.ledger is None or spec.ledger.loop is not loop:
            spec.ledger = _Ledger(env.budget, loop)
        return spec.ledger

    # -- rollouts -----------------------------------------------------------------------------
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
        """See :class:`otelcar.executors.Executor`. ``concurrency`` is not used: each worker
        runs the ``concurrency`` given at construction."""
        shared = self._environment(env)
        job = self._job(run, outcome)
        ledger = self._ledger(shared, env)
        bound = run.horizon + env.budget.slack

        async def one(index: int) -> Judged:
            judged = await self._rollout(env, shared, job, ledger, plan, index, seed, bound)
            if on_rollout is not None:
                on_rollout(judged)
            return judged

        return list(await asyncio.gather(*(one(i) for i in indexes)))

    async def _rollout(
        self,
        env: Environment,
        shared: _Spec,
        job: _Spec,
        ledger: _Ledger,
        plan: Plan,
        index: int,
        seed: int,
        bound: int,
    ) -> Judged:
        ray = import_ray()
        grant = await ledger.reserve(bound)
        worker = self._workers[zlib.crc32(f"{shared.key}:{index}".encode()) % len(self._workers)]
        try:
            reply: RolloutReply = await worker.rollout.remote(
                shared.key, [shared.ref], job.key, [job.ref], plan, index, seed, ledger.share(grant)
            )
        except ray.exceptions.RayError as exc:
            await ledger.settle(grant, None, 0)
            setup = _cause(exc)
            if isinstance(setup, WorkerSetupError):
                raise ExecutorError(str(setup)) from None
            lost = Rollout(index=index, seed=seed, plan=plan, status="failed")
            lost.error = (
                f"Ray task failed: {_first_line(setup)}"
                if isinstance(setup, Exception)
                else f"Ray worker lost (after {self.max_retries} retries): {_first_line(exc)}"
            )
            return Judged(lost, None)
        except BaseException:
            await asyncio.shield(ledger.settle(grant, None, 0))
            raise
        await ledger.settle(grant, reply.calls, reply.tokens)
        for key, value in reply.accounting.items():
            setattr(env.accounting, key, getattr(env.accounting, key) + value)
        for key, decision in reply.made.items():  # later driver-side calls hit, as locally
            env.cache.setdefault(key, decision)
        return reply.judged

    # -- whole tasks --------------------------------------------------------------------------
    async def call(self, function: Callable[..., Awaitable[Any]], /, *args: Any) -> Any:
        """``await function(*args)`` on a worker (round robin), its rollouts run locally
        there. Re-raises the exception ``function`` raised; :class:`WorkerLost` when the
        worker is lost after the retries; :class:`ExecutorError` when the call cannot be
        sent or rebuilt on the worker."""
        ray = import_ray()
        name = getattr(function, "__qualname__", repr(function))
        try:
            payload: Payload = pack((function, args), f"{name} and its arguments")
        except WorkerSetupError as exc:
            raise ExecutorError(str(exc)) from None
        worker = self._workers[self._next % len(self._workers)]
        self._next += 1
        try:
            return await worker.call.remote(payload)
        except ray.exceptions.RayError as exc:
            cause = _cause(exc)
            if isinstance(cause, WorkerSetupError):
                raise ExecutorError(str(cause)) from None
            if isinstance(cause, Exception) and not isinstance(cause, ray.exceptions.RayError):
                raise cause from None
            raise WorkerLost(
                f"Ray worker lost (after {self.max_retries} retries) running {name}: "
                f"{_first_line(exc)}"
            ) from None

    def close(self) -> None:
        """Stop the workers; shut Ray down when this executor started it."""
        ray = import_ray()
        if not ray.is_initialized():
            return
        for worker in self._workers:
            ray.kill(worker)
        self._workers = []
        self._environments.clear()
        self._jobs.clear()
        if self._owns_cluster:
            ray.shutdown()


def _cause(exc: BaseException) -> BaseException | None:
    """The exception the task itself raised (``RayTaskError.cause``); ``None`` when Ray
    failed around it (a lost worker)."""
    if not isinstance(exc, import_ray().exceptions.RayTaskError):
        return None
    cause = getattr(exc, "cause", None)
    return cause if isinstance(cause, BaseException) else None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".strip()
