"""Reports people want to look at: one self-contained HTML file per result, the terminal
report, and the report sections result writers add to their JSON.

- :func:`write_html` / :func:`render_html` — the HTML report of an attribution (and of
  ``why``/``fix`` results), :func:`write_aggregate_html` that of ``otelcar aggregate``.
- :func:`report_sections` / :func:`with_report_sections` and :class:`RolloutSampler` — what a
  result writer adds to its JSON so that ``otelcar report RESULT.json`` can draw it again.
- :func:`read_result` — a result JSON file, checked for its ``kind`` and ``version``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from otelcar.report.aggregate_html import render_aggregate_html, write_aggregate_html
    from otelcar.report.data import (
        RolloutSampler,
        report_sections,
        timeline_section,
        with_report_sections,
    )
    from otelcar.report.html import render_html, write_html
    from otelcar.report.io import ReportError, read_result

#: Where each public name lives. They load on first use, so a module that needs one report
#: module (a schema, the diff page) does not load the attribution and statistics stack the
#: HTML reports import.
_HOMES = {
    "render_aggregate_html": "aggregate_html",
    "write_aggregate_html": "aggregate_html",
    "RolloutSampler": "data",
    "report_sections": "data",
    "timeline_section": "data",
    "with_report_sections": "data",
    "render_html": "html",
    "write_html": "html",
    "ReportError": "io",
    "read_result": "io",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'otelcar.report' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"otelcar.report.{home}"), name)
    globals()[name] = value
    return value


__all__ = [
    "ReportError",
    "RolloutSampler",
    "read_result",
    "render_aggregate_html",
    "render_html",
    "report_sections",
    "timeline_section",
    "with_report_sections",
    "write_aggregate_html",
    "write_html",
]
