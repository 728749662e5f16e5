"""Finished results are values and carry no prose (issue 38): ``to_dict()`` is data (its
notes are kinds and facts), ``report`` words the headline and the notes
(``document(result)`` is what every front end writes), and a result's sequences cannot be
changed after it is made."""

from __future__ import annotations

import copy
import dataclasses
import pickle
from typing import Any

import polars as pl
import pytest

import otelcar
from otelcar.attribution.aggregate import aggregate, attribute_traces
from otelcar.report.notes import worded
from otelcar.report.prose import document, headline
from otelcar.testing import build, single_culprit
from tests.helpers.schemas import validator

#: A second trace of the same agent, for the aggregate.
OTHER_TRACE = "5ec0d5ec0d5ec0d5ec0d5ec0d5ec0d5e"


@pytest.fixture(scope="module")
def results() -> dict[str, Any]:
    """An attribution, a why on its culprit, the pairs it gives and an aggregate of two
    traces, on the scripted single-culprit agent."""
    steps, registry, outcome = build(single_culprit(5, 2))
    run = otelcar.load_run(steps["trace_id"][0], steps)
    attribution = otelcar.attribute(run, registry=registry, outcome=outcome, seed=1)
    assert attribution.culprit is not None
    why = otelcar.why(run, step=attribution.culprit.step, registry=registry, seed=1)
    pairs = otelcar.export_pairs(
        run, result=document(attribution), registry=registry, outcome=outcome, rollouts=4
    )
    other = steps.with_columns(pl.lit(OTHER_TRACE).alias("trace_id"))
    traces = [(steps["trace_id"][0], steps), (OTHER_TRACE, other)]
    verdicts = attribute_traces(traces, registry=registry, outcome=outcome, seed=0)
    return {
        "attribution": attribution,
        "why": why,
        "pairs": pairs,
        "aggregate": aggregate(verdicts),
    }


@pytest.mark.parametrize("kind", ["attribution", "why", "aggregate"])
def test_a_result_holds_data_and_report_words_its_headline(results: dict[str, Any], kind: str):
    result = results[kind]
    data = result.to_dict()
    assert "headline" not in data
    written = document(result)
    assert written["headline"] == headline(result) and written["headline"]
    assert all(set(n) >= {"kind"} for n in data["notes"])  # notes as data: kind and facts
    assert written["notes"] == worded(result.notes)  # ... worded by report
    assert all(isinstance(n, str) for n in written["notes"])
    worded_data = {**data, "notes": written["notes"]}
    assert _without_headlines(written) == _without_headlines(worded_data)  # the same data
    if kind == "attribution":  # its policy check is worded too, and holds no words itself
        assert "headline" not in data["policy_check"] and written["policy_check"]["headline"]
    validator(f"{kind}.schema.json").validate(written)
    assert not hasattr(result, "headline_text") and not callable(getattr(result, "headline", 0))


def test_every_trace_of_an_aggregate_is_worded_from_its_attribution(results: dict[str, Any]):
    written = document(results["aggregate"])
    attributed = [t for t in results["aggregate"].traces if t.attribution is not None]
    assert attributed and all(t.to_dict()["headline"] is None for t in attributed)
    by_id = {t["trace_id"]: t for t in written["traces"]}
    for verdict in attributed:
        assert by_id[verdict.trace_id]["headline"] == headline(verdict.attribution)


@pytest.mark.parametrize("kind", ["attribution", "why", "pairs", "aggregate"])
def test_a_finished_result_cannot_be_changed(results: dict[str, Any], kind: str):
    result = results[kind]
    sequences = {
        f.name: getattr(result, f.name)
        for f in dataclasses.fields(result)
        if isinstance(getattr(result, f.name), list | tuple)
    }
    assert sequences and all(isinstance(v, tuple) for v in sequences.values()), sequences
    name = next(iter(sequences))
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(result, name, ())
    with pytest.raises(AttributeError):
        result.notes.append("changed")
    if hasattr(result, "to_dict"):  # its JSON has lists, as JSON does
        assert not any(isinstance(v, tuple) for v in _values(result.to_dict()))
        # a value copies and pickles (its notes included) into an equal one
        assert pickle.loads(pickle.dumps(result)).to_dict() == result.to_dict()
        assert copy.deepcopy(result).to_dict() == result.to_dict()


def _values(value: Any) -> list[Any]:
    """Every value nested in a result document (tuples included, were there any)."""
    if isinstance(value, dict):
        return [value, *(x for v in value.values() for x in _values(v))]
    if isinstance(value, list | tuple):
        return [value, *(x for v in value for x in _values(v))]
    return [value]


def _without_headlines(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_headlines(v) for k, v in value.items() if k != "headline"}
    if isinstance(value, list):
        return [_without_headlines(v) for v in value]
    return value


def test_wording_a_diff_or_a_live_check_loads_no_estimator():
    """``report.prose`` words the light results itself and loads the estimators' wordings
    (which import SciPy) only for their results: ``otelcar diff`` and ``otelcar replay``
    start without them."""
    import subprocess
    import sys

    code = (
        "import sys; import otelcar.report.prose as p; "
        "assert 'scipy' not in sys.modules and p.FINDINGS not in sys.modules, "
        "sorted(m for m in sys.modules if m.startswith(('scipy', 'otelcar.attribution')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
