"""Named timelines: ``rollout --save`` keeps a plan's rollouts, ``timelines`` lists them,
``show --timeline`` shows one, ``diff`` says where two runs part (terminal, JSON, HTML).

On the refund trace (tests/fixtures, written by the real openai-v2 instrumentation) with the
scripted policy of tests/test_attribution.py: decision 1 (step 4) re-decided issues the
refund with probability 0.1, else answers "needs a manager's approval" and the run ends.
Where each rollout parted is checked against the rollout's own steps, read from the saved
Parquet file, not against the diff's own logic.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from otelcar.cli import cli
from otelcar.messages import Message, ToolCall
from otelcar.replay.divergence import compare_contexts, diff_paths
from otelcar.replay.timelines import (
    PathDecision,
    PathObservation,
    RunPath,
    list_timelines,
    load_timeline,
    trace_dir,
)
from tests.conftest import NEW_CONTENT
from tests.helpers.schemas import validator
from tests.helpers.scripted_refund import OUTCOME, imported_trace_with_policy
from tests.parts import headless_chromium

ROOT = Path(__file__).resolve().parents[1]
SCHEMAS = ROOT / "schemas"


@pytest.fixture
def project(tmp_path: Path) -> dict[str, Any]:
    runner, store, config = imported_trace_with_policy(tmp_path)
    config.write_text(config.read_text() + OUTCOME)
    sys.path.insert(0, str(tmp_path))

    def otelcar(*args: str, code: int = 0) -> Any:
        result = runner.invoke(cli, [*store, *args])
        assert result.exit_code == code, result.output
        return result

    return {"run": otelcar, "config": str(config), "store": tmp_path / "store", "tmp": tmp_path}


def _save(project: dict[str, Any], name: str, *plan: str, n: int = 16) -> Any:
    return project["run"](
        "rollout", NEW_CONTENT[:8], "-c", project["config"], *plan, "-n", str(n), "--save", name
    )


def _refunded_at_decision_1(steps: pl.DataFrame) -> dict[int, bool]:
    """Rollout → whether its second decision called issue_refund (from the saved steps)."""
    out = {}
    for rollout, rows in steps.filter(pl.col("kind") == "llm").group_by("rollout"):
        second = rows.sort("step").row(1, named=True)
        calls = (second["output"] or {}).get("tool_calls") or []
        out[int(rollout[0])] = any(c["name"] == "issue_refund" for c in calls)
    return out


def test_a_saved_timeline_is_listed_shown_and_diffed_against_the_recorded_run(project):
    otelcar = project["run"]
    saved = _save(project, "redecide-refund", "--resample", "4", "--seed", "3")
    assert "kept as timeline redecide-refund" in saved.output

    listed = json.loads(otelcar("timelines", NEW_CONTENT[:8], "--json").output)
    validator("timelines-list.schema.json").validate(listed)
    (info,) = listed["timelines"]
    assert info["name"] == "redecide-refund" and info["plan_text"] == "resample(4)"
    assert info["seed"] == 3 and len(info["rollouts"]) == 16 and info["recorded_failed"] is True
    assert "issue_refund" in info["outcome"] and info["policies"]["llm"] == "CallableLLMPolicy"
    table = otelcar("timelines", NEW_CONTENT[:8]).output
    assert "redecide-refund" in table and "resample(4)" in table

    timeline = load_timeline(project["store"], listed["trace_id"], "redecide-refund")
    refunded = _refunded_at_decision_1(timeline.steps)
    assert 0 < sum(refunded.values()) < 16, "seed 3 should give both branches"
    # The outcome kept per rollout is the rollout's own: failed exactly when it refunded.
    assert {r["rollout"]: r["failed"] for r in info["rollouts"]} == refunded
    assert info["failed"] == sum(refunded.values())

    shown = json.loads(
        otelcar(
            "show", NEW_CONTENT[:8], "--timeline", "redecide-refund", "--rollout", "2", "--json"
        ).output
    )
    validator("timeline.schema.json").validate(shown)
    assert shown["rollout"] == 2
    first, second = shown["decisions"][:2]
    assert first["origin"] == "recorded" and second["origin"].startswith("policy:")
    assert [m["role"] for m in second["context"]][-2:] == ["tool", "tool"]
    text = otelcar("show", NEW_CONTENT[:8], "--timeline", "redecide-refund").output
    assert "plan: resample(4)" in text and "the recorded run failed" in text

    html = project["tmp"] / "diff.html"
    out = otelcar(
        "diff", NEW_CONTENT[:8], "redecide-refund", "--json", "-", "--html", str(html)
    ).output
    diff = json.loads(out)
    validator("diff.schema.json").validate(diff)
    assert diff["b"] == "recorded" and diff["detail"]["b"]["failed"] is True
    by_rollout = {r["rollout"]: r for r in diff["rollouts"]}
    for rollout, did_refund in refunded.items():
        parting = by_rollout[rollout]
        if did_refund:  # same call at step 4; the recorded final answer is held: never part
            assert parting["parted_at"] is None, parting
        else:
            assert (parting["parted_at"], parting["parted_on"]) == (1, "action"), parting
            assert parting["recorded_step"] == 4
        assert parting["failed"] is did_refund
    assert diff["never_parted"] == sum(refunded.values())
    assert diff["a_failed"] == sum(refunded.values()) and diff["a_judged"] == 16
    detail = diff["detail"]
    assert detail["shared_decisions"] == detail["parted_at"] or detail["parted_at"] is None

    terminal = otelcar("diff", NEW_CONTENT[:8], "redecide-refund").output
    assert "over the 16 rollouts of redecide-refund" in terminal
    assert "outcome: A" in terminal and "B failed" in terminal
    (project["tmp"] / "diff.json").write_text(out)
    again = project["tmp"] / "again.html"
    reported = otelcar("report", str(project["tmp"] / "diff.json"), "--html", str(again))
    assert again.read_text() == html.read_text(), reported.output
    assert "over the 16 rollouts" in otelcar("report", str(project["tmp"] / "diff.json")).output
    page = html.read_text()
    assert "otelcar diff" in page and "Content-Security-Policy" in page
    assert json.loads(page.split('id="otelcar-data">')[1].split("</script>")[0]) == diff


def test_two_timelines_are_paired_by_rollout_and_part_where_their_plans_differ(project):
    otelcar = project["run"]
    _save(project, "step4", "--resample", "4", "--seed", "3")
    _save(project, "from1", "--from-step", "1", "--seed", "3")
    diff = json.loads(otelcar("diff", NEW_CONTENT[:8], "step4", "from1", "--json", "-").output)
    validator("diff.schema.json").validate(diff)
    trace = diff["trace_id"]
    refunded = _refunded_at_decision_1(load_timeline(project["store"], trace, "step4").steps)
    # Rollout r of both plans re-decides step 4 with the same seed, so they take the same
    # action there. After a refund, step4 holds the recorded final answer and from1
    # re-decides it ("Done."): they part at decision 2 on the action; otherwise both end.
    for parting in diff["rollouts"]:
        if refunded[parting["rollout"]]:
            assert (parting["parted_at"], parting["parted_on"]) == (2, "action")
        else:
            assert parting["parted_at"] is None
    # Detailing another pair of rollouts is allowed, and says so.
    other = json.loads(
        otelcar(
            "diff",
            NEW_CONTENT[:8],
            "step4",
            "from1",
            "--rollout",
            "1",
            "--b-rollout",
            "5",
            "--json",
            "-",
            "--all-steps",
        ).output
    )
    assert other["detail"]["a"]["label"] == "step4#1" and other["detail"]["b"]["label"] == "from1#5"
    assert other["detail"]["steps"][0]["index"] == 0  # --all-steps


def test_names_are_checked_and_a_taken_name_is_refused_before_any_rollout(project):
    otelcar = project["run"]
    bad = otelcar(
        "rollout",
        NEW_CONTENT[:8],
        "-c",
        project["config"],
        "--resample",
        "4",
        "--save",
        "../escape",
        code=2,
    )
    assert "cannot name a timeline" in bad.output
    _save(project, "kept", "--resample", "4", n=4)
    taken = _save_expecting(project, "kept", code=2)
    assert "already has a timeline 'kept'" in taken.output and "--overwrite" in taken.output
    assert "rollouts" not in taken.output  # refused before running anything
    replaced = otelcar(
        "rollout",
        NEW_CONTENT[:8],
        "-c",
        project["config"],
        "--resample",
        "4",
        "-n",
        "6",
        "--save",
        "kept",
        "--overwrite",
    )
    assert "kept as timeline kept" in replaced.output
    listed = json.loads(otelcar("timelines", NEW_CONTENT[:8], "--json").output)
    assert [len(t["rollouts"]) for t in listed["timelines"]] == [6]
    missing = otelcar("show", NEW_CONTENT[:8], "--timeline", "nope", code=2)
    assert "no timeline 'nope'" in missing.output and "kept: kept" in missing.output
    otelcar("diff", NEW_CONTENT[:8], "nope", code=2)
    otelcar("show", NEW_CONTENT[:8], "--rollout", "1", code=2)  # --rollout needs --timeline
    absent = otelcar("show", NEW_CONTENT[:8], "--timeline", "kept", "--rollout", "9", code=2)
    assert "no rollout 9" in absent.output
    otelcar("timelines", NEW_CONTENT[:8], "--delete", "kept")
    assert json.loads(otelcar("timelines", NEW_CONTENT[:8], "--json").output)["timelines"] == []


def _save_expecting(project: dict[str, Any], name: str, code: int) -> Any:
    return project["run"](
        "rollout",
        NEW_CONTENT[:8],
        "-c",
        project["config"],
        "--resample",
        "4",
        "-n",
        "4",
        "--save",
        name,
        code=code,
    )


def test_a_damaged_timeline_is_reported_and_the_others_still_listed(project):
    otelcar = project["run"]
    _save(project, "good", "--resample", "4", n=4)
    _save(project, "bad", "--resample", "4", n=4)
    trace = json.loads(otelcar("timelines", NEW_CONTENT[:8], "--json").output)["trace_id"]
    (trace_dir(project["store"], trace) / "bad" / "timeline.json").write_text("{not json")
    infos, problems = list_timelines(project["store"], trace)
    assert [i.name for i in infos] == ["good"]
    assert len(problems) == 1 and "'bad'" in problems[0] and "damaged" in problems[0]
    listed = otelcar("timelines", NEW_CONTENT[:8], "--json")
    assert json.loads(listed.stdout)["problems"] == problems
    broken = otelcar("diff", NEW_CONTENT[:8], "bad", code=2)
    assert "damaged" in broken.output and "Traceback" not in broken.output
    (trace_dir(project["store"], trace) / "good" / "steps.parquet").write_bytes(b"PAR1 no")
    unreadable = otelcar("show", NEW_CONTENT[:8], "--timeline", "good", code=2)
    assert "unreadable steps.parquet" in unreadable.output


def test_the_diff_page_opens_offline_and_marks_where_the_runs_part(project):
    _save(project, "redecide", "--resample", "4", "--seed", "3")
    html = project["tmp"] / "diff.html"
    summary = json.loads(project["run"]("diff", NEW_CONTENT[:8], "redecide", "--json", "-").output)
    parted = next(r["rollout"] for r in summary["rollouts"] if r["parted_at"] is not None)
    project["run"](
        "diff", NEW_CONTENT[:8], "redecide", "--rollout", str(parted), "--html", str(html)
    )
    from selenium.webdriver.support.ui import WebDriverWait

    with headless_chromium(project["tmp"] / "chromium") as driver:
        driver.get(html.resolve().as_uri())
        WebDriverWait(driver, 10).until(
            lambda d: d.execute_script("return document.documentElement.dataset.ready") == "1"
        )
        errors = [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]
        assert errors == []
        assert driver.find_element("css selector", "details.step.culprit").get_attribute("id")
        driver.find_element("id", "expand-all").click()
        opened = driver.execute_script(
            "return [...document.querySelectorAll('details.step')].every(d => d.open)"
        )
        assert opened
        text = driver.find_element("tag name", "body").text
        assert "Where the runs part" in text and "issue_refund" in text


# -- the comparison itself, on runs made here ---------------------------------------------------
def _decision(i: int, context: list[Message], action: Message) -> PathDecision:
    return PathDecision(i, i * 3, "llm", None, tuple(context), action, (), "recorded")


SYSTEM = Message("system", "You refund orders.")
USER = Message("user", "Refund A-1001")
CALL = Message("assistant", None, (ToolCall("lookup", {"id": "A-1001"}, "c1"),))
RESULT = Message("tool", "shipped", tool_call_id="c1")


def test_contexts_part_after_their_shared_prefix_and_call_ids_do_not_count():
    same = compare_contexts(
        (SYSTEM, USER, CALL, RESULT),
        (
            SYSTEM,
            USER,
            Message("assistant", None, (ToolCall("lookup", {"id": "A-1001"}, "zz"),)),
            Message("tool", "shipped", tool_call_id="zz"),
        ),
    )
    assert same.status == "same"
    other = compare_contexts((SYSTEM, USER, CALL, RESULT), (SYSTEM, USER, Message("user", "?")))
    assert (other.status, other.shared, len(other.a_only), len(other.b_only)) == (
        "differs",
        2,
        2,
        1,
    )
    assert compare_contexts(None, (SYSTEM,)).status == "unknown"


def test_runs_part_on_context_action_or_length():
    a = RunPath(
        "a",
        (
            _decision(0, [SYSTEM, USER], CALL),
            _decision(1, [SYSTEM, USER, CALL, RESULT], Message("assistant", "done")),
        ),
        True,
        "final",
    )
    b_action = RunPath(
        "b",
        (
            a.decisions[0],
            _decision(1, [SYSTEM, USER, CALL, RESULT], Message("assistant", "escalate")),
        ),
        False,
        "final",
    )
    b_context = RunPath(
        "b",
        (
            a.decisions[0],
            _decision(
                1,
                [SYSTEM, USER, CALL, Message("tool", "lost", tool_call_id="c1")],
                Message("assistant", "done"),
            ),
        ),
        True,
        "final",
    )
    b_short = RunPath("b", a.decisions[:1], False, "truncated")
    assert diff_paths(a, a).parted is None
    assert (diff_paths(a, b_action).parted.index, diff_paths(a, b_action).parted.parts) == (
        1,
        "action",
    )
    assert diff_paths(a, b_context).parted.parts == "context"
    assert diff_paths(a, b_short).parted.parts == "length"


_messages = st.lists(
    st.builds(
        Message,
        role=st.sampled_from(["user", "assistant", "tool"]),
        content=st.sampled_from(["a", "b", None]),
    ),
    max_size=4,
)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(_messages, _messages, st.booleans()), max_size=5), st.integers(0, 5))
def test_parting_is_the_first_difference_and_symmetric(steps, cut):
    """For any two runs: a run never parts from itself; A parts from B where B parts from A;
    every position before the parting is the same in both."""
    a = RunPath(
        "a",
        tuple(_decision(i, c, Message("assistant", str(i))) for i, (c, _, _) in enumerate(steps)),
        None,
        "final",
    )
    b = RunPath(
        "b",
        tuple(
            _decision(i, d if flip else c, Message("assistant", str(i)))
            for i, (c, d, flip) in enumerate(steps[:cut] if cut < len(steps) else steps)
        ),
        None,
        "final",
    )
    assert diff_paths(a, a).parted is None
    forward, backward = diff_paths(a, b).parted, diff_paths(b, a).parted
    assert (forward is None) == (backward is None)
    early = diff_paths(a, b, until_parted=True).parted
    assert (early is None) == (forward is None)
    assert early is None or (early.index, early.parts) == (forward.index, forward.parts)
    if forward is not None:
        assert forward.index == backward.index and forward.parts == backward.parts
        for step in diff_paths(a, b).steps[: forward.index]:
            assert step.parts is None
    observation = PathObservation("lookup", {"id": 1}, "ok", None, "recorded")
    assert observation.result == "ok"


def test_on_a_scripted_scenario_runs_part_exactly_where_the_plan_first_redecides(tmp_path):
    """single_culprit(6, 3): decision 3 chose BAD (re-decided: BAD with p 0.3 here), every
    other decision draws among ok/ok2/ok3. Holding decisions 0–2 and re-deciding from 3 on,
    a rollout parts at 3 exactly when it chose otherwise there, and never before."""
    from otelcar.replay import Environment, Plan, load_run, run_plan
    from otelcar.replay.divergence import diff_timelines, recorded_path
    from otelcar.replay.timelines import save_timeline
    from otelcar.sync import run_sync
    from otelcar.testing import build, single_culprit

    steps, registry, outcome = build(single_culprit(6, 3, p_bad=0.3))
    run = load_run(steps["trace_id"][0], steps)
    plan = Plan.resample_from(run.decisions[3].step, [d.step for d in run.decisions])
    result = run_plan(run, plan, Environment(registry), rollouts=24, seed=11, outcome=outcome)
    info = save_timeline(
        tmp_path,
        "from-3",
        result,
        trace_id=run.trace_id,
        seed=11,
        policies=registry.describe(),
        outcome=outcome.describe(),
        recorded_failed=bool(run_sync(outcome.failed(steps))),
    )
    timeline = load_timeline(tmp_path, run.trace_id, "from-3")
    assert timeline.info == info
    diff = diff_timelines(timeline, recorded_path(run, info.recorded_failed))
    chose = {r.index: r.decisions[3].action.tool_calls[0].arguments["v"] for r in result.rollouts}
    assert set(chose.values()) >= {"BAD", "ok"}, chose
    for parting in diff.rollouts:
        assert parting.parted_at is None or parting.parted_at >= 3
        assert (parting.parted_at == 3) is (chose[parting.rollout] != "BAD")
        assert parting.failed is (
            "BAD"
            in [
                d.action.tool_calls[0].arguments["v"]
                for d in result.rollouts[parting.rollout].decisions
                if d.action.tool_calls
            ]
        )
