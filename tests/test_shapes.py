"""The shape reader (otelcar/conventions/shapes.py) and "never silent, whatever the names".

Unit tests on hand-written payloads (each in its plain and its wrapped form), fuzzing, and two
properties over every framework fixture and every external trace file: payloads moved under a
namespace no mapper knows are read by shape to the same messages or said to be unread, and no
span with content ends as an ``other`` step with nothing said.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from otelcar.conventions import map_span
from otelcar.conventions.shapes import (
    KEPT,
    SOURCE,
    UNREAD,
    carries_content,
    content_keys,
    parse,
    read_span,
)
from otelcar.ingest.files import read_records
from otelcar.ingest.frames import LogFrame, SpanFrame
from otelcar.ingest.raw import decode_record
from otelcar.trajectory import build_trace
from tests.parts import missing
from tests.synth import span

ROOT = Path(__file__).resolve().parents[1]
FRAMEWORKS = ROOT / "fixtures" / "frameworks"
EXTERNAL = ROOT.parent / "shared" / "data" / "external"

REQUEST = {
    "model": "gpt-4o-mini",
    "temperature": 0.2,
    "messages": [
        {"role": "system", "content": "You are a weather assistant."},
        {"role": "user", "content": "Weather in Paris?"},
    ],
    "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {}}}],
}
COMPLETION = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "model": "gpt-4o-mini",
    "choices": [
        {
            "index": 0,
            "finish_reason": "tool_calls",
            "message": {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                    }
                ],
            },
        }
    ],
    "usage": {"prompt_tokens": 40, "completion_tokens": 9, "total_tokens": 49},
}


def _forms(value: Any) -> list[Any]:
    """``value`` as JSON text, as a Python repr, wrapped in a framework's record, and as is."""
    return [json.dumps(value), repr(value), json.dumps({"inputs": {"payload": value}}), value]


@pytest.mark.parametrize("form", range(4))
def test_chat_completion_request_and_reply_in_any_namespace(form: int):
    mapped = read_span(
        span(
            "1",
            "acme call",
            {"acme.in": _forms(REQUEST)[form], "acme.out": _forms(COMPLETION)[form]},
        )
    )
    assert mapped is not None and (mapped.kind, mapped.source) == ("llm", SOURCE)
    assert [(m.role, m.content) for m in mapped.input_messages] == [
        ("system", "You are a weather assistant."),
        ("user", "Weather in Paris?"),
    ]
    (call,) = mapped.output.tool_calls
    assert (call.name, call.arguments, call.id) == ("get_weather", {"city": "Paris"}, "call_1")
    assert mapped.request_model == "gpt-4o-mini" and mapped.finish_reason == "tool_call"
    assert mapped.usage["input_tokens"] == 40 and mapped.usage["output_tokens"] == 9
    assert mapped.params["temperature"] == 0.2
    assert [t["name"] for t in mapped.tools_available] == ["get_weather"]
    assert any("acme.in" in i and "acme.out" in i for i in mapped.issues)


def test_anthropic_messages_request_and_reply():
    request = {
        "model": "claude-x",
        "system": [{"type": "text", "text": "Be brief."}],
        "messages": [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}],
    }
    reply = {
        "type": "message",
        "role": "assistant",
        "model": "claude-x",
        "content": [{"type": "tool_use", "id": "tu_1", "name": "lookup", "input": {"q": "x"}}],
        "stop_reason": "tool_use",
        "usage": {"input_tokens": 5, "output_tokens": 3},
    }
    mapped = read_span(span("1", "x", {"p.req": json.dumps(request), "p.res": reply}))
    assert [(m.role, m.content) for m in mapped.input_messages] == [
        ("system", "Be brief."),
        ("user", "Hi"),
    ]
    assert mapped.output.tool_calls[0].name == "lookup" and mapped.usage["output_tokens"] == 3
    assert mapped.finish_reason == "tool_call"


