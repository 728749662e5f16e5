"""Agent-kind spans that are an agent's own event, not an agent: folded into the agent.

Some frameworks record an event of an agent run as a span of the agent kind: BeeAI's
instrumentation writes the agent's ``final_answer`` event as a 0 ms ``AGENT`` span under the
agent, whose ``input.value`` is the event payload (``delta`` and ``output``, both the agent's
final answer, and ``state``). Mapped as it reads, it would be an agent step with an episode of
its own. What marks such a span is read from the trace, not from a framework's names:

* it is mapped as an ``agent`` step and has **no child spans** (no model call, tool or anything
  else ran inside it);
* it records **no agent name of its own** (no attribute whose key ends ``agent.name`` or
  ``agent_name``);
* it lies inside another agent step (the nearest enclosing one is *its agent*) whose output is
  a non-empty text (an attribute whose key names an output, with no list index in it:
  ``output.value``, ``traceloop.entity.output``, ``mlflow.spanOutputs``…; the text itself, the
  JSON string it encodes or its ``output`` field);
* its **output is exactly that text**: an attribute of its own whose key names an output, or the
  ``output`` field of a JSON object any of its attributes holds (the event payload), is that
  text, and no output it records says anything else.

Such a span echoes its agent's final output: it becomes an ``other`` step in that agent's
episode (no episode of its own, the agent's name), with an issue saying why. A sub-agent that
did anything (a child span), that names itself, or whose output differs from its parent's stays
an agent step. Run once per trace, after every span is mapped
(:func:`otelcar.trajectory.build_trace`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from otelcar.conventions.base import MappedSpan
from otelcar.conventions.memo import decode_json
from otelcar.ingest.frames import SpanFrame

#: A key that names an agent (``agent.name``, ``gen_ai.agent.name``, ``…agent_name``).
_AGENT_NAME = re.compile(r"(?:^|[._])agent[._]name$", re.IGNORECASE)
#: A key that names an output (a dotted or underscored word ``output``: ``output.value``,
#: ``traceloop.entity.output``, ``mlflow.spanOutputs``, ``langfuse.observation.output``).
_OUTPUT_KEY = re.compile(r"(?:^|[._])(?:span)?outputs?(?:$|[._])", re.IGNORECASE)
#: An index in a key (``metadata.steps.0.output``): an entry of a list, not the span's own.
_INDEX = re.compile(r"(?:^|\.)\d+(?:$|\.)")


def fold_agent_events(
    mapped: Mapping[str, MappedSpan],
    spans: Mapping[str, SpanFrame],
    children: Mapping[str | None, Sequence[SpanFrame]],
) -> None:
    """Turn every agent step of one trace that is its enclosing agent's output event into an
    ``other`` step of that agent (see the module docstring)."""
    for span_id, step in mapped.items():
        if step.kind != "agent" or children.get(span_id):
            continue
        span = spans[span_id]
        if any(_names_an_agent(key, value) for key, value in span.attributes.items()):
            continue
        owner = _enclosing_agent(span_id, mapped, spans)
        if owner is None:
            continue
        echoed = _echoed_outputs(span)
        if len(echoed) != 1 or not echoed <= _output_texts(spans[owner]):
            continue
        agent = mapped[owner].agent_name or mapped[owner].name
        step.kind = "other"
        step.episode_boundary = False
        step.agent_name = None  # the enclosing agent's, as any step inside it
        step.issues.append(
            f"an agent-kind span with no child spans and no agent name of its own, whose "
            f"output is exactly the final output of its agent {agent!r}: an event of that "
            "agent recorded as a span, not a sub-agent; kept as an 'other' step in that "
            "agent's episode"
        )


def _names_an_agent(key: str, value: Any) -> bool:
    return bool(_AGENT_NAME.search(key)) and isinstance(value, str) and bool(value.strip())


def _enclosing_agent(
    span_id: str, mapped: Mapping[str, MappedSpan], spans: Mapping[str, SpanFrame]
) -> str | None:
    """The nearest ancestor span mapped as an agent step (parent cycles end the search)."""
    seen = {span_id}
    current = spans[span_id].parent_span_id
    while current is not None and current in spans and current not in seen:
        if mapped[current].kind == "agent":
            return current
        seen.add(current)
        current = spans[current].parent_span_id
    return None


def _own_output(key: str) -> bool:
    """Whether ``key`` names the span's own output (not a list entry's, not a mime type)."""
    return (
        bool(_OUTPUT_KEY.search(key))
        and not _INDEX.search(key)
        and not key.endswith(("mime_type", "mimeType"))
    )


def _decoded(value: str) -> Any:
    if not value.lstrip().startswith(("{", '"')):
        return None
    try:
        return decode_json(value)
    except ValueError:
        return None


def _output_texts(span: SpanFrame) -> set[str]:
    """The non-empty texts a span records as its output (see the module docstring)."""
    texts: set[str] = set()
    for key, value in span.attributes.items():
        if not _own_output(key) or not isinstance(value, str) or not value.strip():
            continue
        decoded = _decoded(value)
        if isinstance(decoded, str):
            value = decoded
        elif isinstance(decoded, dict) and isinstance(decoded.get("output"), str):
            value = decoded["output"]
        if value.strip():
            texts.add(value.strip())
    return texts


def _echoed_outputs(span: SpanFrame) -> set[str]:
    """Every output the span records: its own output attributes and the ``output`` field of
    the JSON objects its attributes hold (an event payload)."""
    texts = _output_texts(span)
    for key, value in span.attributes.items():
        if _own_output(key) or not isinstance(value, str):
            continue
        decoded = _decoded(value)
        if isinstance(decoded, dict) and "output" in decoded:
            output = decoded["output"]
            texts.add(output.strip() if isinstance(output, str) else repr(output))
    return texts
