"""``[policies.llm] type = "acme-canned"``: re-decides a step with one of a few canned answers.

```toml
[policies.llm]
type = "acme-canned"
answers = ["OK.", "Your order A-1 has shipped and arrives on Friday."]
```

The answer is drawn with the request's seed, so rollouts are reproducible (the same seed, the
same answer) and vary across rollouts, as a sampled model's would. No model, no network: a
policy for demos and tests of the harness.
"""

from __future__ import annotations

import random
from typing import Any

from otelcar.messages import Message
from otelcar.policies.base import Decision, DecisionRequest, PolicyError


class CannedPolicy:
    """Answers with ``answers[k]``, ``k`` drawn from the request's seed."""

    max_concurrency = 64

    def __init__(self, answers: list[str], *, name: str = "acme-canned") -> None:
        if not answers or not all(isinstance(a, str) for a in answers):
            raise PolicyError("acme-canned: 'answers' must be a non-empty list of strings")
        self.answers = list(answers)
        self.name = name

    async def decide(self, request: DecisionRequest) -> Decision:
        answer = random.Random(request.seed).choice(self.answers)
        return Decision(Message("assistant", answer), policy=self.name)


def canned_policy(options: dict[str, Any], registry: Any, role: str) -> CannedPolicy:
    """The policy factory: ``options`` is the ``[policies.KEY]`` table less ``type``."""
    del registry, role
    unknown = set(options) - {"answers", "name"}
    if unknown:
        raise PolicyError(f"acme-canned: unknown option(s) {', '.join(sorted(unknown))}")
    return CannedPolicy(options.get("answers") or [], name=options.get("name", "acme-canned"))
