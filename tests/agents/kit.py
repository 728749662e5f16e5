"""What the three agents share, as a user's helper module would: one model call that appends
the assistant message and runs its tool calls. ``hooks`` is how :mod:`.run` traces the agent's
own spans (an agent's turn, a tool call) with the chosen instrumentation; the agents do not
know which."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from typing import Any

MODEL = "scripted-model"


class Hooks:
    """No tracing of the agent's own spans (the instrumented client still traces its calls)."""

    @contextlib.contextmanager
    def agent(self, name: str) -> Iterator[None]:
        yield

    def tool(self, name: str, call_id: str, arguments: dict[str, Any], run: Callable[[], str]):
        return run()


def function(
    tool: str, description: str, properties: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A tool definition in OpenAI's format; ``properties``: argument → JSON schema (one
    mapping, so an argument may be called ``name`` or ``tool``)."""
    properties = properties or {}
    return {
        "type": "function",
        "function": {
            "name": tool,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": properties,
                "required": list(properties),
            },
        },
    }


def turn(
    client: Any,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None,
    implementations: dict[str, Callable[..., str]],
    hooks: Hooks,
    *,
    seed: int,
    tool_choice: str | None = None,
) -> Any:
    """One model call with ``tools`` (``None``: none offered); appends the answer and the
    results of its tool calls to ``messages``; returns the assistant message."""
    extra: dict[str, Any] = {}
    if tools:
        extra["tools"] = tools
        if tool_choice:
            extra["tool_choice"] = tool_choice
    response = client.chat.completions.create(
        model=MODEL, messages=messages, seed=seed, temperature=0.8, **extra
    )
    message = response.choices[0].message
    messages.append(
        {
            "role": "assistant",
            "content": message.content or "",
            **(
                {
                    "tool_calls": [
                        {
                            "id": c.id,
                            "type": "function",
                            "function": {
                                "name": c.function.name,
                                "arguments": c.function.arguments,
                            },
                        }
                        for c in message.tool_calls
                    ]
                }
                if message.tool_calls
                else {}
            ),
        }
    )
    for c in message.tool_calls or ():
        arguments = json.loads(c.function.arguments or "{}")
        implementation = implementations[c.function.name]
        result = hooks.tool(
            c.function.name, c.id, arguments, lambda f=implementation, a=arguments: f(**a)
        )
        messages.append({"role": "tool", "tool_call_id": c.id, "content": result})
    return message
