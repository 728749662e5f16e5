"""``why``: which text in a decision's context made the agent take that decision.

Method (DESIGN.md §6; ``docs/why-fix.md``):

1. **Base rate.** Re-decide step K on its unchanged context ``samples`` (R) times with the
   step's policy (seeds of :func:`otelcar.replay.derive_seed`, requests through the
   :class:`~otelcar.replay.Environment`: cached, budgeted, counted) and count how often it
   repeats the decision (``same``). 0 → ``not-reproduced``. Below 0.8 the base arm grows to
   3R; below ``min_rate`` (0.15) → ``too-rare``; below 0.6 the decision is **intermittent**:
   screens and confirmations use larger arms.
2. **Pieces** (:mod:`otelcar.attribution.context.pieces`): every message, ranked by wording overlap
   with the decision (a zero-call heuristic that only sets the *order* of the tests).
3. **Tests.** Each hypothesis "removing these pieces lowers the rate" gets a level from the
   **online fallback procedure** (Tian & Ramdas 2021): test t runs at
   ``α_t = α/T + α_{t-1}·[test t-1 confirmed]``, a Bonferroni share of the declared number
   of tests T (``3 × pieces + 20`` unless given; fixed from the context before any test)
   plus the level of the previous test when that was confirmed, so narrowing a confirmed
   piece into its parts keeps its power. The family-wise error of all the tests of a search
   is at most α for hypotheses chosen in order from earlier results, under any dependence
   between the tests. Within a test: a futility screen (stop when the arm repeats the
   decision at least as often as the base), a candidate look (stop when that many repeats
   would have probability < 0.1 even at the bar, rate = (1 − ``min_drop``) × base), then a
   one-sided Fisher exact test (``scipy.stats.fisher_exact``, ``alternative="greater"``,
   base arm vs this arm) at ``α_t/2`` on R samples (3R when intermittent) and, if
   ``p ≤ α`` there, at ``α_t/2`` again with both arms grown to 2R (6R when the base arm has
   3R): Bonferroni over the two looks; futility stops never inflate the error. A confirmed
   test also needs the observed drop ≥ the bar. The same removal is not tested twice.
4. **Narrowing.** Each confirmed piece is split (JSON items / paragraphs / lines /
   sentences); the children are tested in overlap order and the search descends into the
   first confirmed child, to the smallest part that still holds (``max_depth``). Inside a
   piece confirmed only as a prerequisite every child is tested (an instruction can hide in
   data the agent needs), causes first; ``full=True`` narrows every confirmed part.
5. **Joint causes.** When no single piece (or no single child of a confirmed piece) is
   confirmed, pairs of the ``joint_top`` most suspicious ones are tested. For a confirmed
   pair, each member's need is a conditional test (the pair removed vs the other member
   removed alone, Fisher); an unneeded member is dropped and the survivor re-tested alone
   at a level of its own on arms twice the second look (4R, or 12R when the base arm had
   3R). A pair whose members are both needed is narrowed
   member by member, the other member held removed.
6. **Labels.** Every re-decision that does not repeat the decision is classified
   (:func:`.decisions.classify`); a confirmed piece is a **cause** when the
   agent most often decides differently without it (another call, an answer) and a
   **prerequisite** when it most often re-fetches, asks or stops.
7. **Headline**: the best-ranked cause (tool results and earlier agent text before the user's
   or system text, narrowed before whole, another action before an answer, larger effect).
   Every cause (up to ``max_causes``) is rechecked with the other fill (cut ↔ neutral
   text; marker ↔ empty) by a further test on new samples (both looks always taken); a
   cause whose recheck does not hold is dropped from the result (and said so in the notes).

Assumptions: samples of one arm are independent draws of the policy given the context; all
tests share the base arm (the fallback's guarantee holds under any dependence); arms share
seeds, which makes them positively correlated for a seed-honouring policy and Fisher's test
conservative. Calibration is checked on null scenarios (tests, ``benchmarks/``).
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from scipy.stats import binom

from otelcar.attribution.context.decisions import (
    SameTool,
    decision_sampler,
    label_of,
    same_decision,
)
from otelcar.attribution.context.lost import losses_could_change
from otelcar.attribution.context.pieces import (
    Piece,
    canonical_json,
    children,
    edits_for,
    other_fill,
    rank,
    top_level,
)
from otelcar.attribution.context.result import Cause, TestRecord, WhyResult
from otelcar.attribution.experiment.contrast import Pairs, paired, unpaired
from otelcar.attribution.experiment.floor import CallFloor, refuse_small_budget
from otelcar.attribution.experiment.lost_samples import refusal
from otelcar.attribution.experiment.redecisions import (
    Arm,
    DecisionError,
    Sample,
    Sampler,
    canonical,
    describe_action,
)
from otelcar.attribution.experiment.seeds import SeedSpace
from otelcar.errors import OtelcarError
from otelcar.messages import Message
from otelcar.notes import Note, note
from otelcar.outcome import Outcome
from otelcar.policies.registry import PolicyRegistry
from otelcar.replay.harness import Budget, BudgetExhausted, Environment
from otelcar.replay.plan import EditContext, Plan
from otelcar.replay.recorded import RecordedDecision, RecordedRun
from otelcar.sync import synchronous

STEADY_RATE = 0.8
INTERMITTENT_RATE = 0.6
FUTILITY = 0.1
CORRECTION = (
    "online fallback (Tian & Ramdas 2021): test t at alpha/T (T declared tests) plus the "
    "level of test t-1 when that was confirmed; two looks per test at half the level each"
)


class WhyError(OtelcarError):
    """``why`` cannot run on this step (not a decision, no context, no rule, no culprit)."""


class TestsExhausted(OtelcarError):
    """The declared number of tests (``max_tests``) is used up."""


@dataclass
class Fallback:
    """The online fallback procedure's levels (see the module docstring)."""

    alpha: float
    max_tests: int
    t: int = 0
    carry: float = 0.0

    def next_level(self) -> float:
        if self.t >= self.max_tests:
            raise TestsExhausted(f"the declared {self.max_tests} tests are used up")
        self.t += 1
        level, self.carry = self.alpha / self.max_tests + self.carry, 0.0
        return level

    def confirmed(self, level: float) -> None:
        self.carry = level


