"""An LLM-simulated tool: an LLM policy plays the environment for calls the recording lacks.

The simulator is shown the tool's name, the new arguments and the recorded examples of the
same tool (arguments → result), and asked for the result only. Its answer is the observation.
"""

from __future__ import annotations

import json
from typing import Any

from otelcar.messages import Arguments, Message
from otelcar.policies.base import DecisionRequest, LLMPolicy, PolicyError, ToolRequest

PROMPT = (
    "You simulate the tool `{name}` of an software agent's environment. Given the call's "
    "arguments, answer with exactly what the tool would return, nothing else. Recorded calls "
    "of this tool and their results:\n{examples}\n"
)


class SimulatedToolPolicy:
    """A tool policy backed by an LLM policy."""

    def __init__(
        self,
        llm: LLMPolicy,
        *,
        examples: dict[str, list[tuple[Arguments, str]]] | None = None,
        name: str | None = None,
        max_examples: int = 5,
    ) -> None:
        self.llm = llm
        self.examples = examples or {}
        self.name = name or f"simulated:{llm.name}"
        self.max_concurrency = llm.max_concurrency
        self.max_examples = max_examples

    def with_examples(
        self, examples: dict[str, list[tuple[Arguments, str]]]
    ) -> SimulatedToolPolicy:
        return SimulatedToolPolicy(
            self.llm, examples=examples, name=self.name, max_examples=self.max_examples
        )

    async def run(self, request: ToolRequest) -> str:
        shown = self.examples.get(request.name, [])[: self.max_examples]
        lines = "\n".join(f"- arguments {_dump(a)} → {r}" for a, r in shown) or "- (none)"
        messages = (
            Message("system", PROMPT.format(name=request.name, examples=lines)),
            Message("user", f"arguments {_dump(request.arguments)}"),
        )
        decision = await self.llm.decide(
            DecisionRequest(
                messages=messages,
                tools=None,
                params={"max_tokens": 512},
                model=None,
                seed=request.seed,
                step=request.step,
            )
        )
        if decision.message.content is None:
            raise PolicyError(f"{self.name} gave no text for tool {request.name!r}")
        return decision.message.content


def _dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)
