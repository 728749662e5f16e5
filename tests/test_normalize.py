"""The one normaliser of messages and tool payloads (:mod:`otelcar.conventions.normalize`):
each wrapper it takes apart, in its wrapped and its plain form, and the defects it fixes in
the mappers (issue 36)."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import example, given, settings
from hypothesis import strategies as st

from otelcar.conventions import map_span
from otelcar.conventions.normalize import (
    messages,
    tool_arguments,
    tool_call,
    tool_calls,
    tool_message_call_id,
    tool_result,
    unwrap,
)
from otelcar.messages import Message
from tests.synth import span

LC = ["langchain", "schema", "messages"]


def lc(cls: str, **kwargs) -> dict:
    return {"lc": 1, "type": "constructor", "id": [*LC, cls], "kwargs": kwargs}


# --- tool arguments ------------------------------------------------------------------------


def test_langchain_callback_record_gives_its_inputs_not_its_kwargs():
    plain = {"city": "Paris"}
    record = {
        "input_str": "{'city': 'Paris'}",
        "inputs": plain,
        "kwargs": {"color": "green"},
        "tags": [],
        "metadata": {"thread": "t"},
    }
    assert tool_arguments(plain) == plain
    assert tool_arguments(record) == plain
    assert tool_arguments(json.dumps(record)) == plain
    assert tool_arguments(repr(record)) == plain  # the Python repr, parsed, never evaluated


def test_an_input_with_options_gives_the_input():
    plain = {"query": "weather", "limit": 3}
    assert tool_arguments({"input": plain, "options": {"signal": None}}) == plain
    assert tool_arguments(json.dumps({"input": plain, "options": {}})) == plain
    assert tool_arguments(plain) == plain
    # one parameter named "input" with nothing beside it is the tool's own argument
    assert tool_arguments({"input": plain}) == {"input": plain}


def test_a_call_record_gives_its_kwargs():
    assert tool_arguments({"args": [], "kwargs": {"a": 1}}) == {"a": 1}
    assert tool_arguments({"args": [1], "kwargs": {"a": 1}}) == {"args": [1], "kwargs": {"a": 1}}


# --- tool results --------------------------------------------------------------------------


def test_a_serialized_tool_message_is_read_as_its_content():
    message = lc("ToolMessage", content="18 degrees", tool_call_id="call_1", name="weather")
    assert tool_result("18 degrees") == "18 degrees"
    assert tool_result(json.dumps(message)) == "18 degrees"
    assert tool_result(json.dumps({"output": message})) == "18 degrees"
    assert tool_result(message) == "18 degrees"
    assert tool_result("ToolMessage(content='18 degrees', tool_call_id='call_1')") == "18 degrees"
    assert tool_result(json.dumps([message])) == "18 degrees"


def test_langchains_on_tool_end_record_is_read_as_its_output():
    # OpenLLMetry's LangChain instrumentation (0.62.4) records on_tool_end's output with its
    # keyword arguments: {"output": <serialized ToolMessage>, "kwargs": {...}}.
    message = lc("ToolMessage", content="18 degrees", tool_call_id="call_1", name="weather")
    kwargs = {"tags": ["seq:step:1"], "color": "green", "name": "weather"}
    assert tool_result(json.dumps({"output": message, "kwargs": kwargs})) == "18 degrees"
    assert tool_result({"output": "18 degrees", "kwargs": kwargs}) == "18 degrees"
    plain = {"output": {"temp": 18}, "kwargs": kwargs}
    assert json.loads(tool_result(plain)) == {"temp": 18}
    # Another key beside output: no such record, kept as recorded.
    other = json.dumps({"output": "18 degrees", "status": "ok"})
    assert tool_result(other) == other


def test_the_call_id_of_a_tool_message_in_each_form():
    message = lc("ToolMessage", content="18 degrees", tool_call_id="call_1")
    data = {"type": "tool", "data": {"content": "18 degrees", "tool_call_id": "call_1"}}
    for form in (
        message,
        json.dumps(message),
        data,
        json.dumps(data),
        {"role": "tool", "content": "18 degrees", "tool_call_id": "call_1"},
        "ToolMessage(content='18 degrees', tool_call_id='call_1')",
        {"output": message},  # OpenInference's LangChain.js tool span
        json.dumps({"output": message}),
    ):
        assert tool_message_call_id(form) == "call_1", form
    for other in (lc("AIMessage", content="x"), {"type": "tool"}, "call_1", None, 5):
        assert tool_message_call_id(other) is None, other


def test_a_result_of_content_blocks_is_their_text():
    blocks = [{"type": "text", "text": "18 degrees"}, {"type": "text", "text": "sunny"}]
    assert tool_result(json.dumps(blocks)) == "18 degrees\nsunny"
    assert tool_result(repr(blocks)) == "18 degrees\nsunny"  # a Python repr of the list
    assert tool_result(json.dumps({"content": blocks, "isError": False})) == "18 degrees\nsunny"
    assert tool_result("18 degrees\nsunny") == "18 degrees\nsunny"


def test_a_result_that_is_no_wrapper_stays_exactly_as_recorded():
    for text in ('{"temp": 18}', "[1, 2]", "plain words", "{'a': 1}", '{"temp":18 }'):
        assert tool_result(text) == text


# --- messages ------------------------------------------------------------------------------

PLAIN = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Weather in Paris?"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "weather", "arguments": '{"city": "Paris"}'},
            }
        ],
    },
    {"role": "tool", "content": "18 degrees", "tool_call_id": "call_1", "name": "weather"},
]
WRAPPED = [
    lc("SystemMessage", content="Be brief."),
    lc("HumanMessage", content="Weather in Paris?"),
    lc(
        "AIMessage",
        content="",
        tool_calls=[{"name": "weather", "args": {"city": "Paris"}, "id": "call_1"}],
    ),
    lc("ToolMessage", content="18 degrees", tool_call_id="call_1", name="weather"),
]


def test_serialized_langchain_messages_read_as_the_plain_ones():
    want = messages(PLAIN, [])
    assert want is not None and [m.role for m in want] == ["system", "user", "assistant", "tool"]
    assert want[2].tool_calls[0].arguments == {"city": "Paris"}
    for form in (
        WRAPPED,
        json.dumps(WRAPPED),
        {"messages": WRAPPED},
        {"output": {"messages": WRAPPED}},
        [WRAPPED],  # a batch of one
    ):
        form = form if not isinstance(form, dict) or "output" not in form else form["output"]
        assert messages(form, []) == want, form


def test_a_repr_of_a_message_reads_as_the_message():
    got = messages(["ToolMessage(content='18 degrees', tool_call_id='call_1', name='weather')"], [])
    assert got == [
        Message(role="tool", content="18 degrees", tool_call_id="call_1", name="weather")
    ]


def test_a_tool_message_of_results_only_keeps_its_name():
    anthropic = {
        "role": "tool",
        "name": "weather",
        "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "18 degrees"}],
    }
    assert messages([anthropic], []) == [
        Message(role="tool", content="18 degrees", tool_call_id="t1", name="weather")
    ]
    parts = {
        "role": "tool",
        "name": "weather",
        "parts": [{"type": "tool_call_response", "id": "t1", "response": "18 degrees"}],
    }
    mapped = map_span(
        span(
            "1",
            "chat m",
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.input.messages": json.dumps([parts]),
            },
        )
    )
    assert mapped.input_messages == [
        Message(role="tool", content="18 degrees", tool_call_id="t1", name="weather")
    ]


# --- tool calls ----------------------------------------------------------------------------


def test_a_tool_call_id_under_any_key_is_read():
    function = {"name": "weather", "arguments": '{"city": "Paris"}'}
    for item in (
        {"id": "c1", "type": "function", "function": function},
        {"type": "function", "function": {**function, "id": "c1"}},
        {"tool_call": {"id": "c1", "function": function}},
        {"toolCallId": "c1", "toolName": "weather", "input": {"city": "Paris"}},
        {"call_id": "c1", "name": "weather", "arguments": '{"city": "Paris"}'},
        {"tool_call_id": "c1", "name": "weather", "args": {"city": "Paris"}},
        {"toolUseId": "c1", "name": "weather", "input": {"city": "Paris"}},
    ):
        call = tool_call(item)
        assert call is not None and (call.id, call.name, call.arguments) == (
            "c1",
            "weather",
            {"city": "Paris"},
        ), item
    assert tool_calls([1, "x", None]) == ()


# --- inside a span -------------------------------------------------------------------------


def test_openllmetry_tool_span_with_a_langchain_callback_record_and_tool_message():
    record = {
        "input_str": "{'city': 'Paris'}",
        "inputs": {"city": "Paris"},
        "kwargs": {"callbacks": None},
        "tags": None,
        "metadata": {},
    }
    output = {"output": lc("ToolMessage", content="18 degrees", tool_call_id="call_1")}
    mapped = map_span(
        span(
            "1",
            "weather.tool",
            {
                "traceloop.span.kind": "tool",
                "traceloop.entity.name": "weather",
                "traceloop.entity.input": json.dumps(record),
                "traceloop.entity.output": json.dumps(output),
            },
        )
    )
    assert (mapped.kind, mapped.tool_args, mapped.tool_result) == (
        "tool",
        {"city": "Paris"},
        "18 degrees",
    )


def test_openllmetry_langchain_tool_span_reads_result_and_call_id_from_callback_records():
    # opentelemetry-instrumentation-langchain 0.62.4 under langchain.agents.create_agent: the
    # callback records in traceloop.entity.* and again in gen_ai.tool.call.*, no call id
    # attribute; the id is in on_tool_end's ToolMessage and on_tool_start's kwargs.
    start = {
        "input_str": "{'city': 'Paris'}",
        "tags": ["seq:step:1"],
        "metadata": {"langgraph_step": 2},
        "inputs": {"city": "Paris"},
        "kwargs": {"color": "green", "name": None, "tool_call_id": "call_1"},
    }
    message = lc("ToolMessage", content="18 degrees", tool_call_id="call_1", name="weather")
    end = {"output": message, "kwargs": {"tags": ["seq:step:1"], "name": "weather"}}
    attributes = {
        "traceloop.span.kind": "tool",
        "traceloop.entity.name": "weather",
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "weather",
    }
    for keys in (
        ("traceloop.entity.input", "traceloop.entity.output"),
        ("gen_ai.tool.call.arguments", "gen_ai.tool.call.result"),
    ):
        records = dict(zip(keys, (json.dumps(start), json.dumps(end)), strict=True))
        mapped = map_span(span("1", "execute_tool weather", {**attributes, **records}))
        assert (mapped.kind, mapped.tool_args, mapped.tool_result, mapped.tool_call_id) == (
            "tool",
            {"city": "Paris"},
            "18 degrees",
            "call_1",
        ), keys
    # Only on_tool_start's record: the id from its kwargs.
    only_start = {**attributes, "traceloop.entity.input": json.dumps(start)}
    assert map_span(span("1", "execute_tool weather", only_start)).tool_call_id == "call_1"


def test_openllmetry_tool_span_with_genai_tool_attributes_only():
    mapped = map_span(
        span(
            "1",
            "weather.tool",
            {
                "traceloop.span.kind": "tool",
                "traceloop.entity.name": "weather",
                "gen_ai.tool.call.id": "call_1",
                "gen_ai.tool.call.arguments": '{"city": "Paris"}',
                "gen_ai.tool.call.result": "18 degrees",
            },
        )
    )
    assert (mapped.tool_args, mapped.tool_result, mapped.tool_call_id) == (
        {"city": "Paris"},
        "18 degrees",
        "call_1",
    )
    assert not any("content unread" in issue for issue in mapped.issues)


def _oi_llm(extra: dict) -> dict:
    return {
        "openinference.span.kind": "LLM",
        "llm.model_name": "m",
        "llm.input_messages.0.message.role": "system",
        "llm.input_messages.1.message.role": "user",
        "llm.input_messages.1.message.content": "Weather in Paris?",
        "llm.output_messages.0.message.role": "assistant",
        "llm.output_messages.0.message.content": "Sunny.",
        **extra,
    }


def test_an_empty_message_is_filled_from_the_whole_request_with_an_issue():
    request = {
        "model": "m",
        "messages": [
            {"role": "system", "content": [{"type": "text", "text": "Be brief."}]},
            {"role": "user", "content": "Weather in Paris?"},
        ],
    }
    mapped = map_span(span("1", "llm", _oi_llm({"input.value": json.dumps(request)})))
    assert [m.content for m in mapped.input_messages] == ["Be brief.", "Weather in Paris?"]
    assert any("read from input.value" in issue for issue in mapped.issues), mapped.issues


def test_an_empty_message_that_cannot_be_filled_is_flagged():
    mapped = map_span(span("1", "llm", _oi_llm({})))
    assert mapped.input_messages[0] == Message(role="system")
    assert any("input messages 0 (system) have no content" in i for i in mapped.issues)
    # a request that does not hold the same messages fills nothing
    other = {"messages": [{"role": "user", "content": "something else"}]}
    mapped = map_span(span("1", "llm", _oi_llm({"input.value": json.dumps(other)})))
    assert mapped.input_messages[0].content is None
    assert any("have no content" in i for i in mapped.issues)


def test_the_providers_own_stop_reason_is_used_without_finish_reasons():
    attributes = {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "claude",
        "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": []}]),
        "anthropic.message.stop_reason": "tool_use",
    }
    mapped = map_span(span("1", "chat claude", attributes))
    assert mapped.finish_reason == "tool_call"
    assert any("anthropic.message.stop_reason" in issue for issue in mapped.issues)
    with_reasons = {**attributes, "gen_ai.response.finish_reasons": ["stop"]}
    assert map_span(span("1", "chat claude", with_reasons)).finish_reason == "stop"


# --- properties ----------------------------------------------------------------------------

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                [
                    "lc",
                    "id",
                    "kwargs",
                    "type",
                    "content",
                    "role",
                    "messages",
                    "input",
                    "inputs",
                    "input_str",
                    "options",
                    "output",
                    "tool_calls",
                    "function",
                    "name",
                    "args",
                    "text",
                    "tool_call",
                    "toolCallId",
                    "tags",
                    "metadata",
                    "result",
                    "blocks",
                    "tool_name",
                ]
            )
            | st.text(max_size=8),
            inner,
            max_size=5,
        )
    ),
    max_leaves=25,
)


@settings(max_examples=300, deadline=None)
@given(JSON)
@example({"content": {"type": []}, "role": None})  # an unhashable block type (found by this test)
def test_the_normaliser_never_raises_on_any_json(value):
    for form in (value, json.dumps(value), repr(value)):
        tool_arguments(form)
        tool_result(form)
        messages(form, [])
        tool_calls(form)
        unwrap(form)


ROLE_CLASSES = {
    "system": "SystemMessage",
    "user": "HumanMessage",
    "assistant": "AIMessage",
    "tool": "ToolMessage",
}


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(sorted(ROLE_CLASSES)), st.text(min_size=1, max_size=30)),
        min_size=1,
        max_size=6,
    )
)
def test_wrapped_and_plain_messages_normalise_the_same(pairs):
    plain = [{"role": role, "content": text} for role, text in pairs]
    wrapped = [lc(ROLE_CLASSES[role], content=text) for role, text in pairs]
    reprs = [f"{ROLE_CLASSES[role]}(content={text!r})" for role, text in pairs]
    want = messages(plain, [])
    assert want is not None
    assert messages(wrapped, []) == want
    assert messages(json.dumps(wrapped), []) == want
    assert messages({"messages": wrapped}, []) == want
    assert messages(reprs, []) == want
    tool_text = pairs[0][1]
    assert tool_result(json.dumps({"output": lc("ToolMessage", content=tool_text)})) == tool_text


def _generations(message: dict) -> dict:
    return {"generations": [[{"text": "", "message": message}]], "llmOutput": {}}


def test_langchains_generations_reply_is_read_as_its_first_message():
    call = {"name": "get_weather", "args": {"city": "Paris"}, "id": "call_1"}
    reply = _generations(lc("AIMessage", content="", tool_calls=[call]))
    for form in (reply, json.dumps(reply)):
        (message,) = messages(form, [])
        assert message.role == "assistant"
        assert [(c.id, c.name, c.arguments) for c in message.tool_calls] == [
            ("call_1", "get_weather", {"city": "Paris"})
        ]
    text_only = {"generations": [[{"text": "Sunny."}]]}
    assert messages(text_only, []) == [Message(role="assistant", content="Sunny.")]
    assert messages({"generations": []}, []) is None


ASKED = "message.tool_calls.0.tool_call.function"


def _lc_llm(extra: dict) -> dict:
    """OpenInference's LangChain.js LLM span: calls without ids, tool message without one."""
    return {
        "openinference.span.kind": "LLM",
        "llm.model_name": "m",
        "llm.input_messages.0.message.role": "user",
        "llm.input_messages.0.message.content": "Weather in Paris?",
        "llm.input_messages.1.message.role": "assistant",
        "llm.input_messages.1.message.content": "",
        f"llm.input_messages.1.{ASKED}.name": "get_weather",
        f"llm.input_messages.1.{ASKED}.arguments": '{"city": "Paris"}',
        "llm.input_messages.2.message.role": "tool",
        "llm.input_messages.2.message.content": "18 degrees",
        "llm.output_messages.0.message.role": "assistant",
        "llm.output_messages.0.message.content": "",
        f"llm.output_messages.0.{ASKED}.name": "get_weather",
        f"llm.output_messages.0.{ASKED}.arguments": '{"city": "Lyon"}',
        **extra,
    }


