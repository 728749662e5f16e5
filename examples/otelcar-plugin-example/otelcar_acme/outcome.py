"""``[outcome] type = "answer_length"``: the run failed when its final answer is too short.

```toml
[outcome]
type = "answer_length"
min_chars = 20        # fails below this many characters (required)
```

A run that ends without a final answer (its last model output asks for a tool, or was not
captured) fails too. It judges a run from its events, as the built-in outcomes do
(:func:`otelcar.outcome.events_of`), so judging a rollout builds no table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import polars as pl

from otelcar.outcome import OutcomeError, RunEvent, events_of, final_answer


@dataclass(frozen=True)
class AnswerLength:
    """Fails when the final answer has fewer than ``min_chars`` characters (or is missing)."""

    min_chars: int
    judges_events = True

    def describe(self) -> str:
        return f"the final answer is shorter than {self.min_chars} characters"

    async def failed(self, steps: pl.DataFrame) -> bool:
        return await self.failed_on(events_of(steps))

    async def failed_on(self, events: list[RunEvent]) -> bool:
        answer = final_answer(events)
        return answer is None or len(answer.strip()) < self.min_chars


def answer_length(options: dict[str, Any], registry: Any) -> AnswerLength:
    """The outcome factory: ``options`` is the ``[outcome]`` table less ``type``."""
    del registry  # no policy needed
    unknown = set(options) - {"min_chars"}
    if unknown:
        raise OutcomeError(f"answer_length: unknown option(s) {', '.join(sorted(unknown))}")
    minimum = options.get("min_chars")
    if not isinstance(minimum, int) or isinstance(minimum, bool) or minimum < 1:
        raise OutcomeError("answer_length needs min_chars = a positive integer")
    return AnswerLength(minimum)