def auto_tests(pieces: int) -> int:
    """The default declared test budget for a context of ``pieces`` top-level pieces: a
    screen of each, narrowing and pair searches (benchmarks use a median of 11, at most 33,
    with 4–7 pieces)."""
    return 3 * pieces + 20


def paired_p(base: Arm, arm: Arm, upto: int) -> float | None:
    """One-sided exact McNemar on the samples both arms drew with the same seed."""
    pairs = Pairs.of(
        {r: s.bad for r, s in arm.samples.items()},
        {r: s.bad for r, s in base.samples.items()},
        upto,
    )
    return paired(pairs).p_less if pairs.n else None


class _Search:
    """One ``why`` run: the base arm, the online tests, the narrowing (module docstring)."""

    def __init__(
        self,
        sampler: Sampler,
        *,
        samples: int,
        alpha: float,
        fill: str,
        min_drop: float,
        min_rate: float,
        max_tests: int | None,
        max_pieces: int,
        max_depth: int,
        max_causes: int,
        joint: bool,
        joint_top: int,
        recheck: bool,
        full: bool,
        batch: int,
        confidence: float,
        recheck_sampler: Sampler | None = None,
    ) -> None:
        self.sampler = sampler
        self.recheck_sampler = recheck_sampler or sampler
        self.context = sampler.context
        self.samples = samples
        pieces = min(len(top_level(sampler.context)), max_pieces)
        self.fallback = Fallback(alpha, max_tests or auto_tests(pieces))
        self.alpha = alpha
        self.fill = fill
        self.min_drop = min_drop
        self.min_rate = min_rate
        self.max_pieces = max_pieces
        self.max_depth = max_depth
        self.max_causes = max_causes
        self.joint = joint
        self.joint_top = joint_top
        self.recheck = recheck
        self.full = full
        self.batch = max(1, batch)
        self.confidence = confidence
        self.decision_text = describe_action(sampler.decision.action)
        self.tests: list[TestRecord] = []
        inferred = sampler.run.requests.note()
        self.notes: list[Note] = [inferred] if inferred else []
        self.base: Arm = sampler.arm([])
        self.stages = (3, 6, samples, 2 * samples)
        self.intermittent = False
        self.stopped = "done"
        #: the base arm's own verdict (``None``: it did not answer, the search ran)
        self.base_verdict: str | None = None
        self.threshold = 0.0
        self.checked_json: set[int] = set()
        self.branches: list[tuple[Piece, list[TestRecord]]] = []
        self.tested: dict[str, TestRecord] = {}
        self.checks: list[TestRecord] = []

    # -- base ------------------------------------------------------------------------------------
    async def measure_base(self) -> str | None:
        """Draw the base arm; return a terminal verdict, or ``None`` to go on."""
        base = await self.sampler.ensure([], self.samples)
        if base.n == 0:
            raise WhyError(
                "the policy failed on every re-decision of the unchanged context: "
                f"{base.errors[0] if base.errors else 'no samples'}"
            )
        if base.bad == 0:
            return "not-reproduced"
        if base.rate < STEADY_RATE:
            base = await self.sampler.ensure([], 3 * self.samples)
        if base.rate < self.min_rate:
            return "too-rare"
        if base.rate < STEADY_RATE:  # the base arm has 3R: the second look gets 6R
            self.stages = (3, 6, self.samples, 6 * self.samples)
        if base.rate < INTERMITTENT_RATE:
            self.intermittent = True
            self.stages = (5, 10, 3 * self.samples, 6 * self.samples)
            self.notes.append(
                note(
                    "intermittent",
                    rate=base.rate,
                    screen=self.stages[0],
                    confirm=[self.stages[2], self.stages[3]],
                )
            )
        self.threshold = self.min_drop * base.rate
        self.base = base
        return None

    # -- one test --------------------------------------------------------------------------------
    def _edits(self, removal: Sequence[Piece], fill: str) -> list[Any]:
        return edits_for(removal, self.context, fill)

    async def prefetch(self, removals: Sequence[Sequence[Piece]]) -> None:
        """Draw the screening samples of several tests at once (data only: the order and
        the levels of the tests do not depend on them)."""
        await asyncio.gather(
            *(self.sampler.ensure(self._edits(r, self.fill), self.stages[0], r) for r in removals)
        )

    async def test(
        self,
        removal: Sequence[Piece],
        purpose: str,
        *,
        fill: str | None = None,
        reference: Sequence[Piece] | None = None,
        retest: bool = False,
        thorough: bool = False,
    ) -> TestRecord:
        """Test "removing ``removal`` lowers the rate" at the next online level.

        Against the base arm, or with ``reference`` against the arm that removes only those
        pieces (a conditional test: is the rest of ``removal`` needed?). A hypothesis already
        tested is not tested again (no extra look at the same data), except with ``retest``
        when it was not confirmed: it then gets a new level of its own and larger arms.
        ``thorough`` (rechecks): no futility looks, and the second look is always taken.
        """
        fill = fill or self.fill
        removal = tuple(removal)
        edits = self._edits(removal, fill)
        ref_edits = self._edits(reference, fill) if reference is not None else []
        key = f"{self.sampler.seed}|{self.sampler.key(edits)}|{self.sampler.key(ref_edits)}"
        if key in self.tested and not (retest and not self.tested[key].confirmed):
            return self.tested[key]
        level = self.fallback.next_level()
        screen, candidate, confirm, extend = self.stages
        # (samples, share of the level): two looks, or one on larger arms for a re-test
        looks = [(2 * extend, 1.0)] if retest else [(confirm, 0.5), (extend, 0.5)]
        direct = retest or thorough or reference is not None  # no futility looks
        if reference is None:
            ref = self.base
        else:
            ref = await self.sampler.ensure(ref_edits, looks[0][0], tuple(reference))
        arm = await self.sampler.ensure(edits, screen, removal)
        verdict, p, threshold = "screened-out", None, None
        bar = self.threshold if reference is None else self.min_drop * ref.rate
        if arm.n == 0 or ref.n == 0:
            verdict = "no-samples"
        elif direct or arm.rate < ref.rate:
            arm = await self.sampler.ensure(edits, candidate, removal)
            if arm.n and (direct or self._plausible(arm)):
                for look, (size, share) in enumerate(looks):
                    if look:  # the second look only when promising; both arms grow
                        if p is None or (p > self.alpha and not thorough):
                            break
                        if reference is None:
                            ref = self.base = await self.sampler.ensure([], max(size, ref.n))
                        else:
                            ref = await self.sampler.ensure(ref_edits, size, tuple(reference))
                    elif reference is None and retest:
                        ref = self.base = await self.sampler.ensure([], max(size, ref.n))
                    arm = await self.sampler.ensure(edits, size, removal)
                    p = unpaired(ref.bad, ref.n, arm.bad, arm.n).p_less
                    verdict, threshold = "not-confirmed", level * share
                    bar = self.threshold if reference is None else self.min_drop * ref.rate
                    if arm.n and p <= threshold and ref.rate - arm.rate >= bar:
                        verdict = "confirmed"
                        break
        if verdict == "confirmed":
            self.fallback.confirmed(level)
        record = TestRecord(
            t=self.fallback.t,
            purpose=purpose,
            removed=removal,
            fill=fill,
            level=level,
            base_bad=ref.bad,
            base_n=ref.n,
            bad=arm.bad,
            n=arm.n,
            p=p,
            p_paired=paired_p(ref, arm, max(ref.samples, default=-1) + 1)
            if p is not None
            else None,
            verdict=verdict,
            instead=dict(arm.instead()),
            alternative=describe_action(alt) if (alt := arm.alternative()) else None,
            plan=Plan(tuple(EditContext(self.sampler.decision.step, e) for e in edits)).to_dict(),
            confidence=self.confidence,
            reference=tuple(reference) if reference is not None else None,
            lost=len(arm.errors),
            base_lost=len(ref.errors),
            threshold=threshold,
            bar=bar,
        )
        self.tests.append(record)
        self.tested[key] = record
        return record

    async def minimal(
        self, parts: list[Piece], held: Sequence[Piece]
    ) -> tuple[list[Piece], list[TestRecord], TestRecord | None]:
        """Which members of a confirmed joint removal are needed.

        For each member, a conditional test: does removing all of ``parts`` lower the rate
        more than removing the others alone? A member that is not needed is dropped; a
        single survivor is re-tested alone against the base on larger arms (its own level),
        and replaces the pair when confirmed. Returns the parts, the conditional tests and
        that re-test.
        """
        checks, needed = [], []
        for member in parts:
            others = [p for p in parts if p != member]
            record = await self.test((*held, *parts), "needed", reference=(*held, *others))
            checks.append(record)
            if record.confirmed:
                needed.append(member)
        if len(needed) == len(parts):
            return parts, checks, None
        for member in needed or parts:
            record = await self.test((*held, member), "joint", retest=True)
            if record.confirmed:
                return [member], checks, record
        return parts, checks, None

    def _plausible(self, arm: Arm) -> bool:
        """Futility at the candidate look: go on unless this many repeats would be unlikely
        (< 10 %) even for a removal that just reaches the bar (rate = base − bar)."""
        boundary = max(0.0, self.base.rate - self.threshold)
        return float(binom.sf(arm.bad - 1, arm.n, boundary)) >= FUTILITY

    async def first_confirmed(
        self, candidates: Sequence[tuple[Piece, ...]], held: Sequence[Piece], purpose: str
    ) -> tuple[tuple[Piece, ...], TestRecord] | None:
        """Test ``held + candidate`` for each candidate in order; the first confirmed one."""
        for start in range(0, len(candidates), self.batch):
            chunk = candidates[start : start + self.batch]
            await self.prefetch([(*held, *c) for c in chunk])
            for candidate in chunk:
                record = await self.test((*held, *candidate), purpose)
                if record.confirmed:
                    return candidate, record
        return None

    async def all_confirmed(
        self, candidates: Sequence[tuple[Piece, ...]], purpose: str
    ) -> list[tuple[tuple[Piece, ...], TestRecord]]:
        """Test every candidate in order (``full`` mode); the confirmed ones."""
        found = []
        for start in range(0, len(candidates), self.batch):
            chunk = candidates[start : start + self.batch]
            await self.prefetch(chunk)
            for candidate in chunk:
                record = await self.test(candidate, purpose)
                if record.confirmed:
                    found.append((candidate, record))
        return found

    # -- narrowing -------------------------------------------------------------------------------
    async def narrow(self, piece: Piece, final: list[Piece], chain: list[TestRecord]) -> None:
        """Replace ``piece`` in ``final`` by its smallest part(s) that still hold."""
        current = piece
        for _ in range(self.max_depth):
            held = [p for p in final if p != current]
            kids = rank(children(current, self.context), self.decision_text)
            if not kids:
                return
            self._check_json(current, kids)
            prerequisite = label_of(Counter(chain[-1].instead)) == "prerequisite"
            if not held and (self.full or prerequisite):
                # Every child: a cause may hide inside data the agent needs (an instruction
                # in an order's notes); causes first, the rest narrowed too in full mode.
                found = await self.all_confirmed([(k,) for k in kids], "drill")
                found.sort(key=lambda f: label_of(Counter(f[1].instead)) != "cause")
                for (extra,), record in found[1:]:
                    if self.full or label_of(Counter(record.instead)) == "cause":
                        self.branches.append((extra, [*chain, record]))
                hit = found[0] if found else None
            else:
                hit = await self.first_confirmed([(k,) for k in kids], held, "drill")
            if hit is not None:
                (kid,), record = hit
                final[final.index(current)] = kid
                chain.append(record)
                current = kid
                continue
            if self.joint and len(kids) >= 2:
                pairs = _pairs(kids[: self.joint_top])
                hit = await self.first_confirmed(pairs, held, "joint")
                if hit is not None:
                    chain.append(hit[1])
                    parts, checks, retest = await self.minimal(list(hit[0]), held)
                    self.checks += checks
                    index = final.index(current)
                    final[index : index + 1] = parts
                    if retest is not None:  # one member suffices: narrow it on
                        chain.append(retest)
                        current = parts[0]
                        continue
                    for part in parts:
                        await self.narrow(part, final, chain)
            return

    def _check_json(self, parent: Piece, kids: list[Piece]) -> None:
        content = self.context[parent.message].content or ""
        if (
            parent.whole
            and kids
            and kids[0].level == "item"
            and parent.message not in self.checked_json
            and not canonical_json(content)
        ):
            self.checked_json.add(parent.message)
            self.notes.append(note("json_reserialized", label=parent.label))

    # -- the whole search ------------------------------------------------------------------------
    def stop(self, exc: Exception) -> None:
        self.stopped = "budget" if isinstance(exc, BudgetExhausted) else "max-tests"
        self.notes.append(note("why_stopped", error=str(exc)))

    async def causes(self) -> tuple[list[Cause], list[str]]:
        ranked = rank(top_level(self.context), self.decision_text)
        untested: list[str] = []
        if len(ranked) > self.max_pieces:
            keep = _essential(ranked)
            for piece in ranked:
                if len(keep) >= self.max_pieces:
                    break
                if piece not in keep:
                    keep.append(piece)
            untested = [p.label for p in ranked if p not in keep]
            ranked = [p for p in ranked if p in keep]
        confirmed: list[tuple[Piece, TestRecord]] = []
        causes: list[Cause] = []
        try:
            for start in range(0, len(ranked), self.batch):
                chunk = ranked[start : start + self.batch]
                await self.prefetch([(p,) for p in chunk])
                for piece in chunk:
                    record = await self.test((piece,), "screen")
                    if record.confirmed:
                        confirmed.append((piece, record))
        except (BudgetExhausted, TestsExhausted) as exc:
            self.stop(exc)
            untested += [p.label for p in ranked if not any(p in t.removed for t in self.tests)]
        order = sorted(confirmed, key=lambda pr: _order_key(pr[0], pr[1], ranked))
        settled = False
        for number, (piece, record) in enumerate(order):
            if settled or number >= self.max_causes or self.stopped != "done":
                causes.append(Cause(label_of(Counter(record.instead)), (piece,), [record]))
                continue
            found = await self._narrowed([piece], [record])
            causes += found
            settled = not self.full and _settled(found[0], self.context)
        if self.joint and self.stopped == "done" and not any(c.kind == "cause" for c in causes):
            done = {p for p, _ in confirmed}
            rest = [p for p in ranked if p not in done][: self.joint_top]
            try:
                hit = await self.first_confirmed(_pairs(rest), (), "joint")
            except (BudgetExhausted, TestsExhausted) as exc:
                self.stop(exc)
                hit = None
            if hit is not None:
                try:
                    parts, checks, retest = await self.minimal(list(hit[0]), [])
                except (BudgetExhausted, TestsExhausted) as exc:
                    self.stop(exc)
                    parts, checks, retest = list(hit[0]), [], None
                chain = [hit[1], retest] if retest is not None else [hit[1]]
                causes += await self._narrowed(parts, chain, checks)
        return causes, untested

    async def _narrowed(
        self, removal: list[Piece], chain: list[TestRecord], checks: Sequence[TestRecord] = ()
    ) -> list[Cause]:
        """Narrow a confirmed removal (in ``full`` mode also every further confirmed part
        found on the way); stopped by the budget, what was narrowed so far."""
        out: list[Cause] = []
        work: list[tuple[list[Piece], list[TestRecord]]] = [(list(removal), list(chain))]
        while work:
            final, chain = work.pop(0)
            self.checks = list(checks) if not out else []
            try:
                for piece in list(final):
                    await self.narrow(piece, final, chain)
            except (BudgetExhausted, TestsExhausted) as exc:
                self.stop(exc)
            kind = label_of(Counter(chain[-1].instead))
            out.append(Cause(kind, tuple(final), chain, checks=self.checks))
            if self.stopped == "done":
                work += [([piece], prefix) for piece, prefix in self.branches]
            self.branches.clear()
        return out

    @property
    def recheck_fill(self) -> str:
        return other_fill(self.fill)

    async def recheck_cause(self, cause: Cause) -> None:
        """Recheck ``cause`` with the other fill, on the recheck sampler's draws (seeds of
        their own, against a base arm of its own): the first test chose the cause on why's
        draws, so the recheck does not reuse them."""
        main, base = self.sampler, self.base
        self.sampler = self.recheck_sampler
        try:
            self.base = await self.sampler.ensure([], self.stages[2])
            cause.recheck = await self.test(
                cause.parts, "recheck", fill=self.recheck_fill, thorough=True
            )
        except (BudgetExhausted, TestsExhausted) as exc:
            self.notes.append(note("recheck_skipped", error=str(exc)))
        finally:
            self.sampler, self.base = main, base


