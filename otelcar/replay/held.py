"""The held walk of a run: its undiverged decisions, replayed once and shared by every rollout.

Until a rollout diverges from the recording, each decision it takes without an intervention
is the recorded one: the recorded action on the recorded context (the template expanded with
nothing changed), each tool call answered by the cassette, or left unrecorded where the
recording has no result. What such a *held* decision looks like depends on the run alone —
not on the plan, the seed, the policies or the environment — so it is replayed once per run
(:func:`held_walk`) and every rollout adopts it (:meth:`HeldStep.adopt`) instead of rebuilding
the context and replaying the tools. A rollout that re-decides one step of a long run then
walks the steps it holds for the cost of a few dictionary updates, before the intervention and
after it when the re-decision repeats the recorded action.

The shared walk stops at the first decision whose held replay could not be shared: one
without a recorded action (it needs a policy), one with a call the cassette cannot answer (it
needs a tool policy), or one whose replayed results differ from the recorded ones (the
rollout diverges there). From that decision on, a rollout does its own work, exactly as it did
before the walk existed; the rollouts are the same either way (``tests/test_replay_held.py``).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from otelcar.identity import IdentityMemo
from otelcar.replay.cassette import Cassette, call_key
from otelcar.replay.contexts import ReplayedObservation, RolloutContexts, SharedContext
from otelcar.replay.recorded import RecordedDecision, RecordedRun, ends_run


@dataclass(frozen=True, slots=True)
class HeldStep:
    """Decision ``index`` replayed held on an undiverged rollout: its context (shared, never
    changed), its recorded action, what its tool calls returned, the cassette entries they
    consumed, the rollout's context state after it, and whether it ends the run."""

    decision: RecordedDecision
    context: SharedContext | None
    observations: tuple[ReplayedObservation, ...]
    plays: tuple[tuple[str, str], ...]
    state: object  # RolloutContexts' latest built context after this decision
    ends: bool

    def adopt(self, contexts: RolloutContexts, cassette: Cassette) -> list[ReplayedObservation]:
        """Bring a rollout's ``contexts`` and ``cassette`` to where replaying this decision
        held would have left them; returns the rollout's own list of the observations."""
        observations = list(self.observations)
        assert self.decision.action is not None
        contexts.adopt_held(self.decision.index, self.decision.action, observations, self.state)
        cassette.consume(self.plays)
        return observations


class HeldWalk:
    """The held replay of one run, extended decision by decision as rollouts ask for it (safe
    to share between threads)."""

    def __init__(self, run: RecordedRun) -> None:
        self._run = run
        self._contexts = RolloutContexts(run)
        self._cassette = Cassette(run)
        self._steps: list[HeldStep] = []
        self._stopped = False
        self._lock = threading.Lock()

    def step(self, index: int) -> HeldStep | None:
        """Decision ``index`` held on an undiverged rollout, or ``None`` where the shared walk
        has stopped (the rollout replays that decision itself)."""
        if index < len(self._steps):
            return self._steps[index]
        with self._lock:
            while len(self._steps) <= index and not self._stopped:
                held = self._next()
                if held is None:
                    self._stopped = True
                else:
                    self._steps.append(held)
            return self._steps[index] if index < len(self._steps) else None

    def _next(self) -> HeldStep | None:
        k = len(self._steps)
        if k >= self._run.horizon:
            return None
        recorded = self._run.decisions[k]
        action = recorded.action
        if action is None:
            return None
        context = self._contexts.context(recorded)[0] if recorded.context is not None else None
        observations: list[ReplayedObservation] = []
        plays: list[tuple[str, str]] = []
        for index, call in enumerate(action.tool_calls):
            recorded_obs = (
                recorded.observations[index] if index < len(recorded.observations) else None
            )
            if recorded_obs is None:
                return None  # a call without a recorded observation: a tool policy answers
            if recorded_obs.result is None and recorded_obs.error is None:
                obs = ReplayedObservation(call, None, None, "not recorded")
            else:
                hit = self._cassette.play(call.name, call.arguments)
                if hit is None or hit[0] != recorded_obs.result:
                    return None  # the rollout diverges here
                plays.append(call_key(call.name, call.arguments))
                obs = ReplayedObservation(call, hit[0], hit[1], "cassette")
            observations.append(obs)
        self._contexts.set_action(k, action, changed=False)
        self._contexts.set_observations(k, observations, ())
        return HeldStep(
            recorded,
            context,
            tuple(observations),
            tuple(plays),
            self._contexts.latest,
            ends_run(action, recorded, self._run),
        )


_WALKS: IdentityMemo[RecordedRun, HeldWalk] = IdentityMemo(8)


def held_walk(run: RecordedRun) -> HeldWalk:
    """The run's shared held walk (one per run object, kept for the latest few runs)."""
    return _WALKS.get(run, HeldWalk)