CALL_1 = {"name": "get_weather", "args": {"city": "Paris"}, "id": "call_1"}
CALL_2 = {"name": "get_weather", "args": {"city": "Lyon"}, "id": "call_2"}
REQUEST = {
    "messages": [
        [
            lc("HumanMessage", content="Weather in Paris?"),
            lc("AIMessage", content="", tool_calls=[CALL_1]),
            lc("ToolMessage", content="18 degrees", tool_call_id="call_1"),
        ]
    ]
}


def test_tool_call_ids_missing_from_the_attributes_are_read_from_the_whole_request():
    extra = {
        "input.value": json.dumps(REQUEST),
        "output.value": json.dumps(_generations(lc("AIMessage", content="", tool_calls=[CALL_2]))),
    }
    mapped = map_span(span("1", "llm", _lc_llm(extra)))
    assistant, tool = mapped.input_messages[1], mapped.input_messages[2]
    assert [c.id for c in assistant.tool_calls] == ["call_1"] and assistant.content is None
    assert tool.tool_call_id == "call_1"
    assert [(c.id, c.arguments) for c in mapped.output.tool_calls] == [("call_2", {"city": "Lyon"})]
    assert any("input messages 1, 2 are not in the structured" in i for i in mapped.issues)
    assert any("output's tool-call ids" in i and "output.value" in i for i in mapped.issues)