def _pairs(pieces: Sequence[Piece]) -> list[tuple[Piece, ...]]:
    """Pairs in order of their members' ranks (sum of positions, then the first)."""
    pairs = list(itertools.combinations(range(len(pieces)), 2))
    pairs.sort(key=lambda ij: (ij[0] + ij[1], ij[0]))
    return [(pieces[i], pieces[j]) for i, j in pairs]


def _essential(ranked: list[Piece]) -> list[Piece]:
    """Always tested: the system prompt, the first user message, the newest message."""
    keep = [p for p in ranked if p.role in ("system", "developer")][:1]
    users = sorted((p for p in ranked if p.role == "user"), key=lambda p: p.message)
    keep += users[:1]
    newest = max(ranked, key=lambda p: p.message)
    if newest not in keep:
        keep.append(newest)
    return keep


def _telling(piece: Piece) -> int:
    """0 for content the agent read or wrote (tool results, agent text), 1 for the user's
    and the system's own text (less telling: the task and the rules)."""
    return 1 if piece.role in ("user", "system", "developer") else 0


def _order_key(piece: Piece, record: TestRecord, ranked: list[Piece]) -> tuple[Any, ...]:
    kind = label_of(Counter(record.instead))
    return (kind != "cause", _telling(piece), ranked.index(piece))


