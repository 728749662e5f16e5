"""JSON Schemas of kept timelines and their diffs, generated from
:mod:`otelcar.replay.timeline_documents`: ``otelcar timelines --json``
(``timelines-list.schema.json``), ``otelcar show --timeline --json`` (``timeline.schema.json``)
and ``otelcar diff --json`` (``diff.schema.json``)."""

from __future__ import annotations

from typing import Any

from otelcar.replay.timeline_documents import TimelineShowDocument, TimelinesListDocument
from otelcar.report.documents import DiffReportDocument
from otelcar.typeschema import document_schema


def timelines_list_schema_document() -> dict[str, Any]:
    """JSON Schema of ``otelcar timelines TRACE --json``."""
    return document_schema(
        TimelinesListDocument,
        name="timelines-list.schema.json",
        title="otelcar timelines of one trace",
    )


def timeline_schema_document() -> dict[str, Any]:
    """JSON Schema of ``otelcar show TRACE --timeline NAME --json``."""
    return document_schema(
        TimelineShowDocument, name="timeline.schema.json", title="otelcar timeline, one rollout"
    )


def diff_schema_document() -> dict[str, Any]:
    """JSON Schema of ``otelcar diff TRACE A [B] --json``."""
    return document_schema(
        DiffReportDocument, name="diff.schema.json", title="otelcar diff of two runs of one trace"
    )
