"""Traces read from the Collector ``clickhouse`` exporter's tables, on a real ClickHouse engine.

The engine is chDB (ClickHouse in-process). The tables are created with the exporter's DDL and
filled the way the exporter writes (``tests/clickhouse_exporter.py``): the committed fixtures'
spans and log records, plus 120 000 spans of 3 000 other traces around them. Steps read back
must equal the file import's; the only difference allowed is the documented one (the exporter
keeps no dropped-attribute counts, so SDK attribute eviction goes unnoticed).
chDB opens one database path per process: every test here shares the module's path.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click
import jsonschema
import polars as pl
import pytest
from click.testing import CliRunner

from otelcar import Store, import_files
from otelcar.cli import cli
from otelcar.errors import SourceError, TraceNotFound
from otelcar.importer import iter_file_records
from otelcar.ingest.frames import LogFrame, SpanFrame
from otelcar.ingest.raw import decode_record
from otelcar.project_config import ConfigError, parse_config
from otelcar.readers import read_otlp
from otelcar.sources import SourceSettings, TraceFilter, TraceSource, open_source
from otelcar.sources.clickhouse_client import ClickHouseConnection, ClickHouseURL
from otelcar.sources.exporter_rows import restore_body, restore_value
from otelcar.trajectory import build_traces
from tests.clickhouse_exporter import as_string, create_tables, insert_frames
from tests.conftest import LEGACY_CONTENT, NEW_CONTENT, OTLP
from tests.helpers.scripted_refund import POLICY
from tests.parts import need_module

clickhouse_connect = need_module("clickhouse_connect", "pip install -e '.[dev]'; `make test` does")
need_module("chdb", "pip install -e '.[dev]'; `make test` does")

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures"
GROUPS: dict[str, list[Path]] = {
    "otlp-new": [OTLP / "new_content.traces.jsonl", OTLP / "new_content.logs.jsonl"],
    "otlp-new-nocontent": [OTLP / "new_nocontent.traces.jsonl", OTLP / "new_nocontent.logs.jsonl"],
    "otlp-legacy": [OTLP / "legacy_content.traces.jsonl", OTLP / "legacy_content.logs.jsonl"],
    "otlp-legacy-nocontent": [
        OTLP / "legacy_nocontent.traces.jsonl",
        OTLP / "legacy_nocontent.logs.jsonl",
    ],
    **{
        f"{path.parent.name}-{path.name.split('.')[0]}": [path]
        for folder in ("openllmetry", "openinference")
        for path in sorted((FIXTURES / folder).glob("*.traces.jsonl"))
    },
    "langfuse-sdk": [FIXTURES / "langfuse" / "sdk.traces.jsonl"],
}
EVICTED = {"openllmetry-evicted", "openinference-evicted"}
# The Langfuse fixture reuses a trace id of the OpenLLMetry ones (same seeded id generator):
# it gets a database of its own, as a separate deployment would.
DATABASES = {"langfuse-sdk": "langfuse"}
FILLER_SPANS = 120_000
PER_TRACE = 40  # spans per filler trace
SERVICE = "refund-agent"


def _frames(paths: list[Path]) -> tuple[list[SpanFrame], list[LogFrame]]:
    spans: list[SpanFrame] = []
    logs: list[LogFrame] = []
    for record in iter_file_records(paths):
        decoded, _ = decode_record(record)
        spans.extend(decoded.spans)
        logs.extend(decoded.logs)
    return spans, logs


class Engine:
    """The module's chDB database: its path, an open client and what was written."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.url = f"chdb://{path}"
        self.client = clickhouse_connect.get_client(interface="chdb", path=str(path))
        self.spans: dict[str, list[SpanFrame]] = {}
        self.logs: dict[str, list[LogFrame]] = {}

    def count(self, sql: str) -> int:
        return int(self.client.query(sql).result_rows[0][0])

    @property
    def trace_ids(self) -> dict[str, list[str]]:
        return {g: sorted({s.trace_id for s in spans}) for g, spans in self.spans.items()}

    @property
    def default_trace_ids(self) -> list[str]:
        """The fixture traces in the ``default`` database."""
        ids = self.trace_ids
        return sorted(t for g in ids if g not in DATABASES for t in ids[g])


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory):
    db = Engine(tmp_path_factory.mktemp("chdb"))
    create_tables(db.client)
    for database in set(DATABASES.values()):
        db.client.command(f"CREATE DATABASE {database}")
        create_tables(db.client, database)
    starts = []
    for group, paths in GROUPS.items():
        spans, logs = _frames(paths)
        database = DATABASES.get(group, "default")
        insert_frames(db.client, spans, logs, database)  # one batch per group, as one export
        db.spans[group], db.logs[group] = spans, logs
        starts += [s.start_ns for s in spans]
    # Other services' traces (an agent span, then LLM spans), a span every 17 s from ten days
    # before the fixtures on.
    db.client.command(
        f"""
        INSERT INTO default.otel_traces (Timestamp, TraceId, SpanId, ParentSpanId, SpanName,
            SpanKind, ServiceName, ResourceAttributes, SpanAttributes, Duration, StatusCode)
        SELECT fromUnixTimestamp64Nano(toInt64({min(starts) - 10 * 86400 * 10**9})
                   + toInt64(number) * 17000000000),
               lower(hex(MD5(toString(intDiv(number, {PER_TRACE}))))),
               substring(lower(hex(MD5(concat('s', toString(number))))), 1, 16),
               if(number % {PER_TRACE} = 0, '',
                  substring(lower(hex(MD5(concat('s',
                      toString(number - number % {PER_TRACE}))))), 1, 16)),
               if(number % {PER_TRACE} = 0, 'invoke_agent filler', 'chat filler-model'),
               'Internal', concat('svc-', toString(intDiv(number, {PER_TRACE}) % 7)),
               map('service.name', concat('svc-', toString(intDiv(number, {PER_TRACE}) % 7))),
               map('gen_ai.operation.name', if(number % {PER_TRACE} = 0, 'invoke_agent', 'chat'),
                   'gen_ai.usage.input_tokens', toString(number % 1000)),
               1000000, 'Unset'
        FROM numbers({FILLER_SPANS})
        """
    )
    yield db
    db.client.close()


