"""Static and recorded policies: no model, no real tool."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Mapping

from otelcar.messages import Message
from otelcar.policies.base import Decision, DecisionRequest, PolicyError, ToolRequest


class StaticLLMPolicy:
    """Answers with the given messages in turn (cycling), whatever the context."""

    def __init__(self, messages: Iterable[Message | str], *, name: str = "static") -> None:
        items = [m if isinstance(m, Message) else Message("assistant", m) for m in messages]
        if not items:
            raise PolicyError("a static policy needs at least one message")
        self._cycle = itertools.cycle(items)
        self.name = name
        self.max_concurrency = 64

    async def decide(self, request: DecisionRequest) -> Decision:
        return Decision(next(self._cycle), policy=self.name)


class StaticToolPolicy:
    """Answers tool calls from a table ``{tool name: result}`` (``"*"``: any tool)."""

    def __init__(self, results: Mapping[str, str], *, name: str = "mock") -> None:
        self.results = dict(results)
        self.name = name
        self.max_concurrency = 64

    async def run(self, request: ToolRequest) -> str:
        if request.name in self.results:
            return self.results[request.name]
        if "*" in self.results:
            return self.results["*"]
        raise PolicyError(f"mock tool policy has no result for {request.name!r}")


class RecordedOnlyToolPolicy:
    """Refuses every call the recording cannot serve: the rollout fails with the reason.

    This is the default tool policy, so a diverged timeline never silently invents results.
    """

    name = "recorded"
    max_concurrency = 64

    async def run(self, request: ToolRequest) -> str:
        arguments = json.dumps(request.arguments, ensure_ascii=False, sort_keys=True)
        raise PolicyError(
            f"tool {request.name!r} was called with arguments {arguments} that the recording "
            "does not contain, and no tool policy is registered for it (register "
            f"'tool:{request.name}' or 'tool:*')"
        )
