"""The commands that bring traces in and show them: ``import``, ``traces``, ``show``,
``records``, ``reindex``, ``collect``, and ``schema`` (the contracts).

Loaded by :mod:`otelcar.cli` only when one of them runs.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click
from rich.progress import BarColumn, DownloadColumn, TextColumn, TimeRemainingColumn

from otelcar.cli.common import (
    console,
    emit_json,
    open_store,
    project,
    stderr_progress,
)
from otelcar.cli.options import (
    RegistryChoice,
    TimeParam,
    config_option,
    source_option,
)
from otelcar.importer import import_files
from otelcar.ingest.files import FILE_FORMATS
from otelcar.ingest.formats import export_formats
from otelcar.render import step_details, steps_table, traces_table
from otelcar.report.imports import import_report
from otelcar.views import (
    own_trace_summary,
    pending_bytes,
    pending_text,
    records_view,
    steps_view,
    trace_view,
    traces_view,
)


@click.command("import")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "--format",
    "fmt",
    type=RegistryChoice(lambda: [f.name for f in export_formats()], fixed=FILE_FORMATS),
    default="auto",
    show_default=True,
    help="File format; auto sniffs each file.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the import report as JSON.")
@click.pass_context
def import_command(ctx: click.Context, paths: tuple[Path, ...], fmt: str, as_json: bool) -> None:
    """Import OTLP dumps (JSON, JSON lines, protobuf, length-prefixed; gzip ok).

    Directories are walked. Records that cannot be decoded are kept in the store with the
    reason; paths that cannot be read, and named files nothing in which could be decoded,
    are listed with why, the others imported. The exit status is 1 when nothing at all could
    be imported or a named path could not be read.
    """
    store = open_store(ctx, create=True)
    progress = stderr_progress(
        TextColumn("importing"), BarColumn(), DownloadColumn(), TimeRemainingColumn()
    )
    done: dict[Path, int] = {}
    with progress:
        task = progress.add_task("import", total=None)

        def on_total(total: int) -> None:
            progress.update(task, total=total or None)

        def on_bytes(path: Path, consumed: int) -> None:
            done[path] = consumed
            progress.update(task, completed=sum(done.values()))

        report = import_files(paths, store=store, format=fmt, on_bytes=on_bytes, on_total=on_total)
    if as_json:
        emit_json(report.to_dict())
    else:
        import_report(console(), report)
    if not report.complete:
        sys.exit(1)


@click.command("traces")
@click.option("--service", help="Only traces of this service.")
@click.option(
    "--since",
    type=TimeParam(),
    help="Only traces started at or after: ISO 8601 (2026-11-01, 2026-11-01T12:00Z) or an age "
    "(30m, 1.5h, 7d, 2w).",
)
@click.option("--until", type=TimeParam(), help="Only traces started before (as --since).")
@click.option(
    "--limit",
    type=int,
    default=None,
    help="Only the newest N traces (with --source: default 100).",
)
@click.option(
    "--json", "as_json", is_flag=True, help="JSON list (schemas/traces-list.schema.json)."
)
@source_option()
@config_option(
    "otelcar.toml whose [source] to read traces from, and whose [outcome] judges each listed "
    "recorded run (default: ./otelcar.toml)."
)
@click.pass_context
def traces_command(
    ctx: click.Context,
    service: str | None,
    since: int | None,
    until: int | None,
    limit: int | None,
    as_json: bool,
    config_path: Path | None,
) -> None:
    """List the traces in the store (or in --source): id, service, start, steps, llm/tool
    counts, errors, dialect, whether content was captured. When received batches are not
    derived yet (a receiver's backlog), says how many MB on stderr.

    With an [outcome] in the config, an outcome column judges each recorded run as it was
    recorded (no policy call): fail or pass; judge where the outcome needs an LLM judge;
    error where the outcome raised (the first reason on stderr)."""
    from otelcar.project_config import load_judging_config, load_source
    from otelcar.sources import TraceFilter

    wanted = TraceFilter(service=service, since_ns=since, until_ns=until, limit=limit)
    judging = load_judging_config(config_path)
    settings = judging.source if judging is not None else load_source(config_path)
    verdicts: dict[str, str] | None = None
    with project(ctx).open_traces(settings) as source:
        traces = source.traces(wanted)
        pending = pending_bytes(source)
        if judging is not None:
            verdicts = _recorded_outcomes(source, traces["trace_id"].to_list(), judging.outcome)
    if as_json:
        rows = traces_view(traces)
        for row in rows if verdicts is not None else ():
            row["outcome"] = verdicts[row["trace_id"]]
        emit_json(rows)
    else:
        console().print(traces_table(traces, outcomes=verdicts))
    if pending:
        console(stderr=True).print(
            pending_text(pending), style="yellow", markup=False, highlight=False
        )


def _recorded_outcomes(source: Any, trace_ids: list[str], outcome: Any) -> dict[str, str]:
    """Each trace's recorded run judged by ``outcome`` as it was recorded
    (:func:`otelcar.outcome.recorded_verdict`); the first error's reason goes to stderr."""
    from otelcar.outcome import recorded_verdict
    from otelcar.sync import run_sync

    verdicts: dict[str, str] = {}
    reasons: list[str] = []
    for trace_id in trace_ids:
        verdict, reason = run_sync(recorded_verdict(outcome, source.load(trace_id).steps))
        verdicts[trace_id] = verdict
        if reason is not None:
            reasons.append(f"{trace_id}: {reason}")
    if reasons:
        console(stderr=True).print(
            f"outcome error on {len(reasons)} trace(s), e.g. {reasons[0]}",
            style="yellow",
            markup=False,
            highlight=False,
        )
    return verdicts


@click.command("show")
@click.argument("trace_id")
@click.option("--json", "as_json", is_flag=True, help="JSON (schemas/show.schema.json).")
@click.option(
    "--parquet",
    "parquet_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the steps table to this Parquet file.",
)
@click.option("--full", is_flag=True, help="Print every message, call and result of each step.")
@click.option(
    "--kind",
    "kinds",
    multiple=True,
    type=click.Choice(["llm", "tool", "agent", "other"]),
    help="Only steps of this kind (repeatable).",
)
@click.option(
    "--timeline",
    "timeline_name",
    metavar="NAME",
    help="Show the kept timeline NAME instead (`otelcar timelines TRACE` lists them).",
)
@click.option(
    "--rollout",
    type=click.IntRange(min=0),
    help="With --timeline: which rollout (default: its first).",
)
@click.option(
    "--own-trace",
    is_flag=True,
    help="With --timeline: the rollout's own trace (a live rollout's agent spans), shown as a "
    "trace is.",
)
@source_option()
@config_option("otelcar.toml whose [source] to read traces from (default: ./otelcar.toml).")
@click.pass_context
def show_command(
    ctx: click.Context,
    trace_id: str,
    as_json: bool,
    parquet_path: Path | None,
    full: bool,
    kinds: tuple[str, ...],
    timeline_name: str | None,
    rollout: int | None,
    own_trace: bool,
    config_path: Path | None,
) -> None:
    """Show the steps of one trace (TRACE_ID may be a unique prefix), or one of its kept
    timelines (--timeline NAME), or the trace a live rollout of one made (--own-trace)."""
    from otelcar.project_config import load_source

    if (rollout is not None or own_trace) and timeline_name is None:
        raise click.UsageError("--rollout and --own-trace go with --timeline NAME")
    loaded = project(ctx).load(trace_id, load_source(config_path))
    full_id, steps, row = loaded.trace_id, loaded.steps, loaded.summary
    if timeline_name is not None:
        timeline, chosen = _timeline_rollout(ctx, full_id, timeline_name, rollout)
        if not own_trace:
            _show_timeline(timeline, chosen, as_json, parquet_path, full)
            return
        steps = timeline.rollout_trace(chosen)
        if steps is None:
            raise click.UsageError(
                f"rollout {chosen} of timeline {timeline_name!r} made no trace of its own (it "
                "ran on the rebuilt agent, or its live agent sent no spans: docs/live.md)"
            )
        row = own_trace_summary(steps, f"{timeline_name}#{chosen}")
    if kinds:
        steps = steps.filter(steps["kind"].is_in(list(kinds)))
    summary = trace_view(row)
    if parquet_path is not None:
        steps.write_parquet(parquet_path)
        console(stderr=True).print(f"wrote {steps.height} steps to {parquet_path}")
    if as_json:
        emit_json({"trace": summary, "steps": steps_view(steps)})
        return
    if parquet_path is not None:
        return
    out = console()
    out.print(steps_table(summary, steps))
    if full:
        for row in steps.iter_rows(named=True):
            if row["kind"] in ("llm", "tool") or row["issues"]:
                out.print(step_details(row))


def _timeline_rollout(
    ctx: click.Context, trace_id: str, name: str, rollout: int | None
) -> tuple[Any, int]:
    """The kept timeline ``name`` and the rollout to show (default: its first)."""
    from otelcar.replay.timelines import load_timeline

    timeline = load_timeline(ctx.obj["store"], trace_id, name)
    kept = timeline.info.rollouts
    return timeline, rollout if rollout is not None else (kept[0].rollout if kept else 0)


def _show_timeline(
    timeline: Any,
    chosen: int,
    as_json: bool,
    parquet_path: Path | None,
    full: bool,
) -> None:
    """``show --timeline``: what was run, how the rollouts ended, one rollout's decisions
    (JSON: schemas/timeline.schema.json, whole contexts included)."""
    from otelcar.report.timelines import timeline_report

    path = timeline.path(chosen)
    if parquet_path is not None:
        timeline.rollout_steps(chosen).write_parquet(parquet_path)
        console(stderr=True).print(f"wrote rollout {chosen}'s steps to {parquet_path}")
    decisions = [d.to_dict(context=as_json or full) for d in path.decisions]
    if as_json:
        emit_json({"timeline": timeline.info.to_dict(), "rollout": chosen, "decisions": decisions})
        return
    timeline_report(console(), timeline.info.to_dict(), chosen, decisions)
    if full:
        from otelcar.report.timelines import decision_details

        for decision in decisions:
            console().print(decision_details(decision))
    own = timeline.rollout_trace(chosen)
    if own is not None:
        console().print(
            f"rollout {chosen} made a trace of its own ({own.height} steps, from its agent's "
            "spans; its outcome was judged on it): add --own-trace to show it",
            highlight=False,
        )


@click.command("records")
@click.option(
    "--status",
    type=click.Choice(["imported", "partial", "unparsed", "duplicate"]),
    help="Only records with this status.",
)
@click.option("--json", "as_json", is_flag=True, help="JSON list.")
@click.pass_context
def records_command(ctx: click.Context, status: str | None, as_json: bool) -> None:
    """List the raw records kept in the store, with their status and reason."""
    records = open_store(ctx).records()
    if status:
        records = records.filter(records["status"] == status)
    if as_json:
        emit_json(records_view(records))
        return
    out = console()
    for row in records.iter_rows(named=True):
        line = f"{row['status']:9} {row['source']} {row['position']}"
        if row["n_spans"] or row["n_logs"]:
            line += f"  ({row['n_spans']} spans, {row['n_logs']} logs)"
        if row["reason"]:
            line += f"  — {row['reason']}"
        out.print(line, markup=False, highlight=False)
    out.print(f"{records.height} records", style="bold")


@click.command("reindex")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.pass_context
def reindex_command(ctx: click.Context, as_json: bool) -> None:
    """Rebuild spans, steps and the trace index from the raw records."""
    store = open_store(ctx)
    with stderr_progress(
        TextColumn("reindexing"), BarColumn(), TextColumn("{task.completed} records")
    ) as progress:
        task = progress.add_task("reindex", total=None)
        report = store.reindex(progress=lambda n: progress.update(task, completed=n))
    if as_json:
        emit_json(report.to_dict())
    else:
        import_report(console(), report)


@click.command("collect")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--grpc-port",
    type=int,
    default=4317,
    show_default=True,
    help="OTLP/gRPC port (0: any free port).",
)
@click.option(
    "--http-port",
    type=int,
    default=4318,
    show_default=True,
    help="OTLP/HTTP port (0: any free port).",
)
@click.option("--no-grpc", is_flag=True, help="Do not serve OTLP/gRPC.")
@click.option("--no-http", is_flag=True, help="Do not serve OTLP/HTTP.")
@click.option(
    "--max-request-bytes",
    type=int,
    default=32 * 1024 * 1024,
    show_default=True,
    help="Largest accepted request body (after decompression).",
)
@click.option(
    "--request-timeout",
    type=click.FloatRange(min=0.1),
    default=10.0,
    show_default=True,
    help="Seconds an HTTP client has for its headers, and for its body plus one second "
    "per --min-upload-rate bytes sent; slower requests get 408.",
)
@click.option(
    "--min-upload-rate",
    type=click.IntRange(min=1),
    default=32 * 1024,
    show_default=True,
    help="Bytes per second an HTTP body must arrive at, on average, past --request-timeout.",
)
@click.option(
    "--max-connections",
    type=click.IntRange(min=1),
    default=1024,
    show_default=True,
    help="Open HTTP connections at most (when full, the oldest idle one makes room).",
)
@click.option(
    "--max-lag",
    "max_lag_mb",
    type=click.FloatRange(min=0),
    default=256.0,
    show_default=True,
    help="MB of received batches not yet derived past which new batches are refused as "
    "busy (the exporters retry): intake slows to what derivation keeps up with. 0: no bound.",
)
@click.option(
    "--derive",
    type=click.Choice(["process", "thread"]),
    default="process",
    show_default=True,
    help="Derive steps in a child process (on another core) or on a thread of this one.",
)
@click.option(
    "--grace",
    type=click.FloatRange(min=0),
    default=10.0,
    show_default=True,
    help="On Ctrl-C / SIGTERM: seconds requests in progress have to finish.",
)
@click.option(
    "--ready-file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the bound ports as JSON here once listening (for scripts).",
)
@click.option(
    "--triage",
    is_flag=True,
    help="Also triage failing traces as they complete, in a child process, within the "
    "limits of [triage] in the config (docs/triage.md).",
)
@config_option("The project config for --triage (default: ./otelcar.toml).")
@click.pass_context
def collect_command(
    ctx: click.Context,
    host: str,
    grpc_port: int,
    http_port: int,
    no_grpc: bool,
    no_http: bool,
    max_request_bytes: int,
    request_timeout: float,
    min_upload_rate: int,
    max_connections: int,
    max_lag_mb: float,
    derive: str,
    grace: float,
    ready_file: Path | None,
    triage: bool,
    config_path: Path | None,
) -> None:
    """Receive OTLP traces and logs (gRPC and HTTP) into the store until Ctrl-C / SIGTERM.

    A batch is acknowledged only after its bytes are fsync-ed to the store's raw segments;
    steps are derived in the background (by default in a child process, on another core), so
    `otelcar traces` shows a trace within seconds. While more than --max-lag MB wait to be
    derived, new batches are refused as busy and the exporters retry them later.
    It may run while `otelcar import` writes the same store. On SIGTERM it stops accepting,
    answers the requests in progress (within --grace seconds) and exits 0.
    """
    from otelcar.receiver import Receiver, ReceiverConfig
    from otelcar.receiver.connections import Deadlines
    from otelcar.receiver.console import run_until_stopped

    config = ReceiverConfig(
        host=host,
        grpc_port=None if no_grpc else grpc_port,
        http_port=None if no_http else http_port,
        max_request_bytes=max_request_bytes,
        max_connections=max_connections,
        max_lag_bytes=int(max_lag_mb * 1e6) or None,
        derive=derive,
        deadlines=Deadlines(
            header_timeout_s=request_timeout,
            body_timeout_s=request_timeout,
            min_upload_bytes_per_s=min_upload_rate,
        ),
    )
    receiver = Receiver(open_store(ctx, create=True), config)
    if not triage:
        run_until_stopped(receiver, console(), ready_file=ready_file, grace_s=grace)
        return
    from otelcar.project_config import load_config
    from otelcar.triage.child import TriageChild

    if load_config(config_path).outcome is None:  # a config error stops here, not in the child
        raise click.UsageError("--triage needs a config with [outcome] (-c otelcar.toml)")
    child = TriageChild(ctx.obj["store"], config_path, debug=bool(ctx.obj.get("debug")))
    child.start()
    try:
        run_until_stopped(receiver, console(), ready_file=ready_file, grace_s=grace)
    finally:
        child.stop(grace)


@click.command("schema")
@click.option(
    "--write",
    "target",
    type=click.Path(file_okay=False, path_type=Path),
    help="Write the schema files into this directory instead of listing them.",
)
def schema_command(target: Path | None) -> None:
    """The JSON contracts: steps table, normalized message, --json outputs."""
    from otelcar.contracts import render_schema_files  # the report schemas load the reports

    files = render_schema_files()
    if target is None:
        for name in files:
            click.echo(name)
        return
    target.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (target / name).write_text(text, encoding="utf-8")
        click.echo(f"wrote {target / name}")
