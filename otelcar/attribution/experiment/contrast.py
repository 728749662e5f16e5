"""One contrast between two arms on a binary result, paired or unpaired — the estimate every
estimator reports.

Arm ``B`` (the treatment: a plan that holds a step, an edited context, a fix) against arm ``A``
(the reference: the plan before, the base arm, the unfixed run), each sample a binary result
(failed; repeated the decision). The contrast is ``rate(B) − rate(A)`` with its interval and
exact one-sided p-values for either direction:

* **paired** — samples of the two arms drawn with the same seed are pairs (common random
  numbers): only the discordant pairs carry information. McNemar's exact test, Newcombe's
  paired interval (method 10). ``attribute``'s step effects, its refutation, ``fix``'s forward
  validation and ``why``'s paired look use it.
* **unpaired** — the two arms are independent samples: Fisher's exact test, Newcombe's
  unpaired interval (method 10). ``why``'s removal tests and ``fix``'s decision-level
  validation use it.

The statistics themselves live in :mod:`otelcar.attribution.stats`; this module only says
which of them a design uses and how its samples are counted, once for every estimator.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from otelcar.attribution.stats import (
    Interval,
    fisher_exact_greater,
    mcnemar_exact_greater,
    newcombe_paired,
    newcombe_unpaired,
)


@dataclass(frozen=True, slots=True)
class Pairs:
    """Paired binary results by kind: both 1, only B 1, only A 1, neither."""

    both: int = 0
    only_b: int = 0
    only_a: int = 0
    neither: int = 0

    @property
    def n(self) -> int:
        return self.both + self.only_b + self.only_a + self.neither

    @classmethod
    def of(
        cls,
        b: Mapping[int, bool | None],
        a: Mapping[int, bool | None],
        upto: int | None = None,
    ) -> Pairs:
        """The pairs of two arms' results by sample index (``None`` results, indexes only one
        arm has, and indexes from ``upto`` on are left out)."""
        both = only_b = only_a = neither = 0
        for r, in_b in b.items():
            in_a = a.get(r)
            if in_b is None or in_a is None or (upto is not None and r >= upto):
                continue
            both += in_b and in_a
            only_b += in_b and not in_a
            only_a += in_a and not in_b
            neither += not in_a and not in_b
        return cls(both, only_b, only_a, neither)


@dataclass(frozen=True, slots=True)
class Contrast:
    """``rate(B) − rate(A)``: the estimate, its interval at ``confidence``, the exact one-sided
    p-values for ``rate(B) > rate(A)`` (``p_greater``) and ``<`` (``p_less``), and the samples
    it rests on (``n``: pairs when paired, ``n_a + n_b`` when not)."""

    kind: str  # paired | unpaired
    difference: float
    interval: Interval
    p_greater: float
    p_less: float
    n: int

    @property
    def p_two_sided(self) -> float:
        """Twice the smaller one-sided p-value (at most 1)."""
        return min(1.0, 2 * min(self.p_greater, self.p_less))


def paired(pairs: Pairs, confidence: float = 0.95) -> Contrast:
    """The paired contrast of ``pairs`` (no pair: difference 0, interval [−1, 1], p 1)."""
    n = pairs.n
    return Contrast(
        "paired",
        (pairs.only_b - pairs.only_a) / n if n else 0.0,
        newcombe_paired(pairs.both, pairs.only_b, pairs.only_a, pairs.neither, confidence),
        mcnemar_exact_greater(pairs.only_b, pairs.only_a),
        mcnemar_exact_greater(pairs.only_a, pairs.only_b),
        n,
    )


def unpaired(a_bad: int, a_n: int, b_bad: int, b_n: int, confidence: float = 0.95) -> Contrast:
    """The unpaired contrast of ``b_bad / b_n`` against ``a_bad / a_n``."""
    rate_a = a_bad / a_n if a_n else 0.0
    rate_b = b_bad / b_n if b_n else 0.0
    return Contrast(
        "unpaired",
        rate_b - rate_a,
        newcombe_unpaired(a_bad, a_n, b_bad, b_n, confidence),
        fisher_exact_greater(b_bad, b_n, a_bad, a_n) if a_n and b_n else 1.0,
        fisher_exact_greater(a_bad, a_n, b_bad, b_n) if a_n and b_n else 1.0,
        a_n + b_n,
    )
