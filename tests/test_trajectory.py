"""Trajectory builder on synthetic traces with known answers."""

from __future__ import annotations

import json

from otelcar.messages import decode_arguments
from otelcar.trajectory import build_trace
from tests.synth import TRACE, calls, chat, responses, span, text, tool

AGENT = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support"}


def _steps(spans, logs=()):
    return build_trace(TRACE, spans, logs)


def test_order_episodes_and_links_by_id():
    spans = [
        span("a", "invoke_agent support", AGENT, start=0, end=100, seq=9),
        chat(
            "c1",
            [text("user", "q")],
            [calls(("id1", "f", {"x": 1}), ("id2", "g", {}))],
            parent="a",
            start=10,
            end=20,
            seq=3,
        ),
        # Parallel tools overlap; exporter order (seq) is end order, not start order.
        tool("t2", "g", "id2", parent="a", start=21, end=30, seq=2),
        tool("t1", "f", "id1", parent="a", start=21, end=25, seq=1),
        chat(
            "c2",
            [
                text("user", "q"),
                calls(("id1", "f", {"x": 1}), ("id2", "g", {})),
                responses(("id1", "R1"), ("id2", "R2")),
            ],
            [text("assistant", "done")],
            parent="a",
            start=40,
            end=50,
            seq=0,
        ),
    ]
    built = _steps(spans)
    rows = built.steps
    assert [(r["step"], r["kind"], r["name"]) for r in rows] == [
        (0, "agent", "support"),
        (1, "llm", "m"),
        (2, "tool", "f"),
        (3, "tool", "g"),
        (4, "llm", "m"),
    ]
    assert {r["episode_id"] for r in rows} == {"a".rjust(16, "0")}
    assert {r["agent_name"] for r in rows} == {"support"}
    f, g = rows[2], rows[3]
    assert (f["call_step"], f["link_inferred"], f["synthesized"]) == (1, False, False)
    # Results backfilled from the next LLM input (tool spans recorded none).
    assert (f["tool_result"], g["tool_result"]) == ("R1", "R2")
    assert decode_arguments(f["tool_args"]) == {"x": 1}
    assert built.summary["n_llm"] == 2 and built.summary["n_tool"] == 2
    assert built.summary["content_captured"] == "yes"


def test_tool_spans_without_ids_link_by_name_and_order():
    spans = [
        chat(
            "c1",
            [text("user", "q")],
            [calls((None, "f", {"n": 1}), (None, "f", {"n": 2}))],
            start=0,
            end=10,
        ),
        tool("t1", "f", start=11, end=12, attributes={"gen_ai.tool.call.result": "one"}),
        tool("t2", "f", start=13, end=14, attributes={"gen_ai.tool.call.result": "two"}),
    ]
    rows = _steps(spans).steps
    first, second = rows[1], rows[2]
    assert first["link_inferred"] and second["link_inferred"]
    assert decode_arguments(first["tool_args"]) == {"n": 1}
    assert decode_arguments(second["tool_args"]) == {"n": 2}
    assert (first["call_step"], second["call_step"]) == (0, 0)


def test_a_tool_dspy_asked_for_in_reply_fields_links_to_that_reply():
    # dspy.ReAct: the model names the tool in ChatAdapter's text fields, not as a tool call.
    def reply(tool_name: str) -> str:
        return (
            f"[[ ## next_thought ## ]]\nthink\n\n[[ ## next_tool_name ## ]]\n{tool_name}\n\n"
            "[[ ## next_tool_args ## ]]\n{}\n\n[[ ## completed ## ]]"
        )

    spans = [
        chat("c1", [text("user", "q")], [text("assistant", reply("f"))], start=0, end=10),
        tool("t1", "f", start=11, end=12),
        chat("c2", [text("user", "q")], [text("assistant", reply("finish"))], start=13, end=20),
        tool("t2", "finish", start=21, end=22),
        tool("t3", "f", start=23, end=24),  # asked for by no reply: stays unlinked
    ]
    rows = _steps(spans).steps
    linked = [(r["name"], r["call_step"], r["link_inferred"]) for r in rows if r["kind"] == "tool"]
    assert linked == [("f", 0, True), ("finish", 2, True), ("f", None, False)]
    assert "next_tool_name" in rows[1]["issues"][0]
    assert rows[2]["output"]["content"] == reply("finish")  # the reply is kept as text
    assert rows[2]["output"]["tool_calls"] == []


