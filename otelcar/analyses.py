"""The three analyses a user starts on one recorded trace — ``attribute``, ``why`` and ``fix``
— with the defaults of the project's ``otelcar.toml`` filled in, in one place.

The CLI (:mod:`otelcar.cli.replay`, :mod:`otelcar.cli.repair`) and the web console
(:mod:`otelcar.ui`) both start them through these coroutine functions, so a run started from
either spends the same budget, uses the same seed and the same outcome. Each is awaitable (a
server cancels it by cancelling its task: :class:`asyncio.CancelledError` is not caught by
the rollouts) and takes every other option of the library function as a keyword.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from otelcar.replay import Budget

if TYPE_CHECKING:
    from otelcar.attribution.context.result import WhyResult
    from otelcar.attribution.fixes.result import FixResult
    from otelcar.attribution.steps.result import AttributionResult
    from otelcar.project_config import ProjectConfig, ReplaySettings
    from otelcar.replay import RecordedRun


def budget_for(settings: ReplaySettings, max_calls: int | Budget | None = None) -> Budget:
    """The budget of one analysis: :meth:`ReplaySettings.budget` of ``max_calls`` policy
    calls. A :class:`Budget` passed as ``max_calls`` is used as it is: its ``calls`` and
    ``tokens`` count up while the analysis runs, which is what a progress display reads."""
    return max_calls if isinstance(max_calls, Budget) else settings.budget(max_calls)


async def attribute_run(
    run: RecordedRun,
    config: ProjectConfig,
    *,
    budget: int | Budget | None = None,
    seed: int | None = None,
    on_rollout: Callable[[Any], None] | None = None,
    **options: Any,
) -> AttributionResult:
    """:func:`otelcar.attribution.attribute_async` of ``run`` with ``config``'s policies,
    outcome, concurrency, budget (``budget`` policy calls overrides ``[replay] max_calls``)
    and seed; ``options`` are its other keywords (``rollouts``, ``mode``, ``refutation``, …).
    Raises :class:`~otelcar.errors.OtelcarError` subclasses as the library does; the caller
    checks that ``config`` has an outcome."""
    from otelcar.attribution.steps.attribute import attribute_async

    settings = config.replay
    return await attribute_async(
        run,
        registry=config.registry,
        outcome=config.outcome,  # type: ignore[arg-type]
        seed=settings.seed_or(seed),
        budget=budget_for(settings, budget),
        concurrency=settings.concurrency,
        on_rollout=on_rollout,
        **options,
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
    return await why_async(
        run,
        step=step,
        registry=config.registry,
        outcome=config.outcome,
        seed=settings.seed_or(seed),
        budget=budget_for(settings, budget),
        on_sample=on_sample,
        **options,
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
    return await fix_async(
        run,
        registry=config.registry,
        step=step,
        outcome=config.outcome,
        seed=settings.seed_or(seed),
        concurrency=settings.concurrency,
        budget=budget_for(settings, budget),
        on_sample=on_sample,
        **options,
    )


def step_arg(value: str) -> int | str:
    """A ``--step`` value: a decision number, or a name (``culprit``, ``last``)."""
    return int(value) if value.lstrip("-").isdigit() else value
