"""Content *not captured* (capture off at the producer) is said apart from content *unread*
(on the wire, not read by otelcar), on traces recorded by the real openai-v2 instrumentation
(``fixtures/otlp``: the v1.28 log-event path and the new path, content on and off)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace
from pathlib import Path

import polars as pl
import pytest

from otelcar import read_otlp
from otelcar.conventions import UNREAD, content_keys, map_span
from otelcar.conventions.shapes import holding_text
from otelcar.ingest.files import read_records
from otelcar.ingest.frames import LogFrame, SpanFrame
from otelcar.ingest.raw import decode_record
from otelcar.render import step_summary
from otelcar.trajectory import build_trace
from tests.conftest import OTLP


def _files(name: str) -> list[Path]:
    return [OTLP / f"{name}.traces.jsonl", OTLP / f"{name}.logs.jsonl"]


def _frames(name: str) -> tuple[list[SpanFrame], dict[str, list[LogFrame]]]:
    spans: list[SpanFrame] = []
    logs: dict[str, list[LogFrame]] = defaultdict(list)
    for path in _files(name):
        for record in read_records(path):
            decoded, _ = decode_record(record)
            spans += decoded.spans
            for log in decoded.logs:
                logs[log.span_id or ""].append(log)
    return spans, logs


def _llm_spans(name: str) -> list[tuple[SpanFrame, list[LogFrame]]]:
    spans, logs = _frames(name)
    return [(s, logs.get(s.span_id, [])) for s in spans if s.name.startswith("chat ")]


@pytest.mark.parametrize("name", ["legacy_nocontent", "new_nocontent"])
def test_capture_off_steps_say_not_captured_never_unread(name: str):
    steps = read_otlp(_files(name))
    calls = steps.filter(steps["kind"].is_in(["llm", "tool"])).to_dicts()
    assert calls and not any(row["content_captured"] for row in calls)
    assert not [i for row in calls for i in row["issues"] if i.startswith(UNREAD)], name
    for row in calls:
        if row["kind"] == "llm" and row["output"] is None:
            assert step_summary(row) == "[content not captured]"
    spans, logs = _frames(name)
    trace = build_trace(steps["trace_id"][0], spans, [x for v in logs.values() for x in v])
    assert trace.summary["content_captured"] == "no"


def test_v128_events_are_named_as_content_yet_hold_only_the_skeleton():
    """The v1.28 events recorded with capture off keep empty bodies, roles, call ids, tool
    names, ``type: function`` and finish reasons: every one is named as content, none holds
    text the step does not hold."""
    for span, logs in _llm_spans("legacy_nocontent"):
        mapped = map_span(span, logs)
        assert mapped.kind == "llm" and not mapped.has_content()
        named = content_keys(span, logs)
        assert {"gen_ai.system.message", "gen_ai.choice"} <= set(named)
        assert holding_text(mapped, named, span, logs) == []


def test_the_same_events_with_content_are_unread_by_a_step_without_it():
    """Content on the wire that a step does not hold is still *unread*: the capture-on
    events of the same run, checked against the capture-off step, are all named."""
    off = _llm_spans("legacy_nocontent")
    on = _llm_spans("legacy_content")
    assert len(off) == len(on) == 3
    for (span_off, logs_off), (span_on, logs_on) in zip(off, on, strict=True):
        step = map_span(span_off, logs_off)
        named = content_keys(span_on, logs_on)
        # each event had text: the messages, the tool results, the calls' arguments
        assert holding_text(step, named, span_on, logs_on) == named
        assert {"gen_ai.system.message", "gen_ai.user.message", "gen_ai.choice"} <= set(named)


def test_a_short_text_in_a_capture_off_body_is_unread_not_skeleton():
    """Any text the step does not hold counts, whatever its length (``"Hi"`` is a message);
    an issue then says content unread, not not captured."""
    span, logs = _llm_spans("legacy_nocontent")[0]
    logs = [
        replace(log, body={"content": "Hi"}) if log.event_name == "gen_ai.user.message" else log
        for log in logs
    ]
    step = map_span(span, logs)
    assert step.input_messages and not all(m.content is None for m in step.input_messages)
    # the mapper read it; a step that did not hold it is told so
    bare = map_span(*_llm_spans("legacy_nocontent")[0])
    assert holding_text(bare, content_keys(span, logs), span, logs) == ["gen_ai.user.message"]


def test_recorded_run_says_not_captured_or_unread_as_the_step_does():
    """The fidelity check's reasons (the recorded run's problems) follow the step: capture
    off is "not captured (content capture was off)"; a step whose content is on the wire
    but unread says "unread", never that capture was off."""
    from otelcar.replay import check_fidelity, load_run

    steps = read_otlp(_files("legacy_nocontent"))
    run = load_run(steps["trace_id"][0], steps)
    problems = [p for d in run.decisions for p in d.problems]
    assert "context not captured (content capture was off)" in problems
    assert not [p for p in problems if "unread" in p]

    issue = f"{UNREAD}gen_ai.choice carry content 'x' did not read"
    unread = steps.with_columns(
        issues=pl.when(pl.col("kind") == "llm")
        .then(pl.col("issues").list.concat(pl.lit([issue])))
        .otherwise(pl.col("issues"))
    )
    run = load_run(unread["trace_id"][0], unread)
    for decision in run.decisions:
        assert decision.problems[0].startswith("context unread: the trace holds it")
        assert not [p for p in decision.problems if "capture was off" in p]
    report = check_fidelity(run)
    assert {s.verdict for s in report.steps} == {"unreproducible"}
    assert all("unread" in " ".join(s.reasons) for s in report.steps)