@pytest.fixture
def source(engine: Engine):
    with open_source(SourceSettings(engine.url)) as opened:
        yield opened


# -- the steps are the file import's ------------------------------------------------------------
@pytest.mark.parametrize("group", list(GROUPS))
def test_steps_from_clickhouse_equal_the_file_import(engine: Engine, group: str):
    settings = SourceSettings(engine.url, database=DATABASES.get(group))
    with open_source(settings) as source:
        _same_steps_as_the_file(engine, source, group)


def _same_steps_as_the_file(engine: Engine, source, group: str) -> None:
    expected = read_otlp(GROUPS[group])
    summaries = {
        built.summary["trace_id"]: built.summary
        for built in build_traces(engine.spans[group], engine.logs[group])
    }
    assert engine.trace_ids[group], group
    for trace_id in engine.trace_ids[group]:
        loaded = source.load(trace_id)
        want = expected.filter(pl.col("trace_id") == trace_id)
        got = loaded.steps
        assert got.schema == want.schema and got.height == want.height > 0
        summary = {k: v for k, v in loaded.summary.items() if k != "build_id"}
        if group not in EVICTED:
            assert got.to_dicts() == want.to_dicts()
            assert summary == summaries[trace_id]
            continue
        # The documented difference: no dropped-attribute count, so no eviction issue.
        same = [c for c in want.columns if c not in ("issues", "content_truncated")]
        assert got.select(same).to_dicts() == want.select(same).to_dicts()
        differing = [
            (w["issues"], g["issues"])
            for w, g in zip(want.iter_rows(named=True), got.iter_rows(named=True), strict=True)
            if (w["issues"], w["content_truncated"]) != (g["issues"], g["content_truncated"])
        ]
        assert differing
        for file_issues, clickhouse_issues in differing:
            assert any("evicted by the SDK" in i for i in file_issues)
            assert not any("evicted" in i for i in clickhouse_issues)
        assert {k: v for k, v in summary.items() if k != "n_issues"} == {
            k: v for k, v in summaries[trace_id].items() if k != "n_issues"
        }