def test_tool_call_ids_are_not_taken_from_a_request_holding_other_messages():
    other_name = {"name": "get_time", "args": {}, "id": "call_9"}
    differs = {
        "messages": [
            [
                lc("HumanMessage", content="Weather in Paris?"),
                lc("AIMessage", content="", tool_calls=[other_name]),  # another tool
                lc("HumanMessage", content="not a tool message"),  # another role
            ]
        ]
    }
    shorter = {"messages": [[lc("HumanMessage", content="Weather in Paris?")]]}
    for request in (differs, shorter):
        mapped = map_span(span("1", "llm", _lc_llm({"input.value": json.dumps(request)})))
        assert [c.id for c in mapped.input_messages[1].tool_calls] == [None]
        assert mapped.input_messages[2].tool_call_id is None
        assert not any("tool-call ids" in i for i in mapped.issues)


def test_a_trace_recorded_with_content_capture_off_is_not_flagged_as_empty_messages() -> None:
    """With capture off every input message is a role and nothing else (tool calls keep
    names and ids): that is said as not captured, not as messages the model saw empty."""
    from otelcar import read_otlp

    otlp = Path(__file__).resolve().parents[1] / "fixtures" / "otlp"
    for name in ("legacy_nocontent", "new_nocontent"):
        steps = read_otlp([otlp / f"{name}.traces.jsonl", otlp / f"{name}.logs.jsonl"])
        llm = steps.filter(steps["kind"] == "llm")
        assert not llm["content_captured"].any(), name
        issues = [i for row in llm["issues"] for i in row]
        assert not [i for i in issues if "an empty message is not what the model saw" in i], name


