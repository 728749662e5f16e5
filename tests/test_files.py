"""Splitting dump files into records: sniffing, gzip, streams, broken input."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from otelcar.errors import FormatError
from otelcar.ingest.files import read_records, sniff
from otelcar.ingest.raw import decode_record
from tests.conftest import BAD, OTLP


@pytest.mark.parametrize(
    ("name", "expected_records", "fmt"),
    [
        ("new_content.traces.jsonl", 2, "otlp-json"),
        ("new_content.traces.jsonl.gz", 2, "otlp-json"),
        ("new_content.traces.json", 1, "otlp-json"),
        ("new_content.traces.pb", 1, "otlp-proto"),
        ("new_content.traces.pb.gz", 1, "otlp-proto"),
        ("new_content.traces.binpb", 2, "otlp-proto"),
        ("new_content.logs.pb", 1, "otlp-proto"),
    ],
)
def test_every_committed_format_splits_into_decodable_records(name, expected_records, fmt):
    records = list(read_records(OTLP / name))
    assert len(records) == expected_records
    assert {r.format for r in records} == {fmt}
    spans = logs = 0
    for record in records:
        decoded, _ = decode_record(record)
        assert decoded.problems == []
        spans += len(decoded.spans)
        logs += len(decoded.logs)
    assert (spans, logs) == ((0, 3) if "logs" in name else (7, 0))


def test_sniff_rules():
    assert sniff(b'{"resourceSpans": []}\n{"resourceSpans": []}\n') == "otlp-jsonl"
    assert sniff(b'{\n  "resourceSpans": []\n}\n') == "otlp-json"
    assert sniff(b'{"resourceSpans": []}') == "otlp-json"
    assert sniff(b"\x0a\x02\x0a\x00") == "otlp-proto"
    assert sniff(b"\x00\x00\x00\x04\x0a\x02\x0a\x00") == "otlp-proto-stream"
    assert sniff(b"some text\nnot json\n") == "unknown"
    assert sniff(b'garbage line\n{"resourceSpans": []}\n') == "otlp-jsonl"
    with pytest.raises(FormatError, match="zstd"):
        sniff(b"\x28\xb5\x2f\xfd....")


def test_format_override(tmp_path: Path):
    path = tmp_path / "dump.txt"
    path.write_bytes((OTLP / "new_content.traces.binpb").read_bytes())
    assert len(list(read_records(path, format="otlp-proto-stream"))) == 2
    with pytest.raises(FormatError, match="unknown format"):
        list(read_records(path, format="csv"))


def test_truncated_stream_keeps_the_good_frame_and_explains_the_bad_tail():
    records = list(read_records(BAD / "truncated.binpb"))
    assert len(records) == 2
    assert records[0].note is None
    assert records[1].note.startswith("truncated frame: length prefix says")
    assert records[1].position.startswith("frame 2")


def test_truncated_json_line_is_its_own_record():
    records = list(read_records(BAD / "truncated_line.traces.jsonl"))
    assert [r.position for r in records] == ["line 1", "line 2", "line 3"]
    with pytest.raises(FormatError, match="invalid JSON"):
        decode_record(records[1])


def test_empty_file_has_no_records_and_corrupt_gzip_is_explained(tmp_path: Path):
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    assert list(read_records(empty)) == []
    broken = tmp_path / "broken.jsonl.gz"
    data = gzip.compress((OTLP / "new_content.traces.jsonl").read_bytes())
    broken.write_bytes(data[: len(data) // 2])
    records = list(read_records(broken))
    assert records[-1].note is not None and "ends early" in records[-1].note
    # Corrupt (not cut) data is still explained as such.
    garbled = tmp_path / "garbled.jsonl.gz"
    garbled.write_bytes(data[:20] + b"\xff" * 64 + data[84:])
    assert "corrupt" in (list(read_records(garbled))[-1].note or "")


def test_a_truncated_gzip_keeps_every_record_before_the_cut(tmp_path: Path):
    lines = (OTLP / "new_content.traces.jsonl").read_bytes().splitlines(keepends=True)
    whole = b"".join(lines * 30)
    data = gzip.compress(whole)
    cut = tmp_path / "cut.jsonl.gz"
    cut.write_bytes(data[: len(data) * 3 // 4])
    records = list(read_records(cut))
    decoded = [r for r in records if r.note is None and r.payload.rstrip().endswith(b"}")]
    assert len(decoded) >= len(lines) * 30 // 2  # most of it was whole
    assert "ends early" in (records[-1].note or "")
    # Several gzip members (concatenated files) read as one stream, nothing flagged.
    members = tmp_path / "members.jsonl.gz"
    members.write_bytes(gzip.compress(whole) + gzip.compress(whole))
    again = list(read_records(members))
    assert len(again) == 2 * len(lines) * 30 and all(r.note is None for r in again)


def test_a_first_line_longer_than_the_sniff_window_is_still_json_lines(tmp_path: Path):
    line = (OTLP / "new_content.traces.jsonl").read_text().splitlines()[0]
    padded = line.replace(
        '"resourceSpans"', '"padding": "' + "x" * 100_000 + '", "resourceSpans"', 1
    )
    path = tmp_path / "long.jsonl"
    path.write_text(padded + "\n" + line + "\n")
    records = list(read_records(path))
    assert len(records) == 2


def test_a_named_file_nothing_in_which_reads_is_named_and_the_import_is_incomplete(tmp_path):
    """``otelcar import good.jsonl bad``: the good file is imported, the bad one is named
    with its reason, and the exit status is non-zero (issue 36)."""
    from click.testing import CliRunner

    from otelcar import Store, import_files
    from otelcar.cli import cli

    good = OTLP / "new_content.traces.jsonl"
    bad = tmp_path / "bad.json"
    bad.write_text('{"resourceSpans": "oops"}\n')
    report = import_files([good, bad], store=Store(tmp_path / "store"))
    assert report.imported >= 1 and not report.complete
    (problem,) = [p for p in report.skipped_paths if p.source == str(bad)]
    assert problem.position == "named" and "resourceSpans is the string 'oops'" in problem.reason
    result = CliRunner().invoke(
        cli, ["--store", str(tmp_path / "cli"), "import", str(good), str(bad)]
    )
    assert result.exit_code == 1, result.output
    assert f"not read {bad}: nothing in it could be read" in result.output
    assert "1 new" in result.output  # the good file's trace
    # a file with one bad record among good ones is imported, not listed as not read
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_text(good.read_text().splitlines()[0] + "\n" + '{"resourceSpans": 5}\n')
    report = import_files([mixed], store=Store(tmp_path / "mixed_store"))
    assert report.complete and len(report.unparsed) == 1


FIXTURES = OTLP.parent


@pytest.mark.parametrize("into", ["reader", "store"])
@pytest.mark.parametrize(
    "name",
    [
        "otlp/new_content.traces.json",
        "otlp/new_content.traces.jsonl",
        "langsmith/sdk.read_run.json",
        "langsmith/sdk.list_runs.jsonl",
        "langfuse/export/api_trace.json",
        "langfuse/export/ui_observations.jsonl",
    ],
)
def test_a_sniffed_json_file_is_parsed_once(name, into, monkeypatch, tmp_path):
    """Sniffing parses what it must to tell the format (a first line; a whole document that
    is not plainly OTLP, to see which export it is), and the decoder takes that same value
    instead of parsing the bytes again, reading a file or importing it into a store (which
    derives what it stored, read back): every record's JSON is parsed exactly once (issue 38;
    before, a LangSmith or Langfuse document was parsed twice and a first line twice)."""
    import json

    from otelcar.importer import import_files
    from otelcar.readers import read_traces
    from otelcar.store import Store

    path = FIXTURES / name
    data = path.read_bytes()
    if name.endswith(".jsonl"):
        records = [line.strip() for line in data.splitlines() if line.strip()]
    else:
        records = [data]
    parsed: dict[bytes, int] = {}
    loads = json.loads

    def counting(text, *args, **kwargs):
        key = text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass")
        parsed[key] = parsed.get(key, 0) + 1
        return loads(text, *args, **kwargs)

    monkeypatch.setattr(json, "loads", counting)
    if into == "reader":
        assert read_traces(path).height > 0
    else:
        with Store(tmp_path / "store") as store:
            report = import_files([path], store=store)
            assert report.imported == len(records) and not report.unparsed
            assert store.steps().height > 0
    assert [parsed.get(record, 0) for record in records] == [1] * len(records)