def _settled(cause: Cause, context: Sequence[Any]) -> bool:
    return (
        cause.kind == "cause"
        and all(_telling(p) == 0 for p in cause.parts)
        and all(not children(p, context) for p in cause.parts)
    )


def headline_key(cause: Cause) -> tuple[Any, ...]:
    """Lower is more telling (see the module docstring, step 7)."""
    top = max(cause.test.instead, key=cause.test.instead.get) if cause.test.instead else ""
    return (
        cause.kind != "cause",
        max(_telling(p) for p in cause.parts),
        not cause.narrowed,
        top != "different",
        -cause.test.effect,
    )


def call_floor(
    run: RecordedRun,
    *,
    step: int | str,
    samples: int,
    attribution: Mapping[str, Any] | None = None,
) -> CallFloor:
    """The fewest policy calls with which :func:`why_async` can reach any verdict: the base
    arm, ``samples`` re-decisions of the step on its recorded context with seeds of their
    own (a base rate of 0 is already the verdict ``not-reproduced``); with ``step="culprit"``
    after the attribution that finds the step
    (:func:`otelcar.attribution.steps.attribute.call_floor`, its default design)."""
    own = CallFloor(samples, f"the base arm needs {samples} re-decisions")
    if step != "culprit" or attribution is not None:
        return own
    from otelcar.attribution.steps.attribute import call_floor as attribution_floor

    return attribution_floor(run) + own


