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
from typing import Any, TypeVar

from otelcar.analyses.options import Request
from otelcar.errors import OtelcarError
from otelcar.project_config import ConfigError, ProjectConfig, load_config

T = TypeVar("T")

#: ``(done, message)`` → a progress notification to the client.
SendProgress = Callable[[int, str], Awaitable[None]]


class RunError(OtelcarError):
    """A run cannot start: its budget is over the server's ceiling, it needs an outcome, or
    it names an agent command where this server takes none."""


@dataclass
class RunContext:
    """What every run of one server shares: where traces are, which ``otelcar.toml``, the
    most policy calls one run may spend (``None``: only ``[replay] max_calls`` bounds), and
    whether a run may name an agent command to run (``agent``: live replay)."""

    store_root: Path
    config_path: Path | None = None
    max_calls_ceiling: int | None = None
    agent_commands: bool = True

    def config(self) -> ProjectConfig:
        """The project config, read now (edits to ``otelcar.toml`` apply to the next run),
        with the store's kept live requests (:mod:`otelcar.store.live_requests`)."""
        from otelcar.store.live_requests import LiveRequestStore

        config = load_config(self.config_path)
        config.live_requests = LiveRequestStore(self.store_root)
        return config

    def open_source(self, config: ProjectConfig | None = None) -> Any:
        """The ``[source]`` of the config when it has one, else the local store."""
        from otelcar.store import Store

        source = (config or self.config()).source
        if source is None:
            return Store(self.store_root)
        from otelcar.sources import open_source

        return open_source(source)

    def budget_calls(self, config: ProjectConfig, max_calls: int | None) -> int | None:
        """The policy-call budget of one run: ``max_calls``, else ``[replay] max_calls``, else
        the ceiling; a request above the ceiling is a :class:`RunError`."""
        calls = max_calls if max_calls is not None else config.replay.max_calls
        ceiling = self.max_calls_ceiling
        if calls is not None and calls < 1:
            raise RunError(f"max_calls must be at least 1, not {calls}")
        if ceiling is not None and calls is not None and calls > ceiling:
            raise RunError(
                f"budget of {calls} policy calls is over this server's ceiling of {ceiling} "
                "(otelcar mcp --max-calls)"
            )
        return calls if calls is not None else ceiling


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


def _prepare(
    ctx: RunContext, trace_id: str, max_calls: int | None, agent: str | None = None
) -> tuple[Any, Any, Any]:
    """``(recorded run, config, environment)`` of a run on ``trace_id``; a config that does
    not fit the trace is a :class:`~otelcar.config_checks.ConfigMismatch`
    (:func:`otelcar.config_checks.check_config_fits`). ``agent``: a command line that
    replaces ``[agent] command`` as ``--agent CMD`` does
    (:func:`~otelcar.project_config.with_agent_command`); a :class:`RunError` where the
    server takes none."""
    from otelcar.config_checks import check_config_fits
    from otelcar.project_config import with_agent_command
    from otelcar.replay import Environment, load_run

    config = ctx.config()
    if agent is not None:
        if not ctx.agent_commands:
            raise RunError(
                "this server runs no agent command of a request (otelcar mcp --http "
                "--allow-agent takes them; [agent] command in otelcar.toml applies anyway)"
            )
        with_agent_command(config, agent)
    budget = config.replay.budget(ctx.budget_calls(config, max_calls))
    with ctx.open_source(config) as source:
        loaded = source.load(trace_id)
    run = load_run(loaded.trace_id, loaded.steps, config.agent)
    check_config_fits(run, config)
    return run, config, Environment(config.registry, budget)


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

    live = Live()
    ticker = Ticker(send, "rollouts" if request.kind == "attribute" else "re-decisions", live.calls)

    async def work() -> tuple[str, dict[str, Any]]:
        calls = request.options()["budget"]
        recorded, config, env = _prepare(ctx, trace_id, calls, agent)
        if request.kind == "attribute" and config.outcome is None:
            raise ConfigError(
                f"no outcome: add [outcome] to {config.path or 'otelcar.toml'} (what counts as "
                "failure)"
            )
        with config.replay.executor_scope():
            result = await run(
                request,
                recorded,
                config,
                budget=env.budget,
                on_progress=ticker.tick,
                env=live.prepared(env),
            )
        return recorded.trace_id, result.to_dict()

    async with ticker.running():
        return await in_worker(work, live)
