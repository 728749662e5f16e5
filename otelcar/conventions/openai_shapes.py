"""OpenAI's request and response shapes, as dialects that log them whole record them.

Several producers log the OpenAI chat request and reply objects as they are (Braintrust's
``braintrust.*`` fields, LiteLLM's ``raw_gen_ai_request`` span): the messages list, request
parameters beside it, the ``choices`` list, the ``usage`` object. One reading of each, for
every mapper.
"""

from __future__ import annotations

import json
from typing import Any

from otelcar.conventions.base import MappedSpan
from otelcar.conventions.genai import messages_from_any, normalize_finish_reason

#: ``params`` key → the request keys that set it, first present wins.
REQUEST_PARAMS: dict[str, tuple[str, ...]] = {
    "temperature": ("temperature",),
    "top_p": ("top_p",),
    "top_k": ("top_k",),
    "max_tokens": ("max_tokens", "max_completion_tokens", "max_output_tokens"),
    "seed": ("seed",),
    "stop": ("stop",),
    "n": ("n",),
    "frequency_penalty": ("frequency_penalty",),
    "presence_penalty": ("presence_penalty",),
}
_INT_PARAMS = frozenset({"max_tokens", "seed", "n"})


def tool_choice_text(value: Any) -> str | None:
    """A recorded tool choice as the steps table keeps it: ``auto``, ``none`` or ``required``,
    or the canonical JSON of OpenAI's named form (``{"type": "function", "function": {"name":
    …}}``); ``None`` when absent or in no known form. Reads OpenAI's forms (strings, a named
    function, the legacy ``function_call``), Anthropic's (``{"type": "auto" | "any" | "none" |
    "tool", "name"}``) and the Vercel AI SDK's (``{"type": …, "toolName"}``), given as
    objects or as JSON text."""
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("{"):
            try:
                return tool_choice_text(json.loads(text))
            except ValueError:
                return None
        return _CHOICES.get(text.lower())
    if not isinstance(value, dict):
        return None
    kind = value.get("type")
    function = value.get("function")
    name = (
        (function.get("name") if isinstance(function, dict) else None)
        or value.get("name")
        or value.get("toolName")
    )
    if kind in ("function", "tool") or (kind is None and name):
        if not isinstance(name, str) or not name:
            return None
        return json.dumps(
            {"type": "function", "function": {"name": name}}, sort_keys=True, separators=(",", ":")
        )
    return _CHOICES.get(str(kind).lower()) if kind is not None else None


_CHOICES = {"auto": "auto", "none": "none", "required": "required", "any": "required"}


def request_params(request: dict[str, Any]) -> dict[str, Any]:
    """``params`` from an OpenAI request's keys (absent, null or ill-typed → ``None``)."""
    params: dict[str, Any] = {}
    for key, names in REQUEST_PARAMS.items():
        value = next((request[k] for k in names if request.get(k) is not None), None)
        params[key] = _param(key, value)
    return params


def _param(key: str, value: Any) -> Any:
    if value is None or isinstance(value, bool):
        return None
    if key == "stop":
        if isinstance(value, str):
            return [value]
        return [str(v) for v in value] if isinstance(value, list) else None
    if not isinstance(value, int | float):
        return None
    return int(value) if key in _INT_PARAMS else float(value)


def count(value: Any) -> int | None:
    """A token count: an integer (a float is truncated), anything else ``None``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return int(value)


def usage_object(usage: Any) -> dict[str, int | None]:
    """``usage`` from OpenAI's usage object (``prompt_tokens_details.cached_tokens``,
    ``completion_tokens_details.reasoning_tokens`` included)."""
    if not isinstance(usage, dict):
        return {}
    prompt = usage.get("prompt_tokens_details")
    completion = usage.get("completion_tokens_details")
    prompt = prompt if isinstance(prompt, dict) else {}
    completion = completion if isinstance(completion, dict) else {}
    return {
        "input_tokens": count(usage.get("prompt_tokens")),
        "output_tokens": count(usage.get("completion_tokens")),
        "cache_read_tokens": count(prompt.get("cached_tokens")),
        "reasoning_tokens": count(completion.get("reasoning_tokens")),
        "total_tokens": count(usage.get("total_tokens")),
    }


def read_reply(value: Any, mapped: MappedSpan, where: str) -> bool:
    """Set ``mapped``'s output, alternates, choice count and finish reason from a reply in
    any shape producers log: a list of OpenAI choices (``{"message", "finish_reason"}``), a
    list of messages, one message, or text. ``False`` (and an issue naming ``where``) when
    ``value`` is none of these."""
    reasons: list[str | None] = []
    choice_list = isinstance(value, list) and bool(value)
    if choice_list and all(
        isinstance(v, dict) and isinstance(v.get("message"), dict) for v in value
    ):
        reasons = [normalize_finish_reason(v.get("finish_reason")) for v in value]
        value = [v["message"] for v in value]
    if isinstance(value, dict) and "role" in value:
        value = [value]
    choices = messages_from_any(value, mapped.issues, "output")
    if not choices:
        mapped.issues.append(f"{where} is not a reply the mapper knows; not read")
        return False
    mapped.output = choices[0]
    mapped.alternates = list(choices[1:])
    mapped.n_choices = len(choices)
    reason = next((r for r in reasons if r), None)
    if reason is None and mapped.output.tool_calls:
        reason = "tool_call"
    mapped.finish_reason = mapped.finish_reason or reason
    return True
