"""Trace files written by other projects (``../shared/data/external``, each with its
``SOURCE.md``), read where they are: what a careful reader of each file finds in it, otelcar
must find too. Skips with a message when the folder is absent; nothing is copied here."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from otelcar import Store, import_files
from tests.parts import EXTERNAL, need_data


def _steps(tmp_path: Path, *names: str) -> list[dict[str, Any]]:
    paths = [EXTERNAL / name for name in names]
    for path in paths:
        need_data(path)
    store = Store(tmp_path / "store")
    report = import_files(paths, store=store)
    assert not report.unparsed, report.unparsed
    return store.steps().to_dicts()


def _llm(steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [s for s in steps if s["kind"] == "llm"]


def test_message_events_on_the_span_semantic_kernel_shape(tmp_path: Path):
    # gen_ai.system/user.message and gen_ai.choice as span events, no operation name.
    (step,) = _steps(tmp_path, "langfuse-test-semantic-kernel/spans.json")
    assert step["kind"] == "llm" and step["content_captured"]
    assert [(m["role"], m["content"]) for m in step["input_messages"]] == [
        ("system", "You are a helpful assistant."),
        ("user", "What is the capital of France?"),
    ]
    assert step["output"]["content"] == "The capital of France is Paris."
    assert step["finish_reason"] == "stop"


def test_openlit_role_lines_and_unset_max_tokens(tmp_path: Path):
    (step,) = _steps(tmp_path, "langfuse-test-openlit/spans.json")
    assert step["content_captured"] and not any("not parseable" in i for i in step["issues"])
    assert [(m["role"], m["content"]) for m in step["input_messages"]] == [
        ("user", "What is LLM Observability?")
    ]
    assert step["output"]["content"].startswith("LLM Observability stands for")
    assert step["params"]["max_tokens"] is None  # -1: not set


def test_litellm_function_call_and_functions(tmp_path: Path):
    steps = _steps(tmp_path, "interlingua-litellm/in.json")
    (call,) = _llm(steps)
    (tool_call,) = call["output"]["tool_calls"]
    assert tool_call["name"] == "lookup_order"
    assert json.loads(tool_call["arguments"]) == {"order_id": "A-1187"}
    assert [t["name"] for t in call["tools_available"]] == ["lookup_order"]
    tools = [s for s in steps if s["kind"] == "tool"]
    assert [t["tool_name"] for t in tools] == ["lookup_order"]
    assert tools[0]["call_step"] == call["step"]


def test_latitude_nonstandard_operation_names_with_messages(tmp_path: Path):
    steps = _steps(tmp_path, "latitude-telemetry/manual_prompt_with_tools_spans.json")
    llm = _llm(steps)
    assert len(llm) == 2 and all(s["content_captured"] for s in llm)
    assert all(any("'completion'" in issue for issue in s["issues"]) for s in llm)
    assert llm[0]["output"]["tool_calls"][0]["name"] == "get_weather"
    tools = [s for s in steps if s["kind"] == "tool"]
    assert [t["tool_name"] for t in tools] == ["get_weather"]
    assert tools[0]["tool_result"]


def test_details_event_beside_the_span(tmp_path: Path):
    steps = _steps(
        tmp_path,
        "semconv-examples/event-content.traces.json",
        "semconv-examples/event-content.logs.json",
    )
    llm = _llm(steps)
    assert len(llm) == 2  # the JSON-string form and the structured (kvlist) form
    for step in llm:
        assert step["content_captured"] and step["input_messages"] and step["output"]


def test_vercel_ai_sdk_v5_model_call_and_tool(tmp_path: Path):
    steps = _steps(tmp_path, "interlingua-vercel-ai/in.json")
    (call,) = _llm(steps)
    assert [m["role"] for m in call["input_messages"]] == ["system", "user"]
    (tool_call,) = call["output"]["tool_calls"]
    assert tool_call["name"] == "lookup_order"
    assert json.loads(tool_call["arguments"]) == {"order_id": "A-1187"}
    assert call["finish_reason"] == "tool_call" and call["usage"]["input_tokens"] == 412
    (tool,) = [s for s in steps if s["kind"] == "tool"]
    assert tool["tool_name"] == "lookup_order" and tool["call_step"] == call["step"]
    assert tool["tool_result"]


def test_vercel_ai_sdk_v6_every_model_call_has_its_content(tmp_path: Path):
    steps = _steps(tmp_path, "vercel-ai-sdk-v6/all-spans.otlp.json")
    llm = _llm(steps)
    assert len(llm) == 4
    assert all(s["content_captured"] and s["input_messages"] and s["output"] for s in llm)
    assert not any("unmapped dialect" in i for s in steps for i in s["issues"])


def test_openinference_fixtures_older_forms_are_read(tmp_path: Path):
    # gen_ai.prompt / gen_ai.completion as attributes, and an LLM span with only
    # input.value (a message list) and output.value ({"text", "finish_reason"}).
    steps = _steps(tmp_path, "openinference-genai-fixtures/fixtures.otlp.json")
    llm = _llm(steps)
    assert len(llm) == 4 and all(s["content_captured"] for s in llm)
    for step in llm:
        assert step["output"]["content"].startswith("The weather in Paris is currently rainy")
        assert [m["role"] for m in step["input_messages"]] == ["user", "assistant", "tool"]
    # One OpenInference span records no finish reason at all; the other three say "stop".
    assert sorted(str(s["finish_reason"]) for s in llm) == ["None", "stop", "stop", "stop"]
    assert "unread" not in set(Store(tmp_path / "store").traces()["content_captured"].to_list())


def test_content_no_mapper_read_is_unread_never_not_captured():
    from otelcar.conventions import map_span
    from otelcar.render import step_summary
    from tests.synth import span

    mapped = map_span(
        span(
            "c",
            "chat m",
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.input.messages": '{"not": "a message list"}',
                "input.value": "__REDACTED__",
            },
        )
    )
    assert mapped.kind == "llm" and not mapped.has_content()
    (unread,) = [i for i in mapped.issues if i.startswith("content unread: ")]
    assert "gen_ai.input.messages" in unread and "input.value" not in unread  # redacted
    row = {"kind": "llm", "content_captured": False, "output": None, "issues": mapped.issues}
    assert step_summary(row).startswith("[content unread")


def test_braintrust_span_processor_llm_and_score_spans(tmp_path: Path):
    steps = _steps(tmp_path, "interlingua-braintrust/in.json")
    (call,) = _llm(steps)
    assert call["source"] == "braintrust" and call["content_captured"]
    assert [(m["role"], m["content"]) for m in call["input_messages"]] == [
        ("system", "You are a support agent. Use the tools you are given."),
        ("user", "Where is order A-1187?"),
    ]
    (tool_call,) = call["output"]["tool_calls"]
    assert tool_call["id"] == "call_9RtYbK2mXqLp" and tool_call["name"] == "lookup_order"
    assert json.loads(tool_call["arguments"]) == {"order_id": "A-1187"}
    assert call["finish_reason"] == "tool_call"
    assert call["usage"]["input_tokens"] == 412 and call["usage"]["total_tokens"] == 439
    assert call["request_model"] == "gpt-4o-mini"
    (score,) = [s for s in steps if s["name"] == "grade"]
    assert score["kind"] == "other" and "braintrust.scores" in json.loads(score["attributes"])
    assert not any("unmapped dialect" in i for s in steps for i in s["issues"])


def test_litellm_raw_request_span_is_the_same_call(tmp_path: Path):
    # raw_gen_ai_request (llm.openai.*, Python reprs) nested in litellm_request: one call,
    # the raw span's usage details and the parent's content both on the step.
    steps = _steps(tmp_path, "interlingua-litellm/in.json")
    (call,) = _llm(steps)
    assert len(call["merged_span_ids"]) == 1
    assert [m["role"] for m in call["input_messages"]] == ["system", "user"]
    assert call["response_id"] == "chatcmpl-CD8yqQ2y3kZs1o0Wm7bT"
    assert call["usage"]["cache_read_tokens"] == 256 and call["usage"]["reasoning_tokens"] == 8
    assert call["params"]["temperature"] == 0.7 and call["params"]["max_tokens"] == 1024
    assert not any("unmapped dialect" in i for s in steps for i in s["issues"])


def test_latitude_prompt_run_and_tool_result(tmp_path: Path):
    steps = _steps(tmp_path, "latitude-telemetry/latitude_rendering_spans.json")
    (prompt,) = [s for s in steps if s["kind"] == "agent"]
    assert prompt["name"] == "prompt-fake-document-uuid"
    assert "gen_ai.request.template" in json.loads(prompt["attributes"])
    assert len(_llm(steps)) == 4
    (tool,) = [s for s in steps if s["kind"] == "tool"]
    assert tool["tool_args"] and tool["tool_result"]
    # Read from gen_ai.tool.result.value itself, not backfilled from the next call's input.
    assert not any("backfilled" in i for i in tool["issues"])
    assert all(s["episode_id"] == prompt["span_id"] for s in steps)
    assert not any("unmapped dialect" in i for s in steps for i in s["issues"])


def test_openinference_genai_tool_with_bare_input_output(tmp_path: Path):
    steps = _steps(tmp_path, "openinference-genai-fixtures/fixtures.otlp.json")
    (tool,) = [s for s in steps if s["kind"] == "tool"]
    assert json.loads(tool["tool_args"]) == {"city": "New York"}
    assert "sunny" in tool["tool_result"]


def test_phoenix_span_export_file(tmp_path: Path):
    steps = _steps(tmp_path, "phoenix-rest-spans/pxi_turn_trace.json")
    kinds = [s["kind"] for s in steps]
    assert kinds.count("agent") == 1 and kinds.count("llm") == 9 and kinds.count("tool") == 8
    by_step = {s["step"]: s for s in steps}
    for call in _llm(steps):
        assert call["content_captured"] and call["input_messages"] and call["output"]
    for tool in (s for s in steps if s["kind"] == "tool"):
        requester = by_step[tool["call_step"]]
        assert tool["tool_call_id"] in {c["id"] for c in requester["output"]["tool_calls"]}
        assert tool["tool_args"] is not None and tool["tool_result"]
    failed = [s for s in steps if s["status"] == "ERROR"]
    assert [s["tool_name"] for s in failed] == ["add_spans_to_dataset"]
    assert _llm(steps)[-1]["output"]["content"].startswith("Done! I created the dataset")


@pytest.mark.parametrize(
    "name",
    [
        "langsmith_py_wrap_openai_",
        "langsmith_py_wrap_openai_reasoning",
        "langsmith_py_wrap_openai_stream",
        "langsmith_js_wrap_openai_reasoning",
    ],
)
def test_langsmith_batch_bodies_read_as_the_stored_runs(tmp_path: Path, name: str):
    # {"post": [...], "patch": [...]}: each run merged with its patch gives the runs the
    # server stores (the .runs.json beside it).
    folder = "langsmith-sdk-wrap-openai"
    batch = _steps(tmp_path / "batch", f"{folder}/{name}.json")
    stored = _steps(tmp_path / "stored", f"{folder}/{name}.runs.json")

    def comparable(steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{k: v for k, v in s.items() if k not in ("attributes", "source")} for s in steps]

    assert batch and comparable(batch) == comparable(stored)
    assert all(s["content_captured"] for s in _llm(batch))


def test_langfuse_older_model_parameters_key(tmp_path: Path):
    steps = _steps(tmp_path, "langfuse-test-langfuse-sdk/spans.json")
    (generation,) = _llm(steps)
    assert generation["params"]["temperature"] == 1.0 and generation["params"]["top_p"] == 0.2


def test_every_external_file_maps_without_silent_loss(tmp_path: Path):
    # Every file imports (nothing kept unparsed but what SOURCE.md says is no trace file),
    # and no step carries content that no mapper read or a dialect no mapper knows.
    need_data(EXTERNAL)
    files = sorted(
        p for p in EXTERNAL.glob("*/*") if p.suffix in (".json", ".jsonl") and p.is_file()
    )
    store = Store(tmp_path / "store")
    report = import_files(files, store=store)
    assert not report.unparsed, [(p.source, p.reason) for p in report.unparsed]
    steps = store.steps().to_dicts()
    bad = [
        (s["name"], issue)
        for s in steps
        for issue in s["issues"]
        if issue.startswith(("content unread", "unmapped dialect"))
    ]
    assert not bad, bad
    assert "unread" not in set(store.traces()["content_captured"].to_list())