# --- flattened records and tool calls written as text (one normaliser for every dialect) ---

_REPR = (
    "ResponseFunctionToolCall(arguments='{\"city\": \"Paris\"}', call_id='call_1', "
    "name='get_weather', type='function_call', id='fc_1', status='completed')"
)


def test_a_message_flattened_one_field_per_key_reads_as_its_nested_form():
    from otelcar.conventions.normalize import message_tool_calls, normalize_message, unflatten

    nested = {
        "role": "assistant",
        "tool_calls": [
            {"id": "call_1", "name": "get_weather", "arguments": '{"city": "Paris"}'},
            {"id": "call_2", "name": "get_time", "arguments": "{}"},
        ],
    }
    flat = {
        "role": "assistant",
        "tool_calls.1.id": "call_2",  # any key order; indexes give the order
        "tool_calls.1.name": "get_time",
        "tool_calls.1.arguments": "{}",
        "tool_calls.0.id": "call_1",
        "tool_calls.0.name": "get_weather",
        "tool_calls.0.arguments": '{"city": "Paris"}',
    }
    assert unflatten(flat) == nested
    assert normalize_message(flat, []) == normalize_message(nested, [])
    calls = message_tool_calls(flat, [])
    assert [(c.id, c.name, c.arguments) for c in calls] == [
        ("call_1", "get_weather", {"city": "Paris"}),
        ("call_2", "get_time", {}),
    ]
    legacy = {"function_call.name": "get_weather", "function_call.arguments": '{"city": "Paris"}'}
    assert message_tool_calls(legacy, []) == message_tool_calls(
        {"function_call": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}, []
    )
    assert [(c.id, c.name) for c in message_tool_calls(legacy, [])] == [(None, "get_weather")]


