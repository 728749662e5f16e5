"""The export-format registry: a non-OTLP JSON dump is sniffed, kept raw and decoded."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from otelcar import Store, import_files
from otelcar.errors import FormatError
from otelcar.ingest import formats
from otelcar.ingest.files import read_records
from otelcar.ingest.formats import ExportFormat, derived_id, register_format
from otelcar.ingest.frames import Decoded, SpanFrame


def _decode(payload: bytes) -> Decoded:
    value = json.loads(payload)
    if "step" not in value:
        raise FormatError("toy record without a step")
    trace = derived_id(value["run"], size=16)
    return Decoded(
        spans=[
            SpanFrame(
                trace_id=trace,
                span_id=derived_id(str(value["step"]), size=8),
                parent_span_id=None,
                name=f"step {value['step']}",
                kind="INTERNAL",
                start_ns=value["step"],
                end_ns=value["step"],
                attributes={"toy.text": value.get("text")},
            )
        ]
    )


@pytest.fixture
def toy_format():
    register_format(
        ExportFormat(
            "toy-log",
            "test format",
            _decode,
            detect=lambda v: isinstance(v, dict) and "run" in v,
            claims_head=lambda head: head.startswith(b"TOY\n"),
        )
    )
    yield
    formats._FORMATS.pop("toy-log")


def test_json_lines_of_an_export_format_are_detected_and_decoded(toy_format, tmp_path: Path):
    dump = tmp_path / "toy.jsonl"
    dump.write_text(
        '{"run": "r1", "step": 1, "text": "a"}\n{"run": "r1"}\n'
        '{"run": "r1", "step": 2, "text": "b"}\n'
    )
    assert {r.format for r in read_records(dump)} == {"toy-log"}
    store = Store(tmp_path / "s")
    report = import_files([dump], store=store)
    assert report.imported == 2 and report.unparsed[0].reason == "toy record without a step"
    steps = store.steps()
    assert steps["name"].to_list() == ["step 1", "step 2"]
    assert json.loads(steps["attributes"][0]) == {"toy.text": "a"}
    assert steps["trace_id"][0] == derived_id("r1", size=16)


def test_whole_document_and_head_claimed_files(toy_format, tmp_path: Path):
    doc = tmp_path / "toy.json"
    doc.write_text(json.dumps({"run": "r2", "step": 3}, indent=2))
    assert [r.format for r in read_records(doc)] == ["toy-log"]
    text = tmp_path / "toy.txt"
    text.write_text("TOY\nnot json\n")
    assert [r.format for r in read_records(text)] == ["toy-log"]


def test_derived_ids_are_stable_and_keep_uuids():
    uuid = "0190f5a2-7c1e-7b3a-9d2e-4f5a6b7c8d9e"
    assert derived_id(uuid, size=16) == uuid.replace("-", "")
    assert derived_id("run-1", size=8) == derived_id("run-1", size=8)
    assert len(derived_id(uuid, size=8)) == 16
