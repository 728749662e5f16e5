"""Langfuse observations: SDK v3+ OTel spans and the spans made from Langfuse export files.

Reads (``reference/otel-genai.md`` §5 and §8.4, ``reference/exports.md`` §2):

- ``langfuse.observation.type``: ``generation``/``embedding`` → llm, ``tool`` → tool,
  ``agent`` → agent (an episode), everything else (``span``, ``chain``, ``event``,
  ``retriever``, ``evaluator``, ``guardrail``) → other. Case-insensitive (exports say
  ``GENERATION``).
- ``langfuse.observation.input`` / ``.output``: JSON text or plain text (a plain string stays
  text; JSON-looking text that does not parse is reported as truncated and left in the
  step's attributes). LLM input is an OpenAI message list, the OpenAI wrapper's
  ``{"tools": [...], "messages": [...]}``, LangChain-handler messages (``tool_calls`` with
  ``args`` dicts; the handler's fake ``role: tool`` messages that carry a tool *definition*
  become ``tools_available``), an ``@observe`` ``{"args", "kwargs"}`` wrapping, a prompt
  string or a Responses-API ``{"instructions", "input"}``. Tool input is the ``@observe``
  wrapping (``kwargs``, positional arguments as ``arg0``, ``arg1``, …), a dict, or text
  (JSON, else a Python repr, else kept raw); the tool result is the output text as
  recorded, or the ``content`` of a LangChain ToolMessage dict.
- ``.model.name`` → ``response_model`` (the OpenAI wrapper reports the response's model;
  LangChain's requested ``ls_model_name`` metadata, when present, is ``request_model``).
- ``.model.parameters`` (``.model_parameters`` in SDK v3 pre-releases) → ``params``.
  Langfuse's OpenAI wrapper *fills in defaults* (temperature 1, top_p 1,
  frequency/presence penalty 0, max_tokens ``"Infinity"``) for parameters that were not
  sent: a value equal to such a default is therefore not known to have been sent and is
  left out of ``params`` (an issue says which). The attribute itself is never consumed,
  so the parameters exactly as recorded stay in ``attributes``.
- ``.usage_details``: OpenAI keys (``prompt_tokens``, ``*_tokens_details``) or Langfuse's
  (``input``, ``output``, ``total``, ``input_cached_tokens``, ``output_reasoning_tokens``,
  …); server-normalised ``input``/``output`` exclude their detail counts, which are added
  back when ``total`` shows that they were subtracted.
- ``.level`` ``ERROR`` + ``.status_message`` → ``error``; ``session.id`` →
  ``conversation_id``; metadata ``tool_call_id`` / ``finish_reason`` / ``ls_provider``.
- ``.completion_start_time`` has no column in the steps table; it stays in ``attributes``.

Tool observations carry no call id (``@observe``): the trajectory links them to the
assistant's tool calls by name and order. Langfuse attributes win over ``gen_ai.*`` ones on
the same span (priority 10).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from otelcar.conventions.base import Attrs, MappedSpan
from otelcar.conventions.genai import normalize_finish_reason, tool_definitions
from otelcar.conventions.memo import decode_json
from otelcar.conventions.normalize import tool_calls
from otelcar.conventions.openai_shapes import tool_choice_text
from otelcar.ingest.frames import LogFrame, SpanFrame
from otelcar.ingest.jsontext import literal_value
from otelcar.messages import Arguments, Message, ToolCall, parse_arguments, text_of

NAME = "langfuse"
PRIORITY = 10
SDK_SCOPE = "langfuse-sdk"

OBS = "langfuse.observation."
TYPE = OBS + "type"
INPUT = OBS + "input"
OUTPUT = OBS + "output"
MODEL = OBS + "model.name"
MODEL_PARAMETERS = OBS + "model.parameters"
#: The spelling of Langfuse SDK v3 pre-releases (2025-04).
OLD_MODEL_PARAMETERS = OBS + "model_parameters"
USAGE = OBS + "usage_details"
LEVEL = OBS + "level"
STATUS_MESSAGE = OBS + "status_message"
METADATA = OBS + "metadata"
EXPORT = "langfuse.export."
EXPORT_FORMAT = EXPORT + "format"

LLM_TYPES = frozenset({"generation", "embedding"})
TRUNCATION_MARK = "...[truncated]"
_LC_ROLES = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool"}
_TEXT_BLOCKS = frozenset({"text", "input_text", "output_text"})
#: What Langfuse's OpenAI wrapper records for a parameter the call did not send.
WRAPPER_DEFAULTS: dict[str, float] = {
    "temperature": 1,
    "top_p": 1,
    "frequency_penalty": 0,
    "presence_penalty": 0,
    "max_tokens": math.inf,
}
_WRAPPER_KEYS = frozenset({"temperature", "top_p", "frequency_penalty", "presence_penalty"})
_MISSING = object()


class LangfuseMapper:
    """Mapper for Langfuse observations (see the module docstring)."""

    name = NAME

    def claim(self, span: SpanFrame) -> int | None:
        value = span.attributes.get(TYPE)
        return PRIORITY if isinstance(value, str) and value.strip() else None

    def map(self, span: SpanFrame, logs: Sequence[LogFrame]) -> MappedSpan:
        consumed: set[str] = set()
        attrs = Attrs(span.attributes, consumed)
        obs_type = (attrs.text(TYPE) or "").strip().lower()
        kind = _kind(obs_type)
        mapped = MappedSpan(
            kind=kind, name=span.name, source=_source(span), operation=obs_type, consumed=consumed
        )
        attrs.get(EXPORT_FORMAT)
        mapped.conversation_id = attrs.text("session.id")
        _map_level(span, attrs, mapped)
        if kind == "llm":
            _map_llm(span, attrs, mapped)
        elif kind == "tool":
            _map_tool(span, attrs, mapped)
        elif kind == "agent":
            mapped.episode_boundary = True
        return mapped


def _kind(obs_type: str) -> str:
    if obs_type in LLM_TYPES:
        return "llm"
    if obs_type in ("tool", "agent"):
        return obs_type
    return "other"


def _source(span: SpanFrame) -> str:
    """``langfuse 5.0.4`` for SDK spans, plus ``(… export)`` for spans from an export file."""
    version = span.scope_version if span.scope_name == SDK_SCOPE else None
    base = f"{NAME} {version}" if version else NAME
    layout = span.attributes.get(EXPORT_FORMAT)
    return f"{base} ({layout} export)" if layout else base


def _map_level(span: SpanFrame, attrs: Attrs, mapped: MappedSpan) -> None:
    level = (attrs.text(LEVEL) or "DEFAULT").upper()
    if level not in ("ERROR", "WARNING"):
        return
    message = attrs.text(STATUS_MESSAGE)
    if level == "ERROR":
        mapped.error = message or "level ERROR"
        if span.status_code != "ERROR":
            mapped.issues.append("Langfuse level is ERROR but the span status is not")
    else:
        mapped.issues.append(f"Langfuse level WARNING: {message or 'no status message'}")


# --------------------------------------------------------------------------------------
# Reading attributes
# --------------------------------------------------------------------------------------


def content_value(
    span: SpanFrame, attrs: Attrs, key: str, mapped: MappedSpan, *, python_repr: bool = False
) -> Any:
    """An input/output attribute: JSON decoded (else, with ``python_repr``, a Python-repr
    literal), plain text kept; ``_MISSING`` when absent or truncated (reported, and left
    unconsumed so the raw value stays in attributes)."""
    raw = span.attributes.get(key)
    if raw is None:
        return _MISSING
    if not isinstance(raw, str):
        attrs.get(key)
        return raw
    text = raw.strip()
    if text.endswith(TRUNCATION_MARK):
        return _truncated(key, raw, "ends with the '...[truncated]' marker", mapped)
    try:
        value = decode_json(text)
    except ValueError as exc:
        value = _python_literal(text) if python_repr else None
        if value is None and text[:1] in ("{", "["):
            return _truncated(key, raw, f"is not valid JSON ({exc})", mapped)
        value = raw if value is None else value
    attrs.get(key)
    return _MISSING if value is None else value  # a stored JSON null records nothing


def _python_literal(text: str) -> dict[str, Any] | list[Any] | None:
    """A Python-repr dict or list (``"{'city': 'Paris'}"``, the v2 LangChain handler)."""
    try:
        value = literal_value(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    return value if isinstance(value, dict | list) else None


def _truncated(key: str, raw: str, why: str, mapped: MappedSpan) -> object:
    mapped.content_truncated = True
    mapped.issues.append(f"{key} {why}: cut at {len(raw)} chars?; raw value kept in attributes")
    return _MISSING


def loose_json(value: Any) -> Any:
    """A value that may hold JSON text (v5 SDK metadata, blob exports): decoded when it is
    a JSON object, array or string literal; other text (``"123"``, plain words) as is."""
    if not isinstance(value, str):
        return value
    try:
        decoded = decode_json(value)
    except ValueError:
        return value
    return decoded if isinstance(decoded, dict | list | str) else value


def metadata(span: SpanFrame, attrs: Attrs, key: str) -> Any:
    """Observation metadata ``key``: flattened (``…metadata.<key>``) or in a metadata dict."""
    value = attrs.get(f"{METADATA}.{key}")
    if value is not None:
        return loose_json(value)
    whole = loose_json(span.attributes.get(METADATA))
    return whole.get(key) if isinstance(whole, dict) else None


# --------------------------------------------------------------------------------------
# LLM observations
# --------------------------------------------------------------------------------------


def _map_llm(span: SpanFrame, attrs: Attrs, mapped: MappedSpan) -> None:
    model = attrs.text(MODEL)
    requested = metadata(span, attrs, "ls_model_name")
    mapped.response_model = model
    mapped.request_model = (
        requested if isinstance(requested, str) else attrs.text("gen_ai.request.model")
    )
    mapped.name = model or mapped.request_model or span.name
    provider = metadata(span, attrs, "ls_provider")
    if not isinstance(provider, str):
        provider = attrs.text("gen_ai.provider.name", "gen_ai.system")
    if provider is None and span.name.startswith("OpenAI-"):
        provider = "openai"  # the default observation names of Langfuse's OpenAI wrapper
    mapped.provider = provider
    recorded = span.attributes.get(MODEL_PARAMETERS, span.attributes.get(OLD_MODEL_PARAMETERS))
    mapped.params = model_params(recorded, mapped.issues)
    parameters = loose_json(recorded)
    if isinstance(parameters, dict):
        mapped.tool_choice = tool_choice_text(parameters.get("tool_choice"))
    mapped.usage = usage(_usage_source(attrs))

    value = content_value(span, attrs, INPUT, mapped)
    if value is not _MISSING:
        mapped.input_messages, tools = input_messages(value, mapped.issues)
        mapped.tools_available = tool_definitions(tools, mapped.issues) if tools else None
    if mapped.tools_available is None:
        mapped.tools_available = _export_tool_definitions(attrs, mapped.issues)
    value = content_value(span, attrs, OUTPUT, mapped)
    reason = metadata(span, attrs, "finish_reason")
    if value is not _MISSING:
        choices, choice_reason = output_choices(value)
        if choices:
            mapped.output, mapped.alternates = choices[0], choices[1:]
            mapped.n_choices = len(choices)
        reason = reason or choice_reason
    mapped.finish_reason = normalize_finish_reason(reason if isinstance(reason, str) else None)


def _usage_source(attrs: Attrs) -> Any:
    details = loose_json(attrs.get(USAGE))
    if isinstance(details, dict) and details:
        return details
    return loose_json(attrs.get(EXPORT + "usage"))  # exports' deprecated usage object


def _export_tool_definitions(attrs: Attrs, issues: list[str]) -> list[dict[str, Any]] | None:
    """Blob/UI ``tool_definitions``: ``{name: '{"description", "parameters": "<json>"}'}``."""
    raw = loose_json(attrs.get(EXPORT + "tool_definitions"))
    if not isinstance(raw, dict) or not raw:
        return None
    items = []
    for name, body in raw.items():
        body = loose_json(body)
        body = body if isinstance(body, dict) else {}
        parameters = loose_json(body.get("parameters"))
        items.append(
            {"name": name, "description": body.get("description"), "parameters": parameters}
        )
    return tool_definitions(items, issues)


def input_messages(value: Any, issues: list[str]) -> tuple[list[Message], list[Any]]:
    """A generation's input as normalized messages, and the tool definitions it offered."""
    tools: list[Any] = []
    items: Any = value
    if isinstance(value, dict):
        items, tools = _unwrap_input(value, issues)
    elif isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        if len(value) > 1:
            issues.append(f"input holds {len(value)} prompts (a batch); the first is used")
        items = value[0]
    if isinstance(items, str):
        return [Message(role="user", content=items)], tools
    if not isinstance(items, list):
        issues.append("input is not a message list; kept as one user message")
        return [Message(role="user", content=text_of(items))], tools
    messages: list[Message] = []
    for item in items:
        definition = _tool_definition_message(item)
        if definition is not None:
            tools.append(definition)
            continue
        messages.extend(normalize_message(item, "user"))
    return messages, tools


