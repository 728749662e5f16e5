"""The words of an import (:class:`~otelcar.store.report.ImportReport`): its headline, the
lines under it, and the terminal report ``otelcar import`` prints. Kept apart from
:mod:`otelcar.report.prose` so that importing files loads no analysis."""

from __future__ import annotations

from collections import Counter

from rich.console import Console

from otelcar.render import untrusted_text
from otelcar.store.report import ImportReport


def import_report(console: Console, report: ImportReport) -> None:
    """An import's headline and the lines under it."""
    style = "green" if report.ok and not report.unparsed else "yellow" if report.ok else "red"
    console.print(untrusted_text(import_headline(report), style=style))
    for line in import_details(report):
        console.print(untrusted_text(line))


def import_headline(report: ImportReport) -> str:
    """``N records, M imported, D already in the store, K kept unparsed: reasons…``"""
    parts = [f"{report.records} records", f"{report.imported} imported"]
    if report.duplicates:
        parts.append(f"{report.duplicates} already in the store")
    text = ", ".join(parts) + f", {len(report.unparsed)} kept unparsed"
    if report.unparsed:
        reasons = Counter(reason_kind(p.reason) for p in report.unparsed)
        text += ": " + "; ".join(f"{n}× {r}" for r, n in reasons.most_common())
    return text


def import_details(report: ImportReport) -> list[str]:
    """The lines under an import's headline: spans, traces, rejected items, and where each
    problem is."""
    lines = [
        f"{report.spans} spans and {report.logs} log records in {len(report.traces)} "
        f"traces ({report.new_traces} new)"
    ]
    if report.rejected_items:
        lines.append(
            f"{report.rejected_items} spans/log records inside decodable records "
            "were rejected (kept raw):"
        )
    if report.logs_without_trace:
        lines.append(
            f"{report.logs_without_trace} log records carry no trace context "
            "(kept, not part of any trace)"
        )
    for problem in report.partial:
        lines.append(f"  {problem.source} {problem.position}: {problem.reason}")
    for problem in report.unparsed:
        lines.append(f"  unparsed {problem.source} {problem.position}: {problem.reason}")
    for item in report.quarantined:
        lines.append(f"  quarantined {item}")
    for problem in report.skipped_paths:
        what = "not read" if problem.position == "named" else "skipped"
        lines.append(f"  {what} {problem.source}: {problem.reason}")
    return lines


#: The longest reason kind shown in a headline; a longer one is cut at a word.
REASON_KIND_CHARS = 100
_OPEN, _CLOSE = "([{", ")]}"


def reason_kind(reason: str) -> str:
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
