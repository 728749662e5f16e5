"""Regression tests for a fixed decision: ``--write-test`` and ``otelcar test``.

:func:`write_regression_test` writes a self-contained pytest file (plus the trace's steps
table as Parquet in ``traces/`` beside it) that re-decides the failed step's exact context
against the **live** policy of ``otelcar.toml`` — no cache kept between runs, so a model or
prompt change that brings the bug back fails it — with the chosen fix applied (or none), and
asserts that the bad decision's rate stays at or below a bound. The file uses the
``otelcar_agent`` fixture of otelcar's pytest plugin (:mod:`otelcar.pytest_plugin`, which
reads the ``otelcar.toml``: project configuration lives above this layer);
:func:`check_decision_async` is the check itself, on a run, a registry and an outcome.

With ``live=True`` (``otelcar fix --agent CMD --write-test``) the file checks the fix on the
user's real agent instead: rollouts of the fix's plan (the fix's edits at the step and at the
later decisions they apply to, every decision from the step on decided again, the ones before
it answered from the trace), each run judged by the outcome, and a bound on how often the run
still fails. :func:`check_fix_rollouts_async` is that check on whichever executor is in
effect; :mod:`otelcar.live_regression` runs it on the agent, after the live check.
"""

from __future__ import annotations

import json
import os
import pprint
import re
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from otelcar.attribution.context.decisions import decision_sampler, same_decision
from otelcar.attribution.experiment.redecisions import describe_action
from otelcar.attribution.fixes.result import FixCandidate
from otelcar.errors import OtelcarError
from otelcar.notes import Note
from otelcar.replay.engine import run_plan_async
from otelcar.replay.harness import Environment
from otelcar.replay.plan import EditContext, Plan, Resample
from otelcar.replay.recorded import RecordedRun


class RegressionError(OtelcarError):
    """A regression test cannot be written or run (forced fix, missing trace or config)."""


@dataclass
class RegressionCheck:
    """How often the (fixed) context still leads to the recorded bad decision."""

    step: int
    decision: str
    rule: str
    fix: str | None
    bad: int
    n: int
    examples: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    calls: int = 0  # policy calls the check made

    @property
    def rate(self) -> float:
        return self.bad / self.n if self.n else 1.0

    def message(self, bound: float) -> str:
        """The assertion message: what came back, against what bound, with examples."""
        fix = f" with the fix ({self.fix})" if self.fix else " (no fix applied)"
        text = (
            f"step {self.step}{fix}: the bad decision ({self.rule}) came back in "
            f"{self.bad}/{self.n} re-decisions ({self.rate:.0%}; allowed ≤ {bound:.0%}). "
            f"Recorded: {self.decision}."
        )
        if self.examples:
            text += " Re-decisions: " + "; ".join(self.examples[:3])
        if self.errors:
            text += f". {len(self.errors)} policy errors, first: {self.errors[0]}"
        return text


async def check_decision_async(
    run: RecordedRun,
    step: int,
    *,
    registry: Any,
    same: str,
    fix: dict[str, Any] | None = None,
    fix_name: str | None = None,
    samples: int = 10,
    seed: int = 0,
    outcome: Any = None,
) -> RegressionCheck:
    """Re-decide ``step`` ``samples`` times (with the fix's edits, a Plan dict) in a fresh
    environment and count the bad decisions (``outcome`` picks the target call, as in
    ``fix``)."""
    decision = run.decision_at_step(step)
    if decision.action is None:
        raise RegressionError(f"step {step}: no recorded action")
    rule = same_decision(same, decision.action, registry, outcome=outcome)
    env = Environment(registry)
    sampler = decision_sampler(run, decision, env, rule, seed=seed)
    edits = []
    if fix is not None:
        plan = Plan.from_dict(fix)
        if any(not isinstance(i, EditContext) for i in plan.interventions):
            raise RegressionError("only context edits can be checked by re-deciding")
        edits = [i.edit for i in plan.interventions]
    arm = await sampler.ensure(edits, samples)
    return RegressionCheck(
        step=step,
        decision=describe_action(decision.action),
        rule=rule.describe(),
        fix=fix_name,
        bad=arm.bad,
        n=arm.n,
        examples=[describe_action(s.action) for s in arm.valid()][:5],
        errors=arm.errors,
        calls=env.accounting.llm_calls,
    )