def test_logs_are_joined_and_can_be_left_out(engine: Engine):
    settings = SourceSettings(engine.url, logs_table=None)
    with open_source(settings) as no_logs, open_source(SourceSettings(engine.url)) as with_logs:
        bare = no_logs.load(LEGACY_CONTENT).steps.filter(pl.col("kind") == "llm")
        full = with_logs.load(LEGACY_CONTENT).steps.filter(pl.col("kind") == "llm")
    assert full["input_messages"].null_count() == 0 and full["content_captured"].all()
    assert bare["input_messages"].null_count() == bare.height and not bare["content_captured"].any()


# -- push-down ----------------------------------------------------------------------------------
def test_one_trace_load_reads_a_sliver_of_the_table(engine: Engine, source):
    total = engine.count("SELECT count() FROM default.otel_traces")
    traces = engine.count("SELECT count() FROM default.otel_traces_trace_id_ts")
    assert total > FILLER_SPANS
    # The statistic is real: a query that cannot skip anything reads every row.
    with ClickHouseConnection(ClickHouseURL.parse(engine.url)) as connection:
        scan = connection.query("SELECT sum(length(SpanId)) AS n FROM default.otel_traces")
    assert scan.read_rows >= total
    assert source.lookup_table == "otel_traces_trace_id_ts"
    loaded = source.load(NEW_CONTENT)
    assert loaded.steps.height == 7
    # At most a granule per part of the lookup table (one row per trace, keyed by trace id),
    # and of the spans and logs only what the partition range and trace-id bloom filter keep.
    assert 0 < loaded.rows_read < min(total / 50, traces)