async def resolve_step(
    run: RecordedRun,
    step: int | str,
    *,
    registry: PolicyRegistry,
    outcome: Outcome | None,
    seed: int = 0,
    budget: Budget | None = None,
    env: Environment | None = None,
    attribution: Mapping[str, Any] | None = None,
) -> tuple[RecordedDecision, str]:
    """The decision ``step`` names: a step number, ``culprit`` (read from ``attribution``,
    a saved ``otelcar attribute`` result of the same trace, when given; else run attribution
    first, in ``env`` when given, so its calls count in the caller's cost; the harmful step
    when the failure is locked in) or ``last`` (the last decision that called a tool)."""
    if isinstance(step, int) or str(step).lstrip("-").isdigit():
        try:
            return run.decision_at_step(int(step)), "given"
        except KeyError as exc:
            steps = [d.step for d in run.decisions]
            raise WhyError(f"{exc.args[0]}; decision steps: {steps}") from None
    if step == "last":
        acting = [d for d in run.decisions if d.action is not None and d.action.tool_calls]
        if not acting:
            raise WhyError("no decision of this trace calls a tool; pass --step K")
        return acting[-1], "the last decision that called a tool"
    if step != "culprit":
        raise WhyError(f"--step {step!r}: use a step number, culprit or last")
    if attribution is not None:
        return saved_culprit(run, attribution)
    if outcome is None:
        raise WhyError("--step culprit needs an outcome ([outcome] in otelcar.toml)")
    from otelcar.attribution.steps.attribute import attribute_async

    # Its own draws: the step is chosen on rollouts that why's samples then do not reuse.
    result = await attribute_async(
        run,
        registry=registry,
        outcome=outcome,
        seed=SeedSpace(seed).stage("culprit"),
        budget=budget,
        env=env,
        policy_check=0,  # only the step is used here
    )
    if result.culprit is not None:
        return run.decision_at_step(result.culprit.step), (
            f"culprit of otelcar attribute (Δ = {result.culprit.delta:+.2f})"
        )
    if result.harmful_step is not None:
        return run.decision_at_step(result.harmful_step), (
            "locked-in failure: the decision that made the harmful call"
        )
    raise WhyError(f"attribution found no culprit step ({result.verdict}); pass --step K")


