"""What every MCP tool of :mod:`otelcar.mcp.tools` shares: the argument types several tools
take, the error wrapper (:func:`tool_errors`), and :class:`Toolkit` — the server's store and
``otelcar.toml``, and how a result is checked, cut to the byte cap, kept and sent.

A tool module declares its tools over a :class:`Toolkit`; :func:`otelcar.mcp.server.build_server`
makes one and registers them.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Hashable
from typing import Annotated, Any, Literal

import jsonschema
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field

from otelcar.errors import OtelcarError
from otelcar.mcp import results, runs, summaries
from otelcar.mcp.bounded import (
    ENVELOPE_BYTES,
    CursorError,
    cut_to_fit,
    decode_cursor,
    encode_cursor,
)
from otelcar.store.stamp import StampedCache, store_stamp
from otelcar.triage.summaries import FailureIndex
from otelcar.views import pending_bytes

log = logging.getLogger("otelcar.mcp")

#: A tool that only reads, and one that runs policies (and, with an agent, real code).
READING = ToolAnnotations(read_only_hint=True, open_world_hint=False)
RUNNING = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=True)

TraceId = Annotated[str, Field(description="A full trace id or a unique prefix of one.")]
AgentLine = Annotated[
    str | None,
    Field(
        description="Live replay: run this command line (split like a shell line, no shell) "
        "once per rollout as the agent, its model calls answered by otelcar; replaces [agent] "
        "command, keeping its cwd, env, timeout_s and concurrency (otelcar --agent CMD, "
        "docs/live.md). The agent must first make every recorded request again (the live "
        "check; its headline is in the result's notes). Runs real code and tools: a test "
        "environment only.",
        min_length=1,
    ),
]
Cursor = Annotated[
    str | None,
    Field(
        description="A next_cursor of an earlier call: continues it (its other arguments "
        "are taken from the cursor)."
    ),
]
Limit = Annotated[int, Field(description="Most steps on a page.", ge=1, le=1000)]
Clip = Annotated[
    int | None,
    Field(
        description="Clip every text at this many chars (null: whole; read_text reads a "
        "clipped text whole).",
        ge=20,
    ),
]
ContextMode = Annotated[
    Literal["new", "all"],
    Field(
        description="'new': an LLM step lists only the input messages its previous LLM "
        "step's input lacked (input_messages_omitted says how many are left out); 'all': each "
        "step's whole context."
    ),
]
StepKinds = Annotated[
    list[Literal["llm", "tool", "agent", "other"]] | None,
    Field(description="Only steps of these kinds."),
]


def one_line(text: str) -> str:
    """``text`` with its whitespace runs (newlines too) as single spaces."""
    return " ".join(str(text).split())


def tool_errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Library errors as tool errors with their message; anything else logged and named."""

    @functools.wraps(fn)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return await fn(*args, **kwargs)
        except ToolError:
            raise
        except OtelcarError as exc:
            raise ToolError(one_line(str(exc))) from exc
        except Exception as exc:
            log.exception("tool %s failed", fn.__name__)
            raise ToolError(
                one_line(f"unexpected {type(exc).__name__}: {exc} (the server's stderr has more)")
            ) from exc

    return wrapper


