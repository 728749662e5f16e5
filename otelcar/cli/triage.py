"""``otelcar triage run`` and ``otelcar triage status`` (docs/triage.md); ``otelcar collect
--triage`` runs the same engine in a child process (:mod:`otelcar.triage.child`)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import click

from otelcar.analyses.requests import AggregateRequest
from otelcar.cli.common import emit_json, open_store
from otelcar.cli.options import config_option, request_options


@click.group("triage")
def triage_group() -> None:
    """Triage failing traces as they arrive: judge each complete trace with [outcome] and
    attribute the failing ones within the limits of [triage] (docs/triage.md)."""


@triage_group.command("run")
@config_option()
@click.option("--once", is_flag=True, help="Stop when nothing is left that the limits let run.")
@click.option(
    "--poll",
    "poll_s",
    type=click.FloatRange(min=0.05),
    default=1.0,
    show_default=True,
    help="Seconds between looks at the store.",
)
@click.option("--background", is_flag=True, hidden=True, help="Run at a lower CPU priority.")
@click.pass_context
def run_command(
    ctx: click.Context, config_path: Path | None, once: bool, poll_s: float, background: bool
) -> None:
    """Triage the store's traces in the foreground until Ctrl-C / SIGTERM (the engine of
    `otelcar collect --triage`): traces already stored and those that arrive. One runs per
    store; a killed one resumes its queue."""
    from otelcar.project_config import load_config
    from otelcar.store.live_requests import LiveRequestStore
    from otelcar.sync import run_sync
    from otelcar.triage.engine import TriageEngine

    if background:
        os.nice(10)  # derivation and intake come first
    config = load_config(config_path)
    config.live_requests = LiveRequestStore(ctx.obj["store"])
    store = open_store(ctx, create=True)
    engine = TriageEngine(
        store,
        config,
        log=lambda line: click.echo(line),
        poll_s=poll_s,
        debug=bool(ctx.obj.get("debug")),
    )

    async def main() -> None:
        import asyncio

        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, engine.stop)
        await engine.run(once=once)

    run_sync(main())


@triage_group.command("status")
@config_option("otelcar.toml whose [triage] limits to report (default: ./otelcar.toml).")
@click.option("--json", "as_json", is_flag=True, help="JSON: every trace (docs/triage.md).")
@click.option(
    "--limit",
    type=click.IntRange(min=0),
    default=50,
    show_default=True,
    help="Traces listed, newest first.",
)
@click.pass_context
def status_command(ctx: click.Context, config_path: Path | None, as_json: bool, limit: int) -> None:
    """What triage has queued, running, done, skipped and passed, and why; the calls spent
    today against [triage] max_calls_per_day."""
    from otelcar.project_config import load_triage
    from otelcar.triage.status import status_document, status_lines

    document = status_document(ctx.obj["store"], load_triage(config_path))
    if as_json:
        emit_json(document)
        return
    for line in status_lines(document, limit=limit):
        click.echo(line)


@triage_group.command("report")
@click.option("--service", help="Only this service.")
@request_options(AggregateRequest, only=("confidence",))
@click.option("--json", "as_json", is_flag=True, help="JSON: the weeks, each an aggregate.")
@click.pass_context
def report_command(
    ctx: click.Context, service: str | None, confidence: float, as_json: bool
) -> None:
    """The systematic weak step per service and ISO week, over what triage attributed (as
    `otelcar aggregate` ranks step identities), with no policy call: the analyses were made
    as the traces arrived."""
    from otelcar.triage.report import weekly, weekly_document

    store = open_store(ctx)
    document = weekly_document(weekly(store, confidence=confidence, service=service))
    if as_json:
        emit_json(document)
        return
    if not document["weeks"]:
        click.echo("triage has attributed no trace yet (otelcar triage status)")
        return
    from otelcar.cli.common import console
    from otelcar.report.terminal import aggregate_report

    out = console()
    for week in document["weeks"]:
        out.rule(f"{week['service'] or '(no service)'} · {week['week']}")
        aggregate_report(out, week["aggregate"])