def _unwrap_input(value: dict[str, Any], issues: list[str]) -> tuple[Any, list[Any]]:
    """The message list inside a dict-shaped input, and its offered tools."""
    if "messages" in value:
        return value["messages"], list(value.get("tools") or value.get("functions") or ())
    if "args" in value and "kwargs" in value:  # @observe(as_type="generation") wrapping
        kwargs = value.get("kwargs") if isinstance(value.get("kwargs"), dict) else {}
        args = value.get("args") if isinstance(value.get("args"), list) else []
        if "messages" in kwargs:
            return kwargs["messages"], list(kwargs.get("tools") or ())
        if args and isinstance(args[0], list | str):
            return args[0], []
        return value, []
    if "instructions" in value or "input" in value:  # Responses API
        items = value.get("input")
        items = [{"role": "user", "content": items}] if isinstance(items, str) else items or []
        if value.get("instructions"):
            items = [{"role": "system", "content": value["instructions"]}, *items]
        return items, list(value.get("tools") or ())
    if "prompt" in value:
        return value["prompt"], []
    if "role" in value:
        return [value], []
    return value, []


def _tool_definition_message(item: Any) -> dict[str, Any] | None:
    """The LangChain handler's pseudo-message ``{"role": "tool", "content": {"type":
    "function", "function": {...}}}`` (no ``tool_call_id``): a definition, not a result."""
    if not isinstance(item, dict) or item.get("role") != "tool" or item.get("tool_call_id"):
        return None
    content = loose_json(item.get("content"))
    if not isinstance(content, dict):
        return None
    body = content.get("function") if isinstance(content.get("function"), dict) else content
    if content.get("type") == "function" and isinstance(body.get("name"), str):
        return content
    return None