def test_responses_api_and_gemini_replies():
    responses = {
        "object": "response",
        "model": "gpt-5",
        "output": [
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "4"}],
            }
        ],
        "usage": {"input_tokens": 3, "output_tokens": 1},
    }
    mapped = read_span(
        span("1", "x", {"q.i": {"model": "gpt-5", "input": "2+2?"}, "q.o": responses})
    )
    assert [(m.role, m.content) for m in mapped.input_messages] == [("user", "2+2?")]
    assert mapped.output.content == "4" and mapped.usage["input_tokens"] == 3
    gemini = {
        "candidates": [{"content": {"role": "model", "parts": [{"text": "Hello"}]}}],
        "usage_metadata": {"prompt_token_count": 2, "candidates_token_count": 1},
    }
    request = {"model": "gemini-2", "contents": [{"role": "user", "parts": [{"text": "Hi"}]}]}
    mapped = read_span(span("2", "x", {"g.req": request, "g.res": json.dumps(gemini)}))
    assert mapped.output.role == "assistant" and mapped.output.content == "Hello"
    assert [(m.role, m.content) for m in mapped.input_messages] == [("user", "Hi")]
    assert mapped.usage["output_tokens"] == 1


def test_langchain_serialized_messages_with_a_model_in_the_reply():
    human = {
        "lc": 1,
        "type": "constructor",
        "id": ["langchain", "schema", "messages", "HumanMessage"],
        "kwargs": {"content": "What is 2+2?"},
    }
    ai = {
        "lc": 1,
        "type": "constructor",
        "id": ["langchain", "schema", "messages", "AIMessage"],
        "kwargs": {"content": "4", "response_metadata": {"model_name": "m1"}},
    }
    mapped = read_span(
        span("1", "x", {"z.in": json.dumps({"messages": [[human]]}), "z.out": {"output": ai}})
    )
    assert mapped is not None and mapped.kind == "llm"
    assert [(m.role, m.content) for m in mapped.input_messages] == [("user", "What is 2+2?")]
    assert mapped.output.content == "4"


def test_haystack_repr_with_enums_and_opaque_objects():
    text = (
        "{'messages': [ChatMessage(_role=<ChatRole.USER: 'user'>, _content=[TextContent("
        "text='Weather in Paris?')], _name=None, _meta={})], 'tools': [Tool(name='w', "
        "function=<function main.<locals>.w at 0x7f32344eca40>)]}"
    )
    assert parse(text)["messages"][0]["_role"] == "user"
    reply = {
        "replies": [
            {
                "role": "assistant",
                "meta": {"model": "small", "usage": {"prompt_tokens": 4, "completion_tokens": 2}},
                "content": [{"tool_call": {"tool_name": "w", "arguments": {"c": 1}, "id": "c1"}}],
            }
        ]
    }
    mapped = read_span(span("1", "x", {"h.input": text, "h.output": json.dumps(reply)}))
    assert mapped.kind == "llm" and mapped.request_model == "small"
    assert [(m.role, m.content) for m in mapped.input_messages] == [("user", "Weather in Paris?")]
    assert mapped.output.tool_calls[0].arguments == {"c": 1}


def test_tool_steps_by_shape():
    call = {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    result = {
        "type": "tool_result",
        "tool_use_id": "call_1",
        "content": [{"type": "text", "text": "42"}],
    }
    mapped = read_span(span("1", "x", {"a.call": json.dumps(call), "a.res": result}))
    assert (mapped.kind, mapped.tool_name, mapped.tool_result, mapped.tool_call_id) == (
        "tool",
        "f",
        "42",
        "call_1",
    )
    # A span whose kind value says "TOOL": arguments and result told apart by their keys.
    mapped = read_span(
        span(
            "2",
            "get_weather",
            {"m.type": "TOOL", "m.inputs": '{"city": "Paris"}', "m.outputs": "18 C"},
        )
    )
    assert (mapped.kind, mapped.tool_name, mapped.tool_args, mapped.tool_result) == (
        "tool",
        "get_weather",
        {"city": "Paris"},
        "18 C",
    )


def test_not_clearly_llm_or_tool_stays_other_but_is_never_silent():
    # A transcript that already holds its reply (an agent's), with a model name: not one call.
    transcript = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"},
    ]
    attributes = {
        "x.in": json.dumps(transcript[:1]),
        "x.out": json.dumps(transcript),
        "x.model": "m",
    }
    assert read_span(span("1", "agent", attributes)) is None
    mapped = map_span(span("1", "agent", attributes))
    assert mapped.kind == "other"
    assert any(i.startswith(f"{UNREAD}x.in, x.out") for i in mapped.issues)
    # Long text is content; short text, stack traces and SQL are not.
    assert map_span(span("2", "a", {"acme.note": "word " * 60})).issues[0].startswith(UNREAD)
    quiet = {"acme.flag": "ok", "exception.stacktrace": "x" * 999, "db.statement": "y" * 999}
    assert map_span(span("3", "a", quiet)).issues == []


