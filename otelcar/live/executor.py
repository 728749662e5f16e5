"""Live replay as an executor: each rollout is one run of the user's agent (DESIGN.md §5b).

:class:`LiveExecutor` implements the replay's :class:`~otelcar.replay.execution.Executor`, so
``attribute``, ``why``, ``fix``, ``rollout`` and ``aggregate`` run their rollouts on the
user's own agent through the one seam they already use, with no live branch in any of them.
For a batch of rollouts it starts the model endpoint (:mod:`otelcar.live.endpoint`) on this
event loop, and for each rollout a :class:`~otelcar.live.session.RolloutSession` that plays
the plan, a receiver of its own spans (:mod:`otelcar.live.spans`) and one run of the agent
(:mod:`otelcar.live.agent`) pointed at both, at most ``concurrency`` at once.

A rollout whose agent exits 0 is ``final`` (any exit, when the outcome reads the exit
status: ``exit_status``); an outcome on the agent's process judges how it ended (its exit
status, a line of its output). Its own trace — the spans its agent sent, built into a steps
table as an imported trace is — is its :attr:`~otelcar.replay.harness.Rollout.trace` and is
what any other outcome judges, with the same ``[outcome]`` as the recorded run. An agent
that sent no spans is judged on what the endpoint saw (every answer, and the tool results the
agent sent back), and :attr:`LiveExecutor.judged_on` says which. A rollout whose agent
failed, hung past ``timeout_s`` or whose policy failed is ``failed`` with the reason (its
stderr's last line), never a pass or a fail; the budget running out makes it ``budget``. A
policy that never answered stops the command, as with the rebuilt agent.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from otelcar.live.agent import AgentCommand, agent_environment, run_agent
from otelcar.live.endpoint import ModelEndpoint
from otelcar.live.session import RolloutSession
from otelcar.live.spans import RolloutTrace
from otelcar.outcome import Outcome, judges_exit, judges_process
from otelcar.policies.base import PolicyUnavailable
from otelcar.replay.execution import Judged
from otelcar.replay.harness import BudgetExhausted, Environment, Rollout
from otelcar.replay.plan import Plan
from otelcar.replay.recorded import RecordedRun
from otelcar.replay.rollout_table import rollout_failed


def first_input(run: RecordedRun) -> str | None:
    """The recorded run's first user message (``OTELCAR_INPUT``)."""
    for decision in run.decisions:
        for message in decision.context or ():
            if message.role == "user" and message.content:
                return message.content
    return None


def _judged_on(outcome: Outcome, rollout: Rollout) -> str:
    """What ``rollout`` is judged on (:func:`otelcar.replay.rollout_table.rollout_failed`)."""
    if judges_process(outcome):
        return "process"
    return "trace" if rollout.trace is not None else "requests"


class LiveExecutor:
    """Rollouts as runs of the user's agent (module docstring)."""

    name = "live"
    trace_concurrency = 1
    trace_tasks = False
    #: the agent runs its own tools: no tool policy is asked (attribution says nothing of
    #: tools without one)
    runs_agent_tools = True

    def __init__(self, command: AgentCommand, *, keep_sessions: bool = False) -> None:
        self.command = command
        #: the session of the rollout that finished last (the live fidelity check reads it)
        self.last_session: RolloutSession | None = None
        #: with ``keep_sessions``, every finished session (each rollout's requests and
        #: answers, to inspect); off by default, so an executor that serves many traces
        #: holds no past requests
        self.sessions: list[RolloutSession] | None = [] if keep_sessions else None
        #: how many judged rollouts were judged on their own trace (``"trace"``), on the
        #: requests the endpoint saw (``"requests"``: the agent sent no spans) and on the
        #: agent's process (``"process"``: an outcome on its exit status or output)
        self.judged_on: dict[str, int] = {"trace": 0, "requests": 0, "process": 0}

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
        del concurrency  # the agent's own: [agent] concurrency
        gate = asyncio.Semaphore(self.command.concurrency)
        with ModelEndpoint(asyncio.get_running_loop()) as endpoint:

            async def one(index: int) -> Judged:
                async with gate:
                    judged = await self._one(run, plan, env, endpoint, index, seed, outcome)
                if on_rollout is not None:
                    on_rollout(judged)
                return judged

            return list(await asyncio.gather(*(one(i) for i in indexes)))

    async def _one(
        self,
        run: RecordedRun,
        plan: Plan,
        env: Environment,
        endpoint: ModelEndpoint,
        index: int,
        seed: int,
        outcome: Outcome | None,
    ) -> Judged:
        session = RolloutSession(run, plan, env, index, seed, endpoint.new_token())
        base_url = endpoint.open(session)
        own = RolloutTrace()
        await asyncio.to_thread(own.start)
        try:
            ran = await run_agent(
                self.command,
                base_url=base_url,
                rollout=index,
                seed=seed,
                trace_id=run.trace_id,
                input_text=first_input(run),
                token=session.token,
                telemetry=own.environment(agent_environment(self.command)),
            )
            trace = await asyncio.to_thread(own.steps)
        finally:
            errors = endpoint.close_session(session.token)
            await asyncio.to_thread(own.stop)
        self.last_session = session
        if self.sessions is not None:
            self.sessions.append(session)
        for error in errors:
            if isinstance(error, PolicyUnavailable):
                raise error  # the policy never answered: the whole command stops
        budget = next((e for e in errors if isinstance(e, BudgetExhausted)), None)
        if budget is not None:
            return Judged(session.rollout_record("budget", str(budget)), None)
        exit_judged = outcome is not None and judges_exit(outcome)
        problem = (
            f"the model endpoint could not answer: {errors[0]}"
            if errors
            else ran.failure(self.command.timeout_s, exit_judged=exit_judged)
        )
        if problem is not None:
            tail = ran.stderr_tail.strip()
            detail = f" (stderr: …{tail[-300:]})" if tail and errors else ""
            failed_run = session.rollout_record("failed", problem + detail)
            failed_run.process = ran
            return Judged(failed_run, None)
        rollout = session.rollout_record("final")
        rollout.trace = trace
        rollout.process = ran
        failed = None
        if outcome is not None:
            self.judged_on[_judged_on(outcome, rollout)] += 1
            try:
                failed = await rollout_failed(env.bind(outcome), rollout)
            except Exception as exc:
                rollout.status, rollout.error = "failed", f"outcome: {exc}"
        return Judged(rollout, failed)

    async def call(self, function: Callable[..., Awaitable[Any]], /, *args: Any) -> Any:
        return await function(*args)

    def close(self) -> None:
        pass
