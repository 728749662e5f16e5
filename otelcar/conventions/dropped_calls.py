"""Tool calls an instrumentation dropped from a model call's reply, rebuilt from the trace.

Some instrumentations lose a streamed tool call: the reply is recorded as an empty assistant
message whose finish reason says tool calls (OpenLLMetry's LlamaIndex instrumentation 0.62.4),
and the next call's input holds the same empty assistant turn before the tool messages. The
calls are still in the trace: in the next call's input when it has them, else in the tool
steps that ran right after the call (their names, arguments and call ids).
:func:`rebuild_dropped_calls` puts them back, with an issue saying so; an empty reply it cannot
rebuild is flagged. Run once per trace, after every span is mapped
(:func:`otelcar.trajectory.build_trace`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from otelcar.conventions.base import MappedSpan
from otelcar.ingest.frames import SpanFrame
from otelcar.messages import Message, ToolCall

#: Finish reasons that say the model asked for tools (normalized, and providers' own).
TOOL_REASONS = frozenset({"tool_call", "tool_calls", "tool_use", "tool-calls", "function_call"})
#: The start of the issue the empty-message fill puts on an input message it cannot fill.
_UNFILLED = "input messages "
_UNFILLED_TAIL = "have no content, and the span holds no request"


def _empty(message: Message | None) -> bool:
    return (
        isinstance(message, Message)
        and not message.content
        and not message.reasoning
        and not message.tool_calls
    )


def _turn(inputs: list[Message]) -> int | None:
    """The position of the last assistant message followed by tool messages."""
    for i in range(len(inputs) - 2, -1, -1):
        if inputs[i].role == "assistant" and inputs[i + 1].role == "tool":
            return i
    return None


def rebuild_dropped_calls(mapped: Mapping[str, MappedSpan], spans: Mapping[str, SpanFrame]) -> None:
    """Rebuild the tool calls of every LLM step of one trace whose reply is empty while its
    finish reason is ``tool_call`` (see the module docstring); flag those it cannot."""
    order = sorted(mapped, key=lambda sid: (spans[sid].start_ns, spans[sid].end_ns))
    llm = [sid for sid in order if mapped[sid].kind == "llm"]
    dropped = [
        k
        for k, sid in enumerate(llm)
        if mapped[sid].finish_reason in TOOL_REASONS and _empty(mapped[sid].output)
    ]
    for k in dropped:
        step = mapped[llm[k]]
        after = llm[k + 1] if k + 1 < len(llm) else None
        inputs = list(mapped[after].input_messages or ()) if after else []
        turn = _turn(inputs)
        calls: tuple[ToolCall, ...] = ()
        source = ""
        if turn is not None and inputs[turn].tool_calls:
            calls, source = inputs[turn].tool_calls, "the next model call's input"
        else:
            end = spans[llm[k]].end_ns
            until = spans[after].start_ns if after else None
            tools = [
                mapped[sid]
                for sid in order
                if mapped[sid].kind == "tool"
                and mapped[sid].tool_call_id
                and spans[sid].start_ns >= end
                and (until is None or spans[sid].start_ns <= until)
            ]
            calls = tuple(
                ToolCall(name=t.tool_name or t.name, arguments=t.tool_args, id=t.tool_call_id)
                for t in tools
            )
            source = "the tool steps that ran after it (names, arguments, call ids)"
        if not calls:
            step.issues.append(
                "the reply is empty although its finish reason is tool_call, and the trace "
                "holds no tool calls to rebuild it from; the calls the model asked for are lost"
            )
            continue
        step.output = replace(step.output, content=None, tool_calls=calls)  # type: ignore[arg-type]
        step.issues.append(
            f"the reply was recorded empty although its finish reason is tool_call (the "
            f"instrumentation dropped the calls); {len(calls)} tool call(s) rebuilt from {source}"
        )
        if after and turn is not None and _empty(inputs[turn]):
            nxt = mapped[after]
            inputs[turn] = replace(inputs[turn], content=None, tool_calls=calls)
            nxt.input_messages = inputs
            if not any(_empty(m) for m in inputs):
                nxt.issues = [
                    i for i in nxt.issues if not (i.startswith(_UNFILLED) and _UNFILLED_TAIL in i)
                ]
            nxt.issues.append(
                f"input message {turn} (assistant) was recorded empty; its {len(calls)} tool "
                f"call(s) rebuilt as the previous call's reply was, from {source}"
            )
