"""The request of each analysis a user starts — ``attribute``, ``why`` and ``fix`` on one
recorded trace, ``aggregate`` over many, ``pairs`` from results — as a frozen type: every
option once, with its type, default, bounds and help text
(:func:`~otelcar.analyses.options.option`).

The CLI's options, the MCP tools' arguments and the console's run form are made from these
types, and every front end starts the analysis with :func:`otelcar.analyses.run` of a
request, so the same request gives the same result wherever it is made. ``budget`` and
``seed`` left ``None`` are ``[replay] max_calls`` and ``[replay] seed`` of ``otelcar.toml``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from otelcar.analyses.options import Request, option

#: What ``--same`` takes besides ``regex:PATTERN`` and ``judge:POLICY_KEY``: the values a
#: choice list offers (:func:`otelcar.attribution.context.decisions.same_decision`).
SAMES = ("outcome", "tool", "tool+args", "judge")
#: Re-decisions per step of the policy check ``attribute`` runs at its culprit: 8 shows a
#: policy that reproduces the action at most once to be below 50 % (Wilson upper bound).
POLICY_CHECK_SAMPLES = 8
#: The names a decision step may be given by instead of its number.
Step = int | Literal["culprit", "last"]

SAME_HELP = (
    "What counts as the same decision: outcome (the call the outcome counts: its tool and "
    "arguments), tool, tool+args, regex:PATTERN (over 'name {json args}' of each call), "
    "judge or judge:POLICY_KEY."
)
STEP_HELP = (
    "Decision step number, 'culprit' (the attribution's: from --attribution FILE, else "
    "attribute first) or 'last'."
)
SEED_HELP = "Base seed (default: [replay] seed)."


def _budget(help: str) -> Any:
    return option(None, help, ge=1, names=(("mcp", "max_calls"),))


def _seed() -> Any:
    return option(None, SEED_HELP, ge=0)


@dataclass(frozen=True)
class AttributionOptions(Request):
    """The options of the step attribution that ``attribute`` runs on one trace and
    ``aggregate`` on each failing trace of many."""

    #: Field names the library calls otherwise.
    library_names: ClassVar[dict[str, str]] = {"refute": "refutation"}

    rollouts: int | None = option(
        None, "Fixed-R mode: R rollouts per plan.", flags=("-n", "--rollouts"), ge=1
    )
    max_rollouts: int = option(64, "Adaptive mode: most rollouts per plan.", ge=1)
    first_look: int = option(
        8, "Adaptive mode: rollouts per plan at the first look (then doubling).", ge=1
    )
    margin: float = option(
        0.3,
        "Locked-in needs every step's upper bound on Δ below this (an equivalence); while "
        "the failure looks locked in, steps above it get more rollouts.",
        gt=0,
        le=1,
    )
    confidence: float = option(
        0.95,
        "Confidence level of the step effects' intervals; 1 - confidence is the tests' "
        "family-wise alpha.",
        gt=0,
        lt=1,
    )
    mode: Literal["auto", "curve", "bisect"] = option(
        "auto",
        "curve: every step's q; bisect: binary search for the largest jump (long traces), "
        "falling back to the curve when the ends show no rise; auto: bisect above 40 decisions.",
    )
    shapley: bool = option(
        False,
        "Also Shapley values of the steps with the largest effects (AND/OR failures).",
    )
    shapley_pairs: int = option(4, "Antithetic permutation pairs for --shapley.", ge=1)
    refute: bool = option(
        True,
        "Check a culprit on fresh rollouts: a placebo (its recorded action done, Δ must "
        "vanish) and its effect measured again on new seeds.",
        flags=("--refute/--no-refute",),
    )
    refute_rollouts: int = option(
        32,
        "Most rollouts per plan of the refutation (a sequential test read after every "
        "batch: it stops as soon as the culprit's effect is significant again, or can no "
        "longer become so within this).",
        ge=4,
    )


@dataclass(frozen=True)
class AttributeRequest(AttributionOptions):
    """``otelcar attribute``: which step caused the failure."""

    kind: ClassVar[str] = "attribute"

    policy_check: int = option(
        POLICY_CHECK_SAMPLES,
        "Re-decide the culprit (and the harmful step) N times on its recorded context and "
        "say when the policy rarely reproduces the recorded action there; the re-decisions the "
        "refutation already made there count (0: skip; every step: otelcar replay --check-policy).",
        ge=0,
        metavar="N",
    )
    budget: int | None = _budget("Most policy calls to spend (default: [replay] max_calls).")
    seed: int | None = _seed()
    credit: bool = option(False, "For a passing run: which step secured success.")


@dataclass(frozen=True)
class AggregateRequest(AttributionOptions):
    """``otelcar aggregate``: the attribution of each failing trace of many, and the steps
    ranked by how often they are the culprit. Which traces (ids, service, since, limit) is
    chosen beside the request, as the trace of ``attribute`` is; each trace is attributed
    without the policy check (the ranking reads the verdicts only), and ``confidence`` is
    also the ranking's."""

    kind: ClassVar[str] = "aggregate"

    budget: int | None = _budget(
        "Most policy calls to spend on each trace (default: [replay] max_calls)."
    )
    seed: int | None = _seed()