def test_missing_tool_spans_are_synthesized_after_their_call_with_results():
    spans = [
        span("r", "app", start=0, end=100),
        chat(
            "c1", [text("user", "q")], [calls(("id1", "f", {"x": 1}))], parent="r", start=10, end=20
        ),
        span("h", "POST /v1/chat", {"http.request.method": "POST"}, parent="c1", start=11, end=19),
        chat(
            "c2",
            [text("user", "q"), calls(("id1", "f", {"x": 1})), responses(("id1", "R"))],
            [text("assistant", "ok")],
            parent="r",
            start=30,
            end=40,
        ),
    ]
    rows = _steps(spans).steps
    assert [(r["kind"], r["name"], r["synthesized"]) for r in rows] == [
        ("other", "app", False),
        ("llm", "m", False),
        ("other", "POST /v1/chat", False),
        ("tool", "f", True),
        ("llm", "m", False),
    ]
    synth = rows[3]
    assert synth["span_id"] is None and synth["tool_call_id"] == "id1"
    assert synth["tool_result"] == "R" and synth["call_step"] == 1
    assert (synth["start_ns"], synth["end_ns"]) == (20, 30)
    assert synth["content_captured"] is True


def test_stacked_instrumentation_of_one_call_becomes_one_row():
    outer = chat(
        "o",
        [text("user", "q")],
        [text("assistant", "a")],
        start=0,
        end=100,
        attributes={"gen_ai.request.temperature": 0.7, "gen_ai.response.id": "r1"},
    )
    inner = span(
        "i",
        "chat m",
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": "m",
            "gen_ai.usage.input_tokens": 5,
        },
        parent="o",
        start=10,
        end=90,
    )
    rows = _steps([outer, inner]).steps
    assert len(rows) == 1
    row = rows[0]
    assert row["span_id"] == "i".rjust(16, "0")
    assert row["merged_span_ids"] == ["o".rjust(16, "0")]
    assert row["input_messages"][0]["content"] == "q"  # content came from the outer span
    assert row["params"]["temperature"] == 0.7 and row["usage"]["input_tokens"] == 5


def test_same_response_id_siblings_merge():
    a = chat(
        "a",
        [text("user", "q")],
        [text("assistant", "x")],
        attributes={"gen_ai.response.id": "chatcmpl-1"},
        seq=1,
    )
    b = span(
        "b", "chat m", {"gen_ai.operation.name": "chat", "gen_ai.response.id": "chatcmpl-1"}, seq=2
    )
    rows = _steps([a, b]).steps
    assert len(rows) == 1 and rows[0]["span_id"] == "a".rjust(16, "0")


def test_sequential_calls_sharing_a_response_id_stay_two_steps():
    # A mock server (or a proxy, a cache) answered both calls with one id: the second call,
    # with the tool result in its context and the final answer, must not vanish.
    first = chat(
        "a",
        [text("user", "weather in Paris?")],
        [calls(("call_1", "get_weather", {"city": "Paris"}))],
        attributes={"gen_ai.response.id": "chatcmpl-fake1"},
        start=100,
        end=200,
        seq=1,
    )
    result = tool("t", "get_weather", "call_1", start=210, end=220, seq=2)
    second = chat(
        "b",
        [
            text("user", "weather in Paris?"),
            calls(("call_1", "get_weather", {"city": "Paris"})),
            responses(("call_1", "sunny")),
        ],
        [text("assistant", "It is sunny in Paris.")],
        attributes={"gen_ai.response.id": "chatcmpl-fake1"},
        start=230,
        end=330,
        seq=3,
    )
    rows = _steps([first, result, second]).steps
    llm = [r for r in rows if r["kind"] == "llm"]
    assert [r["span_id"] for r in llm] == ["a".rjust(16, "0"), "b".rjust(16, "0")]
    assert llm[1]["output"]["content"] == "It is sunny in Paris."
    assert all(any("did not overlap" in issue for issue in r["issues"]) for r in llm)


def test_concurrent_siblings_sharing_a_response_id_still_merge():
    a = chat(
        "a",
        [text("user", "q")],
        [text("assistant", "x")],
        attributes={"gen_ai.response.id": "chatcmpl-1"},
        start=100,
        end=300,
        seq=1,
    )
    b = span(
        "b",
        "chat m",
        {"gen_ai.operation.name": "chat", "gen_ai.response.id": "chatcmpl-1"},
        start=110,
        end=290,
        seq=2,
    )
    rows = _steps([a, b]).steps
    assert len(rows) == 1 and rows[0]["merged_span_ids"] == ["b".rjust(16, "0")]
    assert not any("did not overlap" in issue for issue in rows[0]["issues"])


