"""Policies, the registry, outcomes and otelcar.toml; the OpenAI-compatible policy against a
local fake server (the real model server is exercised in test_local_model.py)."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import logging
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest

from otelcar import read_otlp
from otelcar.messages import Message, ToolCall
from otelcar.outcome import FinalAnswer, ToolCalled, outcome_from_config
from otelcar.policies import (
    DecisionRequest,
    OpenAICompatiblePolicy,
    PolicyError,
    PolicyRegistry,
    PolicyUnavailable,
    StaticLLMPolicy,
)
from otelcar.project_config import ConfigError, load_config
from otelcar.replay import load_run
from tests.conftest import NEW_CONTENT, OTLP

ROOT = Path(__file__).resolve().parents[1]


def _fixtures_module():
    spec = importlib.util.spec_from_file_location(
        "make_fixtures_for_policies", ROOT / "fixtures" / "otlp" / "make_fixtures.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _run():
    return load_run(NEW_CONTENT, read_otlp([OTLP / "new_content.traces.jsonl"]))


def _request(decision, seed: int = 11) -> DecisionRequest:
    return DecisionRequest(
        messages=tuple(decision.context),
        tools=tuple(_run().tool_definitions()),
        params=decision.params,
        model=decision.model,
        seed=seed,
        step=decision.step,
    )


def test_request_for_a_held_context_equals_what_the_agent_sent():
    fixtures = _fixtures_module()
    run = _run()
    body = OpenAICompatiblePolicy(model="m").request_body(_request(run.decisions[2]))
    calls_1 = [
        {
            "id": "call_lookup_1",
            "type": "function",
            "function": {"name": "lookup_order", "arguments": '{"order_id": "A-1001"}'},
        },
        {
            "id": "call_policy_1",
            "type": "function",
            "function": {"name": "get_refund_policy", "arguments": '{"category": "electronics"}'},
        },
    ]
    expected = [
        {"role": "system", "content": fixtures.SYSTEM_PROMPT},
        {"role": "user", "content": fixtures.USER_PROMPT},
        {"role": "assistant", "content": "", "tool_calls": calls_1},
        {
            "role": "tool",
            "content": fixtures.lookup_order("A-1001"),
            "tool_call_id": "call_lookup_1",
        },
        {
            "role": "tool",
            "content": fixtures.get_refund_policy("electronics"),
            "tool_call_id": "call_policy_1",
        },
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "call_refund_1",
                    "type": "function",
                    "function": {
                        "name": "issue_refund",
                        "arguments": '{"order_id": "A-1001", "amount": 129.99}',
                    },
                }
            ],
        },
        {
            "role": "tool",
            "content": fixtures.issue_refund("A-1001", 129.99),
            "tool_call_id": "call_refund_1",
        },
    ]
    assert body["messages"] == expected
    assert (body["temperature"], body["max_tokens"], body["seed"]) == (0.2, 256, 11)
    # openai-v2 records no tool definitions: minimal ones are inferred from the calls.
    assert [t["function"]["name"] for t in body["tools"]] == [
        "lookup_order",
        "get_refund_policy",
        "issue_refund",
    ]
    assert "inferred" not in json.dumps(body["tools"])


def test_temperature_zero_is_replaced_by_the_sampling_temperature(caplog):
    decision = _run().decisions[0]
    decision.params["temperature"] = 0.0
    policy = OpenAICompatiblePolicy(model="m", sampling_temperature=0.9)
    with caplog.at_level(logging.WARNING, logger="otelcar.policies"):
        assert policy.request_body(_request(decision))["temperature"] == 0.9
    assert "temperature 0" in caplog.text
    assert (
        OpenAICompatiblePolicy(model="m", temperature=0.3).request_body(_request(decision))[
            "temperature"
        ]
        == 0.3
    )


class _Flaky(BaseHTTPRequestHandler):
    """A fake OpenAI server: fails the first request with 503, then answers from the fixture
    scenario's fake (which decides by the conversation)."""

    failures = 1
    seen: ClassVar[list[dict]] = []

    def log_message(self, *args):  # quiet
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).seen.append(body)
        if type(self).failures > 0:
            type(self).failures -= 1
            self.send_response(503)
            self.end_headers()
            return
        status, reply = _fixtures_module().build_completion(body)
        data = json.dumps(reply).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def test_openai_policy_retries_transient_errors_and_parses_tool_calls():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Flaky)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        policy = OpenAICompatiblePolicy(
            base_url=f"http://127.0.0.1:{server.server_port}/v1", model="gpt-4o-mini", max_retries=2
        )
        decision = asyncio.run(policy.decide(_request(_run().decisions[0])))
        assert decision.message.tool_calls == (
            ToolCall("lookup_order", {"order_id": "A-1001"}, "call_lookup_1"),
            ToolCall("get_refund_policy", {"category": "electronics"}, "call_policy_1"),
        )
        assert decision.input_tokens > 0 and len(_Flaky.seen) == 2
        assert _Flaky.seen[-1]["seed"] == 11
    finally:
        server.shutdown()
        server.server_close()
    # The same server gone after it answered: transient, the full retries, then PolicyError.
    with pytest.raises(PolicyError, match="after 3 attempts") as info:
        asyncio.run(policy.decide(_request(_run().decisions[0])))
    assert not isinstance(info.value, PolicyUnavailable)


