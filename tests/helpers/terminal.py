"""What a terminal renderer prints, and the check that a result's notes reach it verbatim."""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

from otelcar.report.notes import worded
from otelcar.safe_console import SafeConsole


def printed(render: Callable[[Any, Any], None], result: Any, width: int = 4000) -> str:
    """What ``render(console, result)`` prints on the CLI's console (:class:`SafeConsole`)
    ``width`` wide."""
    out = io.StringIO()
    render(SafeConsole(file=out, width=width), result)
    return out.getvalue()


def assert_notes_printed_verbatim(text: str, result: Any) -> None:
    """Every note of ``result`` is in ``text`` as worded, brackets included (never read as
    rich markup); the result has a note with ``[agent]`` for the check to mean something."""
    notes = worded(result.notes)
    assert any("[agent]" in line for line in notes), notes
    for line in notes:
        assert f"note: {line}" in text