def normalize_message(item: Any, default_role: str) -> list[Message]:
    """One recorded message (OpenAI, LangChain dict or tuple, Anthropic blocks) as
    normalized messages: a message with tool-result blocks becomes one tool message each."""
    if isinstance(item, list | tuple) and len(item) == 2 and all(isinstance(v, str) for v in item):
        return [Message(role=_LC_ROLES.get(item[0], item[0]), content=item[1])]
    if not isinstance(item, dict):
        return [Message(role=default_role, content=text_of(item))]
    role = item.get("role") or _LC_ROLES.get(str(item.get("type"))) or default_role
    text, block_calls, results = _content(item.get("content"))
    calls = _tool_calls(item.get("tool_calls"))
    extra = item.get("additional_kwargs")
    if not calls and isinstance(extra, dict):
        calls = _tool_calls(extra.get("tool_calls"))
    if not calls and isinstance(item.get("function_call"), dict):
        calls = _tool_calls([item["function_call"]])
    message = Message(
        role=str(role),
        content=text,
        tool_calls=calls + block_calls,
        tool_call_id=item.get("tool_call_id"),
        name=item.get("name") if isinstance(item.get("name"), str) else None,
    )
    if message.name is not None:  # the results of a named tool message keep its name
        results = [r if r.name else replace(r, name=message.name) for r in results]
    if results and text is None and not message.tool_calls:
        return results
    return [message, *results]


