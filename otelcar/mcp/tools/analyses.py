"""The MCP tools that run analyses — ``attribute``, ``why``, ``fix``, their arguments the
options of the analyses' request types (:mod:`otelcar.mcp.arguments`) — and read the kept
runs back: ``list_results``, ``read_result``."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context
from mcp_types import CallToolResult
from pydantic import Field

from otelcar.analyses.options import Request
from otelcar.analyses.requests import AttributeRequest, FixRequest, WhyRequest
from otelcar.mcp import arguments, results, runs
from otelcar.mcp.toolkit import READING, RUNNING, AgentLine, Cursor, Toolkit, TraceId, tool_errors

#: The arguments of a run tool besides its request's options.
RUN_ARGUMENTS: dict[str, Any] = {
    "leading": [("trace_id", TraceId), ("ctx", Context)],
    "trailing": [("agent", AgentLine, None)],
}


async def analysed(
    kit: Toolkit,
    request_type: type[Request],
    trace_id: str,
    ctx: Context,
    agent: str | None,
    options: dict,
) -> CallToolResult:
    """The run ``request_type`` of ``options`` (the tool's arguments) asks for, kept."""
    request = request_type.of("mcp", options)  # type: ignore[attr-defined]
    started = time.time()
    full_id, result = await runs.analyse_trace(
        kit.context, trace_id, request, send=await kit.progress_of(ctx), agent=agent
    )
    arguments = {**options, "agent": agent}
    return await kit.kept(request.kind, full_id, arguments, result, started)


def attribute(kit: Toolkit) -> Callable[..., Any]:
    """The ``attribute`` tool over ``kit``."""

    @tool_errors
    @arguments.takes(AttributeRequest, **RUN_ARGUMENTS)
    async def attribute(
        trace_id: str, ctx: Context, *, agent: str | None = None, **options: Any
    ) -> CallToolResult:
        """Which step caused the failure (`otelcar attribute`): the commitment curve, step
        effects with intervals and Holm-adjusted exact tests, the culprit and its cost. Needs
        [outcome] in otelcar.toml. With `agent`, on your agent (live replay). Reports
        progress; the result is kept (read_result)."""
        return await analysed(kit, AttributeRequest, trace_id, ctx, agent, options)

    return attribute


def why(kit: Toolkit) -> Callable[..., Any]:
    """The ``why`` tool over ``kit``."""

    @tool_errors
    @arguments.takes(WhyRequest, **RUN_ARGUMENTS)
    async def why(
        trace_id: str, ctx: Context, *, agent: str | None = None, **options: Any
    ) -> CallToolResult:
        """Which text in the context of a decision made the agent take it (`otelcar why`).
        With `agent`, on your agent's real requests (live replay). Reports progress; the
        result is kept (read_result)."""
        return await analysed(kit, WhyRequest, trace_id, ctx, agent, options)

    return why


def fix(kit: Toolkit) -> Callable[..., Any]:
    """The ``fix`` tool over ``kit``."""

    @tool_errors
    @arguments.takes(FixRequest, **RUN_ARGUMENTS)
    async def fix(
        trace_id: str, ctx: Context, *, agent: str | None = None, **options: Any
    ) -> CallToolResult:
        """Candidate fixes of a decision validated on its exact failed context (`otelcar
        fix`): PASS / PART / FAIL each. With `agent`, on your agent (live replay; forward
        rollouts run it). Reports progress; the result is kept (read_result)."""
        return await analysed(kit, FixRequest, trace_id, ctx, agent, options)

    return fix


def list_results(kit: Toolkit) -> Callable[..., Any]:
    """The ``list_results`` tool over ``kit``."""

    @tool_errors
    async def list_results(
        trace_id: Annotated[str | None, Field(description="Only results of this trace.")] = None,
        kind: Literal["attribute", "why", "fix"] | None = None,
        cursor: Cursor = None,
    ) -> dict[str, Any]:
        """The kept results of attribute, why and fix runs, newest first; next_cursor
        continues."""

        def read() -> dict[str, Any]:
            found = results.list_results(kit.context.store_root, trace_id=trace_id, kind=kind)
            return kit.fitted("list_results", {"results": found}, [trace_id, kind], cursor)

        return await kit.answered("list_results", read)

    return list_results


def read_result(kit: Toolkit) -> Callable[..., Any]:
    """The ``read_result`` tool over ``kit``."""

    @tool_errors
    async def read_result(
        result_id: Annotated[str, Field(description="An id from a run or list_results.")],
        cursor: Cursor = None,
    ) -> dict[str, Any]:
        """One kept run (started here or from the web console): its options (the run's
        arguments), status, cost and full result document (lists cut at the byte cap
        continue with next_cursor)."""

        def read() -> dict[str, Any]:
            record = results.read_result(kit.context.store_root, result_id)
            return kit.fitted("read_result", record, record["id"], cursor)

        return await kit.answered("read_result", read)

    return read_result


#: The tools of this module, in the order the server lists them, with their hints.
TOOLS = (
    (attribute, RUNNING),
    (why, RUNNING),
    (fix, RUNNING),
    (list_results, READING),
    (read_result, READING),
)
