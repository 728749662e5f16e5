"""What an import (or a materialization) did, in counts and reasons."""

from __future__ import annotations

from collections import Counter
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

    def headline(self) -> str:
        """``N records, M imported, D already in the store, K kept unparsed: reasons…``"""
        parts = [f"{self.records} records", f"{self.imported} imported"]
        if self.duplicates:
            parts.append(f"{self.duplicates} already in the store")
        text = ", ".join(parts) + f", {len(self.unparsed)} kept unparsed"
        if self.unparsed:
            reasons = Counter(_reason_kind(p.reason) for p in self.unparsed)
            text += ": " + "; ".join(f"{n}× {r}" for r, n in reasons.most_common())
        return text

    def details(self) -> list[str]:
        """Further lines: spans, traces, rejected items, and where each problem is."""
        lines = [
            f"{self.spans} spans and {self.logs} log records in {len(self.traces)} "
            f"traces ({self.new_traces} new)"
        ]
        if self.rejected_items:
            lines.append(
                f"{self.rejected_items} spans/log records inside decodable records "
                "were rejected (kept raw):"
            )
        if self.logs_without_trace:
            lines.append(
                f"{self.logs_without_trace} log records carry no trace context "
                "(kept, not part of any trace)"
            )
        for problem in self.partial:
            lines.append(f"  {problem.source} {problem.position}: {problem.reason}")
        for problem in self.unparsed:
            lines.append(f"  unparsed {problem.source} {problem.position}: {problem.reason}")
        for item in self.quarantined:
            lines.append(f"  quarantined {item}")
        for problem in self.skipped_paths:
            what = "not read" if problem.position == "named" else "skipped"
            lines.append(f"  {what} {problem.source}: {problem.reason}")
        return lines

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


#: The longest reason kind shown in a headline; a longer one is cut at a word.
REASON_KIND_CHARS = 100
_OPEN, _CLOSE = "([{", ")]}"


def _reason_kind(reason: str) -> str:
    """The kind of a reason: its text up to the first ``:`` or ``;`` outside brackets and
    quotes (what follows is position-specific detail), whole words only; cut at a word
    boundary, with an ellipsis, past :data:`REASON_KIND_CHARS`."""
    depth, quote, end = 0, "", len(reason)
    for index, char in enumerate(reason):
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"" and (index == 0 or not reason[index - 1].isalnum()):
            quote = char
        elif char in _OPEN:
            depth += 1
        elif char in _CLOSE:
            depth = max(0, depth - 1)
        elif char in ":;" and depth == 0:
            end = index
            break
    kind = reason[:end].rstrip()
    if len(kind) > REASON_KIND_CHARS:
        cut = kind.rfind(" ", 0, REASON_KIND_CHARS)
        kind = kind[: cut if cut > 0 else REASON_KIND_CHARS].rstrip(" ,(") + " …"
    return kind or reason[:REASON_KIND_CHARS]