def saved_culprit(run: RecordedRun, attribution: Mapping[str, Any]) -> tuple[RecordedDecision, str]:
    """The step a saved attribution (``otelcar attribute --json``, or
    ``AttributionResult.to_dict()``) names: its culprit, else its harmful step. Raises
    :class:`WhyError` when it is of another trace or names neither."""
    trace = attribution.get("trace_id")
    if trace != run.trace_id:
        raise WhyError(
            f"the saved attribution is of trace {trace}, not {run.trace_id}: attribute this "
            "trace first (otelcar attribute TRACE --json FILE)"
        )
    steps = {d.step for d in run.decisions}
    for key, reason in (
        ("culprit", "culprit of the saved attribution"),
        ("harmful_step", "locked-in failure (saved attribution): the harmful call's decision"),
    ):
        step = attribution.get(key)
        if isinstance(step, int) and step in steps:
            return run.decision_at_step(step), reason
    raise WhyError(
        f"the saved attribution names no culprit ({attribution.get('verdict')}); pass --step K"
    )


async def why_async(
    run: RecordedRun,
    *,
    step: int | str,
    registry: PolicyRegistry,
    same: str = "outcome",
    outcome: Outcome | None = None,
    samples: int = 10,
    seed: int = 0,
    alpha: float = 0.05,
    confidence: float = 0.95,
    fill: str = "cut",
    min_drop: float = 0.5,
    min_rate: float = 0.15,
    max_tests: int | None = None,
    max_pieces: int = 80,
    max_depth: int = 4,
    max_causes: int = 3,
    joint: bool = True,
    joint_top: int = 6,
    recheck: bool = True,
    full: bool = False,
    batch: int = 4,
    budget: Budget | None = None,
    env: Environment | None = None,
    on_sample: Callable[[Sample], None] | None = None,
    attribution: Mapping[str, Any] | None = None,
) -> WhyResult:
    """Explain the decision at ``step`` by its context (see the module docstring).

    ``same``: what counts as the same decision (:func:`~otelcar.attribution.context.decisions.
    same_decision`); ``samples``: R, the base arm and a confirmation; ``alpha``: the
    family-wise error of all the tests of the search; ``fill``: how removed text is filled
    (:mod:`otelcar.attribution.context.pieces`); ``min_drop``: a cause must remove at least this
    fraction of the base rate; ``max_tests``: the declared test budget (sets the levels;
    default ``3 × pieces + 20``, fixed from the context before any test);
    ``full``: narrow every confirmed piece (up to ``max_causes``) instead of stopping at the
    first settled cause. ``env`` may be shared with ``fix`` (its cache and accounting).
    ``attribution``: a saved attribution of this trace (``otelcar attribute --json``) that
    ``step="culprit"`` reads instead of attributing again.
    """
    started = time.perf_counter()
    env = env or Environment(registry, budget or Budget())
    refuse_small_budget(
        env.budget, call_floor(run, step=step, samples=samples, attribution=attribution)
    )
    before = env.accounting.to_dict()
    decision, reason, rule, sampler, rechecks = await _prepare(
        run, step, same=same, registry=registry, outcome=outcome, seed=seed, env=env,
        on_sample=on_sample, attribution=attribution,
    )  # fmt: skip
    search = _Search(
        sampler,
        samples=samples,
        alpha=alpha,
        fill=fill,
        min_drop=min_drop,
        min_rate=min_rate,
        max_tests=max_tests,
        max_pieces=max_pieces,
        max_depth=max_depth,
        max_causes=max_causes,
        joint=joint,
        joint_top=joint_top,
        recheck=recheck,
        full=full,
        batch=batch,
        confidence=confidence,
        recheck_sampler=rechecks,
    )
    verdict, headline, causes, untested = await _find_causes(
        search, recheck=recheck, max_causes=max_causes
    )
    base = sampler.arm([])
    _count_losses(search, sampler, rechecks, base, min_rate)
    coarse = _coarse_rule_note(rule, decision.action, base)
    if coarse and verdict != "cause":
        search.notes.append(coarse)
    after = env.accounting.to_dict()
    cost: dict[str, Any] = {k: after[k] - before[k] for k in after}
    cost.update(
        tests=len(search.tests),
        samples=sum(len(a.samples) for s in (sampler, rechecks) for a in s.arms.values()),
        wall_s=round(time.perf_counter() - started, 3),
    )
    return WhyResult(
        trace_id=run.trace_id,
        step=decision.step,
        step_reason=reason,
        decision=describe_action(decision.action),
        same=rule.describe(),
        same_spec=same,
        policy=sampler.policy.name,
        base_bad=base.bad,
        base_n=base.n,
        intermittent=search.intermittent,
        verdict=verdict,
        headline=headline,
        causes=causes,
        tests=search.tests,
        untested=untested,
        alpha=alpha,
        min_drop=min_drop,
        fill=fill,
        samples=samples,
        correction=CORRECTION,
        cost=cost,
        stopped=search.stopped,
        base_instead=dict(base.instead()),
        base_alternative=describe_action(alt) if (alt := base.alternative()) else None,
        notes=search.notes,
        confidence=confidence,
    )