def test_claimed_llm_step_with_a_value_it_did_not_read():
    # An OTel GenAI chat span whose extra attribute holds a message the mapper never read.
    attributes = {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "m",
        "gen_ai.input.messages": json.dumps(
            [{"role": "user", "parts": [{"type": "text", "content": "hi"}]}]
        ),
        "acme.extra": json.dumps(
            [{"role": "user", "content": "a question nobody read, long enough"}]
        ),
    }
    mapped = map_span(span("1", "chat m", attributes))
    assert mapped.kind == "llm"
    assert any(i.startswith(f"{UNREAD}acme.extra") for i in mapped.issues)
    # The same text in another form (here the whole request) is held: nothing said.
    attributes["acme.extra"] = json.dumps(
        {"messages": [{"role": "user", "content": "hi"}], "model": "m"}
    )
    assert not any(i.startswith(UNREAD) for i in map_span(span("1", "chat m", attributes)).issues)


def test_system_instructions_apart_from_the_messages_in_any_namespace():
    parts = [{"type": "text", "content": "Be brief."}, {"type": "text", "text": "Be kind."}]
    attributes = {
        "acme.in": json.dumps([{"role": "user", "content": "Hi"}]),
        "acme.out": json.dumps([{"role": "assistant", "content": "Hello"}]),
        "acme.model": "m",
        "acme.system_instructions": json.dumps(parts),
        "acme.system": "openai",  # a provider's name, not instructions
    }
    mapped = read_span(span("1", "x", attributes))
    assert [(m.role, m.content) for m in mapped.input_messages] == [
        ("system", "Be brief.\nBe kind."),
        ("user", "Hi"),
    ]
    assert "acme.system_instructions" in mapped.issues[-1]
    # Not text parts: not taken as instructions.
    attributes["acme.system_instructions"] = json.dumps([{"type": "image", "url": "u"}])
    assert [m.role for m in read_span(span("1", "x", attributes)).input_messages] == ["user"]


def test_claimed_llm_step_takes_system_instructions_under_a_producers_own_spelling():
    attributes = {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "m",
        "gen_ai.input.messages": json.dumps(
            [{"role": "user", "parts": [{"type": "text", "content": "hi"}]}]
        ),
        "gen_ai.system.instructions": json.dumps([{"type": "text", "content": "Be brief."}]),
    }
    mapped = map_span(span("1", "chat m", attributes))
    assert [(m.role, m.content) for m in mapped.input_messages] == [
        ("system", "Be brief."),
        ("user", "hi"),
    ]
    assert "system instructions read by shape from gen_ai.system.instructions" in mapped.issues
    # A system message already read: nothing added.
    attributes["gen_ai.system_instructions"] = json.dumps([{"type": "text", "content": "Hm."}])
    mapped = map_span(span("1", "chat m", attributes))
    assert (mapped.input_messages[0].role, mapped.input_messages[0].content) == ("system", "Hm.")
    assert len(mapped.input_messages) == 2


def test_flattened_indexed_keys_are_reassembled_in_any_namespace():
    attributes = {
        "acme.model_name": "m",
        "acme.in.0.message.role": "user",
        "acme.in.0.message.content": "Weather in Paris?",
        "acme.in.1.message.role": "tool",  # a role says nothing of the span's kind
        "acme.in.1.message.content": "18 C",
        "acme.out.0.message.role": "assistant",
        "acme.out.0.message.contents.0.message_content.type": "text",
        "acme.out.0.message.contents.0.message_content.text": "It is 18 C.",
    }
    mapped = read_span(span("1", "x", attributes))
    assert mapped is not None and mapped.kind == "llm"
    assert [(m.role, m.content) for m in mapped.input_messages] == [
        ("user", "Weather in Paris?"),
        ("tool", "18 C"),
    ]
    assert mapped.output.content == "It is 18 C."
    assert "acme.in.*" in mapped.issues[-1] and "acme.out.*" in mapped.issues[-1]
    # A reply left empty beside a call recorded flattened apart: the reply's call.
    attributes = {
        "p.model": "m",
        "p.input": json.dumps([{"role": "user", "content": "Weather in Paris?"}]),
        "p.output": json.dumps([{"role": "assistant", "content": ""}]),
        "p.completion.0.function_call.name": "get_weather",
        "p.completion.0.function_call.arguments": '{"city": "Paris"}',
    }
    (call,) = read_span(span("2", "x", attributes)).output.tool_calls
    assert (call.name, call.arguments) == ("get_weather", {"city": "Paris"})


