"""What the console adds to the trace index from the steps: tokens, cost and session per
trace, and the traces of a session.

The trace index has no token or session columns, so these are read from the steps — for the
listed page's traces only (a projection of five small columns, filtered by trace id: the
contexts are never read). A source that cannot scan steps (a remote one) gets none, and the
list says so rather than showing zeros.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl

from otelcar.pricing import Cost, cost_of

#: The step columns these totals read.
COLUMNS = ("trace_id", "kind", "response_model", "request_model", "usage", "conversation_id")


@dataclass(frozen=True)
class TraceTotals:
    """One trace's tokens and cost (:class:`~otelcar.pricing.Cost`) and its session: the
    conversation id its steps record (``gen_ai.conversation.id``, ``session.id``, a
    Langfuse or LangSmith session), the first when several."""

    cost: Cost
    session: str | None


def _scan(source: Any) -> pl.LazyFrame | None:
    scan = getattr(source, "scan_steps", None)
    return None if scan is None else scan().select(COLUMNS)


def page_totals(
    source: Any, trace_ids: Sequence[str], prices: Mapping[str, tuple[float, float]]
) -> dict[str, TraceTotals] | None:
    """Each listed trace's :class:`TraceTotals`; ``None`` when ``source`` cannot scan steps."""
    scan = _scan(source)
    if scan is None:
        return None
    steps = scan.filter(pl.col("trace_id").is_in(list(trace_ids))).collect()
    out = {}
    for (trace_id,), group in steps.group_by("trace_id"):
        sessions = group["conversation_id"].drop_nulls()
        out[str(trace_id)] = TraceTotals(
            cost_of(group, prices), str(sessions[0]) if sessions.len() else None
        )
    return out


def session_traces(source: Any, session: str) -> list[str] | None:
    """The traces whose steps record conversation id ``session``; ``None`` when ``source``
    cannot scan steps."""
    scan = _scan(source)
    if scan is None:
        return None
    found = scan.filter(pl.col("conversation_id") == session).select("trace_id").unique()
    return sorted(found.collect()["trace_id"].to_list())
