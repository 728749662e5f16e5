"""Tools whose arguments share names with otelcar's internals (``role``, ``function``,
``args``, ``kwargs``, ``self``, ``seed``, ``step``, …), end to end through attribute, why and
fix (issue 37: a tool argument named ``role`` made every rollout fail with "call_user() got
multiple values for keyword argument 'role'", and attribute, why and fix stopped with exit 2).

The scripted agent's tool is a real keyword function (``KeywordToolPolicy``) that raises
unless it receives exactly these arguments, so a name otelcar kept for itself fails the
rollout, which every command below would count and report."""

from __future__ import annotations

from otelcar.attribution import attribute
from otelcar.attribution.context.why import why
from otelcar.attribution.fixes.fix import fix
from otelcar.replay import load_run
from otelcar.report.notes import worded
from otelcar.testing import scenarios as synthetic


def _built(scenario):
    steps, registry, outcome = synthetic.build(scenario)
    return load_run(synthetic.TRACE_ID, steps), registry, outcome


def test_attribute_finds_the_culprit_whatever_its_tool_arguments_are_called():
    scenario = synthetic.internal_names()
    run, registry, outcome = _built(scenario)
    recorded = run.decisions[scenario.answer].action.tool_calls[0].arguments
    assert set(synthetic.INTERNAL_NAMES) <= set(recorded)
    for seed in (1, 2):
        result = attribute(run, registry=registry, outcome=outcome, seed=seed)
        assert result.verdict == "culprit" and result.culprit.index == scenario.answer
        assert result.rollout_errors == (), result.rollout_errors[:2]
        assert all(r.passed for r in result.refutations)


def test_why_and_fix_forward_run_with_such_tools():
    """why re-decides the step whose call carries the names (its same-decision rule compares
    them), and fix --forward runs the rest of the run through the keyword tool."""
    scenario = synthetic.internal_names(p_bad=0.8)
    run, registry, outcome = _built(scenario)
    step = run.decisions[scenario.answer].step
    explained = why(run, step=step, registry=registry, outcome=outcome, seed=1)
    assert explained.base_n >= explained.samples and explained.base_bad > 0
    assert not any("failed" in note for note in worded(explained.notes)), worded(explained.notes)
    repaired = fix(
        run, step=step, why=explained, registry=registry, outcome=outcome, forward=True,
        rollouts=8, seed=1,
    )  # fmt: skip
    forwards = [c.forward for c in repaired.candidates if c.forward is not None]
    # every rollout run was judged (the sequential check stops when its evidence suffices)
    assert forwards and all(f.errors == [] and 0 < f.n == f.rollouts <= 8 for f in forwards)
    # 8 rollouts cannot show a failure rate below 0.3 (13 without failure can): it says so
    assert any("no forward check can PASS" in note for note in worded(repaired.notes))
