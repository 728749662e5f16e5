"""The analyses a user starts — ``attribute``, ``why`` and ``fix`` on one recorded trace,
``aggregate`` over many, ``pairs`` from results — with the defaults of the project's
``otelcar.toml`` filled in, in one place.

The CLI (:mod:`otelcar.cli.replay`, :mod:`otelcar.cli.repair`), the MCP server
(:mod:`otelcar.mcp.runs`) and the web console (:mod:`otelcar.ui`) start them with :func:`run`
of a request (:mod:`otelcar.analyses.requests`), so a run started from any of them spends
the same budget, uses the same seed, options and outcome. Each is awaitable (a
server cancels it by cancelling its task: :class:`asyncio.CancelledError` is not caught by
the rollouts) and takes every other option of the library function as a keyword.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from otelcar.analyses.live import live_prepared, live_ready, live_rollouts
from otelcar.analyses.options import Request
from otelcar.analyses.requests import POLICY_CHECK_SAMPLES
from otelcar.notes import Note
from otelcar.replay import Budget


class _Noted(Protocol):
    """An analysis's result: a frozen dataclass that carries notes."""

    @property
    def notes(self) -> tuple[Note, ...]: ...


Analysed = TypeVar("Analysed", bound=_Noted)

if TYPE_CHECKING:
    from otelcar.analyses.requests import AggregateRequest, PairsRequest
    from otelcar.attribution.aggregate import AggregateResult, TraceVerdict
    from otelcar.attribution.context.result import WhyResult
    from otelcar.attribution.fixes.result import FixResult
    from otelcar.attribution.pairs import PairsResult
    from otelcar.attribution.steps.result import AttributionResult
    from otelcar.project_config import ProjectConfig, ReplaySettings
    from otelcar.replay import RecordedRun


def budget_for(settings: ReplaySettings, max_calls: int | Budget | None = None) -> Budget:
    """The budget of one analysis: :meth:`ReplaySettings.budget` of ``max_calls`` policy
    calls. A :class:`Budget` passed as ``max_calls`` is used as it is: its ``calls`` and
    ``tokens`` count up while the analysis runs, which is what a progress display reads."""
    return max_calls if isinstance(max_calls, Budget) else settings.budget(max_calls)


async def on_the_run(
    run: RecordedRun,
    config: ProjectConfig,
    seed: int | None,
    analyse: Callable[[RecordedRun, int], Awaitable[Analysed]],
) -> Analysed:
    """``analyse(run, seed)`` of one trace as every analysis runs it: the seed is ``seed``
    or ``[replay] seed``; with an agent command the run is made ready first
    (:func:`live_ready`: the live check, and the requests the agent made) and its rollouts
    run on the agent (:func:`live_rollouts`); the notes of that preparation come first in
    the result's."""
    chosen = config.replay.seed_or(seed)
    run, notes = await live_ready(run, config, seed=chosen)
    with live_rollouts(config):
        result = await analyse(run, chosen)
    return replace(result, notes=(*notes, *result.notes)) if notes else result


async def attribute_run(
    run: RecordedRun,
    config: ProjectConfig,
    *,
    budget: int | Budget | None = None,
    seed: int | None = None,
    on_rollout: Callable[[Any], None] | None = None,
    policy_check: int = POLICY_CHECK_SAMPLES,
    **options: Any,
) -> AttributionResult:
    """:func:`otelcar.attribution.attribute_async` of ``run`` with ``config``'s policies,
    outcome, concurrency, budget (``budget`` policy calls overrides ``[replay] max_calls``)
    and seed; ``options`` are its other keywords (``rollouts``, ``mode``, ``refutation``, …).
    ``policy_check``: re-decisions of the policy check at the culprit, a stage of the
    library's attribution (the same result as ``otelcar.attribute`` with the same run and
    seed; 0: none). Raises :class:`~otelcar.errors.OtelcarError` subclasses as the library
    does; the caller checks that ``config`` has an outcome."""
    from otelcar.attribution.steps.attribute import attribute_async

    settings = config.replay
    return await on_the_run(
        run,
        config,
        seed,
        lambda ready, chosen: attribute_async(
            ready,
            registry=config.registry,
            outcome=config.outcome,  # type: ignore[arg-type]
            seed=chosen,
            budget=budget_for(settings, budget),
            concurrency=settings.concurrency,
            on_rollout=on_rollout,
            policy_check=policy_check,
            **options,
        ),
    )


