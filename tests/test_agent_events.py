"""An agent-kind span that only echoes its agent's final output is that agent's event
(:mod:`otelcar.conventions.agent_events`): an ``other`` step in the agent's episode."""

from __future__ import annotations

import json
from typing import Any

from otelcar.trajectory import build_trace
from tests.synth import TRACE, span

ANSWER = "It is 18 degrees and sunny in Paris."
FOLDED = "an event of that agent recorded as a span, not a sub-agent"


def _agent(span_id: str, name: str, extra: dict[str, Any], **kw: Any):
    return span(span_id, name, {"openinference.span.kind": "AGENT", **extra}, **kw)


def _trace(child_attributes: dict[str, Any], *, grandchild: bool = False, end: int = 50):
    """``weather_agent`` (answering ``ANSWER``) with one model call and an AGENT child."""
    spans = [
        _agent(
            "1",
            "weather_agent",
            {"agent.name": "weather_agent", "output.value": ANSWER},
            start=0,
            end=100,
        ),
        span("2", "OpenAIChatModel", {"openinference.span.kind": "LLM"}, parent="1", start=1),
        _agent("3", "final_answer", child_attributes, parent="1", start=50, end=end, seq=1),
    ]
    if grandchild:
        spans.append(
            span("4", "inner", {"openinference.span.kind": "CHAIN"}, parent="3", start=50, seq=2)
        )
    return {s["span_id"][-1]: s for s in build_trace(TRACE, spans).steps if s["span_id"]}


def _event_payload(output: Any) -> dict[str, Any]:
    value = {"delta": output, "output": output, "state": {"memory": {"messages": []}}}
    return {"input.value": json.dumps(value), "input.mime_type": "application/json"}


def test_an_event_echoing_the_agents_output_is_an_other_step_of_that_agent() -> None:
    steps = _trace({**_event_payload(ANSWER), "metadata.path": "agent.x.final_answer"}, end=50)
    event = steps["3"]
    assert event["kind"] == "other"
    assert event["episode_id"] == steps["1"]["span_id"]  # no episode of its own
    assert event["agent_name"] == "weather_agent"
    assert any(FOLDED in issue and "'weather_agent'" in issue for issue in event["issues"])
    assert steps["1"]["kind"] == "agent"
    assert "input.value" in json.loads(event["attributes"])  # the payload stays visible


def test_a_zero_duration_sub_agent_with_its_own_output_stays_an_agent() -> None:
    for attributes in (
        _event_payload("Rain tomorrow."),  # a payload whose output differs
        {"output.value": "Rain tomorrow."},  # its own, different output
        {"output.value": "Rain tomorrow.", **_event_payload(ANSWER)},  # says something else too
        {"input.value": ANSWER},  # takes the answer as its input: no output of its own
        {},
    ):
        event = _trace(attributes, end=50)["3"]
        assert event["kind"] == "agent", attributes
        assert event["episode_id"] == event["span_id"]
        assert not any(FOLDED in issue for issue in event["issues"])


def test_a_sub_agent_that_names_itself_or_ran_something_stays_an_agent() -> None:
    named = _trace({**_event_payload(ANSWER), "agent.name": "reviewer"})["3"]
    assert (named["kind"], named["agent_name"]) == ("agent", "reviewer")
    busy = _trace(_event_payload(ANSWER), grandchild=True)["3"]
    assert busy["kind"] == "agent" and busy["episode_id"] == busy["span_id"]


def test_a_top_level_agent_is_never_folded() -> None:
    (step,) = build_trace(TRACE, [_agent("1", "solo", {"output.value": ANSWER})]).steps
    assert step["kind"] == "agent"


def test_the_rule_reads_any_dialect_output_key() -> None:
    """traceloop decorators: the output as JSON under ``traceloop.entity.output``."""

    def agent(span_id: str, name: str, **kw: Any):
        attributes = {
            "traceloop.span.kind": "agent",
            "traceloop.entity.name": name,
            "traceloop.entity.output": json.dumps(ANSWER),
        }
        return span(span_id, f"{name}.agent", attributes, **kw)

    spans = [
        agent("1", "planner", start=0, end=100),
        span("2", "chat", {"openinference.span.kind": "LLM"}, parent="1", start=1),
        agent("3", "done", parent="1", start=90, end=90, seq=1),
    ]
    steps = {s["span_id"][-1]: s for s in build_trace(TRACE, spans).steps}
    assert steps["3"]["kind"] == "other"
    assert steps["3"]["agent_name"] == "planner"
    assert steps["3"]["episode_id"] == steps["1"]["span_id"]
