"""Preference pairs: what attribution and validated fixes learned, as training data.

A pair is one decision's recorded context (messages and tools), the action the agent should
not take there (``rejected``: the recorded action, which the evidence shows leads to the
failure) and one it should take (``chosen``), with the evidence that says so. Only evidence
that is significant makes a pair:

- **From a fix** (``otelcar fix`` result): every candidate whose verdict is PASS (its
  re-decisions were bad significantly less often than unfixed ones, Holm-adjusted, on draws
  of their own: :mod:`otelcar.attribution.fixes`) gives a pair. ``chosen`` is the most common
  good action the agent took under the fix (``alternative_action``), or the action a
  ``forced`` candidate forces. It costs no new policy call.
- **From an attribution** (``otelcar attribute`` result with a culprit that was not
  refuted): the rollouts that chose the culprit cannot also validate what to do there. So
  the pairs are tested on **fresh** rollouts (seed stage ``pairs``), judged by the outcome
  the attribution used (another one is refused: the culprit is a claim about that one). N
  rollouts re-decide the culprit and every later decision (rollouts 0..N−1 of the stage);
  N more commit the recorded action there and re-decide the rest (rollouts N..2N−1: with
  the same seeds, a re-decision that repeats the recorded action would be a held rollout
  again, served from the cache, and count twice). The two plans advance together, 8
  rollouts at a time, so a budget that runs out cuts both arms. The rejected arm holds the
  second plan's rollouts plus the re-decided ones that repeated the recorded action. Each
  other action taken at the culprit (calls and arguments equal, or the same text up to case
  and spacing: :func:`~otelcar.attribution.faithfulness.same_action`) gets a one-sided
  Fisher exact test that its rollouts fail less often than the rejected arm's. The p-values
  are Holm-adjusted over the actions of the trace. An action becomes a pair only when it is
  significant at ``alpha`` and passed at least once (``chosen`` is then its message in a
  passing rollout).

Pairs are written in three line formats (:data:`FORMATS`, ``schemas/pairs.schema.json``):
``otelcar`` (everything), ``dpo`` (TRL's conversational prompt/chosen/rejected) and ``chat``
(a supervised chat fine-tuning line: the context then the chosen action). Messages are in
the OpenAI chat form, as the resample policies send them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from otelcar.attribution.experiment.rollouts import RolloutArm
from otelcar.attribution.experiment.seeds import SeedSpace
from otelcar.attribution.faithfulness import same_action
from otelcar.attribution.frozen import freeze_sequences
from otelcar.attribution.pairs_documents import PAIRS_VERSION, ChatLine, DpoLine, OtelcarLine
from otelcar.attribution.stats import fisher_exact_greater, holm
from otelcar.attribution.steps.curve import curve_plans
from otelcar.errors import OtelcarError
from otelcar.messages import Message, describe_action
from otelcar.notes import Note, note
from otelcar.outcome import Outcome
from otelcar.policies.openai_compat import to_openai_messages, to_openai_tools
from otelcar.policies.registry import PolicyRegistry
from otelcar.replay.engine import run_plan_async
from otelcar.replay.execution import Judged
from otelcar.replay.harness import Budget, Environment, Rollout
from otelcar.replay.plan import Do, Plan
from otelcar.replay.recorded import RecordedDecision, RecordedRun
from otelcar.sync import synchronous

FORMATS = ("otelcar", "dpo", "chat")
#: The seed stage of the fresh rollouts an attribution's pairs are tested on.
PAIRS_STAGE = "pairs"


class PairsError(OtelcarError):
    """A result pairs cannot be made from (not an attribution or fix result, another trace,
    a step that is not a decision), or an attribution's claim that cannot be tested as asked
    (no policies or outcome, another outcome than the attribution's)."""


@dataclass(frozen=True)
class PreferencePair:
    """One decision's context, the action to avoid there, the action to take, and why."""

    trace_id: str
    step: int
    decision: str
    agent: str | None
    messages: tuple[Message, ...]
    tools: tuple[dict[str, Any], ...]
    rejected: Message
    chosen: Message
    evidence: dict[str, Any]

    def to_line(self, fmt: str = "otelcar") -> OtelcarLine | DpoLine | ChatLine:
        """The pair as one JSON line of format ``fmt`` (:data:`FORMATS`)."""
        messages = to_openai_messages(self.messages, self.agent)
        tools = to_openai_tools(self.tools) or []
        (rejected,) = to_openai_messages([self.rejected], self.agent)
        (chosen,) = to_openai_messages([self.chosen], self.agent)
        if fmt == "otelcar":
            return {
                "format": "otelcar",
                "version": PAIRS_VERSION,
                "trace_id": self.trace_id,
                "step": self.step,
                "decision": self.decision,
                "messages": messages,
                "tools": tools,
                "rejected": rejected,
                "chosen": chosen,
                "evidence": self.evidence,
            }
        if fmt == "dpo":
            return {
                "prompt": messages,
                "chosen": [chosen],
                "rejected": [rejected],
                "tools": tools,
                "evidence": self.evidence,
            }
        if fmt == "chat":
            return {"messages": [*messages, chosen], "tools": tools, "evidence": self.evidence}
        raise ValueError(f"unknown pair format {fmt!r}; known: {', '.join(FORMATS)}")


@dataclass(frozen=True)
class PairsResult:
    """The pairs made from one result, what kept others from being made, what it cost."""

    pairs: tuple[PreferencePair, ...] = ()
    notes: tuple[Note, ...] = ()
    cost: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        freeze_sequences(self)


def result_of(document: Any, *, where: str = "the result") -> dict[str, Any]:
    """The analysis result in ``document``: an ``attribute --json`` or ``fix --json`` file's
    content, or a kept run's record (``{"kind", "result", …}``); :class:`PairsError` for
    anything else."""
    if isinstance(document, Mapping) and "result" in document:  # a kept run's record
        if document.get("status", "done") != "done" or not isinstance(document["result"], Mapping):
            raise PairsError(
                f"{where} is a kept {document.get('kind')} run that did not finish (status "
                f"{document.get('status')!r}): it has no result to make pairs from"
            )
        document = document["result"]
    if not isinstance(document, Mapping) or document.get("kind") not in ("attribution", "fix"):
        kind = document.get("kind") if isinstance(document, Mapping) else type(document).__name__
        raise PairsError(
            f"{where} is not an attribution or fix result (kind {kind!r}): pairs come from "
            "`otelcar attribute --json` and `otelcar fix --json` results, or kept runs"
        )
    if not isinstance(document.get("trace_id"), str):
        raise PairsError(f"{where} names no trace (no 'trace_id')")
    return dict(document)


def _decision(run: RecordedRun, step: Any, where: str) -> RecordedDecision:
    try:
        decision = run.decision_at_step(int(step))
    except (KeyError, TypeError, ValueError):
        raise PairsError(
            f"{where}: step {step!r} is not a decision of trace {run.trace_id}"
        ) from None
    return decision


def _pair(
    run: RecordedRun, decision: RecordedDecision, chosen: Message, evidence: dict[str, Any]
) -> PreferencePair:
    assert decision.context is not None and decision.action is not None
    return PreferencePair(
        trace_id=run.trace_id,
        step=decision.step,
        decision=decision.name,
        agent=decision.agent,
        messages=tuple(decision.context),
        tools=run.request_tools(decision),
        rejected=decision.action,
        chosen=chosen,
        evidence=evidence,
    )


def _usable(decision: RecordedDecision) -> Note | None:
    """Why no pair can be made at ``decision`` (None: one can)."""
    if decision.context is None:
        return note("pairs_not_captured", step=decision.step, part="context")
    if decision.action is None:
        return note("pairs_not_captured", step=decision.step, part="recorded action")
    return None


def fix_pairs(run: RecordedRun, fix: Mapping[str, Any]) -> PairsResult:
    """The pairs of a ``fix`` result: one per PASS candidate with a good action (see the
    module docstring); the recorded run gives the context and the rejected action."""
    pairs: list[PreferencePair] = []
    notes: list[Note] = []
    decision = _decision(run, fix.get("step"), "fix result")
    if (why := _usable(decision)) is not None:
        notes.append(why)
        return PairsResult(pairs, notes)
    seen: list[tuple[str, Message]] = []  # the pairs made: fix name, chosen action
    candidates = sorted(fix.get("candidates") or [], key=lambda c: c.get("name") != fix.get("best"))
    for candidate in candidates:
        name = candidate.get("name")
        if candidate.get("verdict") != "PASS":
            continue
        chosen = _chosen_of(candidate)
        if chosen is None:
            older = "alternative_action" not in (candidate.get("decision") or {})
            notes.append(note("pairs_fix_no_action", fix=name, older=older))
            continue
        if same_action(chosen, decision.action):  # type: ignore[arg-type]
            notes.append(note("pairs_fix_recorded", fix=name))
            continue
        if (made := next((n for n, a in seen if same_action(chosen, a)), None)) is not None:
            notes.append(note("pairs_fix_same", fix=name, same_as=made))
            continue
        seen.append((name, chosen))
        evidence = {
            "source": "fix",
            "fix": name,
            "kind": candidate.get("kind"),
            "description": candidate.get("description"),
            "rule": candidate.get("rule"),
            "decision": candidate.get("decision"),
            "forward": candidate.get("forward"),
            "confidence": fix.get("confidence"),
            "alpha": fix.get("alpha"),
        }
        pairs.append(_pair(run, decision, chosen, evidence))
    if not pairs and not notes:
        notes.append(note("pairs_no_fix_passed", step=decision.step))
    return PairsResult(pairs, notes)


def _chosen_of(candidate: Mapping[str, Any]) -> Message | None:
    check = candidate.get("decision") or {}
    if isinstance(check.get("alternative_action"), Mapping):
        return Message.from_dict(check["alternative_action"])
    if candidate.get("kind") == "forced" and candidate.get("plan"):
        forced = [i for i in Plan.from_dict(candidate["plan"]).interventions if isinstance(i, Do)]
        return forced[0].action if forced else None
    return None


@dataclass
class _ActionArm(RolloutArm):
    """The fresh rollouts that took one action at the decision, by rollout index (so
    ``n`` and ``failed`` count the judged ones), and the action as taken in the first
    passing one."""

    action: Message | None = None
    passing: Message | None = None

    def add(self, rollout: Rollout, failed: bool | None, action: Message | None) -> None:
        self.failures[rollout.index] = failed
        if failed is False and self.passing is None:
            self.passing = action

    def to_dict(self) -> dict[str, int]:
        return {"failed": self.failed, "n": self.n}


def _arm_of(arms: list[_ActionArm], action: Message) -> _ActionArm:
    """The arm of ``action`` (:func:`same_action` as one of theirs), new if none is."""
    for arm in arms:
        if arm.action is not None and same_action(action, arm.action):
            return arm
    arms.append(_ActionArm(action=action))
    return arms[-1]


#: Fresh rollouts run per plan at a time: the two plans advance together, so a budget too
#: small for both cuts both arms alike (not the second plan's whole arm).
CHUNK = 8

JudgedRollouts = list[tuple[Rollout, bool | None]]


async def _fresh_rollouts(
    run: RecordedRun,
    decision: RecordedDecision,
    env: Environment,
    outcome: Outcome,
    rollouts: int,
    seed: int,
    on_rollout: Callable[[Judged], None] | None,
) -> tuple[JudgedRollouts, JudgedRollouts]:
    """``rollouts`` judged rollouts re-deciding ``decision`` and every later decision, and as
    many holding it at its recorded action (:func:`curve_plans`' ``P_{k−1}`` and ``P_k``).

    Rollout r's seeds are derived from (seed, r): a re-decision of rollout r that repeats the
    recorded action would replay held rollout r exactly (from the request cache) and count it
    twice. So the re-deciding plan takes rollouts 0..N−1 of the ``pairs`` stage, the holding
    plan N..2N−1."""
    plans = curve_plans(run)
    redecide, hold = plans[decision.index - 1], plans[decision.index]
    options = {"seed": SeedSpace(seed).stage(PAIRS_STAGE), "outcome": outcome}
    options |= {"on_rollout": on_rollout, "concurrency": CHUNK}
    fresh: JudgedRollouts = []
    held: JudgedRollouts = []
    for start in range(0, rollouts, CHUNK):
        count = min(CHUNK, rollouts - start)
        done = await asyncio.gather(
            run_plan_async(run, redecide, env, rollouts=count, first_rollout=start, **options),
            run_plan_async(
                run, hold, env, rollouts=count, first_rollout=rollouts + start, **options
            ),
        )
        for judged, result in zip((fresh, held), done, strict=True):
            judged.extend(zip(result.rollouts, result.failures, strict=True))
    return fresh, held


def _lost(judged: JudgedRollouts) -> dict[str, int] | None:
    """Why some rollouts were left out of the counts (None: none was)."""
    lost = [r for r, failed in judged if failed is None]
    if not lost:
        return None
    budget = sum(r.status == "budget" for r in lost)
    failed = sum(r.status == "failed" for r in lost)
    return {
        "lost": len(lost),
        "of": len(judged),
        "budget": budget,
        "failed": failed,
        "unjudged": len(lost) - budget - failed,
    }


def _no_claim(attribution: Mapping[str, Any]) -> Note | None:
    """Why ``attribution`` makes no claim pairs can test (None: it does)."""
    if attribution.get("verdict") != "culprit" or attribution.get("culprit") is None:
        return note("pairs_no_culprit", verdict=attribution.get("verdict"))
    if attribution.get("question", "failure") != "failure":
        return note("pairs_credit")
    refuted = [r for r in attribution.get("refutations") or [] if not r.get("passed")]
    if refuted:
        return note("pairs_refuted", checks=[str(r.get("name")) for r in refuted])
    return None


async def attribution_pairs_async(
    run: RecordedRun,
    attribution: Mapping[str, Any],
    *,
    registry: PolicyRegistry,
    outcome: Outcome,
    rollouts: int = 16,
    seed: int = 0,
    alpha: float = 0.05,
    budget: Budget | None = None,
    on_rollout: Callable[[Judged], None] | None = None,
) -> PairsResult:
    """The pairs at an attribution's culprit, tested on ``2 · rollouts`` fresh rollouts (see
    the module docstring), every policy call counted in ``cost`` and bounded by ``budget``.
    ``seed``: the user's seed (the rollouts draw with its ``pairs`` stage). A result with no
    culprit, a refuted one or a credit question gives no pair, a note and no cost."""
    pairs: list[PreferencePair] = []
    notes: list[Note] = []
    if (why := _no_claim(attribution)) is not None:
        notes.append(why)
        return PairsResult(pairs, notes)
    judged_by = attribution.get("outcome")
    if judged_by is not None and judged_by != outcome.describe():
        raise PairsError(
            f"the attribution judged its rollouts by {judged_by!r}, the pairs would be judged "
            f"by {outcome.describe()!r}: its culprit is a claim about the first; pass the "
            "outcome it used"
        )
    decision = _decision(run, attribution["culprit"], "attribution result")
    if (why := _usable(decision)) is not None:
        notes.append(why)
        return PairsResult(pairs, notes)
    recorded: Message = decision.action  # type: ignore[assignment]  # _usable checked it
    env = Environment(registry, budget or Budget())
    fresh, held = await _fresh_rollouts(run, decision, env, outcome, rollouts, seed, on_rollout)
    cost = env.accounting.to_dict()  # the calls spent
    for arm, done in (("re-deciding", fresh), ("holding", held)):
        if (lost := _lost(done)) is not None:
            notes.append(note("pairs_rollouts_lost", arm=arm, step=decision.step, **lost))
    rejected = _ActionArm(action=recorded)
    for r, failed in held:
        rejected.add(r, failed, recorded)
    others: list[_ActionArm] = []
    for r, failed in fresh:
        if len(r.decisions) <= decision.index or r.decisions[decision.index].action is None:
            continue
        action = r.decisions[decision.index].action
        arm = rejected if same_action(action, recorded) else _arm_of(others, action)
        arm.add(r, failed, action)
    tested = [arm for arm in others if arm.n]
    if not tested:
        notes.append(note("pairs_no_other_action", step=decision.step, rollouts=rollouts))
        return PairsResult(pairs, notes, cost)
    p_values = [fisher_exact_greater(rejected.failed, rejected.n, a.failed, a.n) for a in tested]
    evidence = _attribution_evidence(attribution, decision.step)
    for arm, p, p_adjusted in zip(tested, p_values, holm(p_values), strict=True):
        if p_adjusted > alpha or arm.passing is None:
            continue
        fresh_evidence = {
            "seed_stage": PAIRS_STAGE,
            "rollouts_per_plan": rollouts,
            "rejected": rejected.to_dict(),
            "chosen": arm.to_dict(),
            "p": p,
            "p_adjusted": p_adjusted,
            "alpha": alpha,
            "alternatives_tested": len(tested),
        }
        pairs.append(_pair(run, decision, arm.passing, {**evidence, "fresh": fresh_evidence}))
    if pairs and evidence["policy_unfaithful"]:
        notes.append(note("pairs_policy_unfaithful", step=decision.step))
    if not pairs:
        shown = [
            {"action": describe_action(a.action), "failed": a.failed, "n": a.n} for a in tested
        ]
        notes.append(
            note(
                "pairs_none_better",
                step=decision.step,
                failed=rejected.failed,
                n=rejected.n,
                alpha=alpha,
                tested=shown,
            )
        )
    return PairsResult(pairs, notes, cost)


def _attribution_evidence(attribution: Mapping[str, Any], step: int) -> dict[str, Any]:
    """What the attribution itself says of the culprit at ``step`` (its rollouts chose it)."""
    effect = next((s for s in attribution.get("steps") or [] if s.get("step") == step), {})
    checks = attribution.get("refutations") or []
    return {
        "source": "attribution",
        "step": step,
        "delta": effect.get("delta"),
        "delta_ci": effect.get("delta_ci"),
        "p_adjusted": effect.get("p_adjusted"),
        "confidence": attribution.get("confidence"),
        # passed: None when the attribution ran without its refutation.
        "refutation": {
            "passed": all(r.get("passed") for r in checks) if checks else None,
            "names": [r.get("name") for r in checks],
        },
        "policy_unfaithful": _unfaithful_at(attribution, step),
    }


def _unfaithful_at(attribution: Mapping[str, Any], step: int) -> bool | None:
    """Whether the attribution's policy check found the resample policy rarely reproducing
    the recorded action at ``step`` (None: the step was not checked)."""
    check = attribution.get("policy_check") or {}
    if step in (check.get("unfaithful_steps") or ()):
        return True
    checked = any(d.get("step") == step and d.get("n") for d in check.get("decisions") or ())
    return False if checked else None


def needs_rollouts(result: Mapping[str, Any]) -> bool:
    """Whether pairs from ``result`` (as :func:`result_of` returns it) run fresh rollouts
    (so need policies and an outcome): an attribution with a claim to test."""
    return result.get("kind") == "attribution" and _no_claim(result) is None


async def export_pairs_async(
    run: RecordedRun,
    *,
    result: Any,
    registry: PolicyRegistry | None = None,
    outcome: Outcome | None = None,
    rollouts: int = 16,
    seed: int = 0,
    alpha: float = 0.05,
    budget: Budget | None = None,
    on_rollout: Callable[[Judged], None] | None = None,
) -> PairsResult:
    """The preference pairs of ``result`` on its recorded ``run``: an ``attribute`` or
    ``fix`` result (its ``to_dict()`` or JSON file content) or a kept run's record.

    A fix's PASS candidates give pairs at no cost (:func:`fix_pairs`); an attribution's
    culprit gives the pairs that ``2 · rollouts`` fresh rollouts find significant at
    ``alpha`` (:func:`attribution_pairs_async`: it needs ``registry`` and the ``outcome``
    the attribution used). :class:`PairsError` when ``result`` is neither kind, is of
    another trace, or needs rollouts and has no ``registry`` or ``outcome``."""
    document = result_of(result)
    if document["trace_id"] != run.trace_id:
        raise PairsError(
            f"the result is of trace {document['trace_id']}, the run of {run.trace_id}"
        )
    if document["kind"] == "fix":
        return fix_pairs(run, document)
    if needs_rollouts(document) and (registry is None or outcome is None):
        raise PairsError(
            "pairs from an attribution's culprit are tested on fresh rollouts: they need the "
            "policies (registry) and the outcome the attribution used"
        )
    return await attribution_pairs_async(
        run,
        document,
        registry=registry,  # type: ignore[arg-type]  # checked above when it is used
        outcome=outcome,  # type: ignore[arg-type]
        rollouts=rollouts,
        seed=seed,
        alpha=alpha,
        budget=budget,
        on_rollout=on_rollout,
    )


export_pairs = synchronous(export_pairs_async, name="export_pairs")
