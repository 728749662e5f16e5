"""LangSmith runs (``langsmith.run.*`` spans from :mod:`otelcar.ingest.exports.langsmith`).

Contract (``reference/exports.md`` §1.3–1.4, §3, §4.1):

- **Kind** by ``run_type`` (any case): ``llm`` → llm, ``tool`` → tool; ``chain`` → agent
  when it is a LangGraph graph invocation (``extra.metadata.ls_integration == "langgraph"``
  without ``langgraph_node``; a chain named ``LangGraph``/``AgentExecutor``; or, for
  LangChain runs before ``ls_integration``, a chain outside any graph node whose output is
  the graph state ``{"messages": [...]}``), else other; ``prompt``/``parser``/``retriever``/
  ``embedding`` → other. An agent opens an episode.
- **LLM input** from ``inputs.messages`` (one batch element of ``[[...]]``), ``prompts``
  (completion), ``input`` + ``instructions`` (Responses API), ``system`` (Anthropic), in
  every message form: LangChain ``lc`` constructors, ``model_dump`` dicts (``type``),
  OpenAI dicts (``role``), ``(role, content)`` tuples, bare strings; content as a string
  or blocks (text, ``tool_use``, ``tool_result`` → one tool message each, ``thinking``/
  ``reasoning``, LangChain v1 ``tool_call``).
- **LLM output** from ``generations[0]`` (the first candidate is the action, the rest are
  alternates), ``choices`` (raw OpenAI), Responses ``output`` items, an Anthropic message
  (``content`` blocks + ``stop_reason``), ``message``/``messages[-1]``/a bare message.
  Tool calls from ``tool_calls`` (LangChain ``args`` or OpenAI ``function.arguments``), else
  ``additional_kwargs.tool_calls``/``function_call``, never both; ``invalid_tool_calls``
  are kept with their raw arguments.
- **Model/params/usage** from ``extra.invocation_params``, ``extra.metadata.ls_*`` and the
  request kwargs of wrappers; usage from ``usage_metadata`` (outputs, message, metadata),
  ``llm_output.token_usage``, raw ``usage``, the run's token fields or the CLI's
  ``token_usage``.
- **Tool** name = run name; arguments = ``inputs`` unless it is exactly ``{"input": x}``
  (then ``x`` decoded: JSON, else Python repr via ``ast.literal_eval``, else the raw
  string); result = ``outputs.output`` (a ToolMessage's content, a string as is, else
  JSON text) or the whole ``outputs``; call id = ``extra.tool_call_id`` or the
  ToolMessage's ``tool_call_id``.
- **Source** = ``langsmith <shape> <producer>``, e.g. ``langsmith list_runs wrap_openai``.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Sequence
from typing import Any

from otelcar.conventions.base import Attrs, MappedSpan
from otelcar.conventions.genai import normalize_finish_reason, tool_definitions
from otelcar.conventions.normalize import (  # the message reading, shared (names kept here)
    _arguments,
    _dict,
    _is_tuple_message,
    content_parts,
    messages_from_list,
    normalize_message,
)
from otelcar.conventions.normalize import _calls_of as _calls_of  # kept importable here
from otelcar.conventions.normalize import _merge_calls as _merge_calls
from otelcar.conventions.openai_shapes import tool_choice_text
from otelcar.ingest.frames import LogFrame, SpanFrame
from otelcar.messages import Arguments, Message, ToolCall, parse_arguments, text_of

NAME = "langsmith"
PRIORITY = 10
A = "langsmith.run."
EXPORT_ATTR = "langsmith.export"

#: LangChain message class or ``type`` → normalized role.
AGENT_CHAIN_NAMES = frozenset({"LangGraph", "AgentExecutor"})
FLOAT_PARAMS = ("temperature", "top_p", "top_k", "frequency_penalty", "presence_penalty")
INT_PARAMS = {
    "max_tokens": ("max_tokens", "max_completion_tokens", "max_output_tokens"),
    "seed": ("seed",),
    "n": ("n",),
}
_IDENTITY_FIELDS = (
    "id",
    "run_id",
    "trace_id",
    "parent_run_id",
    "parent_run_ids",
    "dotted_order",
    "start_time",
    "end_time",
    "status",
    "error",
    "name",
    "run_type",
)


class LangSmithMapper:
    """Mapper for LangSmith runs (see the module docstring)."""

    name = NAME

    def claim(self, span: SpanFrame) -> int | None:
        return PRIORITY if isinstance(span.attributes.get(A + "run_type"), str) else None

    def map(self, span: SpanFrame, logs: Sequence[LogFrame]) -> MappedSpan:
        consumed: set[str] = set()
        attrs = Attrs(span.attributes, consumed)
        for field in _IDENTITY_FIELDS:
            attrs.get(A + field)
        run_type = str(span.attributes.get(A + "run_type")).lower()
        shape = attrs.text(EXPORT_ATTR) or "runs"
        extra = _dict(attrs.get(A + "extra"))
        metadata = _metadata(attrs, extra)
        kind = _kind(run_type, span.name, metadata, extra, span.attributes.get(A + "outputs"))
        mapped = MappedSpan(kind=kind, name=span.name, source=NAME, consumed=consumed)
        mapped.operation = run_type
        mapped.error = attrs.text(A + "error")
        mapped.conversation_id = _first_text(
            metadata.get("thread_id"),
            metadata.get("session_id"),
            metadata.get("conversation_id"),
            attrs.get(A + "thread_id"),
        )
        if kind == "llm":
            _map_llm(attrs, extra, metadata, mapped)
        elif kind == "tool":
            _map_tool(attrs, extra, mapped)
        elif kind == "agent":
            mapped.agent_name = span.name
            mapped.episode_boundary = True
        producer = _producer(run_type, metadata, extra, span.attributes)
        if kind == "agent" and producer == "langchain" and span.name != "AgentExecutor":
            producer = "langgraph"  # a graph invocation recognised by its state output
        mapped.source = f"{NAME} {shape}" + (f" {producer}" if producer else "")
        return mapped


# --------------------------------------------------------------------------------------
# Classification
# --------------------------------------------------------------------------------------


def _first_text(*values: Any) -> str | None:
    for value in values:
        if value is not None and value != "":
            return str(value)
    return None


def _metadata(attrs: Attrs, extra: dict[str, Any]) -> dict[str, Any]:
    """``extra.metadata``, else the CLI's ``custom_metadata``, else the v2 API's ``metadata``."""
    for value in (
        extra.get("metadata"),
        attrs.get(A + "custom_metadata"),
        attrs.get(A + "metadata"),
    ):
        if isinstance(value, dict):
            return value
    return {}


def _kind(
    run_type: str, name: str, metadata: dict[str, Any], extra: dict[str, Any], outputs: Any
) -> str:
    if run_type == "llm":
        return "llm"
    if run_type == "tool":
        return "tool"
    if run_type == "chain" and _is_agent_chain(name, metadata, extra, outputs):
        return "agent"
    return "other"


def _is_agent_chain(
    name: str, metadata: dict[str, Any], extra: dict[str, Any], outputs: Any
) -> bool:
    """A LangGraph graph invocation (or a LangChain AgentExecutor), not one of its nodes."""
    if "langgraph_node" in metadata:
        return False
    if metadata.get("ls_integration") == "langgraph" or name in AGENT_CHAIN_NAMES:
        return True
    runtime = _dict(extra.get("runtime"))
    messages = _dict(outputs).get("messages")
    return (
        runtime.get("library") == "langchain-core"
        and isinstance(messages, list)
        and bool(messages)
        and all(isinstance(m, dict) and "type" in m for m in messages)
    )


def _producer(
    run_type: str, metadata: dict[str, Any], extra: dict[str, Any], attributes: dict[str, Any]
) -> str | None:
    """What wrote the run: ``wrap_openai``, ``wrap_anthropic``, ``langgraph``, ``langchain``
    or ``traceable`` (``None`` when nothing says)."""
    outputs = _dict(attributes.get(A + "outputs"))
    if run_type == "llm" and (
        "choices" in outputs or ("output" in outputs and "object" in outputs)
    ):
        return "wrap_openai"
    if run_type == "llm" and "stop_reason" in outputs:
        return "wrap_anthropic"
    if metadata.get("ls_integration") == "langgraph" or "langgraph_node" in metadata:
        return "langgraph"
    library = _dict(extra.get("runtime")).get("library")
    if library == "langchain-core" or "invocation_params" in extra or "generations" in outputs:
        return "langchain"
    if metadata.get("ls_method") == "traceable" or library == "langsmith":
        return "traceable"
    return None


# --------------------------------------------------------------------------------------
# LLM runs
# --------------------------------------------------------------------------------------


def _map_llm(
    attrs: Attrs, extra: dict[str, Any], metadata: dict[str, Any], mapped: MappedSpan
) -> None:
    inputs = attrs.get(A + "inputs")
    outputs = attrs.get(A + "outputs")
    request = _dict(inputs)
    invocation = _dict(extra.get("invocation_params"))
    mapped.input_messages = input_messages(inputs, mapped.issues)
    if mapped.input_messages is None and inputs not in (None, {}):  # {}: hidden inputs
        attrs.consumed.discard(A + "inputs")
        mapped.issues.append("llm inputs are in no known message form; kept in attributes")
    result = read_output(outputs, mapped.issues)
    if result.choices:
        mapped.output = result.choices[0]
        mapped.alternates = result.choices[1:]
        mapped.n_choices = len(result.choices)
    elif outputs not in (None, {}) and not result.known:
        attrs.consumed.discard(A + "outputs")
        mapped.issues.append("llm outputs are in no known form; kept in attributes")
    mapped.finish_reason = _finish_reason(result.finish_reason)
    mapped.response_id = result.response_id
    mapped.response_model = result.model
    mapped.request_model = _first_text(
        metadata.get("ls_model_name"),
        invocation.get("model"),
        invocation.get("model_name"),
        request.get("model"),
    )
    mapped.name = mapped.response_model or mapped.request_model or mapped.name
    mapped.provider = _first_text(metadata.get("ls_provider"))
    mapped.params = _params(invocation, metadata, request)
    mapped.tool_choice = tool_choice_text(
        invocation.get("tool_choice")
        or request.get("tool_choice")
        or _dict(metadata.get("ls_invocation_params")).get("tool_choice")
    )
    tools = invocation.get("tools") or request.get("tools") or invocation.get("functions")
    if isinstance(tools, list):
        mapped.tools_available = tool_definitions([_tool_spec(t) for t in tools], mapped.issues)
    mapped.usage = _usage(attrs, metadata, result.usage)


def input_messages(inputs: Any, issues: list[str]) -> list[Message] | None:
    """The context of an LLM run from its ``inputs`` (``None`` when no known form)."""
    if isinstance(inputs, str):
        return [Message(role="user", content=inputs)]
    if not isinstance(inputs, dict):
        return None
    out: list[Message] = []
    system = inputs.get("instructions") or inputs.get("system")
    if system is not None:
        out.append(Message(role="system", content=content_parts(system, issues).text))
    for key in ("messages", "inputs", "input", "prompts", "prompt"):
        if key not in inputs:
            continue
        items = inputs[key]
        if key in ("prompts", "prompt"):
            items = items[:1] if isinstance(items, list) else [items]
            if isinstance(inputs[key], list) and len(inputs[key]) > 1:
                issues.append(f"{len(inputs[key])} prompts in one call; the first is used")
        out.extend(messages_from_list(items, issues))
        return out
    return out or None


class _Output:
    """What an LLM run's outputs say: candidates, finish reason, model, id, usage."""

    def __init__(self) -> None:
        self.choices: list[Message] = []
        self.finish_reason: Any = None
        self.model: str | None = None
        self.response_id: str | None = None
        self.usage: dict[str, Any] = {}
        self.known = False


