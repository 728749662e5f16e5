"""Agent frameworks' own traces, mapped as a careful reader of each file expects.

Each ``fixtures/frameworks/<name>/`` holds a trace recorded by running the real, unmodified
framework against ``fixtures/frameworks/scripted_openai.py`` (generator, versions and notes
beside it) and ``expected.json``, written by reading the trace file, not by running otelcar:
every LLM call with its input roles and text and its output (tool calls with ids and
arguments, or text), every tool call with its arguments, result and the call that asked for
it, the final answer and, where ``agent_steps`` lists them, the agent steps. A framework
otelcar does not read fully yet is listed in :data:`KNOWN_GAPS` with what is missing; its
test is a strict xfail, so it fails (and must be moved out of the list) the day the gap
closes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from otelcar import Store, import_files

FRAMEWORKS = Path(__file__).resolve().parents[1] / "fixtures" / "frameworks"
CASES = sorted(p.parent.name for p in FRAMEWORKS.glob("*/expected.json"))

KNOWN_GAPS = {}


def _mapped(name: str, tmp_path: Path) -> list[dict[str, Any]]:
    store = Store(tmp_path / "store")
    report = import_files(sorted((FRAMEWORKS / name).glob("*.jsonl")), store=store)
    assert report.imported >= 1 and not report.unparsed, report
    assert store.traces().height == 1
    return store.steps().to_dicts()


def _texts(message: dict[str, Any]) -> str:
    parts = [message.get("content") or ""]
    parts += [json.dumps(call.get("arguments")) for call in message.get("tool_calls") or []]
    return "\n".join(parts)


def _arguments(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value


def _check(name: str, tmp_path: Path) -> None:
    expected = json.loads((FRAMEWORKS / name / "expected.json").read_text())
    steps = _mapped(name, tmp_path)
    llm = [s for s in steps if s["kind"] == "llm"]
    assert len(llm) == len(expected["llm_calls"]), [(s["kind"], s["name"]) for s in steps]
    for want, got in zip(expected["llm_calls"], llm, strict=True):
        inputs = got["input_messages"] or []
        roles = [m["role"] for m in inputs]
        for role in want.get("input_roles", []):
            assert role in roles or (role == "tool" and "user" in roles), (roles, want)
        text = "\n".join(_texts(m) for m in inputs)
        for fragment in want.get("input_text_contains", []):
            assert fragment in text, (fragment, text[:800])
        output = got["output"]
        assert output is not None, got
        if "output_tool_calls" in want:
            calls = output["tool_calls"] or []
            assert [c["name"] for c in calls] == [c["name"] for c in want["output_tool_calls"]]
            for want_call, call in zip(want["output_tool_calls"], calls, strict=True):
                assert _arguments(call["arguments"]) == want_call["arguments"]
                if want_call.get("id"):
                    assert call["id"] == want_call["id"]
        if "output_text" in want:
            assert (output["content"] or "").strip() == want["output_text"].strip()
    tools = [s for s in steps if s["kind"] == "tool"]
    assert len(tools) == len(expected["tool_calls"]), [(s["kind"], s["name"]) for s in steps]
    for want, got in zip(expected["tool_calls"], tools, strict=True):
        assert got["tool_name"] == want["name"] or got["name"].endswith(want["name"]), got
        assert _arguments(got["tool_args"]) == want["arguments"], got["tool_args"]
        assert want["result_contains"] in (got["tool_result"] or ""), got["tool_result"]
        # A tool the framework runs itself (BeeAI's final_answer) was asked for by no call;
        # DSPy's ReAct asks for its second tool (finish) in its second call.
        asked_by = want.get("requested_by_llm_call", 0)
        requested = llm[asked_by]["step"] if asked_by is not None else None
        assert got["call_step"] == requested, (got["call_step"], requested)
    final = llm[-1]["output"]["content"] or ""
    assert final.strip() == expected["final_answer"].strip()
    if "agent_steps" in expected:  # an agent's event recorded as a span is no agent step
        agents = [s["name"] for s in steps if s["kind"] == "agent"]
        assert agents == expected["agent_steps"], agents


@pytest.mark.parametrize("name", CASES)
def test_framework_trace_maps_as_read(name: str, tmp_path: Path, request) -> None:
    if name in KNOWN_GAPS:
        request.applymarker(pytest.mark.xfail(reason=KNOWN_GAPS[name], strict=True))
    _check(name, tmp_path)


def test_every_framework_fixture_has_its_generator_and_versions() -> None:
    assert len(CASES) >= 20
    for name in CASES:
        folder = FRAMEWORKS / name
        generators = list(folder.glob("make_fixture.*"))
        pins = [folder / "requirements.txt", folder / "package-lock.json"]
        assert generators, f"{name}: no generator committed beside the fixture"
        assert any(p.exists() for p in pins), f"{name}: no pinned versions"
        assert (folder / "README.md").exists(), f"{name}: no README"
