"""Reports people want to look at: one self-contained HTML file per result, the terminal
report, and the report sections result writers add to their JSON.

- :func:`write_html` / :func:`render_html` — the HTML report of an attribution (and of
  ``why``/``fix`` results), :func:`write_aggregate_html` that of ``otelcar aggregate``.
- :func:`report_sections` / :func:`with_report_sections` and :class:`RolloutSampler` — what a
  result writer adds to its JSON so that ``otelcar report RESULT.json`` can draw it again.
- :func:`read_result` — a result JSON file, checked for its ``kind`` and ``version``.
"""

from otelcar.report.aggregate_html import render_aggregate_html, write_aggregate_html
from otelcar.report.data import (
    RolloutSampler,
    report_sections,
    timeline_section,
    with_report_sections,
)
from otelcar.report.html import render_html, write_html
from otelcar.report.io import ReportError, read_result

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