def test_orphans_cycles_and_duplicate_spans_lose_nothing():
    spans = [
        span("1", "lost child", parent="dead", start=5),
        span("2", "cycle a", parent="3", start=1),
        span("3", "cycle b", parent="2", start=2),
        span("4", "dup", start=3, seq=1),
        span("4", "dup (second copy)", start=3, seq=2),
    ]
    built = _steps(spans)
    names = sorted(r["name"] for r in built.steps)
    assert names == ["cycle a", "cycle b", "dup", "lost child"]
    lost = next(r for r in built.steps if r["name"] == "lost child")
    assert any("not in the trace" in issue for issue in lost["issues"])
    assert built.summary["n_spans"] == 4


def test_content_off_flags_rows():
    spans = [
        span("c", "chat m", {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai"}),
        tool("t", "f", "id1", start=11, end=12),
    ]
    built = _steps(spans)
    assert [r["content_captured"] for r in built.steps] == [False, False]
    assert built.summary["content_captured"] == "no"
    assert json.loads(built.steps[0]["attributes"]) == {}


def test_deep_nesting_does_not_hit_the_recursion_limit():
    spans = [span(str(i), f"s{i}", parent=str(i - 1) if i else None, start=i) for i in range(3000)]
    assert len(_steps(spans).steps) == 3000


DROPPED = {"role": "assistant", "parts": [], "finish_reason": "tool_call"}
REASON = {"gen_ai.response.finish_reasons": ["tool_call"]}


def _dropped_trace(second_input_call: dict, *, tool_id: str | None = "id1"):
    args = {"gen_ai.tool.call.arguments": json.dumps({"city": "Paris"})}
    return [
        chat("c1", [text("user", "q")], [DROPPED], attributes=REASON, start=0, end=10),
        tool("t1", "get_weather", tool_id, attributes=args, start=11, end=12),
        chat(
            "c2",
            [text("user", "q"), second_input_call, responses(("id1", "18 degrees"))],
            [text("assistant", "done")],
            start=20,
            end=30,
        ),
    ]


def _by_kind(build):
    llm = [s for s in build.steps if s["kind"] == "llm"]
    return llm, [s for s in build.steps if s["kind"] == "tool"]


def test_a_dropped_tool_call_is_rebuilt_from_the_tool_steps_with_an_issue():
    llm, tools = _by_kind(_steps(_dropped_trace(DROPPED)))
    (call,) = llm[0]["output"]["tool_calls"]
    assert (call["id"], call["name"], decode_arguments(call["arguments"])) == (
        "id1",
        "get_weather",
        {"city": "Paris"},
    )
    assert any("rebuilt from the tool steps" in i for i in llm[0]["issues"]), llm[0]["issues"]
    assert tools[0]["call_step"] == llm[0]["step"]
    # the next call's empty assistant turn gets the same calls, and is no longer flagged
    turn = llm[1]["input_messages"][1]
    assert [c["id"] for c in turn["tool_calls"]] == ["id1"]
    assert any("input message 1 (assistant) was recorded empty" in i for i in llm[1]["issues"])
    assert not any("have no content" in i for i in llm[1]["issues"]), llm[1]["issues"]


def test_a_dropped_tool_call_is_taken_from_the_next_calls_input_first():
    held = calls(("id1", "get_weather", {"city": "Lyon"}))
    llm, _ = _by_kind(_steps(_dropped_trace(held, tool_id=None)))
    (call,) = llm[0]["output"]["tool_calls"]
    assert (call["id"], decode_arguments(call["arguments"])) == ("id1", {"city": "Lyon"})
    assert any("rebuilt from the next model call's input" in i for i in llm[0]["issues"])


def test_an_empty_tool_call_reply_that_cannot_be_rebuilt_is_flagged():
    spans = [chat("c1", [text("user", "q")], [DROPPED], attributes=REASON, start=0, end=10)]
    llm, _ = _by_kind(_steps(spans))
    assert llm[0]["output"]["tool_calls"] == []
    assert any("holds no tool calls to rebuild" in i for i in llm[0]["issues"]), llm[0]["issues"]
    # an empty reply that did not stop for tool calls is left alone
    plain = [chat("c1", [text("user", "q")], [{"role": "assistant", "parts": []}], start=0)]
    llm, _ = _by_kind(_steps(plain))
    assert not any("tool_call" in i for i in llm[0]["issues"])
