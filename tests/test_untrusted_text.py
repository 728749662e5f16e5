"""Text from a trace never acts on a terminal or hides itself (#15, terminal escapes).

A trace whose content carries a window-title escape, a clear-screen sequence, an OSC 52
clipboard write, a bidi override in a tool name and zero-width characters is imported and
shown by every view a user reads: ``traces``, ``show``, ``show --full``, the fidelity table,
and the HTML report's markup. None may contain the raw characters; each must show them as
visible escapes.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from rich.table import Table

from otelcar.cli import cli
from otelcar.cli.common import console
from otelcar.report.markup import el, esc
from otelcar.safe_text import INVISIBLE, visible
from tests.conftest import NEW_CONTENT, OTLP

TITLE = "\x1b]0;pwned\x07"
CLEAR = "\x1b[2J\x1b[H"
CLIPBOARD = "\x1b]52;c;cm0gLXJmIH4=\x07"
BIDI_NAME = "lookup_order\u202egpj.exe\u202c"
HIDDEN = "A-\u200b1001\ufeff"


def _hostile(value: Any) -> Any:
    """The fixture with every string that names the lookup tool or the order rewritten."""
    if isinstance(value, dict):
        return {k: _hostile(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_hostile(v) for v in value]
    if isinstance(value, str):
        value = value.replace("lookup_order", BIDI_NAME)
        return value.replace("A-1001", f"{HIDDEN}{TITLE}{CLEAR}{CLIPBOARD}")
    return value


def _store_with_hostile_trace(tmp_path: Path) -> list[str]:
    trace = _hostile(json.loads((OTLP / "new_content.traces.json").read_text()))
    dump = tmp_path / "hostile.json"
    dump.write_text(json.dumps(trace))
    store = ["--store", str(tmp_path / "store")]
    CliRunner().invoke(cli, [*store, "import", str(dump)], catch_exceptions=False)
    return store


def _assert_nothing_raw(output: str) -> None:
    raw = sorted({f"U+{ord(c):04X}" for c in INVISIBLE.findall(output)})
    assert not raw, f"raw control/invisible characters reached the terminal: {raw}"


def test_terminal_views_show_escapes_never_raw_characters(tmp_path: Path):
    store = _store_with_hostile_trace(tmp_path)
    runner = CliRunner()
    outputs = {}
    for args in (["traces"], ["show", NEW_CONTENT[:8]], ["show", NEW_CONTENT[:8], "--full"]):
        result = runner.invoke(cli, [*store, *args], catch_exceptions=False)
        assert result.exit_code == 0, result.output
        _assert_nothing_raw(result.output)
        outputs[" ".join(args)] = result.output
    full = outputs[f"show {NEW_CONTENT[:8]} --full"]
    assert "lookup_order\\u202egpj.exe\\u202c" in full  # the name as it really is
    assert "\\x1b]0;pwned\\x07" in full and "\\x1b]52;c;" in full
    assert "A-\\u200b1001\\ufeff" in full


def test_html_marks_invisible_characters_and_attributes_stay_text():
    marked = esc(BIDI_NAME + TITLE)
    _assert_nothing_raw(marked)
    assert '<span class="ctl" title="U+202E">\\u202e</span>' in marked
    assert '<span class="ctl" title="U+001B">\\x1b</span>' in marked
    link = el("a", "x", title=BIDI_NAME, href="#s1")
    _assert_nothing_raw(link)
    assert 'title="lookup_order\\u202egpj.exe\\u202c"' in link


def test_visible_keeps_ordinary_text_and_escapes_the_rest():
    assert visible("tab\tand\nnewline, ünïcödé, 中文, emoji 🙂") == (
        "tab\tand\nnewline, ünïcödé, 中文, emoji 🙂"
    )
    assert visible("\x1b[31m\u200d\u2066") == "\\x1b[31m\\u200d\\u2066"


def test_the_cli_console_prints_brackets_as_they_are_never_as_markup():
    """Rich markup in trace text (a tag, a link, a label like ``[agent]``) is printed as it is,
    in a plain string and in a table cell: rich would drop the tags and style the output."""
    marked = "[bold red]A-1001[/bold red] see [agent] [link=https://example.invalid]here[/link]"
    out = console()
    out.file = io.StringIO()
    out.print(f"note: {marked}", style="yellow")
    table = Table("trace text")
    table.add_row(marked)
    out.print(table)
    printed = out.file.getvalue()
    assert f"note: {marked}" in printed and f"│ {marked} │" in printed
