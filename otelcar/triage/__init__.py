"""Triage as traces arrive (issue 41; docs/triage.md).

Every trace that completes (its root span arrived, or no new span for ``[triage] quiet_s``)
is judged with the configured ``[outcome]`` on the recorded run; a failing one is queued for
``attribute`` (and ``why`` on its culprit with ``[triage] why``) and analysed in the
background within the limits of ``[triage]``. The queue is in the store
(``<store>/triage/``, :mod:`otelcar.triage.queue`): one JSON state file per trace, which the
console, the MCP server and any exporter read.

Modules, one job each: :mod:`~otelcar.triage.files` (atomic JSON files),
:mod:`~otelcar.triage.queue` (the per-trace states), :mod:`~otelcar.triage.ledger` (calls
spent per day), :mod:`~otelcar.triage.completion` (when a trace is complete),
:mod:`~otelcar.triage.safety` (what triage refuses to run), :mod:`~otelcar.triage.analysis`
(one trace's analyses), :mod:`~otelcar.triage.engine` (the loop),
:mod:`~otelcar.triage.status` (what ``otelcar triage status`` says) and
:mod:`~otelcar.triage.child` (the engine as a child process of ``otelcar collect``).
"""

from otelcar.triage.queue import STATES, TriageQueue

__all__ = ["STATES", "TriageQueue"]
