"""The live endpoint's model APIs (``otelcar.live.wire*``, ``otelcar.live.endpoint``), driven by
the official ``openai`` and ``anthropic`` SDKs against a real :class:`ModelEndpoint` on
127.0.0.1: what each API's request reads into (:class:`LiveRequest`), that each SDK reads the
answer back exactly (text, tool calls, ids, usage; JSON and streamed), that one conversation
reads into the same messages whichever API carries it, and that failures reach the SDKs as
their own API errors, sent once.
"""

from __future__ import annotations

import asyncio
import json
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import openai
import pytest

from otelcar.live.endpoint import ModelEndpoint
from otelcar.live.wire import LiveRequest, arguments_text, parse_chat
from otelcar.live.wire_anthropic import messages_response, parse_messages
from otelcar.live.wire_responses import parse_responses, responses_response
from otelcar.messages import Message, ToolCall
from otelcar.replay.recorded import same_message
from tests.parts import need_module

SYSTEM = "You are a weather bot."
SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
    "required": ["city"],
}
TOOLS = (
    {
        "type": "function",
        "name": "get_weather",
        "description": "Current weather of a city.",
        "parameters": SCHEMA,
    },
)
#: The conversation every API carries below, normalized.
CONVERSATION = (
    Message("system", SYSTEM),
    Message("user", "Weather in Oslo and Bergen?"),
    Message(
        "assistant",
        "Checking.",
        (
            ToolCall("get_weather", {"city": "Oslo"}, "call_1"),
            ToolCall("get_weather", {"city": "Bergen"}, "call_2"),
        ),
    ),
    Message("tool", "rain, 8C", tool_call_id="call_1"),
    Message("tool", "sun, 12C", tool_call_id="call_2"),
    Message("user", "And tomorrow?"),
)
CHAT_MESSAGES: list[Any] = [
    {"role": "system", "content": SYSTEM},
    {"role": "user", "content": "Weather in Oslo and Bergen?"},
    {
        "role": "assistant",
        "content": "Checking.",
        "tool_calls": [
            {
                "id": f"call_{n}",
                "type": "function",
                "function": {"name": "get_weather", "arguments": json.dumps({"city": city})},
            }
            for n, city in ((1, "Oslo"), (2, "Bergen"))
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "rain, 8C"},
    {"role": "tool", "tool_call_id": "call_2", "content": "sun, 12C"},
    {"role": "user", "content": "And tomorrow?"},
]
RESPONSES_INPUT: list[Any] = [
    {"role": "user", "content": "Weather in Oslo and Bergen?"},
    {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "Checking."}],
    },
    {
        "type": "function_call",
        "call_id": "call_1",
        "name": "get_weather",
        "arguments": '{"city": "Oslo"}',
    },
    {
        "type": "function_call",
        "call_id": "call_2",
        "name": "get_weather",
        "arguments": '{"city":"Bergen"}',
    },
    {"type": "function_call_output", "call_id": "call_1", "output": "rain, 8C"},
    {"type": "function_call_output", "call_id": "call_2", "output": "sun, 12C"},
    {
        "type": "message",
        "role": "user",
        "content": [{"type": "input_text", "text": "And tomorrow?"}],
    },
]
ANTHROPIC_MESSAGES: list[Any] = [
    {"role": "user", "content": "Weather in Oslo and Bergen?"},
    {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Checking."},
            {"type": "tool_use", "id": "call_1", "name": "get_weather", "input": {"city": "Oslo"}},
            {
                "type": "tool_use",
                "id": "call_2",
                "name": "get_weather",
                "input": {"city": "Bergen"},
            },
        ],
    },
    {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "call_1", "content": "rain, 8C"},
            {
                "type": "tool_result",
                "tool_use_id": "call_2",
                "content": [{"type": "text", "text": "sun, 12C"}],
            },
            {"type": "text", "text": "And tomorrow?"},
        ],
    },
]
CHAT_TOOLS: list[Any] = [
    {"type": "function", "function": {k: v for k, v in TOOLS[0].items() if k != "type"}}
]
RESPONSES_TOOLS: list[Any] = [{**TOOLS[0], "strict": False}]
ANTHROPIC_TOOLS: list[Any] = [
    {"name": "get_weather", "description": "Current weather of a city.", "input_schema": SCHEMA}
]

