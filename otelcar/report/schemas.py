"""JSON Schemas of the results otelcar writes (``schemas/*.schema.json``, ``otelcar schema``):
the report side of each estimator's result, kept apart from the estimators that compute it."""

from __future__ import annotations

from typing import Any

from otelcar.attribution.pairs_documents import PairLine
from otelcar.report.documents import (
    AggregateReportDocument,
    AttributionReportDocument,
    FixReportDocument,
    WhyReportDocument,
)
from otelcar.typeschema import document_schema


def attribution_schema_document() -> dict[str, Any]:
    """JSON Schema of an attribution result (``schemas/attribution.schema.json``), generated
    from :class:`~otelcar.report.documents.AttributionReportDocument`: ``timeline`` and
    ``alternatives`` are optional report sections that result writers add
    (:func:`otelcar.report.with_report_sections`) so the result can be drawn again."""
    return document_schema(
        AttributionReportDocument, name="attribution.schema.json", title="otelcar attribute --json"
    )


def why_schema_document() -> dict[str, Any]:
    """JSON Schema of ``otelcar why --json`` (``schemas/why.schema.json``), generated from
    :class:`~otelcar.report.documents.WhyReportDocument`."""
    return document_schema(WhyReportDocument, name="why.schema.json", title="otelcar why --json")


def fix_schema_document() -> dict[str, Any]:
    """JSON Schema of ``otelcar fix --json`` (``schemas/fix.schema.json``), generated from
    :class:`~otelcar.report.documents.FixReportDocument`."""
    return document_schema(FixReportDocument, name="fix.schema.json", title="otelcar fix --json")


def aggregate_schema_document() -> dict[str, Any]:
    """JSON Schema of ``otelcar aggregate --json`` (``schemas/aggregate.schema.json``),
    generated from :class:`~otelcar.report.documents.AggregateReportDocument`."""
    return document_schema(
        AggregateReportDocument, name="aggregate.schema.json", title="otelcar aggregate --json"
    )


def pairs_schema_document() -> dict[str, Any]:
    """JSON Schema of one line of ``otelcar export pairs`` in any ``--format``
    (``schemas/pairs.schema.json``), generated from
    :data:`~otelcar.attribution.pairs_documents.PairLine`."""
    return document_schema(
        PairLine,
        name="pairs.schema.json",
        title="otelcar preference pair (one JSONL line of `otelcar export pairs`)",
    )