def read_output(outputs: Any, issues: list[str]) -> _Output:
    """The action of an LLM run from its ``outputs`` (see the module docstring)."""
    result = _Output()
    if isinstance(outputs, str):
        result.known = True
        result.choices = [Message(role="assistant", content=outputs)]
        return result
    if not isinstance(outputs, dict):
        return result
    result.model = _first_text(outputs.get("model"))
    result.response_id = _first_text(outputs.get("id")) if "model" in outputs else None
    result.usage = _dict(outputs.get("usage_metadata")) or _dict(outputs.get("usage"))
    if isinstance(outputs.get("generations"), list):
        _read_generations(outputs, result, issues)
    elif isinstance(outputs.get("choices"), list):
        result.known = True
        for choice in outputs["choices"]:
            choice = _dict(choice)
            message = choice.get("message") if "message" in choice else choice.get("text")
            result.choices.extend(normalize_message(message, issues, "assistant")[:1])
        first = _dict(outputs["choices"][0]) if outputs["choices"] else {}
        result.finish_reason = first.get("finish_reason")
    elif isinstance(outputs.get("output"), list) and outputs.get("object") == "response":
        result.known = True
        result.choices = [_responses_message(outputs["output"], issues)]
        result.finish_reason = "tool_call" if result.choices[0].tool_calls else "stop"
    elif "content" in outputs and outputs.get("role") == "assistant" and "stop_reason" in outputs:
        result.known = True
        result.choices = normalize_message(outputs, issues, "assistant")[:1]
        result.finish_reason = outputs.get("stop_reason")
    else:
        message = _message_in(outputs)
        if message is not None:
            result.known = True
            result.choices = normalize_message(message, issues, "assistant")[:1]
            result.finish_reason = _dict(message).get("finish_reason")
    return result