def test_tool_definition_is_no_call_and_holder_words_say_the_side():
    attributes = {
        "k.span.kind": "TOOL",
        "k.tool.parameters": json.dumps({"type": "object", "properties": {"city": {}}}),
        "k.tool.result_as_answer": False,
        "k.input.value": '{"city": "Paris"}',
        "k.input.mime_type": "application/json",
        "k.output.value": "18 C",
    }
    mapped = read_span(span("1", "get_weather", attributes))
    assert (mapped.kind, mapped.tool_args, mapped.tool_result) == (
        "tool",
        {"city": "Paris"},
        "18 C",
    )


def test_chain_note_dropped_only_when_the_traces_calls_hold_its_content():
    question = "Where is my order A-1001, it was due last week?"
    answer = "Your order A-1001 ships tomorrow from the Lyon depot."
    llm = {
        "openinference.span.kind": "LLM",
        "llm.model_name": "m",
        "llm.input_messages.0.message.role": "user",
        "llm.input_messages.0.message.content": question,
        "llm.output_messages.0.message.role": "assistant",
        "llm.output_messages.0.message.content": answer,
    }

    def chain(extra: str) -> dict[str, Any]:
        state = [{"role": "user", "content": question + extra}]
        return {
            "openinference.span.kind": "CHAIN",
            "input.value": json.dumps({"messages": state}),
            "output.value": json.dumps({"messages": [*state, {"role": "ai", "content": answer}]}),
        }

    # A graph node's state is the call's messages seen again: nothing kept only there.
    alone = map_span(span("1", "node", chain("")))
    assert any(i.startswith(KEPT) for i in alone.issues)  # said when the span is mapped alone
    steps = build_trace("t", [span("1", "node", chain("")), span("2", "c", llm, parent="1")])
    assert [(s["kind"], s["issues"]) for s in steps.steps] == [("other", []), ("llm", [])]
    # A text no call of the trace holds is still said.
    extra = " Also, please cancel the second parcel that went to the wrong address."
    steps = build_trace("t", [span("1", "node", chain(extra)), span("2", "c", llm, parent="1")])
    assert any(i.startswith(KEPT) for i in steps.steps[0]["issues"])


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=30),
    lambda inner: (
        st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=12), inner, max_size=5)
    ),
    max_leaves=40,
)
KEYS = st.sampled_from(["role", "content", "messages", "model", "choices", "message", "type", "x"])
SHAPED = st.recursive(
    st.none()
    | st.text(max_size=20)
    | st.sampled_from(["user", "assistant", "tool_use", "message"]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYS, inner, max_size=5),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.text(max_size=10), JSON | SHAPED, max_size=4), st.booleans())
def test_shape_reader_never_raises_on_any_json(attributes: dict[str, Any], as_text: bool):
    values = {k: json.dumps(v) if as_text else v for k, v in attributes.items()}
    read_span(span("1", "fuzz", values))
    content_keys(span("1", "fuzz", values))
    mapped = map_span(span("1", "fuzz", values))
    assert mapped.kind in ("llm", "tool", "other")
    for value in values.values():
        carries_content(value)
        parse(repr(value))


# -- every fixture and external file --------------------------------------------------------


def _cases() -> list[tuple[str, list[Path]]]:
    cases = [
        (folder.name, sorted(folder.glob("*.jsonl")))
        for folder in sorted(FRAMEWORKS.glob("*/"))
        if list(folder.glob("*.jsonl"))
    ]
    cases += [
        (f"external/{p.parent.name}/{p.name}", [p])
        for p in sorted(EXTERNAL.glob("*/*"))
        if p.suffix in (".json", ".jsonl") and p.is_file()
    ]
    return cases