def _content(content: Any) -> tuple[str | None, tuple[ToolCall, ...], list[Message]]:
    """Message content as text, plus Anthropic ``tool_use`` calls and ``tool_result``s."""
    if content is None or isinstance(content, str):
        return content, (), []
    if not isinstance(content, list) or not all(isinstance(b, dict) for b in content):
        return text_of(content), (), []
    texts: list[str] = []
    calls: list[ToolCall] = []
    results: list[Message] = []
    for block in content:
        kind = block.get("type")
        if kind in _TEXT_BLOCKS or (kind is None and isinstance(block.get("text"), str)):
            texts.append(str(block.get("text") or ""))
        elif kind == "tool_use":
            calls.append(
                ToolCall(block.get("name"), parse_arguments(block.get("input")), block.get("id"))
            )
        elif kind == "tool_result":
            inner, _, _ = _content(block.get("content"))
            results.append(
                Message(role="tool", content=inner, tool_call_id=block.get("tool_use_id"))
            )
        else:
            texts.append(text_of(block) or "")
    return ("\n".join(texts) if texts else None), tuple(calls), results


def _tool_calls(items: Any) -> tuple[ToolCall, ...]:
    """OpenAI ``{id, function: {name, arguments}}`` or LangChain ``{name, args, id}`` calls."""
    return tool_calls(items) if isinstance(items, list) else ()


