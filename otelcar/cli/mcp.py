"""``otelcar mcp``: serve the store to coding agents over the Model Context Protocol
(:mod:`otelcar.mcp`; docs/mcp.md). Needs the ``mcp`` extra."""

from __future__ import annotations

from pathlib import Path

import click

from otelcar.cli.options import config_option


@click.command("mcp")
@click.option("--http", "use_http", is_flag=True, help="Serve streamable HTTP, not stdio.")
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=0,
    show_default=True,
    help="With --http: the port on 127.0.0.1 (0: a free one; the URL is printed).",
)
@click.option(
    "--max-calls",
    type=click.IntRange(min=1),
    help="Most policy calls one attribute/why/fix run may spend (a ceiling over the "
    "tools' max_calls and [replay] max_calls).",
)
@click.option(
    "--allow-agent",
    is_flag=True,
    help="With --http: let attribute/why/fix requests name an agent command (their agent "
    "argument: live replay, run as this user). Over stdio the client that started the server "
    "may always.",
)
@click.option(
    "--max-result-bytes",
    type=click.IntRange(min=16 * 1024),
    default=256 * 1024,
    show_default=True,
    help="Most bytes one tool result may be: a longer one is cut at a step or item, says "
    "what it left out and gives a cursor to continue.",
)
@config_option("otelcar.toml with the policies and the outcome (default: ./otelcar.toml).")
@click.pass_context
def mcp_command(
    ctx: click.Context,
    use_http: bool,
    port: int,
    max_calls: int | None,
    allow_agent: bool,
    max_result_bytes: int,
    config_path: Path | None,
) -> None:
    """Model Context Protocol server for coding agents: list, search and show traces, run
    attribute/why/fix with budgets and progress, read kept results.

    On stdio by default (stdout is protocol only; logs go to stderr); --http serves
    http://127.0.0.1:PORT/mcp. Runs call the policies of otelcar.toml, which may call models;
    a run given an agent command (or [agent] command) runs that agent (docs/live.md).
    """
    if allow_agent and not use_http:
        raise click.UsageError("--allow-agent is for --http (over stdio a request may always)")
    try:
        from otelcar.mcp.server import build_server
    except ImportError as exc:
        raise click.ClickException(
            f"otelcar mcp needs the MCP SDK: pip install 'otelcar[mcp]' ({exc})"
        ) from None
    from otelcar.mcp.runs import RunContext
    from otelcar.mcp.transport import serve_http, serve_stdio
    from otelcar.project_config import load_config

    load_config(config_path)  # a broken otelcar.toml is an error now, not at the first run
    context = RunContext(
        ctx.obj["store"], config_path, max_calls, agent_commands=allow_agent or not use_http
    )
    server = build_server(context, max_result_bytes=max_result_bytes)
    if use_http:
        serve_http(server, port=port)
    else:
        serve_stdio(server)
