"""Regression tests for a fixed decision: ``--write-test`` and ``otelcar test``.

:func:`write_regression_test` writes a self-contained pytest file (plus the trace's steps
table as Parquet in ``traces/`` beside it) that re-decides the failed step's exact context
against the **live** policy of ``otelcar.toml`` — no cache kept between runs, so a model or
prompt change that brings the bug back fails it — with the chosen fix applied (or none), and
asserts that the bad decision's rate stays at or below a bound. The file uses the
``otelcar_agent`` fixture of otelcar's pytest plugin (:mod:`otelcar.pytest_plugin`, which
reads the ``otelcar.toml``: project configuration lives above this layer);
:func:`check_decision_async` is the check itself, on a run, a registry and an outcome.
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
from otelcar.replay.harness import Environment
from otelcar.replay.plan import EditContext, Plan
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
) -> Path:
    """Write the pytest file (never overwriting: ``_2``… is appended) and the trace beside
    it; return the file written."""
    if fix is not None and fix.kind == "forced":
        raise RegressionError(
            "a forced action cannot be checked by re-deciding; choose a prompt or source fix"
        )
    target = _free(Path(path))
    target.parent.mkdir(parents=True, exist_ok=True)
    traces = target.parent / "traces"
    traces.mkdir(exist_ok=True)
    trace_file = traces / f"{run.trace_id}.parquet"
    run.steps.write_parquet(trace_file)
    decision = run.decision_at_step(step)
    config_ref = "None"
    if config is not None:
        config_path = Path(config).resolve()
        relative = os.path.relpath(config_path, target.parent.resolve())
        config_ref = f"HERE / {json.dumps(relative)}"
    calls = decision.action.tool_calls if decision.action else ()
    what = _slug(calls[0].name or "") if calls else "repeats"
    name = f"test_step_{step}_{'with_' + fix.name if fix else 'no_fix'}_never_{what}"
    applied = (
        "with the fix below applied" if fix else "with no fix: it fails while the bug is there"
    )
    fix_text = pprint.pformat(fix.plan, width=92, sort_dicts=False) if fix else "None"
    doc = _docstring(
        summary.strip() or f"Regression test for step {step} of trace {run.trace_id}.",
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
    target.write_text(body, encoding="utf-8")
    return target
