"""``acme-jsonl``: ACME's own dump format, one span per line, read by ``otelcar import``.

A line is ``{"acme_span": ID, "trace": ID, "parent": ID | null, "name", "start_ns", "end_ns",
"service", "status": "ok" | "error", "agent" | "llm" | "tool": {…}}`` where ``llm`` holds
``model``, ``temperature``, ``prompt`` (ACME messages), ``completion`` (one ACME message) and
``tokens`` (``in``, ``out``), and ``tool`` holds ``name``, ``input``, ``output``, ``call_id``.

As the built-in formats do, decoding only moves the record onto a span whose attributes are
namespaced (``acme.*``, as the ACME SDK itself would set them): the ACME mapper
(:mod:`otelcar_acme.mapper`) then makes the step, so ``otelcar reindex`` re-runs both halves on
the raw lines kept in the store.
"""

from __future__ import annotations

import json
from typing import Any

from otelcar.errors import FormatError
from otelcar.ingest.formats import ExportFormat, derived_id
from otelcar.ingest.frames import Decoded, SpanFrame

FORMAT = "acme-jsonl"


def detect(value: Any) -> bool:
    """Whether a file's first JSON value is an ACME span line."""
    return isinstance(value, dict) and "acme_span" in value and "trace" in value


def decode(payload: bytes) -> Decoded:
    """One line → one span; raises :class:`FormatError` with the reason for a bad line."""
    try:
        line = json.loads(payload)
    except ValueError as exc:
        raise FormatError(f"not JSON: {exc}") from None
    if not detect(line):
        raise FormatError("not an ACME span line (no 'acme_span' and 'trace')")
    try:
        start, end = int(line["start_ns"]), int(line["end_ns"])
    except (KeyError, TypeError, ValueError):
        raise FormatError("an ACME span needs integer start_ns and end_ns") from None
    parent = line.get("parent")
    span = SpanFrame(
        trace_id=derived_id(str(line["trace"]), size=16),
        span_id=derived_id(str(line["acme_span"]), size=8),
        parent_span_id=derived_id(str(parent), size=8) if parent else None,
        name=str(line.get("name") or "acme"),
        kind="INTERNAL",
        start_ns=start,
        end_ns=end,
        status_code="ERROR" if line.get("status") == "error" else "UNSET",
        attributes=_attributes(line),
        resource={"service.name": str(line.get("service") or "acme")},
        scope_name="acme-jsonl",
    )
    return Decoded(spans=[span])


def _attributes(line: dict[str, Any]) -> dict[str, Any]:
    attributes: dict[str, Any] = {}
    if line.get("agent"):
        attributes["acme.agent.name"] = str(line["agent"])
    llm = line.get("llm")
    if isinstance(llm, dict):
        for key in ("prompt", "completion"):
            if key in llm:
                attributes[f"acme.llm.{key}"] = json.dumps(llm[key], ensure_ascii=False)
        for key in ("model", "temperature"):
            if llm.get(key) is not None:
                attributes[f"acme.llm.{key}"] = llm[key]
        for key, value in (llm.get("tokens") or {}).items():
            attributes[f"acme.llm.tokens.{key}"] = value
    tool = line.get("tool")
    if isinstance(tool, dict):
        attributes["acme.tool.name"] = str(tool.get("name") or "")
        if "input" in tool:
            attributes["acme.tool.input"] = json.dumps(tool["input"], ensure_ascii=False)
        for key in ("output", "call_id"):
            if tool.get(key) is not None:
                attributes[f"acme.tool.{key}"] = str(tool[key])
    return attributes


ACME_JSONL = ExportFormat(
    FORMAT, "ACME agent dumps: one span per JSON line (otelcar-plugin-example)", decode, detect
)