async def _prepare(
    run: RecordedRun,
    step: int | str,
    *,
    same: str,
    registry: PolicyRegistry,
    outcome: Outcome | None,
    seed: int,
    env: Environment,
    on_sample: Callable[[Sample], None] | None,
    attribution: Mapping[str, Any] | None,
) -> tuple[Any, str, Any, Sampler, Sampler]:
    """The preparation stage: the decision ``step`` names (``culprit`` attributes first, on
    its own seeds) and why it was chosen, the ``same`` rule, which must match the recorded
    decision itself, and the samplers of the search and of its recheck (own seeds);
    :class:`WhyError` when any cannot be had."""
    decision, reason = await resolve_step(
        run,
        step,
        registry=registry,
        outcome=outcome,
        seed=seed,
        budget=env.budget,
        env=env,
        attribution=attribution,
    )
    if decision.action is None:
        raise WhyError(f"step {decision.step}: its action was not recorded")
    try:
        rule = same_decision(same, decision.action, registry, outcome=outcome)
        sampler = decision_sampler(run, decision, env, rule, seed=seed, on_sample=on_sample)
        rechecks = decision_sampler(
            run,
            decision,
            env,
            rule,
            seed=SeedSpace(seed).stage("why.recheck"),
            on_sample=on_sample,
        )
    except DecisionError as exc:
        raise WhyError(str(exc)) from None
    if not await rule.matches(decision.action, env):
        raise WhyError(f"--same {same!r} does not match the recorded decision itself")
    return decision, reason, rule, sampler, rechecks


