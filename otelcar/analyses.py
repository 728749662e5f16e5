"""The three analyses a user starts on one recorded trace — ``attribute``, ``why`` and ``fix``
— with the defaults of the project's ``otelcar.toml`` filled in, in one place.

The CLI (:mod:`otelcar.cli.replay`, :mod:`otelcar.cli.repair`) and the web console
(:mod:`otelcar.ui`) both start them through these coroutine functions, so a run started from
either spends the same budget, uses the same seed and the same outcome. Each is awaitable (a
server cancels it by cancelling its task: :class:`asyncio.CancelledError` is not caught by
the rollouts) and takes every other option of the library function as a keyword.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any

from otelcar.replay import Budget

#: Re-decisions per step of the policy check ``attribute`` runs at its culprit: 8 shows a
#: policy that reproduces the action at most once to be below 50 % (Wilson upper bound).
POLICY_CHECK_SAMPLES = 8

if TYPE_CHECKING:
    from otelcar.attribution.aggregate import TraceVerdict
    from otelcar.attribution.context.result import WhyResult
    from otelcar.attribution.fixes.result import FixResult
    from otelcar.attribution.steps.result import AttributionResult
    from otelcar.live.check import LiveCheck
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
    spent = budget_for(settings, budget)
    run, notes = await live_ready(run, config, seed=settings.seed_or(seed))
    with live_rollouts(config):
        result = await attribute_async(
            run,
            registry=config.registry,
            outcome=config.outcome,  # type: ignore[arg-type]
            seed=settings.seed_or(seed),
            budget=spent,
            concurrency=settings.concurrency,
            on_rollout=on_rollout,
            policy_check=policy_check,
            **options,
        )
    result.notes[:0] = notes
    return result


async def live_ready(
    run: RecordedRun, config: ProjectConfig, *, seed: int
) -> tuple[RecordedRun, list[str]]:
    """With an agent command (``[agent] command`` or ``--agent``): the live fidelity check
    (:func:`live_check`, refused with :class:`~otelcar.live.check.LiveReplayError` unless
    the agent reproduces the recorded run), and the run with the requests the agent made
    (source ``live``), with the check's headline and what is read from the agent for the
    result's notes. Without one: the run with the requests a live check kept for it
    (:func:`kept_ready`), else ``run`` as it is."""
    if config.agent_command is None:
        return kept_ready(run, config)
    check, ready, notes = await live_check(run, config, seed=seed)
    check.require()
    return ready, [check.headline(), *notes]


async def live_check(
    run: RecordedRun, config: ProjectConfig, *, seed: int
) -> tuple[LiveCheck, RecordedRun, list[str]]:
    """The live fidelity check of ``run`` on ``config``'s agent command
    (:func:`otelcar.live.check.check_live`). When the agent reproduces the run: its requests
    are kept in the store (``config.live_requests``) for later runs without an agent
    command, and ``(check, the run with them as source live, a note saying which parts of
    which steps are read from the agent and where they are kept)``; otherwise ``(check,
    run, [])``."""
    from otelcar.live.check import check_live
    from otelcar.live.kept import read_note, to_keep
    from otelcar.replay import Environment, load_run

    assert config.agent_command is not None
    check = await check_live(
        run,
        config.agent_command,
        Environment(config.registry),
        outcome=config.outcome,
        seed=seed,
    )
    if not check.reproduced:
        return check, run, []
    ready = load_run(run.trace_id, run.steps, config.agent, live=check.captured)
    ready.process = check.process  # what an outcome on the process reads for the recorded run
    read = read_note(ready.requests, command=check.command)
    where, notes = "", []
    store = config.live_requests
    if store is not None and check.captured:
        try:
            kept = store.save(run.trace_id, to_keep(run, check.captured), command=check.command)
        except (OSError, ValueError) as exc:
            notes.append(f"warning: the live agent's requests could not be kept: {exc}")
        else:
            where = f"kept in {kept.path} for later runs without --agent"
    if read is not None:
        notes.insert(0, f"{read}; {where}" if where else read)
    elif where:  # every part is declared in [agent], which comes before the agent's
        notes.insert(0, f"the live agent's requests are {where}")
    return check, ready, notes


def kept_ready(run: RecordedRun, config: ProjectConfig) -> tuple[RecordedRun, list[str]]:
    """``run`` with the requests a passing live check kept for its trace
    (``config.live_requests``, :mod:`otelcar.store.live_requests`) as source ``live``, and
    notes saying which parts of which steps are read from the agent, with its command and
    when they were captured; kept requests that no longer fit the trace (or a damaged file)
    are left out with a warning note. ``(run, [])`` when none are kept."""
    store = config.live_requests
    if store is None:
        return run, []
    from otelcar.live.kept import fitting, read_note
    from otelcar.replay import load_run

    kept, notes = store.load(run.trace_id)
    if kept is None:
        return run, notes
    live, stale = fitting(run, kept)
    notes += stale
    if not live:
        return run, notes
    ready = load_run(run.trace_id, run.steps, config.agent, live=live, live_rollouts=False)
    read = read_note(ready.requests, command=kept.command, captured_at=kept.captured_at)
    if read is not None:
        notes.append(
            f"{read}, kept in {kept.path} (delete the file to forget them; --agent CMD "
            "captures them anew)"
        )
    return ready, notes


def live_rollouts(config: ProjectConfig) -> AbstractContextManager[Any]:
    """The rollouts started in the block run on the user's agent
    (:class:`~otelcar.live.executor.LiveExecutor`) when ``config`` names an agent command;
    otherwise wherever they would (a no-op)."""
    if config.agent_command is None:
        return nullcontext()
    from otelcar.live.executor import LiveExecutor
    from otelcar.replay.execution import use_executor

    return use_executor(LiveExecutor(config.agent_command))


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
    run, notes = await live_ready(run, config, seed=settings.seed_or(seed))
    with live_rollouts(config):  # --step culprit attributes first
        result = await why_async(
            run,
            step=step,
            registry=config.registry,
            outcome=config.outcome,
            seed=settings.seed_or(seed),
            budget=budget_for(settings, budget),
            on_sample=on_sample,
            **options,
        )
    result.notes[:0] = notes
    return result


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
    run, notes = await live_ready(run, config, seed=settings.seed_or(seed))
    with live_rollouts(config):  # --forward's rollouts run on the agent
        result = await fix_async(
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
    result.notes[:0] = notes
    return result


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


async def live_prepared(run: RecordedRun, *, config: ProjectConfig, seed: int) -> RecordedRun:
    """The run :func:`live_ready` gives (``run`` itself without an agent command): the
    per-trace preparation of :func:`attribute_traces_run`, a module-level function so that a
    whole attribution can be sent to a worker."""
    ready, _ = await live_ready(run, config, seed=seed)
    return ready


def step_arg(value: str) -> int | str:
    """A ``--step`` value: a decision number, or a name (``culprit``, ``last``)."""
    return int(value) if value.lstrip("-").isdigit() else value
