"""``attribute``, ``why`` and ``fix`` on one stored trace, as the MCP server runs them.

The same analyses as ``otelcar attribute``/``why``/``fix`` and the web console
(:mod:`otelcar.analyses`), with the project's ``otelcar.toml`` (policies, outcome,
``[replay]`` settings and budget) read afresh for every run, and progress reported while
they run: rollouts (or re-decisions) done and policy calls spent so far. A run's ``agent``
(a command line) is ``--agent CMD``: live replay on the user's agent (docs/live.md).

Each run goes on a worker thread with an event loop of its own (:func:`in_worker`), so a
synchronous policy or a long computation never stalls the server; a request the client
cancels stops its run at the next policy call.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from otelcar.analyses.options import Request
from otelcar.analyses.project import Project
from otelcar.errors import OtelcarError
from otelcar.project_config import ProjectConfig

if TYPE_CHECKING:
    from otelcar.sources import TraceSource

T = TypeVar("T")

#: ``(done, message)`` → a progress notification to the client.
SendProgress = Callable[[int, str], Awaitable[None]]


class RunError(OtelcarError):
    """A run cannot start: it names an agent command where this server takes none (a budget
    over the ceiling is :class:`~otelcar.analyses.project.BudgetRefused`, a missing outcome
    a :class:`~otelcar.project_config.ConfigError`)."""


@dataclass
class RunContext:
    """What every run of one server shares: where traces are, which ``otelcar.toml``, the
    most policy calls one run may spend (``None``: only ``[replay] max_calls`` bounds), and
    whether a run may name an agent command to run (``agent``: live replay)."""

    store_root: Path
    config_path: Path | None = None
    max_calls_ceiling: int | None = None
    agent_commands: bool = True

    @property
    def project(self) -> Project:
        """Where the server's runs read (:func:`otelcar.analyses.prepare`); the store is
        made when it is missing."""
        return Project(
            self.store_root, self.config_path, max_calls=self.max_calls_ceiling, create_store=True
        )

    def config(self) -> ProjectConfig:
        """The project config, read now (edits to ``otelcar.toml`` apply to the next run),
        with the store's kept live requests (:meth:`Project.config`)."""
        return self.project.config()

    def open_source(self, config: ProjectConfig | None = None) -> TraceSource:
        """The ``[source]`` of the config when it has one, else the local store."""
        return self.project.open_traces((config or self.config()).source)


@dataclass
class Ticker:
    """Counts what a run reports (``tick`` is its ``on_rollout``/``on_sample``) and sends
    a progress notification at most every ``every_s`` seconds, and once at the end."""

    send: SendProgress
    what: str
    calls: Callable[[], int]
    every_s: float = 0.25
    done: int = 0
    _sent: int = field(default=-1, repr=False)

    def tick(self, _item: object = None) -> None:
        self.done += 1

    def message(self) -> str:
        return f"{self.done} {self.what} done, {self.calls()} policy calls"

    async def flush(self) -> None:
        if self.done != self._sent:
            self._sent = self.done
            await self.send(self.done, self.message())

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[Ticker]:
        async def loop() -> None:
            while True:
                await asyncio.sleep(self.every_s)
                await self.flush()

        task = asyncio.create_task(loop())
        try:
            yield self
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self.flush()


@dataclass
class Live:
    """The environment of a run in progress, once it is prepared: what progress reads
    (policy calls so far) and what cancelling stops (its budget)."""

    env: Any = None
    cancelled: bool = False

    def calls(self) -> int:
        return 0 if self.env is None else int(self.env.accounting.llm_calls)

    def cancel(self) -> None:
        """No further policy call of the run (:meth:`~otelcar.replay.Budget.cancel`); a run
        not prepared yet is cancelled as soon as it is."""
        self.cancelled = True
        if self.env is not None:
            self.env.budget.cancel()

    def prepared(self, env: Any) -> Any:
        self.env = env
        if self.cancelled:
            env.budget.cancel()
        return env


async def in_worker(work: Callable[[], Awaitable[T]], live: Live) -> T:
    """``work()`` on a worker thread with an event loop of its own, so what blocks in it
    (loading the trace, a synchronous policy, tool or outcome function, the statistics)
    never stalls the server's loop: other requests, pings and progress go on meanwhile.

    When the awaiting request is cancelled (the client's ``notifications/cancelled``),
    :meth:`Live.cancel` stops the run at its next policy call and the request ends at once;
    the thread finishes on its own and its result is dropped."""
    loop = asyncio.get_running_loop()
    future = loop.run_in_executor(None, lambda: asyncio.run(work()))  # type: ignore[arg-type]
    future.add_done_callback(lambda f: f.cancelled() or f.exception())  # retrieved: no warning
    try:
        return await asyncio.shield(future)
    except asyncio.CancelledError:
        live.cancel()
        raise


async def analyse_trace(
    ctx: RunContext,
    trace_id: str,
    request: Request,
    *,
    send: SendProgress,
    agent: str | None = None,
) -> tuple[str, dict[str, Any]]:
    """The analysis ``request`` asks for (:func:`otelcar.analyses.run`) on ``trace_id``:
    ``(full trace id, result as schemas/attribution.schema.json, why.schema.json or
    fix.schema.json)``. ``attribute`` needs ``[outcome]`` in the config. ``agent``: live
    replay on that command (as ``--agent CMD``); the live check's headline is among the
    result's notes."""
    from otelcar.analyses import run
    from otelcar.analyses.project import prepare
    from otelcar.report.prose import document

    if agent is not None and not ctx.agent_commands:
        raise RunError(
            "this server runs no agent command of a request (otelcar mcp --http "
            "--allow-agent takes them; [agent] command in otelcar.toml applies anyway)"
        )
    live = Live()
    ticker = Ticker(send, "rollouts" if request.kind == "attribute" else "re-decisions", live.calls)

    async def work() -> tuple[str, dict[str, Any]]:
        ready = prepare(ctx.project, trace_id, request, agent=agent)
        with ready.config.replay.executor_scope():
            result = await run(
                request,
                ready.run,
                ready.config,
                budget=ready.env.budget,
                on_progress=ticker.tick,
                env=live.prepared(ready.env),
            )
        return ready.run.trace_id, document(result)

    async with ticker.running():
        return await in_worker(work, live)