async def in_thread(function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``function(*args, **kwargs)`` on a worker thread, awaited."""
    import anyio.to_thread

    return await anyio.to_thread.run_sync(functools.partial(function, *args, **kwargs))


class Toolkit:
    """The server's ``context`` (store, ``otelcar.toml``), the triage index, and how a
    result is sent: checked against its tool's output schema (``schemas``), cut to
    ``max_result_bytes`` (structured content and text together) with a cursor to continue,
    and kept while the store is unchanged."""

    def __init__(
        self, context: runs.RunContext, schemas: dict[str, Any], max_result_bytes: int
    ) -> None:
        self.context = context
        self.triaged = FailureIndex(context.store_root)
        #: The bytes a result's structured content may take.
        self.budget = max_result_bytes - ENVELOPE_BYTES - summaries.MAX_CHARS * 4
        self.validators = {
            name: jsonschema.validators.validator_for(schema)(schema)
            for name, schema in schemas.items()
        }
        self._kept_answers = StampedCache()

    def answer(self, name: str, value: dict[str, Any]) -> CallToolResult:
        """``value`` sent once: as structured content (checked against the tool's schema),
        with a short text summary beside it."""
        self.validators[name].validate(value)  # a mismatch is a bug here, not the caller's
        text = summaries.summary(name, value)
        return CallToolResult(
            content=[TextContent(type="text", text=text)], structured_content=value
        )

    def fitted(self, name: str, value: dict[str, Any], key: Any, cursor: str | None) -> dict:
        """``value`` of a tool with no paging of its own cut to the cap
        (:func:`~otelcar.mcp.bounded.cut_to_fit`); ``cursor`` continues an earlier cut of
        the same ``key`` (the arguments that made it)."""
        starts = None
        if cursor is not None:
            state = decode_cursor(cursor, name)
            if state["key"] != key:
                raise CursorError(f"cursor: made for other arguments of {name}")
            starts = state["starts"]
        self.validators[name].validate(value)
        document, left_out = cut_to_fit(value, self.budget, starts)
        more = {e["path"]: e["shown"][1] for e in left_out if e["shown"][1] < e["total"]}
        if left_out:
            document["left_out"] = left_out
        document["next_cursor"] = (
            encode_cursor(name, {"key": key, "starts": more}) if more else None
        )
        return document

    async def answered(
        self, name: str, read: Callable[[], dict[str, Any]], key: Hashable | None = None
    ) -> CallToolResult:
        """``answer(name, read())`` on a worker thread: reading, checking and sizing a result
        never holds up the server's loop (other requests are answered meanwhile). With a
        ``key`` (the call's arguments), the answer is kept while the local store is unchanged
        (:mod:`otelcar.store.stamp`, and its backlog of received batches, which a list
        reports; ``otelcar.toml`` is read at every call, and a ``[source]`` other than the
        store keeps nothing) and sent again."""

        def keep() -> CallToolResult:
            with self.read_source() as source:
                stamp, backlog = store_stamp(source), pending_bytes(source)
            kept = None if stamp is None else (stamp, backlog, name, key)
            return self._kept_answers.get(kept, lambda: self.answer(name, read()))

        return await in_thread(lambda: self.answer(name, read()) if key is None else keep())

    def read_source(self) -> Any:
        """The trace source of ``otelcar.toml`` as it is now (a context manager)."""
        return self.context.open_source(self.context.config())

    @staticmethod
    async def progress_of(ctx: Context) -> runs.SendProgress:
        """What sends a run's progress to the client of ``ctx``."""

        async def send(done: int, message: str) -> None:
            await ctx.report_progress(done, None, message)

        return send

    async def kept(
        self, kind: str, trace_id: str, arguments: dict, result: dict, started: float
    ) -> CallToolResult:
        """A finished run kept (:func:`otelcar.mcp.results.save_result`) and sent with its
        result id; a result cut at the cap continues with ``read_result``."""
        record = await in_thread(
            results.save_result,
            self.context.store_root,
            kind=kind,
            trace_id=trace_id,
            arguments=arguments,
            result=result,
            started=started,
        )
        envelope = {"result_id": record["id"], "kind": kind, "trace_id": trace_id, "result": result}

        def read() -> dict[str, Any]:
            document = self.fitted(kind, envelope, record["id"], None)
            if document["next_cursor"]:  # read_result continues it: its record has those paths
                more = {e["path"]: e["shown"][1] for e in document["left_out"]}
                document["next_cursor"] = encode_cursor(
                    "read_result", {"key": record["id"], "starts": more}
                )
            return document

        return await self.answered(kind, read)
