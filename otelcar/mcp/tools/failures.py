"""The MCP tools over what triage found as traces arrived (``otelcar collect --triage``):
``list_failures`` and ``read_failure``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal

from pydantic import Field

from otelcar.mcp import queries
from otelcar.mcp.toolkit import READING, Cursor, Toolkit, tool_errors


def list_failures(kit: Toolkit) -> Callable[..., Any]:
    """The ``list_failures`` tool over ``kit``."""

    @tool_errors
    async def list_failures(
        state: Annotated[
            Literal["queued", "running", "done", "skipped", "passed"] | None,
            Field(description="Only traces in this state (default: all but passed)."),
        ] = None,
        service: Annotated[str | None, Field(description="Only traces of this service.")] = None,
        cursor: Cursor = None,
    ) -> dict[str, Any]:
        """What triage found as traces arrived (`otelcar collect --triage`, docs/triage.md):
        each triaged trace, most recently updated first, with its state and reason, culprit
        step, headline, the cause sentence why named and the calls spent; counts by state.
        read_failure gives one trace's whole attribution. next_cursor continues."""

        def read() -> dict[str, Any]:
            every = kit.triaged.all()
            shown = [
                f.to_dict()
                for f in every
                if (f.state == state if state else f.state != "passed")
                and (service is None or f.service == service)
            ]
            document = {"counts": kit.triaged.counts(every), "failures": shown}
            return kit.fitted("list_failures", document, [state, service], cursor)

        return await kit.answered("list_failures", read)

    return list_failures


def read_failure(kit: Toolkit) -> Callable[..., Any]:
    """The ``read_failure`` tool over ``kit``."""

    @tool_errors
    async def read_failure(
        trace_id: Annotated[str, Field(description="A triaged trace's id or a unique prefix.")],
        cursor: Cursor = None,
    ) -> dict[str, Any]:
        """One triaged trace's state with its whole attribution result (as `otelcar
        attribute --json`) and why's, when triage made them (lists cut at the byte cap
        continue with next_cursor)."""

        def read() -> dict[str, Any]:
            prefix = trace_id.strip().lower()
            matches = [f for f in kit.triaged.all() if f.trace_id.startswith(prefix)]
            if len(matches) != 1:
                raise queries.QueryError(
                    f"{len(matches)} triaged traces start with {trace_id!r}"
                    + ("" if matches else " (list_failures lists them)")
                )
            summary = matches[0].to_dict()
            full = summary["trace_id"]
            found = kit.triaged.state(full) or {}
            document = {
                **summary,
                "attribution": found.get("attribution"),
                "why": found.get("why"),
            }
            return kit.fitted("read_failure", document, full, cursor)

        return await kit.answered("read_failure", read)

    return read_failure


#: The tools of this module, in the order the server lists them, with their hints.
TOOLS = ((list_failures, READING), (read_failure, READING))