@dataclass(frozen=True)
class DecisionRequest(Request):
    """The options ``why`` and ``fix`` share: which decision, how it is re-decided, and the
    error rate of the tests."""

    library_names: ClassVar[dict[str, str]] = {}

    step: Step = option("culprit", STEP_HELP, metavar="STEP")  # noqa: RUF009 (a field, as field())
    samples: int = option(
        10,
        "Re-decisions per arm (base arm and confirmations).",
        flags=("--samples", "-R"),
        ge=2,
    )
    same: str = option("outcome", SAME_HELP, offered=SAMES)
    seed: int | None = _seed()
    alpha: float = option(0.05, "Family-wise error.", gt=0, lt=1)


@dataclass(frozen=True)
class WhyRequest(DecisionRequest):
    """``otelcar why``: which text in the context of a decision made the agent take it."""

    kind: ClassVar[str] = "why"

    fill: str = option("cut", "Removed text: cut, marker, neutral, empty or text:YOUR TEXT.")
    budget: int | None = _budget("Most policy calls to spend (default: [replay] max_calls).")
    max_tests: int | None = option(
        None, "Declared number of tests (default: 3 × pieces + 20).", ge=1
    )
    full: bool = option(False, "Narrow every confirmed piece, not just the first.")


@dataclass(frozen=True)
class FixRequest(DecisionRequest):
    """``otelcar fix``: candidate fixes for a decision, validated on its failed context."""

    kind: ClassVar[str] = "fix"

    forward: bool = option(False, "Also validate by full rollouts (needs an outcome).")
    rollouts: int = option(20, "Forward rollouts per plan.", ge=1)
    max_rate: float = option(
        0.3,
        "PASS needs the upper 95% bound of the bad-decision rate at or below this.",
        gt=0,
        le=1,
    )
    budget: int | None = _budget(
        "Most policy calls to spend, why and fix together (default: [replay] max_calls)."
    )


@dataclass(frozen=True)
class RolloutRequest(Request):
    """``otelcar rollout``: an intervention plan run on a trace R times."""

    kind: ClassVar[str] = "rollout"
    library_names: ClassVar[dict[str, str]] = {}

    resample: tuple[int, ...] = option((), "Re-decide this step (repeatable).")
    from_step: int | None = option(None, "Hold the steps before it, re-decide the rest.")
    rollouts: int | None = option(
        None, "Rollouts (default: [replay] rollouts).", flags=("-n", "--rollouts"), ge=1
    )
    seed: int | None = _seed()


@dataclass(frozen=True)
class ReplayCheckRequest(Request):
    """``otelcar replay``: the fidelity check, and with ``check_policy`` the policy check
    of every recorded decision."""

    kind: ClassVar[str] = "replay"
    library_names: ClassVar[dict[str, str]] = {}

    check_policy: int | None = option(
        None,
        "Also re-decide every recorded decision N times on its recorded context and report "
        "how often the policy reproduces the recorded action (with --json: policy_check).",
        ge=1,
        metavar="N",
    )
    same: str = option(
        "action",
        "With --check-policy: what reproduces a decision: action (same calls and arguments, "
        "or the same answer), or a rule of `otelcar why --same` (tool, tool+args, regex:…, "
        "judge).",
    )
    seed: int | None = option(None, "With --check-policy: the seed.", ge=0)
    budget: int | None = option(None, "With --check-policy: most policy calls.", ge=1)


@dataclass(frozen=True)
class PairsRequest(Request):
    """``otelcar export pairs``: preference pairs from attribution and fix results; an
    attribution's pairs are tested on fresh rollouts."""

    kind: ClassVar[str] = "pairs"
    library_names: ClassVar[dict[str, str]] = {}

    rollouts: int = option(
        16, "Attribution results: fresh rollouts per plan the pairs are tested on.", ge=4
    )
    alpha: float = option(0.05, "Attribution results: the pairs' significance level.", gt=0, lt=1)
    seed: int | None = _seed()
    budget: int | None = _budget(
        "Most policy calls to spend (attribution results' rollouts; default: [replay] max_calls)."
    )


#: The request type of each analysis the MCP server and the console run, by its name (the
#: CLI has them all).
REQUESTS: dict[str, type[Request]] = {r.kind: r for r in (AttributeRequest, WhyRequest, FixRequest)}
