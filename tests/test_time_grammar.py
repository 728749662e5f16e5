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
