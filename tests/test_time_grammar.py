"""One time grammar everywhere (issue 38): ``otelcar traces --since``, ``aggregate --since``,
the console's filters and the MCP tools all read a time with
:func:`otelcar.sources.parse_time` — ISO 8601 (UTC without an offset) or an age."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from otelcar.cli import cli
from otelcar.sources import parse_time

NOW = 1_800_000_000 * 10**9


@pytest.mark.parametrize(
    ("text", "seconds_ago"),
    [("90s", 90), ("30m", 1800), ("1.5h", 5400), ("7d", 7 * 86400), ("2w", 14 * 86400),
     (" 6H ", 6 * 3600)],
)  # fmt: skip
def test_ages(text: str, seconds_ago: int) -> None:
    assert parse_time(text, now_ns=NOW) == NOW - seconds_ago * 10**9


def test_iso_8601_is_utc_without_an_offset() -> None:
    assert parse_time("1970-01-02") == 86400 * 10**9
    assert parse_time("1970-01-01T01:00Z") == parse_time("1970-01-01T01:00") == 3600 * 10**9
    assert parse_time("1970-01-01T02:00+01:00") == 3600 * 10**9


@pytest.mark.parametrize("text", ["yesterday", "2 weeks", "-3h", "h", ""])
def test_anything_else_is_refused_with_the_grammar(text: str) -> None:
    with pytest.raises(ValueError, match=r"ISO 8601 .* or an age \(30m, 1\.5h, 7d, 2w\)"):
        parse_time(text)


@pytest.mark.parametrize("command", [["traces"], ["aggregate", "--fail-if", "tool_called:x"]])
def test_every_command_takes_the_same_grammar(command: list[str], tmp_path) -> None:
    """``traces --since 2w`` was refused while ``aggregate --since 2w`` worked."""
    store = ["--store", str(tmp_path / "store")]
    for since in ("2w", "1.5h", "2026-11-01"):
        done = CliRunner().invoke(cli, [*store, *command, "--since", since])
        assert "Invalid value for '--since'" not in done.output, (since, done.output)
    bad = CliRunner().invoke(cli, [*store, *command, "--since", "yesterday"])
    assert bad.exit_code == 2 and "or an age (30m, 1.5h, 7d, 2w)" in bad.output


RECENT, OLD = "1234abcd" * 4, "9876fedc" * 4


@pytest.fixture(scope="module")
def two_ages(tmp_path_factory: pytest.TempPathFactory):
    """A store with a trace that started an hour ago and one three weeks ago."""
    import json
    import time

    from otelcar import Store, import_files
    from otelcar.testing.long_traces import long_conversation

    root = tmp_path_factory.mktemp("ages")
    now = time.time_ns()
    for trace_id, ago_s in ((RECENT, 3600), (OLD, 21 * 86400)):
        dump = root / f"{trace_id}.json"
        document = long_conversation(1, trace_id=trace_id, start_ns=now - ago_s * 10**9)
        dump.write_text(json.dumps(document), "utf-8")
        import_files([dump], store=Store(root / "store"))
    return root / "store"


#: ``since`` → the traces it selects, in every front end.
SELECTIONS = [("2w", {RECENT}), ("1.5h", {RECENT}), ("30m", set()), ("5w", {RECENT, OLD})]


def _ten_days_ago() -> str:
    from datetime import UTC, datetime, timedelta

    return (datetime.now(UTC) - timedelta(days=10)).date().isoformat()


def test_the_cli_lists_by_the_grammar(two_ages) -> None:
    import json

    for since, wanted in [*SELECTIONS, (_ten_days_ago(), {RECENT})]:
        done = CliRunner().invoke(
            cli, ["--store", str(two_ages), "traces", "--since", since, "--json"]
        )
        assert done.exit_code == 0, done.output
        assert {row["trace_id"] for row in json.loads(done.output)} == wanted, since


def test_the_mcp_server_lists_by_the_same_grammar(two_ages) -> None:
    pytest.importorskip("mcp")
    import anyio
    from mcp import Client

    from otelcar.mcp.runs import RunContext
    from otelcar.mcp.server import build_server

    cases = [*SELECTIONS, (_ten_days_ago(), {RECENT})]

    async def main() -> tuple[list[set[str]], object]:
        async with Client(build_server(RunContext(two_ages))) as client:
            listed = []
            for since, _ in cases:
                result = await client.call_tool("list_traces", {"since": since})
                assert not result.is_error, (since, result.content)
                listed.append({t["trace_id"] for t in result.structured_content["traces"]})
            return listed, await client.call_tool("list_traces", {"since": "yesterday"})

    listed, refused = anyio.run(main)
    assert listed == [wanted for _, wanted in cases]
    assert refused.is_error and "or an age (30m, 1.5h, 7d, 2w)" in refused.content[0].text


def test_the_consoles_filters_take_the_same_grammar(two_ages) -> None:
    pytest.importorskip("starlette", reason="otelcar ui needs the 'ui' extra")
    from starlette.testclient import TestClient

    from otelcar.store import Store
    from otelcar.ui import create_app

    app = create_app(
        open_source=lambda: Store(two_ages, create=False),
        runs_dir=two_ages / "runs",
        allowed_hosts=["testserver"],
        store_root=two_ages,
    )
    with TestClient(app) as client:
        for since, wanted in [*SELECTIONS, (_ten_days_ago(), {RECENT})]:
            page = client.get("/traces", params={"since": since})
            assert page.status_code == 200, (since, page.text)
            assert {t for t in (RECENT, OLD) if t[:12] in page.text} == wanted, since
        refused = client.get("/traces", params={"since": "yesterday"})
    assert refused.status_code == 400 and "or an age (30m, 1.5h, 7d, 2w)" in refused.text