def _message_in(outputs: dict[str, Any]) -> Any:
    """``message``, ``messages[-1]``, a bare ``{role, content}``, or ``output`` (a message,
    a ``(role, text)`` tuple or text) of a hand-written ``@traceable(run_type="llm")``."""
    if isinstance(outputs.get("message"), dict):
        return outputs["message"]
    if isinstance(outputs.get("messages"), list) and outputs["messages"]:
        return outputs["messages"][-1]
    if "role" in outputs and ("content" in outputs or "tool_calls" in outputs):
        return outputs
    output = outputs.get("output")
    if isinstance(output, str | dict) or _is_tuple_message(output):
        return output
    return None


def _read_generations(outputs: dict[str, Any], result: _Output, issues: list[str]) -> None:
    result.known = True
    generations = outputs["generations"]
    batch = generations[0] if generations and isinstance(generations[0], list) else generations
    if len(generations) > 1 and isinstance(generations[0], list):
        issues.append(f"{len(generations)} batch elements in one run; the first is used")
    first_info: dict[str, Any] = {}
    for index, generation in enumerate(batch):
        generation = _dict(generation)
        message = generation.get("message")
        if message is None:
            result.choices.append(Message(role="assistant", content=generation.get("text")))
        else:
            result.choices.extend(normalize_message(message, issues, "assistant")[:1])
        if index == 0:
            first_info = _dict(generation.get("generation_info"))
            body = _dict(_dict(message).get("kwargs")) or _dict(message)
            meta = _dict(body.get("response_metadata"))
            result.finish_reason = first_info.get("finish_reason") or meta.get(
                "finish_reason", meta.get("stop_reason")
            )
            result.model = _first_text(meta.get("model_name"), meta.get("model"))
            result.response_id = _first_text(meta.get("id"))
            result.usage = _dict(body.get("usage_metadata"))
    llm_output = _dict(outputs.get("llm_output"))
    result.model = result.model or _first_text(llm_output.get("model_name"))
    if not result.usage:
        result.usage = _dict(llm_output.get("token_usage")) or _dict(llm_output.get("usage"))


