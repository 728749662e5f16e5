"""The live fidelity check: does the user's agent, answered from the trace, make the recorded
requests again?

One held live rollout (``Plan()``: every answer the recorded one) must reproduce every
recorded request: the same messages (the recorded context), and where the trace recorded
them the same tools and tool choice; and the agent must make exactly the recorded number of
model calls and exit 0. The first request that differs is reported with what differs. What
the agent's requests carried (tools, tool choice, parameters) is kept by step
(:attr:`LiveCheck.captured`): it fills what the trace did not record, marked ``live``
(:func:`otelcar.replay.requests.plan_requests`), so the rebuilt requests of ``why`` and
``fix`` are the agent's own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from otelcar.errors import OtelcarError
from otelcar.live.agent import AgentCommand
from otelcar.live.executor import LiveExecutor
from otelcar.notes import Note, note
from otelcar.outcome import Outcome, judges_process
from otelcar.replay.harness import Environment
from otelcar.replay.plan import Plan
from otelcar.replay.recorded import RecordedRun


class LiveReplayError(OtelcarError):
    """The live agent does not reproduce the recorded run: live counterfactuals would start
    from another run than the one being explained."""


@dataclass
class RequestCheck:
    """One recorded decision against the agent's request for it (``None``: not made)."""

    step: int
    index: int
    made: bool
    differs: list[str] = field(default_factory=list)
    tools: list[str] | None = None
    tool_choice: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "index": self.index,
            "made": self.made,
            "differs": self.differs,
            "tools": self.tools,
            "tool_choice": self.tool_choice,
        }


@dataclass
class LiveCheck:
    """The held live rollout of one trace (module docstring)."""

    trace_id: str
    command: str
    requests: list[RequestCheck]
    made: int
    status: str
    error: str | None
    recorded_failed: bool | None = None
    replayed_failed: bool | None = None
    captured: dict[int, dict[str, Any]] = field(default_factory=dict)
    #: what the outcome judged: ``"trace"`` (the agent's own spans), ``"requests"`` (the
    #: agent sent none: what the endpoint saw), ``"process"`` (its exit status or output)
    #: or ``None`` (no outcome, or not judged)
    judged_on: str | None = None
    #: how the held run's process ended (:class:`otelcar.live.agent.AgentRun`): with an
    #: outcome on the process, the recorded run's outcome is read from it
    process: Any = None

    @property
    def reproduced(self) -> bool:
        """Every recorded request made again, as recorded, and no more; the agent exited 0;
        with an outcome, the same outcome."""
        return (
            self.status == "final"
            and all(r.made and not r.differs for r in self.requests)
            and self.made == len(self.requests)
            and self.recorded_failed == self.replayed_failed
        )

    def reproduced_note(self) -> Note:
        """The ``live_reproduced`` note a result made on the agent carries: the check that
        made its rollouts' environment (worded as the check's headline)."""
        return note(
            "live_reproduced",
            trace_id=self.trace_id,
            command=self.command,
            requests=len(self.requests),
            judged_on=self.judged_on,
            returncode=getattr(self.process, "returncode", None),
            replayed_failed=self.replayed_failed,
        )

    def first_difference(self) -> str | None:
        if self.status != "final":
            return f"the agent's run did not finish: {self.error}"
        for r in self.requests:
            if not r.made:
                return f"the agent made no request for step {r.step} (it made {self.made})"
            if r.differs:
                return f"its request for step {r.step} differs: {'; '.join(r.differs)}"
        if self.made > len(self.requests):
            return f"the agent made {self.made} requests, the recording {len(self.requests)}"
        if self.recorded_failed != self.replayed_failed:
            return (
                f"the outcome differs: recorded failed={self.recorded_failed}, "
                f"live failed={self.replayed_failed}"
            )
        return None

    def to_dict(self) -> dict[str, Any]:
        return {
            "trace_id": self.trace_id,
            "command": self.command,
            "reproduced": self.reproduced,
            "status": self.status,
            "error": self.error,
            "made": self.made,
            "recorded_failed": self.recorded_failed,
            "replayed_failed": self.replayed_failed,
            "judged_on": self.judged_on,
            "exit_status": getattr(self.process, "returncode", None),
            "requests": [r.to_dict() for r in self.requests],
        }

    def require(self) -> None:
        """Raise :class:`LiveReplayError` unless :attr:`reproduced`."""
        if not self.reproduced:
            raise LiveReplayError(
                f"live replay of {self.trace_id} with `{self.command}` does NOT reproduce the "
                f"recorded run: {self.first_difference()}; live counterfactuals would start "
                "from another run. "
                "Check the command (it gets the recorded run's input as OTELCAR_INPUT), or "
                "leave out --agent to use the rebuilt agent (otelcar replay TRACE --agent CMD "
                "shows every request)"
            )


async def check_live(
    run: RecordedRun,
    command: AgentCommand,
    env: Environment,
    *,
    outcome: Outcome | None = None,
    seed: int = 0,
) -> LiveCheck:
    """Run the agent once with every answer from the trace and compare (module docstring)."""
    executor = LiveExecutor(command)
    (judged,) = await executor.run_rollouts(
        run, Plan(), env, indexes=[0], seed=seed, outcome=outcome, concurrency=1, on_rollout=None
    )
    session = executor.last_session
    assert session is not None  # one rollout ran
    checks: list[RequestCheck] = []
    captured: dict[int, dict[str, Any]] = {}
    for decision in run.decisions:
        exchange = (
            session.exchanges[decision.index] if decision.index < len(session.exchanges) else None
        )
        if exchange is None:
            checks.append(RequestCheck(decision.step, decision.index, made=False))
            continue
        request = exchange.request
        names = [str(t.get("name")) for t in request.tools or ()]
        check = RequestCheck(
            decision.step, decision.index, True, [], names, request.tool_choice_text
        )
        if exchange.differs:
            check.differs.append(exchange.differs)
        if decision.tools is not None and names != [str(t.get("name")) for t in decision.tools]:
            recorded = [str(t.get("name")) for t in decision.tools]
            check.differs.append(f"tools {names} where the trace recorded {recorded}")
        sent = request.tool_choice_text or ("auto" if request.tools else None)  # API default
        if decision.tool_choice is not None and sent != decision.tool_choice:
            check.differs.append(
                f"tool choice {request.tool_choice_text} where the trace recorded "
                f"{decision.tool_choice}"
            )
        checks.append(check)
        if not check.differs and not exchange.diverged_before:
            captured[decision.step] = {
                "tools": list(request.tools or ()),
                "tool_choice": request.tool_choice_text,
                "params": dict(request.params),
            }
    process = judged.rollout.process
    if outcome is None:
        recorded_failed = None
    elif judges_process(outcome):
        # A trace records no process: a held replay that made every recorded request again
        # ended as the recorded run did, so its process is the recorded run's (headline).
        recorded_failed = judged.failed
    else:
        recorded_failed = await outcome.failed(run.steps)
    return LiveCheck(
        run.trace_id,
        command.describe(),
        checks,
        len(session.exchanges),
        judged.rollout.status,
        judged.rollout.error,
        recorded_failed,
        judged.failed,
        captured,
        next((k for k, n in executor.judged_on.items() if n), None),
        process,
    )