class _Odd(BaseHTTPRequestHandler):
    """A server that answers 200 with what ``body`` says, and 400 to a request for ``bad``."""

    body = b"not json"

    def log_message(self, *args):  # quiet
        pass

    def do_POST(self):
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        status, data = (
            (400, b'{"error": {"message": "no such model"}}')
            if request.get("model") == "bad"
            else (200, type(self).body)
        )
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.mark.parametrize(
    ("model", "body", "message"),
    [
        ("m", b"not json", "not JSON"),
        ("m", b'{"choices": []}', "returned no choices"),
        ("bad", b"", "refused the request.*no such model"),
    ],
)
def test_openai_policy_names_an_answer_it_cannot_read(model: str, body: bytes, message: str):
    _Odd.body = body
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Odd)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        policy = OpenAICompatiblePolicy(
            base_url=f"http://127.0.0.1:{server.server_port}/v1", model=model, max_retries=0
        )
        with pytest.raises(PolicyError, match=message):
            asyncio.run(policy.decide(_request(_run().decisions[0])))
    finally:
        server.shutdown()
        server.server_close()


def test_openai_policy_that_never_answered_is_unavailable_at_once():
    """A refused connection before any answer stops the command: PolicyUnavailable after
    first_call_retries + 1 attempts, whatever max_retries says."""
    unreachable = OpenAICompatiblePolicy(
        base_url=f"http://127.0.0.1:{_closed_port()}/v1", max_retries=4, timeout_s=2
    )
    start = time.monotonic()
    with pytest.raises(PolicyUnavailable, match=r"cannot be reached .*2 attempts, no answer yet"):
        asyncio.run(unreachable.decide(_request(_run().decisions[0])))
    assert time.monotonic() - start < 30  # one retry after 0.5 s, not 4 with backoff


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]  # closed again when the socket is


def test_registry_resolution_and_config_errors():
    specific, general = StaticLLMPolicy(["a"], name="a"), StaticLLMPolicy(["b"], name="b")
    registry = PolicyRegistry().register("llm", general).register("llm:planner", specific)
    assert registry.llm_for(agent="planner", name="gpt") is specific
    assert registry.llm_for(agent=None, name="gpt") is general
    assert registry.tool_for("anything").name == "recorded"
    with pytest.raises(PolicyError, match="invalid policy key"):
        registry.register("model", general)
    with pytest.raises(PolicyError, match="unknown type 'nope'; known:"):
        PolicyRegistry.from_config({"llm": {"type": "nope"}})
    with pytest.raises(PolicyError, match="is a tool policy"):
        PolicyRegistry.from_config({"llm": {"type": "mock"}})
    with pytest.raises(PolicyError, match="unknown option"):
        PolicyRegistry.from_config({"llm": {"type": "openai", "modle": "x"}})
    with pytest.raises(PolicyError, match="no LLM policy registered"):
        PolicyRegistry().llm_for(agent=None, name="x")


def test_otelcar_toml_with_python_policies_and_outcomes(tmp_path: Path):
    (tmp_path / "agent_tools.py").write_text(
        "def lookup_order(order_id):\n    return {'order_id': order_id, 'amount': 1}\n"
        "def decide(request):\n    return 'no'\n"
    )
    config_path = tmp_path / "otelcar.toml"
    config_path.write_text("""
[policies.llm]
type = "python"
function = "agent_tools:decide"

[policies."tool:lookup_order"]
type = "python"
function = "agent_tools:lookup_order"

[outcome]
any = [
  { type = "tool_called", tool = "issue_refund", args = { amount = "re:12.*" } },
  { type = "final_answer", contains = "sorry" },
]

[replay]
seed = 3
rollouts = 5
""")
    config = load_config(config_path)
    assert config.replay.seed == 3 and config.replay.rollouts == 5
    tool = config.registry.tool_for("lookup_order")
    from otelcar.policies import ToolRequest

    assert json.loads(
        asyncio.run(tool.run(ToolRequest("lookup_order", {"order_id": "Z"}, None, None, 0)))
    ) == {"order_id": "Z", "amount": 1}
    steps = read_otlp([OTLP / "new_content.traces.jsonl"])
    assert asyncio.run(config.outcome.failed(steps)) is True  # issue_refund(amount=129.99)
    (tmp_path / "bad.toml").write_text("[replay]\nseeds = 3\n")
    with pytest.raises(ConfigError, match="seeds"):
        load_config(tmp_path / "bad.toml")
    (tmp_path / "worse.toml").write_text("[policies.llm\n")
    with pytest.raises(ConfigError, match="invalid TOML"):
        load_config(tmp_path / "worse.toml")