def output_choices(value: Any) -> tuple[list[Message], str | None]:
    """A generation's output as its choices (the first continues the run) and the first
    choice's finish reason when the output records one."""
    if isinstance(value, dict) and isinstance(value.get("choices"), list):
        choices = [c for c in value["choices"] if isinstance(c, dict)]
        messages = [m for c in choices for m in normalize_message(c.get("message"), "assistant")]
        return messages, choices[0].get("finish_reason") if choices else None
    if isinstance(value, dict) and isinstance(value.get("output"), list):  # Responses API
        return [_responses_output(value["output"])], None
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        return [normalize_message(v, "assistant")[0] for v in value], None
    if isinstance(value, dict) and _looks_like_message(value):
        return normalize_message(value, "assistant")[:1], None
    return [Message(role="assistant", content=text_of(value))], None


def _looks_like_message(value: dict[str, Any]) -> bool:
    return any(k in value for k in ("role", "content", "tool_calls", "function_call"))


def _responses_output(items: list[Any]) -> Message:
    texts, calls = [], []
    for item in items:
        if not isinstance(item, dict):
            continue
        if item.get("type") == "message":
            text, _, _ = _content(item.get("content"))
            if text is not None:
                texts.append(text)
        elif item.get("type") == "function_call":
            arguments = parse_arguments(item.get("arguments"))
            calls.append(ToolCall(item.get("name"), arguments, item.get("call_id")))
    return Message("assistant", "\n".join(texts) if texts else None, tuple(calls))


def model_params(raw: Any, issues: list[str]) -> dict[str, Any]:
    """``params`` from recorded model parameters, without the OpenAI wrapper's defaults."""
    values = loose_json(raw)
    if not isinstance(values, dict) or not values:
        return {}
    wrapper = values.keys() >= _WRAPPER_KEYS and bool(
        {"max_tokens", "max_completion_tokens"} & values.keys()
    )
    max_tokens_key = next(
        (k for k in ("max_tokens", "max_completion_tokens", "max_output_tokens") if k in values),
        "max_tokens",
    )
    keys = {
        "temperature": "temperature",
        "top_p": "top_p",
        "top_k": "top_k",
        "max_tokens": max_tokens_key,
        "seed": "seed",
        "stop": "stop",
        "n": "n",
        "frequency_penalty": "frequency_penalty",
        "presence_penalty": "presence_penalty",
    }
    params: dict[str, Any] = {}
    defaulted: list[str] = []
    for key, source in keys.items():
        value = _number(values.get(source)) if key != "stop" else _stop(values.get(source))
        is_default = value is None or value == WRAPPER_DEFAULTS.get(key)
        if wrapper and key in WRAPPER_DEFAULTS and source in values and is_default:
            defaulted.append(f"{source}={json.dumps(values[source])}")
            value = None
        if key in ("max_tokens", "seed", "n") and isinstance(value, float):
            value = int(value) if math.isfinite(value) else None
        params[key] = value
    if defaulted:
        issues.append(
            f"model.parameters {', '.join(defaulted)} equal the defaults Langfuse's OpenAI "
            "wrapper records for parameters not sent; left out of params (raw value kept in "
            "attributes)"
        )
    return params


def _number(value: Any) -> float | None:
    """A parameter value as a number; ``"Infinity"`` (unbounded) as ``inf``."""
    if isinstance(value, bool) or value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return number if not math.isnan(number) else None