@dataclass
class RolloutCheck:
    """How often the run still fails with the fix, over whole rollouts: ``failed`` of
    ``judged`` rollouts failed by the outcome, ``lost`` more could not be judged (the agent
    exited non-zero, hung, a policy error) and count as failures, so a broken agent never
    passes. ``agent``: the command the rollouts ran (``None``: the rebuilt agent)."""

    step: int
    decision: str
    outcome: str
    fix: str | None
    failed: int
    judged: int
    lost: int
    agent: str | None = None
    examples: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    calls: int = 0  # policy calls the check made
    notes: list[Note] = field(default_factory=list)

    @property
    def n(self) -> int:
        return self.judged + self.lost

    @property
    def bad(self) -> int:
        """Rollouts that count against the bound: failed, or not judged."""
        return self.failed + self.lost

    @property
    def rate(self) -> float:
        return self.bad / self.n if self.n else 1.0

    def message(self, bound: float) -> str:
        """The assertion message: what came back, against what bound, with examples."""
        fix = f" with the fix ({self.fix})" if self.fix else " (no fix applied)"
        where = f"the agent `{self.agent}`" if self.agent else "the rebuilt agent"
        text = (
            f"step {self.step}{fix}, rolled out on {where}: the run still failed "
            f"({self.outcome}) in {self.bad}/{self.n} rollouts ({self.rate:.0%}; allowed ≤ "
            f"{bound:.0%}). Recorded: {self.decision}."
        )
        if self.lost:
            text += (
                f" {self.lost} of them could not be judged and count as failures, first: "
                f"{self.errors[0] if self.errors else '(no reason given)'}."
            )
        if self.examples:
            text += " Failed rollouts: " + "; ".join(self.examples[:3])
        return text


def rollout_plan(run: RecordedRun, step: int, fix: FixCandidate | None) -> Plan:
    """What a rollout check plays: the fix's forward plan (its edits at the step and at the
    later decisions they apply to, every decision from the step on decided again: what
    ``fix --forward`` validates), or with no fix every decision from the step re-decided."""
    if fix is not None and fix.kind == "forced":
        raise RegressionError(
            "a forced action is a diagnosis, not a fix to keep; choose a prompt or source fix"
        )
    if fix is not None and fix.forward_plan is not None:
        return Plan.from_dict(fix.forward_plan)
    edits = Plan.from_dict(fix.plan).interventions if fix is not None else ()
    later = tuple(Resample(d.step) for d in run.decisions if d.step >= step)
    return Plan((*edits, *later))


async def check_fix_rollouts_async(
    run: RecordedRun,
    step: int,
    *,
    registry: Any,
    outcome: Any,
    plan: dict[str, Any],
    fix_name: str | None = None,
    rollouts: int = 10,
    seed: int = 0,
    concurrency: int = 8,
    agent: str | None = None,
) -> RolloutCheck:
    """Roll ``plan`` (a Plan dict, :func:`rollout_plan`) out ``rollouts`` times in a fresh
    environment, on the executor in effect (:func:`otelcar.replay.execution.use_executor`;
    ``agent`` names it in the message), judge every run with ``outcome`` and count the runs
    that still fail; a rollout that could not be judged is counted too (:class:`RolloutCheck`).
    ``step``: the fixed decision, whose action in each failed rollout is an example."""
    if outcome is None:
        raise RegressionError("a rollout check needs an outcome: add [outcome] to otelcar.toml")
    decision = run.decision_at_step(step)
    env = Environment(registry)
    result = await run_plan_async(
        run,
        Plan.from_dict(plan),
        env,
        rollouts=rollouts,
        seed=seed,
        outcome=outcome,
        concurrency=concurrency,
        stop_when_most_fail=False,  # a broken agent is a failed check, with its reasons
    )
    examples, errors = [], []
    for rollout, failed in zip(result.rollouts, result.failures, strict=True):
        if failed is None:
            errors.append(f"rollout {rollout.index}: {rollout.error or rollout.status}")
        elif failed:
            at = next((d for d in rollout.decisions if d.recorded_step == step), None)
            did = describe_action(at.action) if at is not None else "(no decision there)"
            examples.append(f"rollout {rollout.index}: step {step} {did}")
    judged = result.judged
    return RolloutCheck(
        step=step,
        decision=describe_action(decision.action),
        outcome=outcome.describe(),
        fix=fix_name,
        failed=sum(judged),
        judged=len(judged),
        lost=len(result.failures) - len(judged),
        agent=agent,
        examples=examples[:5],
        errors=errors,
        calls=env.accounting.llm_calls,
    )


