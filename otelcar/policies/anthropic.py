"""Anthropic Messages API policy (``type = "anthropic"``), over plain HTTP (no SDK needed).

Mapping from normalized messages: system messages become the ``system`` parameter; assistant
tool calls become ``tool_use`` blocks; tool messages become ``tool_result`` blocks in a user
turn; consecutive turns of the same role are merged (the API requires alternation); tools
become ``{name, description, input_schema}``. The API has no ``seed``: reproducibility then
rests on the request cache, and rollouts of the same request differ only through sampling.
Transient failures (connection errors, 429, 5xx, 529 overloaded) are retried with backoff.
"""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any

from otelcar.messages import Message, ToolCall
from otelcar.policies.base import Decision, DecisionRequest, PolicyError, PolicyUnavailable

API_VERSION = "2023-06-01"
RETRY_STATUSES = {429, 500, 502, 503, 504, 529}


def to_anthropic(
    messages: tuple[Message, ...] | list[Message], agent: str | None = None
) -> tuple[str | None, list[dict[str, Any]]]:
    """``(system, messages)`` for the Messages API."""
    system: list[str] = []
    turns: list[dict[str, Any]] = []

    def add(role: str, block: dict[str, Any]) -> None:
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].append(block)
        else:
            turns.append({"role": role, "content": [block]})

    for message in messages:
        if message.role == "system":
            if message.content:
                system.append(message.content)
        elif message.role == "tool":
            add(
                "user",
                {
                    "type": "tool_result",
                    "tool_use_id": message.tool_call_id or "",
                    "content": message.content or "",
                },
            )
        elif message.role == "assistant" or (agent is not None and message.role == agent):
            if message.content:
                add("assistant", {"type": "text", "text": message.content})
            for index, call in enumerate(message.tool_calls):
                arguments = call.arguments if isinstance(call.arguments, dict) else {}
                add(
                    "assistant",
                    {
                        "type": "tool_use",
                        "id": call.id or f"toolu_{index}",
                        "name": call.name,
                        "input": arguments,
                    },
                )
        else:
            prefix = "" if message.role == "user" else f"[{message.role}] "
            add("user", {"type": "text", "text": prefix + (message.content or "")})
    return ("\n\n".join(system) or None), turns


def from_anthropic(response: dict[str, Any]) -> Message:
    texts, calls = [], []
    for block in response.get("content") or ():
        if block.get("type") == "text":
            texts.append(block.get("text", ""))
        elif block.get("type") == "tool_use":
            calls.append(ToolCall(block.get("name"), block.get("input"), block.get("id")))
    return Message("assistant", "\n".join(texts) if texts else None, tuple(calls))


class AnthropicPolicy:
    """LLM policy for Anthropic's Messages API (or a compatible endpoint)."""

    def __init__(
        self,
        *,
        model: str,
        base_url: str = "https://api.anthropic.com",
        api_key_env: str = "ANTHROPIC_API_KEY",
        temperature: float | None = None,
        sampling_temperature: float = 1.0,
        max_tokens: int = 1024,
        timeout_s: float = 120.0,
        connect_timeout_s: float = 5.0,
        max_retries: int = 4,
        first_call_retries: int = 1,
        max_concurrency: int = 4,
        name: str | None = None,
    ) -> None:
        self.model = model
        self.base_url = base_url.rstrip("/")
        self.api_key_env = api_key_env
        self.temperature = temperature
        self.sampling_temperature = sampling_temperature
        self.max_tokens = max_tokens
        self.timeout_s = timeout_s
        self.connect_timeout_s = connect_timeout_s
        self.max_retries = max_retries
        self.first_call_retries = first_call_retries
        self.max_concurrency = max_concurrency
        self.name = name or f"anthropic:{model}"
        self._answered = False  # has the server answered once (in this process)?

    def sent_temperature(self, request: DecisionRequest) -> float:
        """The temperature sent for ``request``: the policy's own when set, else the recorded
        one, the sampling temperature where none was recorded or it was 0."""
        if self.temperature is not None:
            return self.temperature
        recorded = request.params.get("temperature")
        return self.sampling_temperature if not recorded else float(recorded)

    def request_body(self, request: DecisionRequest) -> dict[str, Any]:
        system, messages = to_anthropic(request.messages, request.agent)
        temperature = self.sent_temperature(request)
        body: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "temperature": temperature,
            "max_tokens": request.params.get("max_tokens") or self.max_tokens,
        }
        if system:
            body["system"] = system
        if request.params.get("top_p") is not None:
            body["top_p"] = request.params["top_p"]
        if request.params.get("stop"):
            body["stop_sequences"] = list(request.params["stop"])
        if request.tools:
            body["tools"] = [
                {
                    "name": t.get("name"),
                    "description": t.get("description") or "",
                    "input_schema": t.get("parameters") or {"type": "object"},
                }
                for t in request.tools
            ]
            choice = anthropic_tool_choice(request.tool_choice)
            if choice is not None:
                body["tool_choice"] = choice
        return body

    async def decide(self, request: DecisionRequest) -> Decision:
        import httpx

        body = self.request_body(request)
        headers = {
            "x-api-key": os.environ.get(self.api_key_env, ""),
            "anthropic-version": API_VERSION,
            "content-type": "application/json",
        }
        delay = 0.5
        timeout = httpx.Timeout(self.timeout_s, connect=min(self.connect_timeout_s, self.timeout_s))
        async with httpx.AsyncClient(timeout=timeout) as client:
            for attempt in range(self.max_retries + 1):
                try:
                    reply = await client.post(
                        f"{self.base_url}/v1/messages", headers=headers, content=json.dumps(body)
                    )
                except httpx.TransportError as exc:
                    if not self._answered and attempt >= self.first_call_retries:
                        raise PolicyUnavailable(
                            f"{self.name}: the server at {self.base_url} cannot be reached "
                            f"({type(exc).__name__}: {exc}; {attempt + 1} attempts, no answer "
                            "yet): is it running?"
                        ) from None
                    if attempt == self.max_retries:
                        raise PolicyError(
                            f"{self.name}: {exc} (after {attempt + 1} attempts)"
                        ) from None
                else:
                    if reply.status_code == 200:
                        break
                    if reply.status_code not in RETRY_STATUSES or attempt == self.max_retries:
                        raise PolicyError(
                            f"{self.name}: HTTP {reply.status_code}: {reply.text[:300]}"
                        )
                await asyncio.sleep(delay)
                delay *= 2
        self._answered = True
        data = reply.json()
        usage = data.get("usage") or {}
        return Decision(
            from_anthropic(data),
            input_tokens=usage.get("input_tokens", 0),
            output_tokens=usage.get("output_tokens", 0),
            policy=self.name,
            raw={"id": data.get("id"), "stop_reason": data.get("stop_reason")},
        )


def anthropic_tool_choice(choice: Any) -> dict[str, Any] | None:
    """A request's ``tool_choice`` (OpenAI's wire form) as the Messages API writes it
    (``auto``, ``any`` for ``required``, ``none``, ``{"type": "tool", "name": …}``);
    ``None``: not sent."""
    if choice is None:
        return None
    if isinstance(choice, dict):
        name = (choice.get("function") or {}).get("name") or choice.get("name")
        return {"type": "tool", "name": name}
    return {"type": {"required": "any"}.get(choice, choice)}