def _responses_message(items: list[Any], issues: list[str]) -> Message:
    """OpenAI Responses API ``output`` items as one assistant message."""
    texts: list[str] = []
    calls: list[ToolCall] = []
    reasoning: list[str] = []
    for item in items:
        item = _dict(item)
        kind = item.get("type")
        if kind == "message":
            text = content_parts(item.get("content"), issues).text
            if text is not None:
                texts.append(text)
        elif kind == "function_call":
            calls.append(
                ToolCall(
                    name=item.get("name"),
                    arguments=_arguments(item.get("arguments")),
                    id=item.get("call_id") or item.get("id"),
                )
            )
        elif kind == "reasoning":
            summary = [_dict(s).get("text") for s in item.get("summary") or ()]
            reasoning.extend(s for s in summary if isinstance(s, str))
        else:
            issues.append(f"Responses output item {kind!r} is not represented")
    return Message(
        role="assistant",
        content="\n".join(texts) if texts else None,
        tool_calls=tuple(calls),
        reasoning="\n".join(reasoning) if reasoning else None,
    )


def _finish_reason(reason: Any) -> str | None:
    """Finish reasons in the schema's vocabulary (``tool_calls``/``tool_use`` → ``tool_call``)."""
    if reason == "tool_use":
        return "tool_call"
    return normalize_finish_reason(reason)


def _params(
    invocation: dict[str, Any], metadata: dict[str, Any], request: dict[str, Any]
) -> dict[str, Any]:
    """Sampling params: invocation params, then ``ls_*`` metadata, then request kwargs."""
    ls = {
        "temperature": metadata.get("ls_temperature"),
        "max_tokens": metadata.get("ls_max_tokens"),
        "stop": metadata.get("ls_stop"),
        **_dict(metadata.get("ls_invocation_params")),
    }
    sources = (invocation, ls, request)

    def pick(*keys: str) -> Any:
        for source in sources:
            for key in keys:
                if source.get(key) is not None:
                    return source[key]
        return None

    params: dict[str, Any] = {k: _float(pick(k)) for k in FLOAT_PARAMS}
    for key, aliases in INT_PARAMS.items():
        params[key] = _int(pick(*aliases))
    stop = pick("stop", "stop_sequences")
    params["stop"] = [stop] if isinstance(stop, str) else stop if isinstance(stop, list) else None
    return params if any(v is not None for v in params.values()) else {}


def _float(value: Any) -> float | None:
    try:
        return None if value is None or isinstance(value, bool) else float(value)
    except (TypeError, ValueError, OverflowError):
        return None