def test_listing_is_a_group_by_over_the_filtered_rows(engine: Engine, source):
    total = engine.count("SELECT count() FROM default.otel_traces")
    everything = engine.default_trace_ids
    before = source.rows_read
    page = source.traces(TraceFilter(service=SERVICE))
    assert sorted(page["trace_id"].to_list()) == everything
    assert source.rows_read - before < total / 10  # the service is the table's leading key
    assert page["start_ns"].is_sorted() and page["n_steps"].min() > 0
    assert set(page["service"].to_list()) == {SERVICE}

    first_start = {
        t: min(
            s.start_ns
            for group, spans in engine.spans.items()
            if group not in DATABASES
            for s in spans
            if s.trace_id == t
        )
        for t in everything
    }
    newest = sorted(everything, key=lambda t: first_start[t])[-3:]
    limited = source.traces(TraceFilter(service=SERVICE, limit=3))
    assert sorted(limited["trace_id"].to_list()) == sorted(newest)

    cut = sorted(first_start.values())[len(first_start) // 2]
    late = source.traces(TraceFilter(service=SERVICE, since_ns=cut))
    early = source.traces(TraceFilter(service=SERVICE, until_ns=cut))
    assert sorted(late["trace_id"].to_list()) == sorted(
        t for t in everything if first_start[t] >= cut
    )
    assert sorted(early["trace_id"].to_list()) == sorted(
        t for t in everything if first_start[t] < cut
    )
    by_id = source.traces(TraceFilter(trace_ids=(NEW_CONTENT, LEGACY_CONTENT.upper())))
    assert sorted(by_id["trace_id"].to_list()) == sorted([NEW_CONTENT, LEGACY_CONTENT])
    by_prefix = source.traces(TraceFilter(prefix=NEW_CONTENT[:10]))
    assert by_prefix["trace_id"].to_list() == [NEW_CONTENT]
    others = source.traces(TraceFilter(service="svc-3", limit=4))
    assert others.height == 4 and set(others["service"].to_list()) == {"svc-3"}
    assert others["n_spans"].to_list() == [PER_TRACE] * 4
    assert others["n_llm"].to_list() == [PER_TRACE - 1] * 4


def test_values_cannot_change_a_query(source):
    assert source.traces(TraceFilter(service="x' OR 1=1 --")).height == 0
    assert source.traces(TraceFilter(prefix="') OR ('1'='1")).height == 0
    with pytest.raises(TraceNotFound, match="not a trace id"):
        source.resolve("c2b9' OR '1'='1")


# -- ids and errors -----------------------------------------------------------------------------
def test_trace_ids_resolve_by_unique_prefix_with_clear_errors(engine: Engine, source):
    assert source.resolve(NEW_CONTENT[:8].upper()) == NEW_CONTENT
    with pytest.raises(TraceNotFound, match=r"matches more than 5 traces in chdb://.*otel_traces"):
        source.resolve("a")
    with pytest.raises(TraceNotFound, match=r"no trace id starts with 'ffffffffff' in chdb://"):
        source.resolve("ffffffffff")
    with pytest.raises(TraceNotFound, match=r"trace 0{31}1 has no spans in chdb://"):
        source.load("0" * 31 + "1")


def test_errors_name_what_and_where(engine: Engine):
    with pytest.raises(SourceError, match=r"no table default\.nope at chdb://.*otel_logs"):
        open_source(SourceSettings(engine.url, table="nope"))
    engine.client.command(
        "CREATE TABLE IF NOT EXISTS default.not_otel (TraceId String) ENGINE = Memory"
    )
    with pytest.raises(SourceError, match=r"default\.not_otel .* lacks column\(s\) Duration"):
        open_source(SourceSettings(engine.url, table="not_otel"))
    with pytest.raises(SourceError, match=r"no chDB database directory"):
        open_source(SourceSettings(f"chdb://{engine.path}/missing"))
    with pytest.raises(
        SourceError, match=r"cannot reach ClickHouse at clickhouse://otel@127\.0\.0\.1:9/otel"
    ):
        open_source(SourceSettings("clickhouse://otel:s3cret@127.0.0.1:9/otel"))
    with pytest.raises(SourceError, match="not a trace source URL") as bad:
        open_source(SourceSettings("postgres://u:s3cret@db/otel"))
    assert "s3cret" not in str(bad.value)


def test_urls_parse_into_both_backends():
    url = ClickHouseURL.parse("clickhouses://otel:p%40ss@ch.example:8443/traces")
    assert (url.scheme, url.host, url.port, url.username, url.password, url.database) == (
        "clickhouses",
        "ch.example",
        8443,
        "otel",
        "p@ss",
        "traces",
    )
    assert url.describe() == "clickhouses://otel@ch.example:8443/traces"
    assert ClickHouseURL.parse("chdb://data/ch").path == "data/ch"
    assert ClickHouseURL.parse("clickhouse://localhost").database is None
    for bad in ("clickhouse://", "chdb://", "clickhouse://h/a/b", "clickhouse://h:x/db"):
        with pytest.raises(SourceError):
            ClickHouseURL.parse(bad)


def test_a_missing_extra_is_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.setitem(sys.modules, "clickhouse_connect", None)
    with pytest.raises(SourceError, match=r"pip install 'otelcar\[clickhouse\]'"):
        open_source(SourceSettings(f"chdb://{tmp_path}"))


# -- type restoration ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "value",
    [
        "plain",
        "",
        True,
        False,
        0,
        -42,
        2**63 - 1,
        0.2,
        129.99,
        1.5e-7,
        1e21,
        ["tool_calls"],
        [1, 2.5, True, None],
        [],
        '[{"role":"user"}]',
        '{"a": 1}',
    ],
)
def test_exporter_strings_restore_to_the_value(value):
    assert restore_value(as_string(value)) == value


def test_the_stand_in_stringifies_as_the_collector_does():
    """Literal ``AsString()`` outputs (pdata ``float64AsString``, ``json.Marshal``)."""
    assert [as_string(v) for v in (True, 7, 2.0, 0.2, 1e-7, 1e21, 123456789.0)] == [
        "true",
        "7",
        "2",
        "0.2",
        "1e-7",
        "1e+21",
        "123456789",
    ]
    assert as_string(["a", 1, 2.5, None]) == '["a",1,2.5,null]'
    assert as_string({"b": [1.0], "a": {"c": "ü"}}) == '{"a":{"c":"ü"},"b":[1]}'