async def why_run(
    run: RecordedRun,
    config: ProjectConfig,
    *,
    step: int | str = "culprit",
    budget: int | Budget | None = None,
    seed: int | None = None,
    on_sample: Callable[[Any], None] | None = None,
    **options: Any,
) -> WhyResult:
    """:func:`otelcar.attribution.context.why.why_async` of decision ``step`` (a number,
    ``"culprit"`` or ``"last"``) with ``config``'s policies, outcome, budget and seed;
    ``options`` are its other keywords (``samples``, ``same``, ``fill``, …)."""
    from otelcar.attribution.context.why import why_async

    settings = config.replay
    return await on_the_run(  # --step culprit attributes first, on the agent too
        run,
        config,
        seed,
        lambda ready, chosen: why_async(
            ready,
            step=step,
            registry=config.registry,
            outcome=config.outcome,
            seed=chosen,
            budget=budget_for(settings, budget),
            on_sample=on_sample,
            **options,
        ),
    )


async def fix_run(
    run: RecordedRun,
    config: ProjectConfig,
    *,
    step: int | str = "culprit",
    budget: int | Budget | None = None,
    seed: int | None = None,
    on_sample: Callable[[Any], None] | None = None,
    **options: Any,
) -> FixResult:
    """:func:`otelcar.attribution.fixes.fix.fix_async` of decision ``step`` with
    ``config``'s policies, outcome, concurrency, budget (``why`` and ``fix`` together) and
    seed; ``options`` are its other keywords (``samples``, ``forward``, ``max_rate``, …)."""
    from otelcar.attribution.fixes.fix import fix_async

    settings = config.replay
    return await on_the_run(  # --forward's rollouts run on the agent
        run,
        config,
        seed,
        lambda ready, chosen: fix_async(
            ready,
            registry=config.registry,
            step=step,
            outcome=config.outcome,
            seed=chosen,
            concurrency=settings.concurrency,
            budget=budget_for(settings, budget),
            on_sample=on_sample,
            **options,
        ),
    )


async def attribute_traces_run(
    traces: Iterable[tuple[str, Any]],
    config: ProjectConfig,
    *,
    budget: int | None = None,
    seed: int | None = None,
    on_trace: Callable[[Any], None] | None = None,
    **options: Any,
) -> list[TraceVerdict]:
    """:func:`otelcar.attribution.aggregate.attribute_traces_async` of ``traces``
    (``(trace_id, steps)`` pairs) with ``config``'s policies, outcome, ``[agent]``
    declaration, concurrency and seed, and a budget of ``budget`` policy calls per trace
    (default ``[replay] max_calls``; ``max_tokens`` too); ``options`` are its other keywords
    (``rollouts``, ``max_rollouts``, ``confidence``, …).

    With an agent command, each failing trace is prepared as :func:`attribute_run` prepares
    one (:func:`live_ready`: the live check, and the requests the agent made) and its
    rollouts run on the agent (:func:`live_rollouts`); a trace the agent does not reproduce
    is ``skipped``, the check's refusal (its first difference) as the reason."""
    from otelcar.attribution.aggregate import attribute_traces_async

    settings = config.replay
    with live_rollouts(config):
        return await attribute_traces_async(
            traces,
            registry=config.registry,
            outcome=config.outcome,  # type: ignore[arg-type]
            agent=config.agent,
            prepare=functools.partial(live_prepared, config=config, seed=settings.seed_or(seed)),
            on_trace=on_trace,
            max_calls=budget if budget is not None else settings.max_calls,
            max_tokens=settings.max_tokens,
            seed=settings.seed_or(seed),
            concurrency=settings.concurrency,
            **options,
        )