def test_outcome_rules():
    steps = read_otlp([OTLP / "new_content.traces.jsonl"])
    run = asyncio.run
    assert run(ToolCalled("issue_refund", {"amount": 129.99}).failed(steps))
    assert not run(ToolCalled("issue_refund", {"amount": 5}).failed(steps))
    assert not run(ToolCalled("issue_refund", negate=True).failed(steps))
    assert run(FinalAnswer(pattern=r"refund R-\d+").failed(steps))
    assert run(FinalAnswer(contains="R-77", negate=True).failed(steps)) is False
    with pytest.raises(Exception, match="exactly one"):
        FinalAnswer()
    rule = outcome_from_config(
        {
            "all": [
                {"type": "tool_called", "tool": "lookup_order"},
                {"type": "tool_not_called", "tool": "escalate"},
            ]
        }
    )
    assert run(rule.failed(steps))
    assert "lookup_order" in rule.describe()
    assert Message("assistant", "x").to_dict()["content"] == "x"


def test_an_explicit_temperature_outside_replay_is_sent_as_asked():
    policy = OpenAICompatiblePolicy(model="m", sampling_temperature=0.9)
    judge_request = DecisionRequest(
        messages=(Message("user", "yes or no?"),),
        tools=None,
        params={"temperature": 0},
        model=None,
        seed=0,
        step=None,
    )
    assert policy.request_body(judge_request)["temperature"] == 0.0


class _FakeAnthropic(BaseHTTPRequestHandler):
    seen: ClassVar[list[dict]] = []
    failures = 1

    def log_message(self, *args):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).seen.append(
            {"path": self.path, "body": body, "version": self.headers.get("anthropic-version")}
        )
        if type(self).failures:
            type(self).failures -= 1
            self.send_response(529)
            self.end_headers()
            return
        reply = json.dumps(
            {
                "id": "msg_1",
                "stop_reason": "tool_use",
                "usage": {"input_tokens": 12, "output_tokens": 5},
                "content": [
                    {"type": "text", "text": "Refunding."},
                    {
                        "type": "tool_use",
                        "id": "toolu_9",
                        "name": "issue_refund",
                        "input": {"order_id": "A-1001", "amount": 5},
                    },
                ],
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)


def test_anthropic_policy_maps_messages_and_tool_use_both_ways():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _FakeAnthropic)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        config = PolicyRegistry.from_config(
            {
                "llm": {
                    "type": "anthropic",
                    "model": "claude-x",
                    "base_url": f"http://127.0.0.1:{server.server_port}",
                }
            }
        )
        decision = asyncio.run(config.llm("llm").decide(_request(_run().decisions[2])))
        assert decision.message.content == "Refunding."
        assert decision.message.tool_calls == (
            ToolCall("issue_refund", {"order_id": "A-1001", "amount": 5}, "toolu_9"),
        )
        assert decision.input_tokens == 12
        sent = _FakeAnthropic.seen[-1]
        assert sent["path"] == "/v1/messages" and sent["version"] == "2023-06-01"
        body = sent["body"]
        assert body["system"].startswith("You are a refund support agent")
        assert [t["role"] for t in body["messages"]] == [
            "user",
            "assistant",
            "user",
            "assistant",
            "user",
        ]
        tool_results = body["messages"][2]["content"]
        assert [b["tool_use_id"] for b in tool_results] == ["call_lookup_1", "call_policy_1"]
        assert body["messages"][1]["content"][0] == {
            "type": "tool_use",
            "id": "call_lookup_1",
            "name": "lookup_order",
            "input": {"order_id": "A-1001"},
        }
        assert body["tools"][0]["input_schema"]["type"] == "object"
        assert len(_FakeAnthropic.seen) == 2  # the 529 was retried
    finally:
        server.shutdown()
        server.server_close()


def test_a_function_outcome_takes_its_parameters_from_the_config(tmp_path: Path):
    # Before, `args` was refused (a function outcome could not be parameterized).
    (tmp_path / "thresholds.py").write_text(
        "def too_many_calls(steps, limit, tool='lookup_order'):\n"
        "    return (steps['tool_name'] == tool).sum() > limit\n"
    )
    config_path = tmp_path / "otelcar.toml"
    config_path.write_text(
        '[outcome]\ntype = "function"\nfunction = "thresholds:too_many_calls"\n'
        "args = { limit = 0 }\n"
    )
    config = load_config(config_path)
    steps = read_otlp([OTLP / "new_content.traces.jsonl"])
    assert asyncio.run(config.outcome.failed(steps)) is True
    assert config.outcome.describe() == "thresholds:too_many_calls(limit=0)"
    config_path.write_text(
        '[outcome]\ntype = "function"\nfunction = "thresholds:too_many_calls"\n'
        "args = { limit = 99 }\n"
    )
    assert asyncio.run(load_config(config_path).outcome.failed(steps)) is False
    config_path.write_text(
        '[outcome]\ntype = "function"\nfunction = "thresholds:too_many_calls"\nlimit = 1\n'
    )
    with pytest.raises(ConfigError, match=r"unknown option.*limit.*known: function, args"):
        load_config(config_path)
