"""The ``otelcar-gemma`` chat format: Gemma turns that keep every message, and seeded tool calls.

llama-cpp-python 0.3.36's built-in formats lose what an agent replay needs (measured, see
docs/local-model.md): ``gemma`` drops system and tool messages, every built-in drops tool
results and assistant tool calls, and ``chatml-function-calling`` ignores the request's
``seed``. This format, registered in the server process by :mod:`otelcar.model.llama_server`
(and in-process by :func:`otelcar.model.load_llama`), renders:

- system messages folded into the first user turn (as Gemma 3's own template does);
- the tools, when a request has them, as a short preamble: name, description, JSON schema;
- assistant tool calls as ``{"name": …, "arguments": {…}}`` lines in the model turn;
- tool results as user turns ``Result of <name>:`` followed by the content.

With tools (``tool_choice`` ``auto`` — the default —, ``required`` or a named function) the
completion is constrained by a grammar built from the tools' JSON schemas, so it always parses,
and comes back as OpenAI ``tool_calls`` (one call per decision); ``auto`` also allows
``{"content": …}``, returned as a plain answer. Every completion passes ``seed`` through, so the
same request and seed give the same output. Without tools (or ``tool_choice="none"``) requests go
to llama-cpp-python's generic handler on the same prompt (streaming, ``response_format``).
Each request evaluates its whole prompt (no reuse of the previous request's KV cache), which
is what makes the output independent of the requests before it.

The pure parts (:func:`render_prompt`, :func:`decision_schema`, :func:`parse_decision`) need
no llama-cpp-python; :func:`register` imports it.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

CHAT_FORMAT = "otelcar-gemma"
GRAMMAR_SAMPLER_ENV = "OTELCAR_GRAMMAR_SAMPLER"
START, END = "<start_of_turn>", "<end_of_turn>"
_SAMPLING_KEYS = (
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "typical_p",
    "max_tokens",
    "presence_penalty",
    "frequency_penalty",
    "repeat_penalty",
    "tfs_z",
    "mirostat_mode",
    "mirostat_tau",
    "mirostat_eta",
    "model",
    "logits_processor",
    "logit_bias",
)

Message = Mapping[str, Any]
Tool = Mapping[str, Any]


def render_prompt(
    messages: Sequence[Message], tools: Sequence[Tool] = (), *, auto: bool = True
) -> str:
    """The Gemma prompt for ``messages`` (OpenAI chat format), ending with an open model turn.

    ``tools`` (OpenAI ``{"type": "function", "function": {...}}`` items) are described at the
    start; ``auto`` says the model may also answer with ``{"content": …}``.
    """
    system = [_text(m.get("content")) for m in messages if m.get("role") in ("system", "developer")]
    preamble = "\n\n".join(part for part in [*system, _tools_preamble(tools, auto=auto)] if part)
    names = _call_names(messages)
    turns: list[tuple[str, str]] = []
    for message in messages:
        role = message.get("role")
        if role in ("system", "developer"):
            continue
        if role == "assistant":
            turns.append(("model", _assistant_text(message, json_answers=bool(tools))))
        elif role in ("tool", "function"):
            name = message.get("name") or names.get(str(message.get("tool_call_id")), "")
            label = f"Result of {name}:" if name else "Tool result:"
            turns.append(("user", f"{label}\n{_text(message.get('content'))}"))
        else:  # user, and any other speaker (a named agent) as a user turn
            turns.append(("user", _text(message.get("content"))))
    if preamble:
        if turns and turns[0][0] == "user":
            turns[0] = ("user", f"{preamble}\n\n{turns[0][1]}")
        else:
            turns.insert(0, ("user", preamble))
    body = "".join(f"{START}{role}\n{text}{END}\n" for role, text in turns)
    return f"{body}{START}model\n"


def decision_schema(tools: Sequence[Tool], tool_choice: Any) -> dict[str, Any]:
    """The JSON schema a tool-mode completion must satisfy.

    One alternative per allowed tool, ``{"name": <const>, "arguments": <its parameters>}``;
    ``tool_choice="auto"`` adds ``{"content": <string>}``. Raises ``ValueError`` for a named
    tool that is not among ``tools``.
    """
    functions = [_function(t) for t in tools]
    if isinstance(tool_choice, Mapping):
        wanted = _function(tool_choice).get("name")
        functions = [f for f in functions if f.get("name") == wanted]
        if not functions:
            raise ValueError(f"tool_choice names {wanted!r}, which is not among the tools")
    options: list[dict[str, Any]] = [
        {
            "type": "object",
            "properties": {
                "name": {"const": f["name"]},
                "arguments": f.get("parameters") or {"type": "object"},
            },
            "required": ["name", "arguments"],
            "additionalProperties": False,
        }
        for f in functions
    ]
    if tool_choice in (None, "auto"):
        options.append(
            {
                "type": "object",
                "properties": {"content": {"type": "string"}},
                "required": ["content"],
                "additionalProperties": False,
            }
        )
    return options[0] if len(options) == 1 else {"anyOf": options}


def parse_decision(text: str) -> dict[str, Any]:
    """An OpenAI assistant message from a tool-mode completion text.

    ``{"name", "arguments"}`` becomes one ``tool_calls`` item (``arguments`` as a JSON string,
    the id derived from the text, so a reproduced completion has the same id);
    ``{"content"}`` becomes a plain answer; anything else (a completion cut by ``max_tokens``)
    is returned as plain ``content`` unchanged.
    """
    try:
        value = json.loads(text)
    except ValueError:
        return {"role": "assistant", "content": text}
    if isinstance(value, dict) and isinstance(value.get("name"), str) and "arguments" in value:
        arguments = json.dumps(value["arguments"], ensure_ascii=False)
        digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:24]
        call = {
            "id": f"call_{digest}",
            "type": "function",
            "function": {"name": value["name"], "arguments": arguments},
        }
        return {"role": "assistant", "content": None, "tool_calls": [call]}
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        return {"role": "assistant", "content": value["content"]}
    return {"role": "assistant", "content": text}


def chat_handler(
    *,
    llama: Any,
    messages: list[Message],
    functions: list[Mapping[str, Any]] | None = None,
    function_call: Any = None,
    tools: list[Tool] | None = None,
    tool_choice: Any = None,
    stream: bool = False,
    stop: str | list[str] | None = None,
    seed: int | None = None,
    grammar: Any = None,
    **kwargs: Any,
) -> Any:
    """A llama-cpp-python chat completion handler for :data:`CHAT_FORMAT` (see module doc)."""
    if functions and not tools:  # the legacy spelling of tools
        tools = [{"type": "function", "function": f} for f in functions]
        if isinstance(function_call, Mapping):
            tool_choice = {"type": "function", "function": {"name": function_call.get("name")}}
        elif function_call is not None:
            tool_choice = function_call
    if not tools or tool_choice == "none":
        # Evaluate the whole prompt: the plain formatter tokenizes it itself.
        llama.reset()
        return _plain_handler()(
            llama=llama, messages=messages, stream=stream, stop=stop, seed=seed, grammar=grammar,
            **kwargs,
        )  # fmt: skip
    from llama_cpp import LogitsProcessorList, llama_grammar

    schema = decision_schema(tools, tool_choice)
    prompt = render_prompt(messages, tools, auto=tool_choice in (None, "auto"))
    stops = [stop] if isinstance(stop, str) else list(stop or [])
    tokens = llama.tokenize(prompt.encode("utf-8"), add_bos=True, special=True)
    keep_aligned_prefix(llama, tokens)
    sampling = {key: kwargs[key] for key in _SAMPLING_KEYS if kwargs.get(key) is not None}
    grammar_text = llama_grammar.json_schema_to_gbnf(json.dumps(schema))
    prefilter = _prefilter(llama, grammar_text, sampling)
    if prefilter is None:
        constraint: dict[str, Any] = {
            "grammar": llama_grammar.LlamaGrammar.from_string(grammar_text, verbose=False)
        }
    else:
        constraint = {"logits_processor": LogitsProcessorList([prefilter])}
    try:
        completion = llama.create_completion(
            prompt=tokens, stop=[*stops, END], seed=seed, stream=False, **sampling, **constraint
        )
    finally:
        if prefilter is not None:
            prefilter.close()
    choice = completion["choices"][0]
    message = parse_decision(choice["text"])
    finish = choice["finish_reason"]
    if message.get("tool_calls"):
        finish = "tool_calls"
    response = {
        "id": "chat" + completion["id"],
        "object": "chat.completion",
        "created": completion["created"],
        "model": completion["model"],
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish}],
        "usage": completion["usage"],
    }
    return _as_chunks(response) if stream else response


def grammar_sampler() -> str:
    """Which way tool-mode completions enforce their grammar: ``prefilter`` (the default,
    :mod:`otelcar.model.grammar_sampling`) or ``chain`` (llama-cpp-python's grammar-first
    chain; ``OTELCAR_GRAMMAR_SAMPLER=chain``, for comparisons and benchmarks)."""
    value = os.environ.get(GRAMMAR_SAMPLER_ENV, "prefilter").strip().lower() or "prefilter"
    if value not in ("prefilter", "chain"):
        raise ValueError(f"{GRAMMAR_SAMPLER_ENV}={value!r}: expected prefilter or chain")
    return value


def _prefilter(llama: Any, grammar_text: str, sampling: Mapping[str, Any]) -> Any:
    """A :class:`GrammarPrefilter` for these sampling options, or ``None`` where the chain's
    own grammar must do (the ``chain`` setting, mirostat, a caller's logits processor or
    logit bias)."""
    if grammar_sampler() == "chain":
        return None
    if sampling.get("mirostat_mode") or sampling.get("logits_processor"):
        return None
    if sampling.get("logit_bias"):
        return None
    from otelcar.model.grammar_sampling import GrammarPrefilter

    def option(name: str, default: float) -> float:
        value = sampling.get(name)
        return default if value is None else float(value)

    return GrammarPrefilter(
        llama,
        grammar_text,
        top_k=int(option("top_k", 40)),
        top_p=option("top_p", 0.95),
        min_p=option("min_p", 0.05),
        temperature=option("temperature", 0.8),
        repeat_penalty=option("repeat_penalty", 1.0),
        frequency_penalty=option("frequency_penalty", 0.0),
        presence_penalty=option("presence_penalty", 0.0),
    )


def keep_aligned_prefix(llama: Any, tokens: Sequence[int]) -> int:
    """Keep the part of the KV cache that the new prompt shares with the previous one, cut
    down to a multiple of ``llama.n_batch`` tokens (nothing when that is 0); returns it.

    llama.cpp evaluates a prompt in batches of ``n_batch`` tokens from where the cache ends,
    and a batch's numbers depend on where it starts. Reusing an arbitrary common prefix
    therefore changes the logits in the last bits (and, now and then, a sampled token), so
    the output would depend on the request before. Cut at a multiple of ``n_batch``, the
    remaining batches start exactly where a fresh evaluation's would, on identical cache
    contents: the output stays a function of (prompt, options, seed) while the shared
    prefix (system prompt, tools, earlier turns) is evaluated once
    (``tests/test_local_model.py`` checks both).
    """
    unit = max(1, int(llama.n_batch))
    common = 0
    for cached, new in zip(llama._input_ids, tokens[:-1], strict=False):
        if cached != new:
            break
        common += 1
    keep = common // unit * unit
    if keep == 0:
        llama.reset()
    else:
        llama.n_tokens = keep
    return keep


def _as_chunks(response: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """A finished tool-mode response as a stream: one delta with everything, then the end."""
    head = {k: response[k] for k in ("id", "created", "model")} | {
        "object": "chat.completion.chunk"
    }
    choice = response["choices"][0]
    delta = dict(choice["message"])
    if delta.get("tool_calls"):
        delta["tool_calls"] = [{"index": i, **c} for i, c in enumerate(delta["tool_calls"])]
    yield head | {
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": None}]
    }
    end = {"index": 0, "delta": {}, "logprobs": None, "finish_reason": choice["finish_reason"]}
    yield head | {"choices": [end]}


def register() -> None:
    """Register :data:`CHAT_FORMAT` with llama-cpp-python (idempotent)."""
    from llama_cpp import llama_chat_format

    llama_chat_format.LlamaChatCompletionHandlerRegistry().register_chat_completion_handler(
        CHAT_FORMAT, chat_handler, overwrite=True
    )


@functools.cache
def _plain_handler() -> Any:
    from llama_cpp import llama_chat_format

    def formatter(*, messages: list[Message], **_: Any) -> Any:
        return llama_chat_format.ChatFormatterResponse(prompt=render_prompt(messages), stop=END)

    return llama_chat_format.chat_formatter_to_chat_completion_handler(formatter)


def _function(tool: Mapping[str, Any]) -> Mapping[str, Any]:
    function = tool.get("function")
    return function if isinstance(function, Mapping) else tool


def _tools_preamble(tools: Sequence[Tool], *, auto: bool) -> str:
    if not tools:
        return ""
    lines = ["You can call these tools:"]
    for tool in tools:
        function = _function(tool)
        description = f": {function['description']}" if function.get("description") else ""
        schema = json.dumps(function.get("parameters") or {"type": "object"}, ensure_ascii=False)
        lines.append(f"- {function.get('name')}{description}. Arguments (JSON schema): {schema}")
    lines.append('To call a tool, reply with only {"name": <tool name>, "arguments": {...}}.')
    if auto:
        lines.append('To answer without a tool, reply with only {"content": <your answer>}.')
    return "\n".join(lines)


def _assistant_text(message: Message, *, json_answers: bool) -> str:
    parts: list[str] = []
    content = _text(message.get("content"))
    if content:
        parts.append(
            json.dumps({"content": content}, ensure_ascii=False) if json_answers else content
        )
    for call in _tool_calls(message):
        function = call.get("function") or {}
        arguments: Any = function.get("arguments")
        if isinstance(arguments, str):
            with contextlib.suppress(ValueError):  # unparseable arguments stay a string
                arguments = json.loads(arguments)
        parts.append(
            json.dumps({"name": function.get("name"), "arguments": arguments}, ensure_ascii=False)
        )
    return "\n".join(parts)


def _tool_calls(message: Message) -> Iterator[Mapping[str, Any]]:
    yield from message.get("tool_calls") or ()
    if message.get("function_call"):
        yield {"function": message["function_call"]}


def _call_names(messages: Sequence[Message]) -> dict[str, str]:
    names: dict[str, str] = {}
    for message in messages:
        for call in message.get("tool_calls") or ():
            names[str(call.get("id"))] = str((call.get("function") or {}).get("name", ""))
    return names


def _text(content: Any) -> str:
    """Message content as text: strings as is, OpenAI content parts joined, None as ""."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            part.get("text", "") if isinstance(part, Mapping) else str(part) for part in content
        )
    return str(content)