def test_what_cannot_be_restored_is_documented():
    assert restore_value(as_string(2.0)) == 2 and isinstance(restore_value("2"), int)
    assert restore_value(as_string("42")) == 42  # a numeric-looking string becomes a number
    assert restore_value(as_string({"k": [1]})) == '{"k":[1]}'  # maps stay JSON text
    assert restore_value(as_string([{"a": 1}])) == '[{"a":1}]'  # arrays of maps too
    assert restore_value("007") == "007" and restore_value("1.50") == "1.50"
    assert restore_body(as_string({"content": "hi"})) == {"content": "hi"}
    assert restore_body("") is None and restore_body("text {") == "text {"


# -- configuration and CLI ----------------------------------------------------------------------
def test_source_section_of_the_config():
    config = parse_config({"source": {"url": "chdb:///x", "logs_table": ""}})
    assert config.source == SourceSettings("chdb:///x", "otel_traces", None, None)
    assert parse_config({}).source is None
    for bad in ({"table": "t"}, {"url": "chdb:///x", "port": "1"}, {"url": 3}):
        with pytest.raises(ConfigError, match=r"\[source\]"):
            parse_config({"source": bad})


def _validator(name: str) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(json.loads((ROOT / "schemas" / name).read_text()))


def test_cli_traces_show_and_attribute_from_clickhouse(engine: Engine, tmp_path: Path):
    runner = CliRunner()
    store = ["--store", str(tmp_path / "no-store")]  # never created: everything comes from chDB

    def run(*args: str):
        result = runner.invoke(cli, [*store, *args], catch_exceptions=False)
        return result

    listing = run("traces", "--source", engine.url, "--service", SERVICE, "--json")
    assert listing.exit_code == 0, listing.output
    traces = json.loads(listing.output)
    _validator("traces-list.schema.json").validate(traces)
    assert sorted(t["trace_id"] for t in traces) == engine.default_trace_ids
    table = run("traces", "--source", engine.url, "--service", "svc-1", "--limit", "2")
    assert table.exit_code == 0 and table.output.count("svc-1") == 2

    shown = run("show", NEW_CONTENT[:8], "--source", engine.url, "--json")
    assert shown.exit_code == 0, shown.output
    assert len(json.loads(shown.output)["steps"]) == 7
    by_env = runner.invoke(
        cli, [*store, "show", NEW_CONTENT[:8], "--json"], env={"OTELCAR_SOURCE": engine.url}
    )
    assert by_env.exit_code == 0 and json.loads(by_env.output) == json.loads(shown.output)

    (tmp_path / "agent_policy.py").write_text(POLICY)
    config = tmp_path / "otelcar.toml"
    config.write_text(
        '[policies.llm]\ntype = "python"\nfunction = "agent_policy:decide"\n[replay]\nseed = 4\n'
        f'[source]\nurl = "{engine.url}"\n'
    )
    result = run(
        "attribute",
        NEW_CONTENT[:8],
        "-c",
        str(config),
        "--fail-if",
        "tool_called:issue_refund",
        "--json",
        str(tmp_path / "result.json"),
    )
    assert result.exit_code == 0, result.output
    assert "Step 4 caused the failure" in result.output
    data = json.loads((tmp_path / "result.json").read_text())
    assert data["culprit"] == 4 and data["verdict"] == "culprit"

    # The fidelity check sees the same trace from ClickHouse as from an imported file.
    local = ["--store", str(tmp_path / "store")]
    runner.invoke(cli, [*local, "import", str(OTLP / "new_content.traces.jsonl")])
    replays = [
        runner.invoke(cli, [*prefix, "replay", NEW_CONTENT, "--json", *extra])
        for prefix, extra in ((local, []), (store, ["--source", engine.url]))
    ]
    assert replays[0].exit_code == replays[1].exit_code
    assert json.loads(replays[0].output) == json.loads(replays[1].output)

    # `test` (like why and fix) loads through the same loader: the trace it copies is the same.
    written = run(
        "test",
        NEW_CONTENT[:8],
        "-c",
        str(config),
        "--step",
        "4",
        "--write-test",
        str(tmp_path / "tests" / "test_from_clickhouse.py"),
    )
    assert written.exit_code == 0, written.output
    copied = pl.read_parquet(tmp_path / "tests" / "traces" / f"{NEW_CONTENT}.parquet")
    imported = read_otlp(OTLP / "new_content.traces.jsonl")
    assert copied.select(imported.columns).to_dicts() == imported.to_dicts()

    by_config = run("traces", "-c", str(config), "--limit", "1", "--json")
    assert by_config.exit_code == 0 and len(json.loads(by_config.output)) == 1
    missing = runner.invoke(cli, [*store, "show", "ffffffffff", "--source", engine.url])
    assert missing.exit_code == 2 and "no trace id starts with 'ffffffffff'" in missing.output
    down = runner.invoke(
        cli, [*store, "replay", NEW_CONTENT, "--source", "clickhouse://u:pw@127.0.0.1:9/x"]
    )
    assert down.exit_code == 2 and "cannot reach ClickHouse at clickhouse://u@127.0.0.1:9/x" in (
        down.output
    )