def _int(value: Any) -> int | None:
    try:
        return None if value is None or isinstance(value, bool) else int(value)
    except (TypeError, ValueError, OverflowError):  # int(inf)
        return None


def _tool_spec(tool: Any) -> Any:
    """An offered tool in the OpenAI shape (Anthropic ``input_schema`` → ``parameters``)."""
    if isinstance(tool, dict) and "input_schema" in tool and "function" not in tool:
        return {
            "type": "function",
            "name": tool.get("name"),
            "description": tool.get("description"),
            "parameters": tool.get("input_schema"),
        }
    return tool


def _usage(attrs: Attrs, metadata: dict[str, Any], found: dict[str, Any]) -> dict[str, Any]:
    """Token usage from the outputs (``found``), else ``metadata.usage_metadata``, else the
    run's token fields or the CLI's ``token_usage``."""
    usage = found or _dict(metadata.get("usage_metadata"))
    cli = _dict(attrs.get(A + "token_usage"))
    fields = {
        "input_tokens": attrs.get(A + "prompt_tokens"),
        "output_tokens": attrs.get(A + "completion_tokens"),
        "total_tokens": attrs.get(A + "total_tokens"),
    }
    details_in = _dict(usage.get("input_token_details")) or _dict(
        usage.get("prompt_tokens_details")
    )
    details_out = _dict(usage.get("output_token_details")) or _dict(
        usage.get("completion_tokens_details")
    )
    out = {
        "input_tokens": _int(
            usage.get("input_tokens", usage.get("prompt_tokens"))
            or fields["input_tokens"]
            or cli.get("prompt_tokens")
        ),
        "output_tokens": _int(
            usage.get("output_tokens", usage.get("completion_tokens"))
            or fields["output_tokens"]
            or cli.get("completion_tokens")
        ),
        "cache_read_tokens": _int(
            details_in.get("cache_read", details_in.get("cached_tokens"))
            or usage.get("cache_read_input_tokens")
        ),
        "reasoning_tokens": _int(details_out.get("reasoning", details_out.get("reasoning_tokens"))),
        "total_tokens": _int(
            usage.get("total_tokens") or fields["total_tokens"] or cli.get("total_tokens")
        ),
    }
    return out if any(v is not None for v in out.values()) else {}


# --------------------------------------------------------------------------------------
# Tool runs
# --------------------------------------------------------------------------------------


def _map_tool(attrs: Attrs, extra: dict[str, Any], mapped: MappedSpan) -> None:
    inputs = attrs.get(A + "inputs")
    outputs = attrs.get(A + "outputs")
    mapped.tool_name = mapped.name
    mapped.tool_args = tool_arguments(inputs)
    if isinstance(inputs, dict) and set(inputs) == {"input"} and isinstance(mapped.tool_args, str):
        mapped.issues.append("tool input is neither a JSON nor a Python-literal dict; kept as text")
    result, message = tool_result(outputs)
    mapped.tool_result = result
    mapped.tool_call_id = _first_text(extra.get("tool_call_id"), message.get("tool_call_id"))
    if message.get("status") == "error" and mapped.error is None:
        mapped.error = result


def tool_arguments(inputs: Any) -> Arguments:
    """A tool run's arguments (see the module docstring)."""
    if isinstance(inputs, dict) and set(inputs) == {"input"}:
        return _loose_arguments(inputs["input"])
    if inputs is None or isinstance(inputs, dict | str):
        return _loose_arguments(inputs) if isinstance(inputs, str) else inputs
    return json.dumps(inputs, ensure_ascii=False)


def _loose_arguments(value: Any) -> Arguments:
    """JSON object, else a Python-repr dict (LangChain < 1.4 logged ``str(dict)``), else the
    raw string; non-strings: a dict as is, anything else as JSON text."""
    if isinstance(value, dict) or value is None:
        return value
    if not isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    parsed = parse_arguments(value)
    if isinstance(parsed, dict):
        return parsed
    try:
        literal = ast.literal_eval(value)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return value
    return literal if isinstance(literal, dict) else value


def tool_result(outputs: Any) -> tuple[str | None, dict[str, Any]]:
    """``(result text, ToolMessage body or {})`` of a tool run's ``outputs``."""
    if outputs is None:
        return None, {}
    if isinstance(outputs, dict) and set(outputs) == {"output"}:
        output = outputs["output"]
        body = _dict(output)
        if body.get("lc") == 1:
            body = _dict(body.get("kwargs"))
        if body and ("tool_call_id" in body or body.get("type") == "tool"):
            return content_parts(body.get("content"), []).text, body
        return text_of(output), {}
    return text_of(outputs), {}
