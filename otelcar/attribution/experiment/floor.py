"""The fewest policy calls an analysis needs to reach any verdict, and the refusal of a
budget below it before a single call is spent.

Each analysis states its own floor (:func:`otelcar.attribution.steps.attribute.call_floor`,
:func:`otelcar.attribution.context.why.call_floor`,
:func:`otelcar.attribution.fixes.fix.call_floor`) as a lower bound that holds whatever the
policy answers: it counts only requests that are certainly distinct (another decision's
recorded context, or another seed), so the request cache cannot serve any of them. A budget
at or above the floor may still end undecided; one below it cannot end any other way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from otelcar.errors import BudgetTooSmall

if TYPE_CHECKING:
    from otelcar.replay.harness import Budget


@dataclass(frozen=True)
class CallFloor:
    """At least ``calls`` policy calls before any verdict; ``detail`` says where they go
    (``"the first look needs at least 40: 8 rollouts per plan × 5 decisions re-decided"``)."""

    calls: int
    detail: str

    def __add__(self, other: CallFloor) -> CallFloor:
        return CallFloor(self.calls + other.calls, f"{self.detail}, then {other.detail}")


def refuse_small_budget(budget: Budget | None, floor: CallFloor) -> None:
    """Raise :class:`~otelcar.errors.BudgetTooSmall` when ``budget`` caps policy calls below
    ``floor`` (counting what it has spent already: a budget shared with an earlier stage);
    nothing when it has no call cap."""
    if budget is None or budget.max_calls is None:
        return
    left = budget.max_calls - budget.calls
    if left >= floor.calls:
        return
    spent = f" ({left} left after {budget.calls} spent)" if budget.calls else ""
    raise BudgetTooSmall(
        f"a budget of {budget.max_calls} policy calls{spent} cannot reach any verdict on this "
        f"trace ({floor.detail}): use --budget {floor.calls + budget.calls} or more",
        budget=left,
        needed=floor.calls,
    )
