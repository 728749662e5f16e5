"""A budget too small for any verdict is refused before a call is spent, with the budget that
would do (:mod:`otelcar.attribution.experiment.floor`); an attribution that ran out of budget
says what it did not measure instead of printing q = nan and a point of no return."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from otelcar import attribute, fix, load_run, why
from otelcar.attribution.context.why import call_floor as why_floor
from otelcar.attribution.fixes.fix import call_floor as fix_floor
from otelcar.attribution.stats import Interval
from otelcar.attribution.steps.attribute import call_floor
from otelcar.attribution.steps.curve import StepEffect, point_of_no_return
from otelcar.cli import cli
from otelcar.errors import BudgetTooSmall
from otelcar.render import attribution_report
from otelcar.replay import Budget, Environment
from otelcar.report.prose import document
from otelcar.report.prose import headline as headline_of
from otelcar.testing import TRACE_ID, Scenario, build, single_culprit
from tests.conftest import NEW_CONTENT
from tests.helpers.scripted_refund import imported_trace_with_policy, never_called


def _repeating(n: int) -> Scenario:
    """Every re-decision repeats the recorded action, and the run always fails."""
    return Scenario("repeat", ["ok"] * n, [[("ok", 1.0)] for _ in range(n)], lambda c: True, None)


def test_attribute_refuses_a_budget_below_its_first_look_and_spends_nothing():
    steps, registry, outcome = build(single_culprit(4, 2))
    run = load_run(TRACE_ID, steps)
    assert run.horizon == 5 and call_floor(run).calls == 8 * 5
    env = Environment(registry, Budget(20))
    with pytest.raises(BudgetTooSmall) as refused:
        attribute(run, registry=registry, outcome=outcome, env=env)
    assert str(refused.value) == (
        "a budget of 20 policy calls cannot reach any verdict on this trace (the first look "
        "needs at least 40: 8 rollouts per plan × 5 decisions re-decided): use --budget 40 or "
        "more"
    )
    assert (refused.value.budget, refused.value.needed) == (20, 40)
    assert env.accounting.llm_calls == 0 and env.budget.calls == 0
    assert call_floor(run, rollouts=12).calls == 60  # fixed R: its one look
    assert call_floor(run, first_look=4).calls == 20


def test_the_floor_is_tight_a_policy_that_repeats_reaches_a_verdict_with_exactly_it():
    """Rollout r of every plan asks the same requests when every re-decision repeats the
    recorded action, so the cache serves all but the n first ones: the floor is reachable."""
    steps, registry, outcome = build(_repeating(3))
    run = load_run(TRACE_ID, steps)
    floor = call_floor(run).calls
    result = attribute(run, registry=registry, outcome=outcome, seed=1, budget=Budget(floor))
    # A verdict: undecided, since locked-in needs every step's upper bound below the margin
    # (0.3), which 8 rollouts per plan cannot show (Δ ≤ 0.37); without the margin, locked-in.
    assert result.verdict == "undecided" and result.rollout_errors == ()
    unbounded = attribute(
        run, registry=registry, outcome=outcome, seed=1, budget=Budget(floor), margin=1.01
    )
    assert unbounded.verdict == "locked-in" and unbounded.cost["llm_calls"] == floor
    assert result.cost["llm_calls"] == floor and result.baseline.n == 8
    with pytest.raises(BudgetTooSmall, match=f"use --budget {floor} or more"):
        attribute(run, registry=registry, outcome=outcome, budget=Budget(floor - 1))


def test_bisection_has_a_floor_of_its_own_and_spends_at_least_it():
    steps, registry, outcome = build(single_culprit(12, 7))
    run = load_run(TRACE_ID, steps)
    floor = call_floor(run, mode="bisect")
    # search at the second look (16) on P_-1 and floor(log2 13) = 3 midpoints, then 16 more
    assert floor.calls == 16 * 4 + 16 and "bisection needs at least 80" in floor.detail
    with pytest.raises(BudgetTooSmall, match="use --budget 80 or more"):
        attribute(run, registry=registry, outcome=outcome, mode="bisect", budget=Budget(79))
    found = attribute(run, registry=registry, outcome=outcome, mode="bisect", seed=3)
    assert found.cost["llm_calls"] >= floor.calls


def test_why_and_fix_refuse_a_budget_below_their_base_arms():
    steps, registry, outcome = build(single_culprit(4, 2))
    run = load_run(TRACE_ID, steps)
    step = run.decisions[2].step
    assert why_floor(run, step=step, samples=10).calls == 10
    assert why_floor(run, step="culprit", samples=10).calls == 40 + 10
    assert fix_floor(run, step=step, samples=10).calls == 10 + 20
    assert fix_floor(run, step="culprit", samples=6).calls == 40 + 6 + 12
    env = Environment(registry, Budget(9))
    with pytest.raises(BudgetTooSmall, match=r"\(the base arm needs 10 re-decisions\)"):
        why(run, step=step, registry=registry, outcome=outcome, env=env)
    assert env.accounting.llm_calls == 0
    with pytest.raises(BudgetTooSmall, match="use --budget 58 or more"):
        fix(run, registry=registry, outcome=outcome, samples=6, budget=Budget(57))


def test_a_shared_budget_counts_what_it_spent_already():
    steps, registry, outcome = build(single_culprit(4, 2))
    run = load_run(TRACE_ID, steps)
    budget = Budget(45, calls=10)
    with pytest.raises(BudgetTooSmall) as refused:
        attribute(run, registry=registry, outcome=outcome, budget=budget)
    assert "a budget of 45 policy calls (35 left after 10 spent)" in str(refused.value)
    assert str(refused.value).endswith("use --budget 50 or more")


@pytest.mark.parametrize(
    ("command", "message"),
    [
        (["attribute", "--budget", "20"], "the first look needs at least 24"),
        (["why", "--step", "4", "--budget", "9"], "the base arm needs 10 re-decisions"),
        (["fix", "--step", "4", "--budget", "29"], "use --budget 30 or more"),
    ],
)
def test_the_cli_refuses_before_any_call(tmp_path: Path, command: list[str], message: str):
    runner, store, config = imported_trace_with_policy(tmp_path)
    never_called(tmp_path, config)
    base = [*store, command[0], NEW_CONTENT[:8], "-c", str(config)]
    done = runner.invoke(cli, [*base, "--fail-if", "tool_called:issue_refund", *command[1:]])
    assert done.exit_code == 2, done.output
    (line,) = done.output.strip().splitlines()
    assert line.startswith("error: a budget of ") and message in line


def _effect(step: int, n: int, q_ci: tuple[float, float]) -> StepEffect:
    return StepEffect(
        index=step,
        step=step,
        agent=None,
        name="x",
        n=n,
        fails=n,
        q=1.0 if n else float("nan"),
        q_ci=Interval(*q_ci),
        pairs=n,
        only_now=0,
        only_before=0,
        delta=0.0,
        delta_ci=Interval(-1.0, 1.0),
        p_value=1.0,
    )


def test_an_unmeasured_step_is_never_the_point_of_no_return():
    measured = [_effect(0, 8, (0.6, 1.0)), _effect(1, 8, (0.6, 1.0))]
    assert point_of_no_return(measured, True) == 0
    gap = [_effect(0, 0, (0.0, 1.0)), _effect(1, 8, (0.6, 1.0))]
    assert point_of_no_return(gap, True) == 1
    assert point_of_no_return([_effect(0, 8, (0.6, 1.0)), _effect(1, 0, (0.0, 1.0))], True) is None


def test_a_result_cut_by_the_budget_says_what_it_did_not_measure():
    """At the floor the single-culprit run's first look is not complete (its rollouts take
    several decisions): the result is undecided and must not read as a finding."""
    steps, registry, outcome = build(single_culprit(4, 2))
    run = load_run(TRACE_ID, steps)
    result = attribute(run, registry=registry, outcome=outcome, seed=1, budget=Budget(40))
    assert result.verdict == "undecided" and result.stop_reason == "budget"
    assert result.unmeasured()[0] == "the start" and result.point_of_no_return is None
    headline = headline_of(result)
    assert headline.startswith("Undecided: the budget ran out before every step was measured")
    assert "have no judged rollout, so the effects there are unknown" in headline
    out = io.StringIO()
    attribution_report(Console(file=out, width=220), document(result))
    printed = out.getvalue()
    assert "not measured" in printed and "nan" not in printed
    assert "point of no return" not in printed
