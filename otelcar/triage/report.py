"""The systematic weak step per service and week, over what triage attributed (docs/triage.md).

Every ``done`` state's attribution becomes a :class:`~otelcar.attribution.aggregate.TraceVerdict`
(its steps read from the store, for each decision's identity: the agent and the call it
makes) and the verdicts of one service and ISO week (of the trace's start, else of when
triage saw it) are aggregated as ``otelcar aggregate`` aggregates them: which step identity is
the culprit more often than chance, with its interval and its Holm-adjusted p. No policy call
is made: the analyses were made as the traces arrived.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime
from typing import Any

from otelcar.attribution.aggregate import AggregateResult, TraceVerdict, aggregate, trace_verdict
from otelcar.report.prose import document
from otelcar.store import Store
from otelcar.triage.queue import TriageQueue


def iso_week(moment: datetime) -> str:
    """``2026-W49``: the ISO year and week of ``moment``."""
    year, week, _ = moment.isocalendar()
    return f"{year}-W{week:02d}"


def _week_of(state: dict[str, Any], starts: dict[str, int]) -> str:
    start = starts.get(state["trace_id"])
    if start is not None:
        return iso_week(datetime.fromtimestamp(start / 1e9, UTC))
    seen = state.get("seen_at") or state.get("finished_at")
    return iso_week(datetime.fromisoformat(seen)) if seen else "unknown"


def weekly(
    store: Store, *, confidence: float = 0.95, service: str | None = None
) -> list[tuple[str | None, str, AggregateResult]]:
    """``(service, week, aggregate)`` for every service and ISO week with an attributed
    trace, newest week first; ``service``: only that one. A state whose trace is no longer in
    the store is counted as skipped, with the reason."""
    done = [s for s in TriageQueue(store.root).all() if s["state"] == "done" and s["attribution"]]
    if service is not None:
        done = [s for s in done if s.get("service") == service]
    index = store.traces()
    starts = dict(zip(index["trace_id"].to_list(), index["start_ns"].to_list(), strict=True))
    groups: dict[tuple[str | None, str], list[TraceVerdict]] = defaultdict(list)
    for state in done:
        key = (state.get("service"), _week_of(state, starts))
        try:
            steps = store.steps(state["trace_id"])
        except Exception as exc:  # a trace removed from the store since
            groups[key].append(
                TraceVerdict(state["trace_id"], "skipped", reason=f"not in the store: {exc}")
            )
            continue
        groups[key].append(trace_verdict(state["attribution"], steps))
    out = [
        (svc, week, aggregate(verdicts, confidence=confidence, service=svc, since=week))
        for (svc, week), verdicts in groups.items()
    ]
    return sorted(out, key=lambda item: (item[1], item[0] or ""), reverse=True)


def weekly_document(results: list[tuple[str | None, str, AggregateResult]]) -> dict[str, Any]:
    """The JSON of :func:`weekly`: ``{"weeks": [{"service", "week", "aggregate"}]}``, each
    aggregate as ``otelcar aggregate --json`` writes it."""
    return {
        "weeks": [
            {"service": svc, "week": week, "aggregate": document(result)}
            for svc, week, result in results
        ]
    }
