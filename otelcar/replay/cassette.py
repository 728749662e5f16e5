"""The cassette: recorded tool results served by (tool name, canonical arguments).

A call that recurs with the same arguments gets the recorded result (the n-th recurrence gets
the n-th recorded result of that call, then the last one again); anything else is a miss, and
the tool policy runs. Recorded tools are never re-executed for a hit (side effects).
"""

from __future__ import annotations

import json
from collections import defaultdict

from otelcar.identity import IdentityMemo
from otelcar.messages import Arguments, arguments_text
from otelcar.replay.recorded import RecordedRun

Results = dict[tuple[str, str], list[tuple[str | None, str | None]]]

#: Each run's recorded results, remembered: every rollout looks up the same recorded calls
#: of the same run.
_RUN_RESULTS: IdentityMemo[RecordedRun, Results] = IdentityMemo(8)


def call_key(name: str | None, arguments: Arguments) -> tuple[str, str]:
    """Canonical identity of a tool call: name and key-sorted JSON arguments."""
    if isinstance(arguments, dict):
        text = arguments_text(arguments)
    else:
        text = "" if arguments is None else str(arguments)
    return (name or "", text)


def _recorded_results(run: RecordedRun) -> Results:
    results: Results = defaultdict(list)
    for decision in run.decisions:
        for obs in decision.observations:
            if obs.result is not None or obs.error is not None:
                results[call_key(obs.call.name, obs.call.arguments)].append((obs.result, obs.error))
    return dict(results)


class Cassette:
    """Per-rollout view of the recorded observations (consumption is per rollout; the
    recorded results are indexed once per run)."""

    def __init__(self, run: RecordedRun) -> None:
        self._results = _RUN_RESULTS.get(run, _recorded_results)
        self._used: dict[tuple[str, str], int] = defaultdict(int)

    def play(self, name: str | None, arguments: Arguments) -> tuple[str | None, str | None] | None:
        """``(result, error)`` recorded for this call, or ``None`` for a miss."""
        key = call_key(name, arguments)
        results = self._results.get(key)
        if not results:
            return None
        index = min(self._used[key], len(results) - 1)
        self._used[key] += 1
        return results[index]

    def consume(self, keys: tuple[tuple[str, str], ...]) -> None:
        """Count the recorded results of ``keys`` (:func:`call_key`) as played, as if
        :meth:`play` had served each (a held decision adopted from the shared walk)."""
        for key in keys:
            self._used[key] += 1

    def examples(self) -> dict[str, list[tuple[Arguments, str]]]:
        """Recorded (arguments, result) pairs per tool, for simulated tools."""
        out: dict[str, list[tuple[Arguments, str]]] = defaultdict(list)
        for (name, arguments), results in self._results.items():
            for result, _ in results:
                if result is not None:
                    try:
                        parsed: Arguments = json.loads(arguments) if arguments else None
                    except ValueError:
                        parsed = arguments
                    out[name].append((parsed, result))
        return dict(out)