def test_time_filters_parse_instants_and_ages():
    import time

    from otelcar.cli.options import TimeParam

    param = TimeParam()
    assert param.convert("2026-11-29T10:00:00Z", None, None) == 1795946400 * 10**9
    assert param.convert("2026-11-29T11:00:00+01:00", None, None) == 1795946400 * 10**9
    assert param.convert("2026-11-29", None, None) == 1795910400 * 10**9
    assert abs(param.convert("30m", None, None) - (time.time_ns() - 1800 * 10**9)) < 10**9
    with pytest.raises(click.BadParameter, match="ISO 8601"):
        param.convert("yesterday", None, None)


def test_time_filters_apply_to_the_local_store_too(tmp_path: Path):
    runner = CliRunner()
    store = ["--store", str(tmp_path / "store")]
    runner.invoke(cli, [*store, "import", str(OTLP / "new_content.traces.jsonl")])
    after = runner.invoke(cli, [*store, "traces", "--since", "2000-01-01", "--json"])
    before = runner.invoke(cli, [*store, "traces", "--until", "2000-01-01", "--json"])
    assert [t["trace_id"] for t in json.loads(after.output)] == [NEW_CONTENT]
    assert json.loads(before.output) == []


# -- one trace-reading interface: the local store answers the same calls alike -----------------
def test_the_store_and_clickhouse_answer_the_same_source_calls(engine: Engine, tmp_path: Path):
    groups = [g for g in GROUPS if g not in DATABASES and g not in EVICTED]
    store = Store(tmp_path / "store")
    import_files([p for g in groups for p in GROUPS[g]], store=store)
    ids = sorted({t for g in groups for t in engine.trace_ids[g]})
    with store as local, open_source(SourceSettings(engine.url)) as remote:
        for source in (local, remote):
            assert isinstance(source, TraceSource) and source.where
        wanted = TraceFilter(trace_ids=tuple(ids))
        mine, theirs = local.traces(wanted), remote.traces(wanted)
        assert (
            mine["trace_id"].to_list()
            == theirs["trace_id"].to_list()
            == sorted(ids, key=lambda t: (mine.filter(pl.col("trace_id") == t)["start_ns"][0], t))
        )
        assert mine.drop("build_id").equals(theirs.drop("build_id"))
        for trace_id in ids:
            assert local.resolve(trace_id[:12]) == remote.resolve(trace_id[:12]) == trace_id
            a, b = local.load(trace_id[:12]), remote.load(trace_id)
            assert a.trace_id == b.trace_id == trace_id
            assert a.steps.equals(b.steps), trace_id
            assert {k: v for k, v in a.summary.items() if k != "build_id"} == {
                k: v for k, v in b.summary.items() if k != "build_id"
            }
        newest = local.traces(TraceFilter(trace_ids=tuple(ids), limit=2))
        assert newest["trace_id"].to_list() == mine["trace_id"].to_list()[-2:]
        with pytest.raises(TraceNotFound):
            local.load("ffffffffffff")
