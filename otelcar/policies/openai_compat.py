"""OpenAI-compatible chat policy: OpenAI, Ollama, vLLM, llama.cpp server, LM Studio, …

Sends the rebuilt context as chat messages with the recorded tools and sampling parameters
(overridable), passes the rollout's ``seed``, parses tool calls, and retries transient
failures (connection errors, timeouts, 429, 5xx) with exponential backoff.

Fail fast: until the server has answered once, a connection it refuses or cannot open within
``connect_timeout_s`` (or a first answer that times out) is retried only ``first_call_retries``
times and then raises :class:`~otelcar.policies.base.PolicyUnavailable`, which stops the whole
command within seconds; after a first answer the same errors are transient and get the full
``max_retries``.

Message mapping: ``system``/``user``/``assistant``/``tool`` pass through (an assistant's
missing text is sent as ``""``: some servers reject ``null``); in multi-agent contexts the
deciding agent's own messages become ``assistant`` and every other participant's become
``user`` messages prefixed with ``[name]``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from typing import Any

from otelcar.messages import Message, ToolCall, parse_arguments
from otelcar.policies.base import Decision, DecisionRequest, PolicyError, PolicyUnavailable

log = logging.getLogger("otelcar.policies")
STANDARD_ROLES = ("system", "user", "assistant", "tool", "developer")
SAMPLING_KEYS = ("top_p", "max_tokens", "stop", "frequency_penalty", "presence_penalty")


def to_openai_messages(
    messages: tuple[Message, ...] | list[Message], agent: str | None = None
) -> list[dict[str, Any]]:
    """Normalized messages as OpenAI chat-completions messages."""
    out: list[dict[str, Any]] = []
    for message in messages:
        role = message.role
        if role not in STANDARD_ROLES:
            if agent is not None and role == agent:
                role = "assistant"
            else:
                out.append({"role": "user", "content": f"[{role}] {message.content or ''}"})
                continue
        item: dict[str, Any] = {"role": role, "content": message.content or ""}
        if role == "assistant" and message.tool_calls:
            item["tool_calls"] = [
                {
                    "id": call.id or f"call_{index}",
                    "type": "function",
                    "function": {
                        "name": call.name,
                        "arguments": call.arguments
                        if isinstance(call.arguments, str)
                        else json.dumps(call.arguments or {}, ensure_ascii=False),
                    },
                }
                for index, call in enumerate(message.tool_calls)
            ]
        if role == "tool":
            item["tool_call_id"] = message.tool_call_id or ""
        if message.name and role in ("user", "assistant"):
            item["name"] = message.name
        out.append(item)
    return out


def to_openai_tools(tools: tuple[dict[str, Any], ...] | None) -> list[dict[str, Any]] | None:
    if not tools:
        return None
    return [
        {
            "type": "function",
            "function": {
                key: value
                for key, value in (
                    ("name", tool.get("name")),
                    ("description", tool.get("description")),
                    ("parameters", tool.get("parameters")),
                )
                if value is not None
            },
        }
        for tool in tools
    ]


def from_openai_message(message: Any) -> Message:
    """An OpenAI SDK (or dict) assistant message as a normalized message."""
    data = message if isinstance(message, dict) else message.model_dump()
    calls = tuple(
        ToolCall(
            name=(call.get("function") or {}).get("name"),
            arguments=parse_arguments((call.get("function") or {}).get("arguments")),
            id=call.get("id"),
        )
        for call in data.get("tool_calls") or ()
    )
    return Message(role="assistant", content=data.get("content"), tool_calls=calls)


class OpenAICompatiblePolicy:
    """LLM policy for any OpenAI-compatible chat-completions server."""

    def __init__(
        self,
        *,
        base_url: str | None = None,
        model: str | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        temperature: float | None = None,
        sampling_temperature: float = 1.0,
        timeout_s: float = 120.0,
        connect_timeout_s: float = 5.0,
        max_retries: int = 4,
        first_call_retries: int = 1,
        max_concurrency: int = 4,
        tool_choice: Any = None,
        extra_body: dict[str, Any] | None = None,
        max_tokens: int | None = None,
        name: str | None = None,
    ) -> None:
        self.base_url = base_url
        self.model = model
        self.api_key_env = api_key_env
        self.temperature = temperature
        self.sampling_temperature = sampling_temperature
        self.timeout_s = timeout_s
        self.connect_timeout_s = connect_timeout_s
        self.max_retries = max_retries
        self.first_call_retries = first_call_retries
        self.max_concurrency = max_concurrency
        self.tool_choice = tool_choice
        self.extra_body = extra_body or {}
        self.max_tokens = max_tokens  # overrides the recorded max_tokens when set
        self.name = name or f"openai:{model or 'recorded-model'}"
        self._client: Any = None
        self._client_loop: Any = None
        self._warned_zero = False
        self._answered = False  # has the server answered once (in this process)?

    def __getstate__(self) -> dict[str, Any]:
        """Picklable (for Ray workers): the client is not sent; each process makes its own."""
        state = self.__dict__.copy()
        state["_client"] = state["_client_loop"] = None
        return state

    def _get_client(self) -> Any:
        loop = asyncio.get_running_loop()
        if self._client is not None and self._client_loop is not loop:
            self._client = None  # an async client belongs to the event loop that made it
        if self._client is None:
            self._client_loop = loop
            try:
                import openai
            except ImportError:
                raise PolicyError(
                    "the openai package is required for OpenAI-compatible "
                    "policies (pip install openai)"
                ) from None
            import httpx

            self._client = openai.AsyncOpenAI(
                base_url=self.base_url,
                api_key=os.environ.get(self.api_key_env) or "not-needed",
                max_retries=0,
                timeout=httpx.Timeout(
                    self.timeout_s, connect=min(self.connect_timeout_s, self.timeout_s)
                ),
            )
        return self._client

    def request_body(self, request: DecisionRequest) -> dict[str, Any]:
        """The chat-completions request sent for ``request`` (also used by tests)."""
        body: dict[str, Any] = {
            "model": self.model or request.model or "default",
            "messages": to_openai_messages(request.messages, request.agent),
            "seed": request.seed,
            "temperature": self._temperature(request),
        }
        for key in SAMPLING_KEYS:
            if request.params.get(key) is not None:
                body[key] = request.params[key]
        if self.max_tokens is not None:
            body["max_tokens"] = self.max_tokens
        tools = to_openai_tools(request.tools)
        if tools:
            body["tools"] = tools
            # the agent's declared tool choice for this decision, else the policy's option
            choice = request.tool_choice if request.tool_choice is not None else self.tool_choice
            if choice is not None:
                body["tool_choice"] = choice
        return body

    def sent_temperature(self, request: DecisionRequest) -> float:
        """The temperature sent for ``request``: the policy's own when set; else the
        request's for a step that is not replayed (the caller's choice); else the recorded
        one, the sampling temperature where none was recorded or it was 0 (which would
        repeat the recorded action)."""
        if self.temperature is not None:
            return self.temperature
        recorded = request.params.get("temperature")
        if request.step is None and recorded is not None:
            return float(recorded)
        if recorded is None or recorded == 0:
            return self.sampling_temperature
        return float(recorded)

    def _temperature(self, request: DecisionRequest) -> float:
        """:meth:`sent_temperature`, warning once when a step recorded at 0 is resampled."""
        recorded = request.params.get("temperature")
        resampled_zero = self.temperature is None and request.step is not None and recorded == 0
        if resampled_zero and not self._warned_zero:
            log.warning(
                "step %s was recorded at temperature 0: resampling it at the recorded "
                "temperature would repeat it; using the policy's sampling temperature %s",
                request.step,
                self.sampling_temperature,
            )
            self._warned_zero = True
        return self.sent_temperature(request)

    async def decide(self, request: DecisionRequest) -> Decision:
        import httpx
        import openai

        client = self._get_client()
        body = {**self.request_body(request), **(self.extra_body or {})}
        delay = 0.5
        for attempt in range(self.max_retries + 1):
            try:
                # The client's own transport (timeouts, error types, headers), without its
                # typed request transform and response models: the body is built here and the
                # answer read as JSON, about 1 ms less per call (benchmarks/live_replay.py).
                response = await client.post("/chat/completions", body=body, cast_to=httpx.Response)
                break
            except openai.APIConnectionError as exc:  # refused, unreachable, timed out
                if not self._answered and attempt >= self.first_call_retries:
                    raise PolicyUnavailable(
                        f"{self.name}: the server at {self.base_url or 'the default URL'} "
                        f"cannot be reached ({_reason(exc)}; {attempt + 1} attempts, no "
                        "answer yet): is it running?"
                    ) from None
                if attempt == self.max_retries:
                    raise PolicyError(
                        f"{self.name} at {self.base_url}: {_reason(exc)} "
                        f"(after {attempt + 1} attempts)"
                    ) from None
                await asyncio.sleep(delay)
                delay *= 2
            except (openai.RateLimitError, openai.InternalServerError) as exc:
                if attempt == self.max_retries:
                    raise PolicyError(
                        f"{self.name} at {self.base_url}: {exc} (after {attempt + 1} attempts)"
                    ) from None
                await asyncio.sleep(delay)
                delay *= 2
            except openai.APIError as exc:
                raise PolicyError(
                    f"{self.name} at {self.base_url} refused the request: {exc}"
                ) from None
        self._answered = True
        try:
            data = json.loads(response.content)
        except ValueError:
            raise PolicyError(f"{self.name} answered with a body that is not JSON") from None
        choices = data.get("choices") if isinstance(data, dict) else None
        if not choices or not isinstance(choices[0], dict):
            raise PolicyError(f"{self.name} returned no choices")
        usage = data.get("usage") or {}
        return Decision(
            from_openai_message(choices[0].get("message") or {}),
            input_tokens=usage.get("prompt_tokens") or 0,
            output_tokens=usage.get("completion_tokens") or 0,
            policy=self.name,
            raw={"id": data.get("id"), "model": data.get("model")},
        )


def _reason(exc: Exception) -> str:
    """An OpenAI client connection error with its cause: "Connection error. (All connection
    attempts failed)"."""
    cause = exc.__cause__ or exc.__context__
    detail = str(cause) if cause is not None else ""
    return f"{exc} ({detail})" if detail and detail not in str(exc) else str(exc)
