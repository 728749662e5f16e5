"""The MCP server's tools, one module per group: :mod:`.traces` (reading traces),
:mod:`.analyses` (running attribute, why, fix; the kept runs), :mod:`.timelines` (kept
timelines) and :mod:`.failures` (triage). Each module's ``TOOLS`` pairs a function that makes
a tool over a :class:`~otelcar.mcp.toolkit.Toolkit` with its hints."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mcp_types import ToolAnnotations

from otelcar.mcp.toolkit import Toolkit
from otelcar.mcp.tools import analyses, failures, timelines, traces


def tool_functions(kit: Toolkit) -> list[tuple[Callable[..., Any], ToolAnnotations]]:
    """Every tool's function over ``kit`` with its hints, in the order the server lists
    them."""
    groups = (traces, analyses, timelines, failures)
    return [(make(kit), hints) for group in groups for make, hints in group.TOOLS]
