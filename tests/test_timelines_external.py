"""Named timelines on traces otelcar did not write: every third-party trace with a decision
(``../shared/data/external``, each file with its ``SOURCE.md``) is rolled out with ``rollout
--save``, listed with ``timelines``, shown with ``show --timeline`` and diffed against the
recorded run, through the CLI and against the JSON Schemas.

The plan re-decides the trace's first decision with a seeded policy whose answers no producer
recorded (``answer 0``…), so every rollout must part from the recorded run exactly there: the
test reads where from the rollout's own saved steps and requires the diff to say the same.
"""

from __future__ import annotations

import json
from typing import Any

import polars as pl
import pytest
from click.testing import CliRunner

from otelcar.cli import cli
from otelcar.replay import load_run
from otelcar.store import Store
from tests.helpers.frameworks import trace_files
from tests.helpers.schemas import validator
from tests.parts import EXTERNAL, need_data

ROLLOUTS = 3

POLICY = """
import random
from otelcar.messages import Message, ToolCall

def decide(request):
    rng = random.Random(request.seed)
    if rng.random() < 0.5:
        return Message("assistant", f"answer {rng.randrange(3)}")
    return Message("assistant", None, (ToolCall("lookup", {"q": rng.randrange(3)}, "c1"),))

def tool(request):
    return f"looked up {request.arguments!r}"
"""

CONFIG = """
[policies.llm]
type = "python"
function = "ext_policy:decide"

[policies."tool:*"]
type = "python"
function = "ext_policy:tool"
keywords = false

[outcome]
type = "final_answer"
contains = "answer 0"

[replay]
seed = 3
"""


@pytest.fixture(scope="module")
def external(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    need_data(EXTERNAL)
    tmp = tmp_path_factory.mktemp("external-timelines")
    (tmp / "ext_policy.py").write_text(POLICY)
    (tmp / "otelcar.toml").write_text(CONFIG)
    runner = CliRunner()
    store = ["--store", str(tmp / "store")]
    result = runner.invoke(cli, [*store, "import", *map(str, trace_files(EXTERNAL))])
    assert result.exit_code in (0, 1), result.output  # 1: some files hold broken records
    traces = []
    opened = Store(tmp / "store")
    for trace_id in opened.traces()["trace_id"].to_list():
        run = load_run(trace_id, opened.steps(trace_id))
        if run.horizon >= 1:
            traces.append((trace_id, [d.step for d in run.decisions]))
    return {"runner": runner, "store": store, "tmp": tmp, "traces": traces}


def _cli(external: dict[str, Any], *args: str) -> Any:
    result = external["runner"].invoke(cli, [*external["store"], *args])
    assert result.exit_code == 0, (args, result.output)
    return result


def _parting_steps(saved: pl.DataFrame, recorded: pl.DataFrame, first: int) -> dict[int, int]:
    """Rollout → the recorded step of its first LLM decision at or after ``first`` whose
    output is not the recorded one (a rollout numbers its own steps; ``recorded_step`` says
    which recorded step each one replays)."""
    recorded_outputs = {
        row["step"]: row["output"]
        for row in recorded.filter(pl.col("kind") == "llm").iter_rows(named=True)
    }
    out = {}
    for (rollout,), rows in saved.filter(pl.col("kind") == "llm").group_by(["rollout"]):
        for row in rows.sort("step").iter_rows(named=True):
            step = row["recorded_step"]
            if step is not None and step >= first and row["output"] != recorded_outputs[step]:
                out[rollout] = step
                break
    return out


def test_every_third_party_trace_with_a_decision_keeps_lists_shows_and_diffs_a_timeline(
    external: dict[str, Any],
) -> None:
    traces = external["traces"]
    assert len(traces) >= 30, f"only {len(traces)} third-party traces with a decision"
    assert sum(len(steps) >= 2 for _, steps in traces) >= 4
    listing, shown = validator("timelines-list.schema.json"), validator("timeline.schema.json")
    config = str(external["tmp"] / "otelcar.toml")
    for trace_id, steps in traces:
        # the first decision re-decided; on longer runs also the last one alone (every
        # decision before it held, as recorded)
        plans = {"first": steps[0], **({"last": steps[-1]} if len(steps) >= 2 else {})}
        for name, step in plans.items():
            _check_timeline(external, config, trace_id, name, step, step == steps[0])
        listed = json.loads(_cli(external, "timelines", trace_id, "--json").output)
        listing.validate(listed)
        assert sorted(t["name"] for t in listed["timelines"]) == sorted(plans), trace_id
        for entry in listed["timelines"]:
            assert len(entry["rollouts"]) == ROLLOUTS and entry["judged"] == ROLLOUTS, entry
        for name in plans:
            shown.validate(
                json.loads(_cli(external, "show", trace_id, "--timeline", name, "--json").output)
            )


def _check_timeline(
    external: dict[str, Any], config: str, trace_id: str, name: str, step: int, first: bool
) -> None:
    """``rollout --resample STEP --save NAME``, then its diff against the recorded run: every
    rollout parts on the action of that decision, as its own saved steps show."""
    where = f"trace {trace_id}, timeline {name} (re-decides step {step})"
    saved_path = external["tmp"] / f"{trace_id}-{name}.parquet"
    _cli(
        external,
        "rollout",
        trace_id,
        "-c",
        config,
        "--resample",
        str(step),
        "-n",
        str(ROLLOUTS),
        "--save",
        name,
        "--parquet",
        str(saved_path),
    )
    saved = pl.read_parquet(saved_path)
    recorded = Store(external["tmp"] / "store").steps(trace_id)
    parted = _parting_steps(saved, recorded, step)
    assert parted == dict.fromkeys(range(ROLLOUTS), step), (where, parted)
    diff_path = external["tmp"] / f"{trace_id}-{name}.diff.json"
    html = external["tmp"] / f"{trace_id}-{name}.diff.html"
    _cli(external, "diff", trace_id, name, "--json", str(diff_path), "--html", str(html))
    diff = json.loads(diff_path.read_text())
    validator("diff.schema.json").validate(diff)
    for parting in diff["rollouts"]:
        assert (parting["parted_on"], parting["recorded_step"]) == ("action", step), (
            where,
            parting,
        )
        assert (parting["parted_at"] == 0) is first, (where, parting)
    page = html.read_text()
    assert "<script src=" not in page and "<link " not in page, where