async def _find_causes(
    search: _Search, *, recheck: bool, max_causes: int
) -> tuple[str, Cause | None, list[Cause], list[str]]:
    """The search stage: the base arm's verdict (when it already answers: an intermittent
    or never-made decision), else the causes found, each of the first ``max_causes`` rechecked
    with the other fill (a cause whose recheck does not hold is dropped, with a note).
    Returns the verdict, the headline cause, the causes and the untested pieces."""
    search.base_verdict = await search.measure_base()
    if search.base_verdict is not None:
        return search.base_verdict, None, [], []
    causes, untested = await search.causes()
    causes.sort(key=headline_key)
    for cause in [c for c in causes if c.kind == "cause"][:max_causes]:
        if not recheck or search.stopped != "done":
            break
        await search.recheck_cause(cause)
        if cause.recheck is not None and not cause.recheck.confirmed:
            causes.remove(cause)
            search.notes.append(
                note(
                    "recheck_failed",
                    label=cause.label,
                    text=cause.text[:80],
                    fill=search.recheck_fill,
                )
            )
    headline = next((c for c in causes if c.kind == "cause"), None)
    verdict = "cause" if headline else ("prerequisites-only" if causes else "no-cause")
    return verdict, headline, causes, untested


def _count_losses(search: _Search, sampler: Any, rechecks: Any, base: Any, min_rate: float) -> None:
    """The loss stage: re-decisions that failed are left out of the counts, with a note;
    when some assignment of them could change an answer, :func:`refusal` is raised."""
    errors = [e for a in (*sampler.arms.values(), *rechecks.arms.values()) for e in a.errors]
    if not errors:
        return
    changing = losses_could_change(search.tests, base, search.base_verdict, min_rate)
    if changing:
        raise refusal(errors, changing)
    search.notes.append(note("redecisions_lost", failed=len(errors)))


def _coarse_rule_note(rule: Any, recorded: Message, base: Any) -> Note | None:
    """A note when ``--same tool`` counted re-decisions with other arguments as the recorded
    decision: a harmful and a good call of the same tool are then one decision, and no text
    can be found to cause the difference."""
    if not isinstance(rule, SameTool):
        return None
    target = next((c for c in recorded.tool_calls if c.name == rule.name), None)
    if target is None:
        return None
    want = canonical(target.arguments)
    others = {
        canonical(c.arguments)
        for sample in base.valid()
        if sample.bad and sample.action is not None
        for c in sample.action.tool_calls
        if c.name == rule.name and canonical(c.arguments) != want
    }
    if not others:
        return None
    return note(
        "coarse_same_tool", tool=rule.name, others=len(others), shown=sorted(others)[:2], want=want
    )


why = synchronous(why_async, name="why")