def test_openllmetry_indexed_messages_read_by_the_normaliser_as_the_mapper_reads_them():
    """On traces recorded by OpenLLMetry's indexed instrumentation (``fixtures/openllmetry``),
    each ``gen_ai.prompt.N`` / ``gen_ai.completion.N`` group given to the normaliser as it is
    has the tool calls the dialect mapper gives."""
    from otelcar.conventions.normalize import indexed, normalize_message
    from otelcar.ingest.files import read_records
    from otelcar.ingest.raw import decode_record

    root = Path(__file__).resolve().parents[1] / "fixtures" / "openllmetry"
    compared = 0
    for name in ("indexed", "traceloop_indexed", "evicted"):
        for record in read_records(root / f"{name}.traces.jsonl"):
            for frame in decode_record(record)[0].spans:
                mapped = map_span(frame)
                if mapped.kind != "llm":
                    continue
                got = [*(mapped.input_messages or ()), *([mapped.output] if mapped.output else [])]
                prompts = indexed(frame.attributes, "gen_ai.prompt").values()
                groups = [g for g in prompts if isinstance(g.get("role"), str)]
                groups += list(indexed(frame.attributes, "gen_ai.completion").values())[:1]
                for message, fields in zip(got, groups, strict=True):
                    (read,) = normalize_message(fields, [])
                    assert read.tool_calls == message.tool_calls, (name, fields)
                    compared += bool(message.tool_calls)
    assert compared >= 3


def test_a_tool_call_written_as_its_python_repr_is_that_call_in_any_message_form():
    from otelcar.conventions.normalize import normalize_message, repr_tool_call

    issues: list[str] = []
    call = repr_tool_call(_REPR, issues, "output message 0")
    assert (call.id, call.name, call.arguments) == ("call_1", "get_weather", {"city": "Paris"})
    assert issues == [
        "output message 0: a tool call recorded as the text ResponseFunctionToolCall(…) "
        "(a Python repr); read as the tool call"
    ]
    for content in (_REPR, [{"type": "text", "text": _REPR}], [_REPR]):
        issues = []
        (message,) = normalize_message({"role": "assistant", "content": content}, issues)
        assert message.content is None and message.tool_calls == (call,), content
        assert any("a Python repr" in i for i in issues)
    # a text that only mentions such a class stays text
    assert repr_tool_call("I called ResponseFunctionToolCall earlier", [], "") is None
    (plain,) = normalize_message({"role": "assistant", "content": "it is sunny"}, [])
    assert plain.content == "it is sunny" and not plain.tool_calls
