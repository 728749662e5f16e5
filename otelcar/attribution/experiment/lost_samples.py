"""Re-decisions lost to errors in the unpaired tests of ``why`` and ``fix``: whether they could
change the answer.

A re-decision that fails (a policy that raises, a judge that errs) is left out of its arm. Such
losses need not be missing at random — an edited context can make the policy fail exactly when
it would have decided otherwise — so, as in ``attribute`` (:mod:`otelcar.attribution.steps.
losses`), an answer stands only if it stays the answer whatever the lost samples held. The
one-sided Fisher test of "arm B repeats the decision less often than arm A" is monotone in
each arm's count, so two assignments bound it: **for the drop** (A's lost samples repeat the
decision, B's do not) and **against it** (the other way round). :class:`LostCounts` holds one
test's counts and gives both; :func:`refusal` words the refusal, with exit 2
(:class:`~otelcar.replay.engine.RolloutsFailed`) like ``attribute``'s.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from otelcar.attribution.experiment.contrast import unpaired
from otelcar.attribution.stats import wilson
from otelcar.replay.engine import RolloutsFailed


@dataclass(frozen=True)
class Assigned:
    """One test with its lost samples assigned: the Fisher p-value of the drop, the drop (A's
    rate minus B's) and B's counts."""

    p: float
    drop: float
    bad: int
    n: int

    def upper(self, confidence: float) -> float:
        """The upper Wilson bound of B's rate."""
        return wilson(self.bad, self.n, confidence).high if self.n else 1.0


@dataclass(frozen=True)
class LostCounts:
    """One unpaired test: arm A (``base_bad`` of ``base_n`` valid samples repeat the decision,
    ``base_lost`` errored) against arm B (``bad`` of ``n``, ``lost`` errored)."""

    base_bad: int
    base_n: int
    base_lost: int
    bad: int
    n: int
    lost: int

    @property
    def any(self) -> bool:
        return bool(self.base_lost or self.lost)

    def assigned(self, *, for_drop: bool) -> Assigned:
        """The test had every lost sample been judged: for the drop or against it."""
        base_bad = self.base_bad + (self.base_lost if for_drop else 0)
        bad = self.bad + (0 if for_drop else self.lost)
        base_n, n = self.base_n + self.base_lost, self.n + self.lost
        drop = base_bad / base_n - bad / n if base_n and n else 0.0
        return Assigned(unpaired(base_bad, base_n, bad, n).p_less, drop, bad, n)


def lost_in(samples: Sequence[object], upto: int | None = None) -> int:
    """How many of ``samples`` (an arm's :class:`~otelcar.attribution.experiment.redecisions.
    Sample` values) errored, among those below index ``upto`` when given."""
    return sum(
        1
        for s in samples
        if getattr(s, "bad", None) is None and (upto is None or getattr(s, "r", 0) < upto)
    )


def refusal(errors: Sequence[str], changing: str, *, what: str = "re-decisions") -> RolloutsFailed:
    """The error that stops a command whose lost samples could change its answer: how many
    failed, the two most common reasons (which policy or tool was missing) and how the answer
    could change."""
    reasons = Counter(
        re.sub(r"\s+", " ", re.sub(r"^rollout \d+: ", "", e or "unknown error")).strip()[:200]
        for e in errors
    ).most_common(2)
    return RolloutsFailed(
        f"{len(errors)} {what} failed ({'; '.join(f'{r} ({n}×)' for r, n in reasons)}), and "
        f"{changing}: no verdict. Register the policies they lacked ([policies] in "
        "otelcar.toml), or fix what made them fail"
    )
