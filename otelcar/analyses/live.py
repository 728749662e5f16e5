"""How a recorded run is made ready for live replay on the user's agent: the live fidelity
check (:func:`live_check`), the requests a passing check kept (:func:`kept_ready`), and the
executor that runs rollouts on the agent (:func:`live_rollouts`). Every analysis of
:mod:`otelcar.analyses.runs` prepares its run through :func:`live_ready`."""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from otelcar.live.check import LiveCheck
    from otelcar.notes import Note
    from otelcar.project_config import ProjectConfig
    from otelcar.replay import RecordedRun


async def live_ready(
    run: RecordedRun, config: ProjectConfig, *, seed: int
) -> tuple[RecordedRun, list[Note]]:
    """With an agent command (``[agent] command`` or ``--agent``): the live fidelity check
    (:func:`live_check`, refused with :class:`~otelcar.live.check.LiveReplayError` unless
    the agent reproduces the recorded run), and the run with the requests the agent made
    (source ``live``), with the check (its ``live_reproduced`` note) and what is read from
    the agent for the result's notes. Without one: the run with the requests a live check
    kept for it (:func:`kept_ready`), else ``run`` as it is."""
    if config.agent_command is None:
        return kept_ready(run, config)
    check, ready, notes = await live_check(run, config, seed=seed)
    check.require()
    return ready, [check.reproduced_note(), *notes]


async def live_check(
    run: RecordedRun, config: ProjectConfig, *, seed: int
) -> tuple[LiveCheck, RecordedRun, list[Note]]:
    """The live fidelity check of ``run`` on ``config``'s agent command
    (:func:`otelcar.live.check.check_live`). When the agent reproduces the run: its requests
    are kept in the store (``config.live_requests``) for later runs without an agent
    command, and ``(check, the run with them as source live, a note saying which parts of
    which steps are read from the agent and where they are kept)``; otherwise ``(check,
    run, [])``."""
    from otelcar.live.check import check_live
    from otelcar.live.kept import read_note, to_keep
    from otelcar.notes import note
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
    saved_to, notes = None, []
    store = config.live_requests
    if store is not None and check.captured:
        try:
            kept = store.save(run.trace_id, to_keep(run, check.captured), command=check.command)
        except (OSError, ValueError) as exc:
            notes.append(note("live_not_kept", error=str(exc)))
        else:
            saved_to = str(kept.path)
    read = read_note(ready.requests, command=check.command, saved_to=saved_to)
    if read is not None:
        notes.insert(0, read)
    elif saved_to is not None:  # every part is declared in [agent], before the agent's
        notes.insert(0, note("live_kept", path=saved_to))
    return check, ready, notes


def kept_ready(run: RecordedRun, config: ProjectConfig) -> tuple[RecordedRun, list[Note]]:
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
    read = read_note(
        ready.requests,
        command=kept.command,
        captured_at=kept.captured_at,
        loaded_from=str(kept.path),
    )
    if read is not None:
        notes.append(read)
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


async def live_prepared(run: RecordedRun, *, config: ProjectConfig, seed: int) -> RecordedRun:
    """The run :func:`live_ready` gives (``run`` itself without an agent command): the
    per-trace preparation of :func:`otelcar.analyses.runs.attribute_traces_run`, a
    module-level function so that a whole attribution can be sent to a worker."""
    ready, _ = await live_ready(run, config, seed=seed)
    return ready