FORECAST = {"city": "Oslo", "days": 1}
#: An answer with text and a tool call, and one with text only.
WITH_CALL = Message("assistant", "Let me look.", (ToolCall("get_forecast", FORECAST, "call_7"),))
TEXT_ONLY = Message("assistant", "Tomorrow: rain in Oslo, sun in Bergen.")
CALL_ONLY = Message("assistant", None, (ToolCall("get_forecast", {"city": "Bergen"}, "call_8"),))
USAGE = (11, 7)


@dataclass
class Answered:
    """What :meth:`RolloutSession.answer` returns, as far as the endpoint reads it."""

    index: int
    answer: Message
    input_tokens: int
    output_tokens: int


@dataclass
class FakeSession:
    """A rollout session that answers its requests with ``answers`` in turn (or fails each
    with ``fail``) and keeps every request it was sent."""

    token: str
    answers: list[Message] = field(default_factory=list)
    fail: str | None = None
    requests: list[LiveRequest] = field(default_factory=list)

    async def answer(self, request: LiveRequest) -> Answered:
        self.requests.append(request)
        if self.fail is not None:
            raise RuntimeError(self.fail)
        index = len(self.requests) - 1
        return Answered(index, self.answers[index], *USAGE)


@pytest.fixture(scope="module")
def endpoint() -> Iterator[ModelEndpoint]:
    """A model endpoint whose sessions answer on an event loop of their own thread."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        with ModelEndpoint(loop) as served:
            yield served
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        loop.close()


@pytest.fixture
def sdk_anthropic() -> ModuleType:
    return need_module("anthropic", "install the dev extra: pip install -e '.[dev]'")


def serve(
    endpoint: ModelEndpoint, *answers: Message, fail: str | None = None
) -> tuple[FakeSession, str]:
    """A fresh session on ``endpoint`` and its base URL (``…/r/<token>/v1``)."""
    session = FakeSession(endpoint.new_token(), list(answers), fail)
    return session, endpoint.open(session)  # type: ignore[arg-type]


def openai_client(base_url: str, **options: Any) -> openai.OpenAI:
    return openai.OpenAI(base_url=base_url, api_key="test", **options)


def anthropic_client(sdk: ModuleType, base_url: str, **options: Any) -> Any:
    return sdk.Anthropic(base_url=base_url.removesuffix("/v1"), api_key="test", **options)


def assert_same_messages(a: tuple[Message, ...], b: tuple[Message, ...]) -> None:
    """The comparison the live fidelity check makes (session.context_difference)."""
    assert len(a) == len(b), (a, b)
    for x, y in zip(a, b, strict=True):
        assert same_message(x, y) and x.tool_call_id == y.tool_call_id, (x, y)


# One conversation, three APIs.


def test_one_conversation_reads_the_same_in_every_api(
    endpoint: ModelEndpoint, sdk_anthropic: ModuleType
) -> None:
    session, base = serve(endpoint, TEXT_ONLY, TEXT_ONLY, TEXT_ONLY)
    client = openai_client(base)
    client.chat.completions.create(
        model="gpt-test",
        messages=CHAT_MESSAGES,
        tools=CHAT_TOOLS,
        tool_choice="required",
        temperature=0.2,
        top_p=0.9,
        max_tokens=100,
        stop=["END"],
    )
    client.responses.create(
        model="gpt-test",
        instructions=SYSTEM,
        input=RESPONSES_INPUT,
        tools=RESPONSES_TOOLS,
        tool_choice="required",
        temperature=0.2,
        top_p=0.9,
        max_output_tokens=100,
    )
    anthropic_client(sdk_anthropic, base).messages.create(
        model="claude-test",
        system=SYSTEM,
        messages=ANTHROPIC_MESSAGES,
        tools=ANTHROPIC_TOOLS,
        tool_choice={"type": "any"},
        max_tokens=100,
        stop_sequences=["END"],
        extra_body={"temperature": 0.2, "top_p": 0.9},  # older SDKs' keywords, gone in 2.x
    )
    chat, responses, messages = session.requests
    assert [r.api for r in session.requests] == ["chat", "responses", "anthropic"]
    for request in session.requests:
        assert request.messages == CONVERSATION
        assert request.tools == TOOLS
        assert request.tool_choice == "required"
        assert request.issues == ()
    assert_same_messages(chat.messages, responses.messages)
    assert_same_messages(chat.messages, messages.messages)
    both = {"temperature": 0.2, "top_p": 0.9, "max_tokens": 100}
    assert chat.params == messages.params == {**both, "stop": ["END"]}
    assert responses.params == both
    assert (chat.model, responses.model, messages.model) == ("gpt-test", "gpt-test", "claude-test")


# The OpenAI Responses API.


def test_responses_request_and_answer(endpoint: ModelEndpoint) -> None:
    session, base = serve(endpoint, WITH_CALL)
    response = openai_client(base).responses.create(
        model="gpt-test",
        instructions=SYSTEM,
        input=RESPONSES_INPUT,
        tools=RESPONSES_TOOLS,
        tool_choice={"type": "function", "name": "get_weather"},
        temperature=0.5,
    )
    (request,) = session.requests
    assert request.api == "responses" and request.stream is False
    assert request.tool_choice == {"type": "function", "function": {"name": "get_weather"}}
    assert request.tool_choice_text == '{"function":{"name":"get_weather"},"type":"function"}'
    assert request.params == {"temperature": 0.5}
    assert response.object == "response" and response.status == "completed"
    assert response.output_text == "Let me look."
    message, call = response.output
    assert message.type == "message" and message.role == "assistant"
    assert call.type == "function_call"
    assert (call.name, call.call_id, json.loads(call.arguments)) == (
        "get_forecast",
        "call_7",
        FORECAST,
    )
    assert len({response.id, message.id, call.id}) == 3
    assert response.usage is not None
    assert (response.usage.input_tokens, response.usage.output_tokens) == USAGE
    assert response.usage.total_tokens == sum(USAGE)


def test_responses_answers_with_only_the_items_it_has(endpoint: ModelEndpoint) -> None:
    _, base = serve(endpoint, TEXT_ONLY, CALL_ONLY)
    client = openai_client(base)
    text = client.responses.create(model="m", input="Tomorrow?")
    assert [item.type for item in text.output] == ["message"]
    assert text.output_text == TEXT_ONLY.content
    call = client.responses.create(model="m", input="Tomorrow?")
    assert [item.type for item in call.output] == ["function_call"]
    assert call.output[0].call_id == "call_8"
    assert json.loads(call.output[0].arguments) == {"city": "Bergen"}


RESPONSE_EVENTS = [
    "response.created",
    "response.in_progress",
    "response.output_item.added",
    "response.content_part.added",
    "response.output_text.delta",
    "response.output_text.done",
    "response.content_part.done",
    "response.output_item.done",
    "response.output_item.added",
    "response.function_call_arguments.delta",
    "response.function_call_arguments.done",
    "response.output_item.done",
    "response.completed",
]


def test_responses_streamed_raw(endpoint: ModelEndpoint) -> None:
    session, base = serve(endpoint, WITH_CALL)
    events = list(
        openai_client(base).responses.create(
            model="gpt-test", input=RESPONSES_INPUT, tools=RESPONSES_TOOLS, stream=True
        )
    )
    assert session.requests[0].stream is True
    assert [e.type for e in events] == RESPONSE_EVENTS
    assert [e.sequence_number for e in events] == list(range(len(events)))
    deltas = [e for e in events if e.type == "response.output_text.delta"]
    assert "".join(e.delta for e in deltas) == "Let me look."
    arguments = next(e for e in events if e.type == "response.function_call_arguments.done")
    assert json.loads(arguments.arguments) == FORECAST and arguments.name == "get_forecast"
    final = events[-1].response
    assert final.status == "completed" and final.output_text == "Let me look."
    assert final.output[1].call_id == "call_7"
    assert final.usage is not None and final.usage.output_tokens == USAGE[1]


def test_responses_stream_helper(endpoint: ModelEndpoint) -> None:
    _, base = serve(endpoint, WITH_CALL)
    with openai_client(base).responses.stream(
        model="gpt-test", input=RESPONSES_INPUT, tools=RESPONSES_TOOLS
    ) as stream:
        text = "".join(e.delta for e in stream if e.type == "response.output_text.delta")
        final = stream.get_final_response()
    assert text == "Let me look."
    assert final.output_text == "Let me look."
    call = final.output[1]
    assert call.type == "function_call"
    assert (call.name, call.call_id, json.loads(call.arguments)) == (
        "get_forecast",
        "call_7",
        FORECAST,
    )


def test_responses_items_without_a_normalized_form_are_named() -> None:
    request = parse_responses(
        {
            "model": "m",
            "input": [
                {"role": "developer", "content": "Be brief."},
                {
                    "role": "user",
                    "content": [
                        {"type": "input_text", "text": "What is this?"},
                        {"type": "input_image", "image_url": "data:image/png;base64,AA=="},
                    ],
                },
                {
                    "type": "reasoning",
                    "id": "rs_1",
                    "summary": [{"type": "summary_text", "text": "think"}],
                },
                {"type": "function_call", "call_id": "c1", "name": "look", "arguments": "{}"},
                {
                    "type": "function_call_output",
                    "call_id": "c1",
                    "output": [{"type": "input_text", "text": "a cat"}],
                },
                {"type": "item_reference", "id": "x"},
            ],
            "tools": [{"type": "web_search_preview"}, {"type": "function", "name": "look"}],
            "tool_choice": {"type": "allowed_tools", "mode": "required", "tools": []},
        }
    )
    assert request.messages == (
        Message("system", "Be brief."),
        Message("user", "What is this?"),
        Message("assistant", None, (ToolCall("look", {}, "c1"),), reasoning="think"),
        Message("tool", "a cat", tool_call_id="c1"),
    )
    assert request.tools == (
        {"type": "function", "name": "look", "description": None, "parameters": None},
    )
    assert request.tool_choice == "required"
    text = "\n".join(request.issues)
    assert "'input_image'" in text and "'item_reference'" in text
    assert "web_search_preview tool" in text and "allowed_tools" in text
    assert len(request.issues) == 4


def test_responses_refuses_a_stored_conversation(endpoint: ModelEndpoint) -> None:
    session, base = serve(endpoint, TEXT_ONLY)
    with pytest.raises(openai.BadRequestError, match="previous_response_id is not supported"):
        openai_client(base).responses.create(
            model="m", input="and then?", previous_response_id="resp_1"
        )
    assert session.requests == []


# The Anthropic Messages API.


def test_anthropic_request_and_answer(endpoint: ModelEndpoint, sdk_anthropic: ModuleType) -> None:
    session, base = serve(endpoint, WITH_CALL)
    message = anthropic_client(sdk_anthropic, base).messages.create(
        model="claude-test",
        max_tokens=50,
        messages=ANTHROPIC_MESSAGES,
        tools=ANTHROPIC_TOOLS,
        system=[{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}],
        tool_choice={"type": "tool", "name": "get_weather"},
        extra_body={"top_p": 0.5},
    )
    (request,) = session.requests
    assert request.api == "anthropic" and request.stream is False
    assert request.messages == CONVERSATION
    assert request.tool_choice == {"type": "function", "function": {"name": "get_weather"}}
    assert request.params == {"max_tokens": 50, "top_p": 0.5}
    assert message.type == "message" and message.role == "assistant"
    text, use = message.content
    assert text.type == "text" and text.text == "Let me look."
    assert use.type == "tool_use"
    assert (use.id, use.name, use.input) == ("call_7", "get_forecast", FORECAST)
    assert message.stop_reason == "tool_use"
    assert (message.usage.input_tokens, message.usage.output_tokens) == USAGE


def test_anthropic_text_answer_ends_the_turn(
    endpoint: ModelEndpoint, sdk_anthropic: ModuleType
) -> None:
    session, base = serve(endpoint, TEXT_ONLY)
    message = anthropic_client(sdk_anthropic, base).messages.create(
        model="claude-test",
        max_tokens=50,
        messages=[{"role": "user", "content": "Tomorrow?"}],
        tool_choice={"type": "none"},
    )
    assert session.requests[0].tool_choice == "none"
    assert [(b.type, b.text) for b in message.content] == [("text", TEXT_ONLY.content)]
    assert message.stop_reason == "end_turn"


ANTHROPIC_EVENTS = [
    "message_start",
    "content_block_start",
    "content_block_delta",
    "content_block_stop",
    "content_block_start",
    "content_block_delta",
    "content_block_stop",
    "message_delta",
    "message_stop",
]


def test_anthropic_streamed_raw(endpoint: ModelEndpoint, sdk_anthropic: ModuleType) -> None:
    session, base = serve(endpoint, WITH_CALL)
    events = list(
        anthropic_client(sdk_anthropic, base).messages.create(
            model="claude-test", max_tokens=50, messages=ANTHROPIC_MESSAGES, stream=True
        )
    )
    assert session.requests[0].stream is True
    assert [e.type for e in events] == ANTHROPIC_EVENTS
    assert events[1].content_block.type == "text"
    assert events[2].delta.type == "text_delta" and events[2].delta.text == "Let me look."
    start = events[4].content_block
    assert (start.type, start.id, start.name) == ("tool_use", "call_7", "get_forecast")
    assert events[5].delta.type == "input_json_delta"
    assert json.loads(events[5].delta.partial_json) == FORECAST
    assert events[7].delta.stop_reason == "tool_use"
    assert events[7].usage.output_tokens == USAGE[1]


def test_anthropic_stream_helper(endpoint: ModelEndpoint, sdk_anthropic: ModuleType) -> None:
    _, base = serve(endpoint, WITH_CALL)
    with anthropic_client(sdk_anthropic, base).messages.stream(
        model="claude-test", max_tokens=50, messages=ANTHROPIC_MESSAGES, tools=ANTHROPIC_TOOLS
    ) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text == "Let me look."
    assert [b.type for b in final.content] == ["text", "tool_use"]
    use = final.content[1]
    assert (use.id, use.name, use.input) == ("call_7", "get_forecast", FORECAST)
    assert final.stop_reason == "tool_use"
    assert (final.usage.input_tokens, final.usage.output_tokens) == USAGE


def test_anthropic_blocks_without_a_normalized_form_are_named() -> None:
    request = parse_messages(
        {
            "model": "m",
            "max_tokens": 10,
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "Look:"},
                        {"type": "image", "source": {"type": "base64", "data": "AA=="}},
                    ],
                },
                {
                    "role": "assistant",
                    "content": [
                        {"type": "thinking", "thinking": "a picture", "signature": "s"},
                        {"type": "tool_use", "id": "t1", "name": "zoom", "input": {"x": 1}},
                    ],
                },
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "before"},
                        {
                            "type": "tool_result",
                            "tool_use_id": "t1",
                            "content": "blurred",
                            "is_error": True,
                        },
                    ],
                },
            ],
            "tools": [
                {"type": "bash_20250124", "name": "bash"},
                {"name": "zoom", "input_schema": SCHEMA},
            ],
            "tool_choice": {"type": "auto", "disable_parallel_tool_use": True},
        }
    )
    assert request.messages == (
        Message("user", "Look:"),
        Message("assistant", None, (ToolCall("zoom", {"x": 1}, "t1"),), reasoning="a picture"),
        Message("user", "before"),
        Message("tool", "blurred", tool_call_id="t1"),
    )
    assert [t["name"] for t in request.tools or ()] == ["zoom"]
    assert request.tool_choice == "auto"
    text = "\n".join(request.issues)
    assert "'image'" in text and "is_error" in text and "bash_20250124 tool 'bash'" in text
    assert "disable_parallel_tool_use" in text
    assert len(request.issues) == 4


def test_arguments_that_are_no_object() -> None:
    """A raw (unparsed) arguments string goes back as it is where the API carries text, as
    ``{}`` in Anthropic's ``input`` object, which has no form for it."""
    raw = Message("assistant", None, (ToolCall("f", "{not json", "c1"),))
    request = parse_chat({"messages": [{"role": "user", "content": "x"}]})
    assert responses_response(raw, request, ref="r")["output"][0]["arguments"] == "{not json"
    assert messages_response(raw, request, ref="r")["content"][0]["input"] == {}
    assert arguments_text({"a": 1}) == '{"a": 1}'


