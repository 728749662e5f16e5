"""The shared held walk changes nothing but the cost: rollouts that adopt its decisions are the
rollouts that replay every decision themselves.

Every undiverged decision a rollout holds is taken from the run's held walk
(:mod:`otelcar.replay.held`). These tests replay the framework fixtures (real
instrumentations), the third-party traces and a long synthetic run under random plans with
the walk and with the walk switched off, and require identical rollouts — every field of every
decision, status, error, the requests the policy saw and the run's accounting — and check
that the walk stops where a held decision could not be shared.
"""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path

import pytest

from otelcar.messages import Message, ToolCall
from otelcar.replay import Plan, Resample, harness, load_run
from otelcar.replay.harness import replay
from otelcar.replay.held import HeldWalk, held_walk
from otelcar.replay.recorded import RecordedRun
from otelcar.sync import run_sync
from tests.helpers.frameworks import CASES, FRAMEWORKS, random_env, random_plans, runs_in
from tests.parts import EXTERNAL, need_data


class _NoWalk:
    """A walk that shares nothing: every rollout replays every decision itself."""

    def step(self, index: int) -> None:
        return None


def _rollouts(run: RecordedRun, plan: Plan, *, shared: bool, monkeypatch: pytest.MonkeyPatch):
    seen: list = []
    env = random_env(seen)
    with monkeypatch.context() as patch:
        if not shared:
            patch.setattr(harness, "held_walk", lambda run: _NoWalk())
        rollouts = [run_sync(replay(run, plan, env, rollout=r, base_seed=5)) for r in range(3)]
    return rollouts, [(r.messages, r.seed, r.step) for r in seen], env.accounting.to_dict()


def _check_same_with_and_without_walk(
    run: RecordedRun, rng: random.Random, where: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for plan in random_plans(run, rng, 6):
        shared = _rollouts(run, plan, shared=True, monkeypatch=monkeypatch)
        alone = _rollouts(run, plan, shared=False, monkeypatch=monkeypatch)
        for a, b in zip(shared[0], alone[0], strict=True):
            assert (a.status, a.error, a.index, a.seed) == (b.status, b.error, b.index, b.seed)
            assert len(a.decisions) == len(b.decisions), (where, plan.describe())
            for x, y in zip(a.decisions, b.decisions, strict=True):
                assert dataclasses.asdict(x) == dataclasses.asdict(y), (where, plan.describe())
        assert shared[1] == alone[1], (where, plan.describe())  # the same requests
        assert shared[2] == alone[2], (where, plan.describe())  # the same accounting


@pytest.mark.parametrize("name", CASES)
def test_held_walk_changes_no_rollout_of_a_framework_fixture(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs = runs_in(FRAMEWORKS / name, tmp_path)
    if not runs:
        pytest.skip(f"{name}: no trace with two decisions")
    rng = random.Random(f"held {name}")
    for run in runs:
        _check_same_with_and_without_walk(run, rng, name, monkeypatch)


def test_held_walk_changes_no_rollout_of_a_third_party_trace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    need_data(EXTERNAL)
    runs = runs_in(EXTERNAL, tmp_path)
    assert runs, "no third-party trace with two decisions"
    rng = random.Random(11)
    for run in runs:
        _check_same_with_and_without_walk(run, rng, run.trace_id, monkeypatch)


def test_held_walk_on_a_long_run_is_shared_and_complete(monkeypatch: pytest.MonkeyPatch) -> None:
    from otelcar.testing.scenarios import single_culprit, steps_table

    steps = steps_table(single_culprit(30, 11))
    run = load_run(steps["trace_id"][0], steps)
    _check_same_with_and_without_walk(run, random.Random(4), "synthetic", monkeypatch)
    walk = held_walk(run)
    assert held_walk(run) is walk  # one walk per run object
    assert all(walk.step(k) is not None for k in range(run.horizon))  # nothing stops it
    assert walk.step(run.horizon) is None
    # a rollout resampling the last step adopts every earlier decision from the walk
    rollout = run_sync(replay(run, Plan((Resample(run.decisions[-1].step),)), random_env([])))
    for k, decision in enumerate(rollout.decisions[: run.horizon - 1]):
        assert decision.context is walk.step(k).context


def test_held_walk_stops_where_a_policy_must_answer() -> None:
    """A call the recording has no observation for, and an action that was not recorded,
    end the shared walk: the rollout needs a tool policy or an LLM policy there."""
    from otelcar.testing.scenarios import single_culprit, steps_table

    steps = steps_table(single_culprit(6, 3))
    run = load_run(steps["trace_id"][0], steps)
    third = run.decisions[2]
    assert third.action is not None
    extra = ToolCall("never_recorded", {"x": 1}, "extra")
    third_changed = dataclasses.replace(
        third, action=Message("assistant", None, (*third.action.tool_calls, extra))
    )
    gapped = dataclasses.replace(
        run, decisions=[*run.decisions[:2], third_changed, *run.decisions[3:]]
    )
    walk = HeldWalk(gapped)
    assert walk.step(1) is not None and walk.step(2) is None and walk.step(4) is None
    unrecorded = dataclasses.replace(
        run, decisions=[run.decisions[0], dataclasses.replace(run.decisions[1], action=None)]
    )
    walk = HeldWalk(unrecorded)
    assert walk.step(0) is not None and walk.step(1) is None
    seen: list = []
    rollout = run_sync(replay(unrecorded, Plan(), random_env(seen)))
    assert rollout.decisions[1].origin == "policy:p"
    assert seen[0].step == unrecorded.decisions[1].step  # the policy was asked there


def test_a_rollout_diverging_after_held_steps_gets_the_next_recorded_result() -> None:
    """The cassette serves a repeated call's n-th recorded result to its n-th occurrence: the
    held decisions a rollout adopts count as played, as when it replayed them itself."""
    from otelcar.replay import Do
    from otelcar.replay.recorded import RecordedObservation
    from otelcar.testing.scenarios import single_culprit, steps_table

    steps = steps_table(single_culprit(4, 2))
    run = load_run(steps["trace_id"][0], steps)
    decisions = []
    for d in run.decisions:
        if d.action is None or not d.action.tool_calls:
            decisions.append(d)
            continue
        call = ToolCall("act", {"q": "same"}, f"c{d.index}")
        decisions.append(
            dataclasses.replace(
                d,
                action=Message("assistant", None, (call,)),
                observations=[RecordedObservation(call, f"result {d.index}", None)],
            )
        )
    repeated = dataclasses.replace(run, decisions=decisions)
    forced = Message("assistant", "forced", (ToolCall("act", {"q": "same"}, "z"),))
    plan = Plan((Do(repeated.decisions[2].step, forced),))
    results = []
    for rollout in range(2):  # the second rollout adopts the walk the first one built
        done = run_sync(replay(repeated, plan, random_env([]), rollout=rollout))
        results.append(done.decisions[2].observations[0].result)
    assert results == ["result 2", "result 2"]