async def aggregate_run(
    request: AggregateRequest,
    traces: Iterable[tuple[str, Any]],
    config: ProjectConfig,
    *,
    on_trace: Callable[[Any], None] | None = None,
    service: str | None = None,
    since: str | None = None,
) -> AggregateResult:
    """``request`` over ``traces`` (``(trace_id, steps)`` pairs): each failing trace
    attributed (:func:`attribute_traces_run`, ``on_trace`` called with each verdict), then
    the steps ranked at the request's ``confidence``
    (:func:`otelcar.attribution.aggregate.aggregate`); ``service`` and ``since`` (ISO 8601)
    say in the result which traces were selected."""
    from otelcar.attribution.aggregate import aggregate

    options = library_options(request)
    calls, seed = options.pop("budget"), options.pop("seed")
    verdicts = await attribute_traces_run(
        traces, config, budget=calls, seed=seed, on_trace=on_trace, **options
    )
    return aggregate(verdicts, confidence=request.confidence, service=service, since=since)


async def pairs_run(
    request: PairsRequest,
    recorded: RecordedRun,
    config: ProjectConfig,
    *,
    result: Any,
    on_rollout: Callable[[Any], None] | None = None,
) -> PairsResult:
    """The preference pairs of ``result`` (an attribution or fix result, or a kept run's
    record) on its ``recorded`` run (:func:`otelcar.attribution.pairs.export_pairs_async`)
    with ``config``'s policies and outcome, the request's seed and budget (else
    ``[replay]``'s); ``on_rollout`` is called with each fresh rollout, judged (``Judged``)."""
    from otelcar.attribution.pairs import export_pairs_async

    settings = config.replay
    return await export_pairs_async(
        recorded,
        result=result,
        registry=config.registry,
        outcome=config.outcome,
        rollouts=request.rollouts,
        seed=settings.seed_or(request.seed),
        alpha=request.alpha,
        budget=budget_for(settings, request.budget),
        on_rollout=on_rollout,
    )


def library_options(request: Request) -> dict[str, Any]:
    """Every option of ``request`` under the name the library function takes it by."""
    names = request.library_names  # type: ignore[attr-defined]
    return {names.get(k, k): v for k, v in request.options().items()}


def step_arg(value: str) -> int | str:
    """A ``--step`` value: a decision number, or a name (``culprit``, ``last``)."""
    return int(value) if value.lstrip("-").isdigit() else value


async def run(
    request: Request,
    recorded: RecordedRun,
    config: ProjectConfig,
    *,
    budget: Budget | None = None,
    on_progress: Callable[[Any], None] | None = None,
    **extra: Any,
) -> Any:
    """The analysis ``request`` asks for (its :attr:`~Request.kind`) on ``recorded`` with
    ``config``: :func:`attribute_run`, :func:`why_run` or :func:`fix_run` with every option
    of the request. ``budget``: a :class:`Budget` the caller reads progress from (default:
    one of the request's ``budget`` policy calls); ``on_progress``: called with each rollout
    (attribute) or re-decision (why, fix) done; ``extra``: other keywords of the library
    function (``env``, ``attribution``)."""
    if request.kind not in _STARTS:  # aggregate_run, pairs_run; rollout, replay: the CLI's
        raise TypeError(f"run() starts {', '.join(_STARTS)}, not {request.kind}")
    start, progress = _STARTS[request.kind]
    options = library_options(request)
    calls, seed = options.pop("budget"), options.pop("seed")
    return await start(
        recorded,
        config,
        budget=budget if budget is not None else calls,
        seed=seed,
        **{progress: on_progress},
        **options,
        **extra,
    )


#: Each analysis' coroutine function and the keyword its progress callback goes by.
_STARTS: dict[str, tuple[Callable[..., Any], str]] = {
    "attribute": (attribute_run, "on_rollout"),
    "why": (why_run, "on_sample"),
    "fix": (fix_run, "on_sample"),
}