# The Chat Completions API (what the split of the module must keep).


def test_chat_streamed_with_usage(endpoint: ModelEndpoint) -> None:
    _, base = serve(endpoint, WITH_CALL)
    chunks = list(
        openai_client(base).chat.completions.create(
            model="gpt-test",
            messages=CHAT_MESSAGES,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    calls = [tc for c in chunks if c.choices for tc in c.choices[0].delta.tool_calls or ()]
    assert text == "Let me look."
    assert calls[0].id == "call_7" and calls[0].function.name == "get_forecast"
    assert json.loads("".join(tc.function.arguments or "" for tc in calls)) == FORECAST
    assert chunks[-1].usage is not None and chunks[-1].usage.prompt_tokens == USAGE[0]
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "tool_calls"


def test_chat_roles_are_normalized() -> None:
    request = parse_chat({"messages": [{"role": "developer", "content": "Be brief."}]})
    assert request.messages == (Message("system", "Be brief."),)


# Errors, in each API's shape.


def test_a_failing_policy_is_each_sdks_api_error_sent_once(
    endpoint: ModelEndpoint, sdk_anthropic: ModuleType
) -> None:
    session, base = serve(endpoint, fail="the policy is down")
    client = openai_client(base)  # the SDKs' default retries: the endpoint says not to
    with pytest.raises(openai.InternalServerError, match="the policy is down") as chat:
        client.chat.completions.create(model="m", messages=CHAT_MESSAGES)
    with pytest.raises(openai.InternalServerError, match="the policy is down") as responses:
        client.responses.create(model="m", input="hi", stream=True)
    with pytest.raises(sdk_anthropic.InternalServerError, match="the policy is down") as messages:
        anthropic_client(sdk_anthropic, base).messages.create(
            model="m", max_tokens=5, messages=[{"role": "user", "content": "hi"}]
        )
    assert chat.value.status_code == responses.value.status_code == 502
    assert messages.value.status_code == 502
    assert messages.value.body["error"]["type"] == "api_error"
    assert len(session.requests) == 3
    assert [str(e) for e in endpoint.close_session(session.token)] == ["the policy is down"] * 3


def test_an_unknown_rollout_is_not_found(
    endpoint: ModelEndpoint, sdk_anthropic: ModuleType
) -> None:
    base = f"http://{endpoint.host}:{endpoint.port}/r/nobody/v1"
    with pytest.raises(openai.NotFoundError):
        openai_client(base).responses.create(model="m", input="hi")
    with pytest.raises(sdk_anthropic.NotFoundError):
        anthropic_client(sdk_anthropic, base).messages.create(
            model="m", max_tokens=5, messages=[{"role": "user", "content": "hi"}]
        )


@pytest.mark.parametrize(
    ("route", "body", "expected"),
    [
        ("responses", {"model": "m", "input": 5}, "not a responses request"),
        ("messages", {"model": "m", "max_tokens": 5}, "not a messages request"),
        ("messages", {"messages": [{"role": "user", "content": 5}]}, "content must be"),
    ],
)
def test_an_unreadable_request_is_a_bad_request(
    endpoint: ModelEndpoint, route: str, body: dict[str, Any], expected: str
) -> None:
    session, base = serve(endpoint, TEXT_ONLY)
    post = urllib.request.Request(
        f"{base}/{route}",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(post, timeout=10)
    assert caught.value.code == 400
    assert caught.value.headers["x-should-retry"] == "false"
    error = json.loads(caught.value.read())
    if route == "messages":
        assert error["type"] == "error" and error["error"]["type"] == "invalid_request_error"
    assert expected in error["error"]["message"]
    assert session.requests == []


def test_an_error_leaves_the_connection_usable(endpoint: ModelEndpoint) -> None:
    """A refused request's body is never read as the next request of its connection."""
    httpx = need_module("httpx", "install the dev extra: pip install -e '.[dev]'")
    session, base = serve(endpoint, TEXT_ONLY)
    root = f"http://{endpoint.host}:{endpoint.port}"
    body = {"model": "m", "messages": CHAT_MESSAGES}
    with httpx.Client(timeout=10) as client:
        assert client.post(f"{root}/r/nobody/v1/chat/completions", json=body).status_code == 404
        answered = client.post(f"{base}/chat/completions", json=body)
    assert answered.status_code == 200
    assert answered.json()["choices"][0]["message"]["content"] == TEXT_ONLY.content
    assert len(session.requests) == 1