def _stop(value: Any) -> list[str] | None:
    value = loose_json(value)
    if isinstance(value, str):
        return [value]
    return [str(v) for v in value] if isinstance(value, list) else None


def usage(raw: Any) -> dict[str, int | None]:
    """Token counts from Langfuse usage details (OpenAI or Langfuse key vocabulary)."""
    if not isinstance(raw, dict):
        return {}
    prompt_details = raw.get("prompt_tokens_details")
    completion_details = raw.get("completion_tokens_details")
    prompt_details = prompt_details if isinstance(prompt_details, dict) else {}
    completion_details = completion_details if isinstance(completion_details, dict) else {}
    total = _int(raw, "total", "total_tokens")
    inputs = _int(raw, "input", "prompt_tokens", "input_tokens")
    outputs = _int(raw, "output", "completion_tokens", "output_tokens")
    if "input" in raw and total is not None and inputs is not None and outputs is not None:
        in_details = sum(_int(raw, k) or 0 for k in raw if k.startswith("input_"))
        out_details = sum(_int(raw, k) or 0 for k in raw if k.startswith("output_"))
        if inputs + outputs != total and inputs + in_details + outputs + out_details == total:
            inputs, outputs = inputs + in_details, outputs + out_details
    cache = _int(raw, "input_cached_tokens", "input_cache_read", "cache_read_input_tokens")
    reasoning = _int(raw, "output_reasoning_tokens", "output_reasoning", "reasoning_tokens")
    return {
        "input_tokens": inputs,
        "output_tokens": outputs,
        "cache_read_tokens": cache if cache is not None else _int(prompt_details, "cached_tokens"),
        "reasoning_tokens": reasoning
        if reasoning is not None
        else _int(completion_details, "reasoning_tokens"),
        "total_tokens": total,
    }


def _int(values: dict[str, Any], *keys: str) -> int | None:
    for key in keys:
        value = values.get(key)
        if value is None or isinstance(value, bool):
            continue
        try:
            return int(float(value))
        except (TypeError, ValueError, OverflowError):  # inf, or too large for a float
            continue
    return None


# --------------------------------------------------------------------------------------
# Tool observations
# --------------------------------------------------------------------------------------


def _map_tool(span: SpanFrame, attrs: Attrs, mapped: MappedSpan) -> None:
    mapped.tool_name = span.name
    call_id = metadata(span, attrs, "tool_call_id")
    value = content_value(span, attrs, INPUT, mapped, python_repr=True)
    if value is not _MISSING:
        mapped.tool_args = tool_arguments(value)
    raw = span.attributes.get(OUTPUT)
    value = content_value(span, attrs, OUTPUT, mapped)
    if value is not _MISSING:
        result, result_id = tool_result(value, raw)
        mapped.tool_result = result
        call_id = call_id or result_id
    mapped.tool_call_id = call_id if isinstance(call_id, str) and call_id else None


def tool_arguments(value: Any) -> Arguments:
    """Tool input as arguments: ``@observe``'s ``{"args": [...], "kwargs": {...}}`` → the
    kwargs with positional values as ``arg0``, ``arg1``, …; a dict as it is; text (not JSON
    nor a Python-repr literal) as the raw text."""
    if isinstance(value, dict) and set(value) == {"args", "kwargs"}:
        args = value["args"] if isinstance(value["args"], list) else [value["args"]]
        kwargs = value["kwargs"] if isinstance(value["kwargs"], dict) else {}
        return {**{f"arg{i}": v for i, v in enumerate(args)}, **kwargs}
    return parse_arguments(value)


def tool_result(value: Any, raw: Any) -> tuple[str | None, str | None]:
    """The tool's result text and, for a LangChain ToolMessage dict, its call id. Text is
    kept exactly as recorded (a JSON result string is not re-serialized)."""
    if (
        isinstance(value, dict)
        and "content" in value
        and ("tool_call_id" in value or value.get("type") == "tool")
    ):
        call_id = value.get("tool_call_id")
        return text_of(value.get("content")), call_id if isinstance(call_id, str) else None
    if isinstance(raw, str):
        return raw, None
    return text_of(value), None