def _frames(paths: list[Path]) -> tuple[list[SpanFrame], dict[str, list[LogFrame]]]:
    spans: list[SpanFrame] = []
    logs: dict[str, list[LogFrame]] = defaultdict(list)
    for path in paths:
        for record in read_records(path):
            try:
                decoded, _ = decode_record(record)
            except Exception:  # what SOURCE.md says is no trace file
                continue
            spans += decoded.spans
            for log in decoded.logs:
                logs[log.span_id or ""].append(log)
    return spans, logs


def _need_external() -> None:
    if not EXTERNAL.exists():
        missing(f"{EXTERNAL} (../shared/data/external beside the clone)", "see docs/dialects")


NS = "zz_acme."


def _renamed(frame: SpanFrame) -> SpanFrame:
    """The span with every attribute and event under a namespace no mapper knows."""
    return replace(
        frame,
        name=f"zz {frame.name}",
        attributes={NS + k: v for k, v in frame.attributes.items()},
        events=[
            {
                **event,
                "name": NS + str(event.get("name")),
                "attributes": {NS + k: v for k, v in (event.get("attributes") or {}).items()},
            }
            for event in frame.events
        ],
        scope_name=None,
        resource={},
    )


def _renamed_log(log: LogFrame) -> LogFrame:
    return replace(
        log,
        event_name=None if log.event_name is None else NS + log.event_name,
        attributes={NS + k: v for k, v in log.attributes.items()},
    )


def _said(issues: list[str]) -> bool:
    return any(i.startswith((UNREAD, KEPT, "read by shape")) for i in issues)


def _gist(mapped: Any) -> Any:
    if mapped.kind == "tool":
        return ("tool", mapped.tool_args, mapped.tool_result)
    inputs = [(m.role, m.content) for m in mapped.input_messages or ()]
    output = mapped.output
    return (
        "llm",
        inputs,
        None if output is None else (output.content, [c.name for c in output.tool_calls]),
    )


CASES = _cases()


@pytest.mark.parametrize("name,paths", CASES, ids=[c[0] for c in CASES])
def test_no_span_with_content_is_an_other_step_with_nothing_said(name: str, paths: list[Path]):
    if name.startswith("external/"):
        _need_external()
    spans, logs = _frames(paths)
    silent = []
    for frame in spans:
        own = logs.get(frame.span_id, [])
        mapped = map_span(frame, own)
        if mapped.kind == "other" and content_keys(frame, own) and not _said(mapped.issues):
            silent.append((frame.name, content_keys(frame, own)))
    assert not silent, silent


#: Fixtures otelcar does not map exactly yet (no expected.json): the property is checked, and
#: a strict xfail turns red the day it holds, so the mark comes off with the fix.
NOT_YET_EXACT: dict[str, str] = {}


def _marked(cases: list[tuple[str, list[Path]]]) -> list[Any]:
    return [
        pytest.param(
            name,
            paths,
            id=name,
            marks=pytest.mark.xfail(strict=True, reason=NOT_YET_EXACT[name])
            if name in NOT_YET_EXACT
            else (),
        )
        for name, paths in cases
    ]


@pytest.mark.parametrize("name,paths", _marked(CASES))
def test_renamed_namespace_is_read_by_shape_or_said_unread(name: str, paths: list[Path]):
    if name.startswith("external/"):
        _need_external()
    spans, logs = _frames(paths)
    wrong = []
    for frame in spans:
        own = logs.get(frame.span_id, [])
        original = map_span(frame, own)
        moved = map_span(_renamed(frame), [_renamed_log(log) for log in own])
        if not content_keys(frame, own):
            continue
        if moved.kind == "other" or moved.source != SOURCE:
            if not any(i.startswith(UNREAD) for i in moved.issues):
                wrong.append((frame.name, "silent", moved.kind, moved.issues))
            continue
        if original.kind in ("llm", "tool") and original.has_content():
            same = _gist(moved) == _gist(original)
            if not same and not any(i.startswith(UNREAD) for i in moved.issues):
                wrong.append((frame.name, "differs", _gist(original), _gist(moved)))
        elif not _said(moved.issues):
            wrong.append((frame.name, "silent", moved.kind, moved.issues))
    assert not wrong, wrong[:5]
