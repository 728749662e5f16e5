"""Named seed spaces: each stage of an estimator draws its own randomness.

Rollouts and re-decisions are seeded (``derive_seed(seed, r, decision)``) and requests are
cached by (request, seed), so two stages that use the same base seed get the *same draws*:
validating a fix on the samples that chose it is then a cache hit, not a test. A
:class:`SeedSpace` gives every stage its own base seed, derived from the user's seed and the
stage's name, so sharing draws between stages is a declared choice (the same name), never an
accident of the cache. Every stage name is declared in :data:`STAGES` with what draws there;
an undeclared name is an error, so the list cannot fall behind the code.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

#: Every stage that draws, and what it draws.
STAGES: dict[str, str] = {
    "attribute": "the curve's rollouts (the user's seed itself); attribute's policy check "
    "re-decides the harmful step on these seeds, so the re-decisions the curve's P_{h-1} "
    "rollouts made there are served from the cache",
    "why": "why's re-decisions (the user's seed itself)",
    "why.recheck": "why's recheck of a cause with the other fill, and its own base arm (the "
    "cause was chosen on why's draws)",
    "culprit": "the attribution why/fix --step culprit run to choose the step, so why's "
    "samples do not reuse the rollouts that chose it",
    "bisect.confirm": "the bisection's confirmation of the jump it chose",
    "refute": "the culprit's refutation: its recheck and its placebo share the held arm; "
    "attribute's policy check at the culprit re-decides on these seeds too, so the "
    "re-decisions the recheck's P_{k-1} rollouts made there are served from the cache",
    "fix.validate": "decision-level validation of every fix candidate, with its own base arm",
    "fix.forward": "forward rollouts of a fix, fixed and unfixed",
    "pairs": "the fresh rollouts preference pairs are tested on (attribution/pairs.py)",
    "policy.check": "the re-decisions that test whether the policy is the agent that ran "
    "(attribution/faithfulness.py)",
}

#: Stages that draw with the user's seed itself (their results are what earlier versions gave).
ROOT_STAGES = frozenset({"why", "attribute"})


@dataclass(frozen=True)
class SeedSpace:
    """The user's ``seed`` and the stages' seeds derived from it."""

    seed: int = 0

    def stage(self, name: str) -> int:
        """The base seed of stage ``name``: the same name, the same seed; different names,
        independent seeds (64-bit, from SHA-256). Raises :class:`ValueError` for a name not
        in :data:`STAGES`."""
        if name not in STAGES:
            raise ValueError(f"seed stage {name!r} is not declared in STAGES ({sorted(STAGES)})")
        if name in ROOT_STAGES:
            return self.seed
        digest = hashlib.sha256(f"otelcar-stage:{self.seed}:{name}".encode()).digest()
        return int.from_bytes(digest[:8], "big") >> 1
