"""What an import (or a materialization) did, in counts and reasons."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class RecordProblem:
    """A record kept unparsed, or decoded with some parts rejected."""

    source: str
    position: str
    reason: str


@dataclass(slots=True)
class ImportReport:
    """Counts of one import. ``imported`` counts records decoded fully or in part."""

    records: int = 0
    imported: int = 0
    duplicates: int = 0
    unparsed: list[RecordProblem] = field(default_factory=list)
    partial: list[RecordProblem] = field(default_factory=list)
    spans: int = 0
    logs: int = 0
    rejected_items: int = 0
    logs_without_trace: int = 0
    traces: set[str] = field(default_factory=set)
    new_traces: int = 0
    quarantined: list[str] = field(default_factory=list)
    #: Paths not read, with why: position ``named`` (a path the user named: an error) or
    #: ``walked`` (found while walking a named directory: a note).
    skipped_paths: list[RecordProblem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """False only when nothing at all could be imported (and nothing was already there)."""
        return self.imported > 0 or self.duplicates > 0

    @property
    def complete(self) -> bool:
        """:attr:`ok`, and every path the user named could be read."""
        return self.ok and not any(p.position == "named" for p in self.skipped_paths)

    def merge(self, other: ImportReport) -> None:
        self.records += other.records
        self.imported += other.imported
        self.duplicates += other.duplicates
        self.unparsed.extend(other.unparsed)
        self.partial.extend(other.partial)
        self.spans += other.spans
        self.logs += other.logs
        self.rejected_items += other.rejected_items
        self.logs_without_trace += other.logs_without_trace
        self.traces |= other.traces
        self.new_traces += other.new_traces
        self.quarantined.extend(other.quarantined)
        self.skipped_paths.extend(other.skipped_paths)

    def to_dict(self) -> dict[str, Any]:
        return {
            "records": self.records,
            "imported": self.imported,
            "duplicates": self.duplicates,
            "unparsed": [vars_of(p) for p in self.unparsed],
            "partial": [vars_of(p) for p in self.partial],
            "spans": self.spans,
            "logs": self.logs,
            "rejected_items": self.rejected_items,
            "logs_without_trace": self.logs_without_trace,
            "traces": sorted(self.traces),
            "new_traces": self.new_traces,
            "quarantined": self.quarantined,
            "skipped_paths": [vars_of(p) for p in self.skipped_paths],
        }


def vars_of(problem: RecordProblem) -> dict[str, str]:
    return {"source": problem.source, "position": problem.position, "reason": problem.reason}