def _free(path: Path) -> Path:
    """``path``, or ``name_2.py``, ``name_3.py``… when it exists (never overwrite)."""
    if not path.exists():
        return path
    for number in range(2, 1000):
        candidate = path.with_name(f"{path.stem}_{number}{path.suffix}")
        if not candidate.exists():
            return candidate
    raise RegressionError(f"{path}: too many existing files")


def _docstring(*paragraphs: str) -> str:
    """Wrapped paragraphs, safe inside a triple-quoted docstring."""
    out = []
    for paragraph in paragraphs:
        lines = [textwrap.fill(line, 96) if line else "" for line in paragraph.split("\n")]
        out.append("\n".join(lines))
    return "\n\n".join(out).replace("\\", "\\\\").replace('"""', '\\"\\"\\"')


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")[:40] or "decision"


def _relative(path: str | Path, folder: Path) -> str:
    """``HERE / "…"``: ``path`` relative to the written file's folder, as code."""
    relative = os.path.relpath(Path(path).resolve(), folder.resolve())
    return f"HERE / {json.dumps(relative)}"


def write_regression_test(
    path: str | Path,
    *,
    run: RecordedRun,
    step: int,
    same: str,
    config: str | Path | None,
    fix: FixCandidate | None = None,
    samples: int = 10,
    max_rate: float = 0.2,
    seed: int = 0,
    summary: str = "",
    live: bool = False,
    agent: str | None = None,
    agent_cwd: str | Path | None = None,
    rollouts: int = 10,
) -> Path:
    """Write the pytest file (never overwriting: ``_2``… is appended) and the trace beside
    it; return the file written.

    ``live``: the test runs the user's agent instead of re-deciding (module docstring):
    ``rollouts`` rollouts of the fix's plan, judged by ``config``'s outcome. Its agent
    command is ``agent`` when given (``--agent``: written into the file, run in ``agent_cwd``
    unless ``[agent] cwd`` says otherwise; ``[agent]``'s other settings still apply), else
    ``[agent] command`` of ``config`` when the test runs."""
    if fix is not None and fix.kind == "forced":
        raise RegressionError(
            "a forced action cannot be checked by re-deciding; choose a prompt or source fix"
        )
    if live and fix is None:
        raise RegressionError("a test on the agent checks a fix: choose one")
    plan = rollout_plan(run, step, fix).to_dict() if live else None
    target = _free(Path(path))
    target.parent.mkdir(parents=True, exist_ok=True)
    traces = target.parent / "traces"
    traces.mkdir(exist_ok=True)
    trace_file = traces / f"{run.trace_id}.parquet"
    run.steps.write_parquet(trace_file)
    decision = run.decision_at_step(step)
    config_ref = _relative(config, target.parent) if config is not None else "None"
    calls = decision.action.tool_calls if decision.action else ()
    what = _slug(calls[0].name or "") if calls else "repeats"
    fixed = "with_" + fix.name if fix else "no_fix"
    # on the agent the test is about the run's outcome, not one call
    name = f"test_step_{step}_{fixed}_" + ("on_the_agent" if live else f"never_{what}")
    summary_text = summary.strip() or f"Regression test for step {step} of trace {run.trace_id}."
    if live:
        body = _live_test_body(
            run, step=step, summary_text=summary_text, trace_file=trace_file,
            config_ref=config_ref, agent=agent, agent_cwd=agent_cwd, target=target,
            rollouts=rollouts, max_rate=max_rate, seed=seed, fix=fix, plan=plan, name=name,
        )  # fmt: skip
    else:
        body = _decision_test_body(
            run, step=step, summary_text=summary_text, trace_file=trace_file,
            config_ref=config_ref, same=same, samples=samples, max_rate=max_rate, seed=seed,
            fix=fix, name=name,
        )  # fmt: skip
    target.write_text(body, encoding="utf-8")
    return target


