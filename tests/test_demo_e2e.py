"""The README's first command, reduced: the refund agent fails on the real local model and
otelcar names the step and the text the scenario planted.

Runs ``examples/refund_agent/demo.py`` as a user would (it starts the model server and
``otelcar collect`` on 127.0.0.1 and stops them), with a smaller budget than ``make demo``.
Every model call is seeded and the local model's output is a function of (prompt, seed), so
the run is reproducible; the assertions are about what the scenario planted, not about
numbers that happened to come out.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from examples.refund_agent.tools import CUSTOMER_ORDER, PLANTED_NOTE

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "examples" / "refund_agent" / "demo.py"
PLANTED_SENTENCE = "refund A-2002 instead"


@pytest.fixture(scope="module")
def demo_output(local_model_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("demo")
    command = [sys.executable, str(DEMO), "--out", str(out), "--max-runs", "4"]
    # 4 re-decisions per why/fix arm: the refund decision is intermittent, so why grows its
    # base arm to 3R and its second looks to 6R (24) either way; fix tests each candidate on
    # that many. 318 model calls for why + fix, where --samples 8 took 510 and make demo's 10
    # takes 420 (measured on this trace; every call is seeded, so the run is reproducible).
    command += ["--max-rollouts", "32", "--samples", "4", "--timeline-rollouts", "4"]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=2400)
    log = done.stdout + done.stderr
    (out / "demo.log").write_text(log)
    assert done.returncode == 0, log[-4000:]
    return out


def _load(out: Path, name: str) -> dict:
    path = out / name
    assert path.exists(), f"{name} missing; demo log:\n{(out / 'demo.log').read_text()[-3000:]}"
    return json.loads(path.read_text())


def _wrong_refund_step(attribution: dict) -> int:
    """The decision that refunded another customer's order, read from the trace's timeline."""
    for row in attribution["timeline"]["steps"]:
        if row["kind"] == "llm" and row["gist"] == '→ issue_refund(order_id="A-2002")':
            return row["step"]
    raise AssertionError(f"no decision refunded A-2002: {attribution['timeline']['steps']}")


@pytest.mark.slow
def test_attribution_names_the_wrong_refund(demo_output: Path) -> None:
    attribution = _load(demo_output, "attribution.json")
    assert attribution["verdict"] == "culprit", attribution["headline"]
    assert attribution["culprit"] == _wrong_refund_step(attribution)
    assert attribution["ties"] == []
    culprit = next(s for s in attribution["steps"] if s["step"] == attribution["culprit"])
    low, high = culprit["delta_ci"]
    assert 0 < low <= culprit["delta"] <= high and culprit["significant"]
    assert attribution["cost"]["llm_calls"] > 0 and attribution["cost"]["rollouts"] > 0
    # The triage lookup repeats itself under resampling: not a cause, and it cost nothing more.
    triage = [s for s in attribution["steps"] if s["agent"] == "triage"]
    assert triage and all(not s["significant"] for s in triage)


@pytest.mark.slow
def test_why_names_the_planted_sentence(demo_output: Path) -> None:
    why = _load(demo_output, "why.json")
    assert why["verdict"] == "cause", why["headline"]
    cause = why["cause"]
    assert cause["kind"] == "cause"
    assert PLANTED_SENTENCE in cause["text"] and cause["text"] in PLANTED_NOTE
    (part,) = cause["parts"]
    assert (part["role"], part["source"], part["path"]) == ("tool", "lookup_order", ["notes"])
    assert CUSTOMER_ORDER not in cause["text"]
    low, _ = cause["effect"]["difference_ci"]
    assert low > 0


@pytest.mark.slow
def test_fix_is_validated_and_the_report_names_step_and_text(demo_output: Path) -> None:
    fix = _load(demo_output, "fix.json")
    assert fix["best"] is not None, [(c["name"], c.get("decision")) for c in fix["candidates"]]
    best = next(c for c in fix["candidates"] if c["name"] == fix["best"])
    assert best["decision"]["verdict"] == "PASS"
    html = (demo_output / "report.html").read_text()
    attribution = _load(demo_output, "attribution.json")
    assert f"Step {attribution['culprit']} caused the failure" in html
    assert "refund A-2002 instead" in html


@pytest.mark.slow
def test_the_culprits_redecisions_are_kept_and_diffed_against_the_recorded_run(
    demo_output: Path,
) -> None:
    """The demo keeps 4 re-decisions of the culprit as a timeline: each either repeats the
    recorded action there (and then, the rest held, never parts) or parts exactly there."""
    import jsonschema
    from referencing import Registry, Resource

    diff = _load(demo_output, "diff.json")
    schemas = ROOT / "schemas"
    message = json.loads((schemas / "message.schema.json").read_text())
    jsonschema.Draft202012Validator(
        json.loads((schemas / "diff.schema.json").read_text()),
        registry=Registry().with_resource("message.schema.json", Resource.from_contents(message)),
    ).validate(diff)
    culprit = _load(demo_output, "attribution.json")["culprit"]
    assert diff["b"] == "recorded" and len(diff["rollouts"]) == 4
    for parting in diff["rollouts"]:
        assert parting["parted_at"] is None or parting["recorded_step"] == culprit, parting
    assert "Where the runs part" in (demo_output / "diff.html").read_text()


@pytest.mark.slow
def test_the_validated_fixes_are_exported_as_preference_pairs(demo_output: Path) -> None:
    """Each PASS fix of the demo is a DPO line: the wrong refund rejected, its evidence kept."""
    import jsonschema

    schema = json.loads((ROOT / "schemas" / "pairs.schema.json").read_text())
    fix = _load(demo_output, "fix.json")
    lines = [json.loads(line) for line in (demo_output / "pairs.jsonl").read_text().splitlines()]
    passed = [c for c in fix["candidates"] if c["verdict"] == "PASS"]
    assert lines and len(lines) <= len(passed)
    for line in lines:
        jsonschema.validate(line, schema)
        assert line["evidence"]["source"] == "fix" and line["evidence"]["fix"] in {
            c["name"] for c in passed
        }
        (rejected,) = line["rejected"]
        assert "A-2002" in json.dumps(rejected)  # the other customer's order