def _live_test_body(
    run: RecordedRun,
    *,
    step: int,
    summary_text: str,
    trace_file: Path,
    config_ref: str,
    agent: str | None,
    agent_cwd: str | Path | None,
    target: Path,
    rollouts: int,
    max_rate: float,
    seed: int,
    fix: FixCandidate | None,
    plan: Any,
    name: str,
) -> str:
    """The source of a test that runs the user's agent (``live``: module docstring)."""
    doc = _docstring(
        summary_text,
        f"Written by otelcar. Runs the agent (AGENT, else [agent] command of CONFIG) "
        f"ROLLOUTS times against otelcar's model endpoint: answered from trace "
        f"{run.trace_id} up to step {step}, where the fix below edits the agent's request "
        "and the policy of CONFIG decides again (and at every later decision, the fix kept "
        "in the requests it applies to). Each run is judged with CONFIG's [outcome]; the "
        "test fails when the run still fails in more than MAX_RATE of them (a run that "
        "could not be judged counts as failed), and first, when the agent no longer makes "
        "the recorded requests (the live check). No cache is kept between runs: a model, "
        "prompt or code change that brings the bug back fails this test. The agent's real "
        "tools run: point it at a test environment.",
    )
    body = f'''"""{doc}
"""

from pathlib import Path

HERE = Path(__file__).resolve().parent
TRACE = HERE / "traces" / {json.dumps(trace_file.name)}
CONFIG = {config_ref}
AGENT = {json.dumps(agent) if agent is not None else None}
AGENT_CWD = {_relative(agent_cwd, target.parent) if agent_cwd is not None else None}
STEP = {step}
ROLLOUTS = {rollouts}
MAX_RATE = {max_rate!r}
SEED = {seed}
FIX_NAME = {json.dumps(fix.name) if fix else None}
PLAN = {pprint.pformat(plan, width=92, sort_dicts=False)}


def {name}(otelcar_agent):
    agent = otelcar_agent(TRACE, config=CONFIG)
    agent.assert_fix_live(
        STEP,
        max_rate=MAX_RATE,
        plan=PLAN,
        fix_name=FIX_NAME,
        rollouts=ROLLOUTS,
        seed=SEED,
        command=AGENT,
        cwd=AGENT_CWD,
    )
'''
    return body


def _decision_test_body(
    run: RecordedRun,
    *,
    step: int,
    summary_text: str,
    trace_file: Path,
    config_ref: str,
    same: str,
    samples: int,
    max_rate: float,
    seed: int,
    fix: FixCandidate | None,
    name: str,
) -> str:
    """The source of a test that re-decides ``step`` with the fix applied."""
    applied = (
        "with the fix below applied" if fix else "with no fix: it fails while the bug is there"
    )
    fix_text = pprint.pformat(fix.plan, width=92, sort_dicts=False) if fix else "None"
    doc = _docstring(
        summary_text,
        f"Written by otelcar. Re-decides step {step} of trace {run.trace_id} (its exact "
        f"recorded context, {applied}) against the live policy of CONFIG, SAMPLES times, and "
        "fails when the recorded bad decision comes back more often than MAX_RATE. No cache is "
        "kept between runs: a model or prompt change that brings the bug back fails this test.",
    )
    body = f'''"""{doc}
"""

from pathlib import Path

HERE = Path(__file__).resolve().parent
TRACE = HERE / "traces" / {json.dumps(trace_file.name)}
CONFIG = {config_ref}
STEP = {step}
SAME = {json.dumps(same)}
SAMPLES = {samples}
MAX_RATE = {max_rate!r}
SEED = {seed}
FIX_NAME = {json.dumps(fix.name) if fix else None}
FIX = {fix_text}


def {name}(otelcar_agent):
    agent = otelcar_agent(TRACE, config=CONFIG)
    agent.assert_decision(
        STEP,
        max_rate=MAX_RATE,
        same=SAME,
        fix=FIX,
        fix_name=FIX_NAME,
        samples=SAMPLES,
        seed=SEED,
    )
'''
    return body
