"""The ``otelcar`` command line: parses arguments, calls the library, prints.

Errors raised by the library (:class:`otelcar.errors.OtelcarError`) become one ``error:``
line and exit status 2, in one place (:class:`OtelcarGroup`); ``--debug`` or
``OTELCAR_DEBUG=1`` shows the traceback instead.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

from otelcar import __version__
from otelcar.cli_options import (
    TimeParam,
    apply_fail_if,
    chosen_source,
    config_option,
    executor_for,
    executor_options,
    fail_if_option,
    html_option,
    json_option,
    source_option,
)
from otelcar.cli_repair import fix_command, test_command, why_command
from otelcar.cli_report import aggregate_command, report_command
from otelcar.config import ENV_HOME, debug_enabled
from otelcar.contracts import render_schema_files
from otelcar.errors import OtelcarError
from otelcar.importer import expand_paths, iter_file_records
from otelcar.ingest.files import FILE_FORMATS
from otelcar.ingest.formats import export_formats
from otelcar.model.cli import model_group
from otelcar.render import import_report, step_details, steps_table, traces_table
from otelcar.store import Store
from otelcar.views import records_view, steps_view, trace_view, traces_view


def _console(*, stderr: bool = False) -> Console:
    console = Console(stderr=stderr, soft_wrap=False)
    if not console.is_terminal:  # piped or captured: do not squeeze tables into 80 columns
        console = Console(stderr=stderr, soft_wrap=False, width=max(console.width, 200))
    return console


def stderr_progress(*columns: Any) -> Progress:
    """A progress display with ``columns`` on stderr that disappears when done, and is off
    when stderr is not a terminal (logs and pipes get no control sequences)."""
    err = _console(stderr=True)
    return Progress(*columns, console=err, transient=True, disable=not err.is_terminal)


def _emit_json(value: Any) -> None:
    click.echo(json.dumps(value, indent=2, ensure_ascii=False, default=str))


def _store(ctx: click.Context, *, create: bool = False) -> Store:
    return Store(ctx.obj["store"], create=create)


class LibraryError(click.ClickException):
    """A library error shown as one ``error:`` line, exit status 2."""

    exit_code = 2

    def show(self, file: Any = None) -> None:
        click.echo(f"error: {self.message}", err=True, file=file)


class OtelcarGroup(click.Group):
    """Turns every error into one ``error:`` line, in one place: an :class:`OtelcarError` as
    its message, anything else (a bug) with its type and a pointer to ``--debug``, which (as
    ``OTELCAR_DEBUG=1``) shows the traceback instead."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.ClickException, click.Abort):
            raise
        except Exception as exc:
            if debug_enabled() or (ctx.obj or {}).get("debug"):
                raise
            if isinstance(exc, OtelcarError):
                raise LibraryError(str(exc)) from exc
            raise LibraryError(
                f"unexpected {type(exc).__name__}: {exc} (run with --debug for the traceback)"
            ) from exc


@click.group(cls=OtelcarGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="otelcar")
@click.option(
    "--store",
    "store_path",
    type=click.Path(file_okay=False, path_type=Path),
    envvar=ENV_HOME,
    default=".otelcar",
    show_default=True,
    help=f"Store directory (env {ENV_HOME}).",
)
@click.option("--debug", is_flag=True, help="Show tracebacks on errors.")
@click.pass_context
def cli(ctx: click.Context, store_path: Path, debug: bool) -> None:
    """otelcar: which step of a failed agent run caused the failure, from its trace."""
    ctx.ensure_object(dict)
    ctx.obj["store"] = store_path
    ctx.obj["debug"] = debug


@cli.command("import")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "--format",
    "fmt",
    type=click.Choice([*FILE_FORMATS, *(f.name for f in export_formats())]),
    default="auto",
    show_default=True,
    help="File format; auto sniffs each file.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the import report as JSON.")
@click.pass_context
def import_command(ctx: click.Context, paths: tuple[Path, ...], fmt: str, as_json: bool) -> None:
    """Import OTLP dumps (JSON, JSON lines, protobuf, length-prefixed; gzip ok).

    Directories are walked. Records that cannot be decoded are kept in the store with the
    reason; the exit status is 1 only when nothing at all could be imported.
    """
    store = _store(ctx, create=True)
    files = expand_paths(paths)
    total = sum(p.stat().st_size for p in files)
    progress = stderr_progress(
        TextColumn("importing"), BarColumn(), DownloadColumn(), TimeRemainingColumn()
    )
    done: dict[Path, int] = {}
    with progress:
        task = progress.add_task("import", total=total or None)

        def on_bytes(path: Path, consumed: int) -> None:
            done[path] = consumed
            progress.update(task, completed=sum(done.values()))

        report = store.import_records(iter_file_records(files, format=fmt, on_bytes=on_bytes))
    if as_json:
        _emit_json(report.to_dict())
    else:
        import_report(_console(), report)
    if not report.ok:
        sys.exit(1)


@cli.command("traces")
@click.option("--service", help="Only traces of this service.")
@click.option("--since", type=TimeParam(), help="Only traces started at or after (ISO 8601, 6h).")
@click.option("--until", type=TimeParam(), help="Only traces started before (ISO 8601, 30m).")
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
@config_option("otelcar.toml whose [source] to read traces from (default: ./otelcar.toml).")
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
    counts, errors, dialect, whether content was captured."""
    from otelcar.project_config import load_source

    settings = chosen_source(ctx, load_source(config_path))
    if settings is not None:
        from otelcar.sources import TraceFilter, open_source

        wanted = TraceFilter(service=service, since_ns=since, until_ns=until, limit=limit)
        with open_source(settings) as source:
            traces = source.traces(wanted)
    else:
        traces = _store(ctx).traces()
        if service:
            traces = traces.filter(traces["service"] == service)
        if since is not None:
            traces = traces.filter(traces["start_ns"] >= since)
        if until is not None:
            traces = traces.filter(traces["start_ns"] < until)
    if limit is not None:
        traces = traces.tail(limit)
    if as_json:
        _emit_json(traces_view(traces))
    else:
        _console().print(traces_table(traces))


@cli.command("show")
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
    config_path: Path | None,
) -> None:
    """Show the steps of one trace (TRACE_ID may be a unique prefix)."""
    from otelcar.project_config import load_source

    _, steps, row = _load_trace(ctx, trace_id, load_source(config_path))
    if kinds:
        steps = steps.filter(steps["kind"].is_in(list(kinds)))
    summary = trace_view(row)
    if parquet_path is not None:
        steps.write_parquet(parquet_path)
        _console(stderr=True).print(f"wrote {steps.height} steps to {parquet_path}")
    if as_json:
        _emit_json({"trace": summary, "steps": steps_view(steps)})
        return
    if parquet_path is not None:
        return
    console = _console()
    console.print(steps_table(summary, steps))
    if full:
        for row in steps.iter_rows(named=True):
            if row["kind"] in ("llm", "tool") or row["issues"]:
                console.print(step_details(row))


@cli.command("records")
@click.option(
    "--status",
    type=click.Choice(["imported", "partial", "unparsed", "duplicate"]),
    help="Only records with this status.",
)
@click.option("--json", "as_json", is_flag=True, help="JSON list.")
@click.pass_context
def records_command(ctx: click.Context, status: str | None, as_json: bool) -> None:
    """List the raw records kept in the store, with their status and reason."""
    records = _store(ctx).records()
    if status:
        records = records.filter(records["status"] == status)
    if as_json:
        _emit_json(records_view(records))
        return
    console = _console()
    for row in records.iter_rows(named=True):
        line = f"{row['status']:9} {row['source']} {row['position']}"
        if row["n_spans"] or row["n_logs"]:
            line += f"  ({row['n_spans']} spans, {row['n_logs']} logs)"
        if row["reason"]:
            line += f"  — {row['reason']}"
        console.print(line, markup=False, highlight=False)
    console.print(f"{records.height} records", style="bold")


@cli.command("reindex")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.pass_context
def reindex_command(ctx: click.Context, as_json: bool) -> None:
    """Rebuild spans, steps and the trace index from the raw records."""
    store = _store(ctx)
    with stderr_progress(
        TextColumn("reindexing"), BarColumn(), TextColumn("{task.completed} records")
    ) as progress:
        task = progress.add_task("reindex", total=None)
        report = store.reindex(progress=lambda n: progress.update(task, completed=n))
    if as_json:
        _emit_json(report.to_dict())
    else:
        import_report(_console(), report)


@cli.command("collect")
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
    "--ready-file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the bound ports as JSON here once listening (for scripts).",
)
@click.pass_context
def collect_command(
    ctx: click.Context,
    host: str,
    grpc_port: int,
    http_port: int,
    no_grpc: bool,
    no_http: bool,
    max_request_bytes: int,
    ready_file: Path | None,
) -> None:
    """Receive OTLP traces and logs (gRPC and HTTP) into the store until Ctrl-C / SIGTERM.

    A batch is acknowledged only after its bytes are fsync-ed to the store's raw segments;
    steps are derived in the background, so `otelcar traces` shows a trace within seconds.
    """
    from otelcar.receiver import Receiver, ReceiverConfig
    from otelcar.receiver.console import run_until_stopped

    config = ReceiverConfig(
        host=host,
        grpc_port=None if no_grpc else grpc_port,
        http_port=None if no_http else http_port,
        max_request_bytes=max_request_bytes,
    )
    receiver = Receiver(_store(ctx, create=True), config)
    run_until_stopped(receiver, _console(), ready_file=ready_file)


def _load_trace(ctx: click.Context, trace_id: str, configured: Any) -> tuple[str, Any, dict]:
    """``(full id, steps, trace summary row)`` of one trace, from ``--source`` or the
    ``configured`` :class:`~otelcar.sources.SourceSettings` when either is set, else from the
    local store."""
    settings = chosen_source(ctx, configured)
    if settings is not None:
        from otelcar.sources import open_source

        with open_source(settings) as source:
            loaded = source.load(trace_id)
        return loaded.trace_id, loaded.steps, loaded.summary
    store = _store(ctx)
    full_id = store.resolve(trace_id)
    traces = store.traces()
    summary = traces.filter(traces["trace_id"] == full_id).row(0, named=True)
    return full_id, store.steps(full_id), summary


def _run_and_config(ctx: click.Context, trace_id: str, config_path: Path | None) -> tuple:
    from otelcar.project_config import load_config
    from otelcar.replay import load_run

    config = load_config(config_path)
    full_id, steps, _ = _load_trace(ctx, trace_id, config.source)
    return load_run(full_id, steps), config, steps


@cli.command("replay")
@click.argument("trace_id")
@click.option(
    "-c",
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="otelcar.toml (default: ./otelcar.toml if present).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the fidelity report as JSON.")
@source_option()
@click.pass_context
def replay_command(
    ctx: click.Context, trace_id: str, config_path: Path | None, as_json: bool
) -> None:
    """Fidelity check: replay the trace with every step held and compare with the recording.

    Each LLM step gets a verdict: ok, held-only (reproduced, but changes upstream of it would
    not propagate faithfully) or unreproducible, with the reason. With an outcome configured,
    the recorded and replayed outcomes must agree. Exit status 1 when not reproducible.
    """
    from otelcar.replay import check_fidelity

    run, config, steps = _run_and_config(ctx, trace_id, config_path)
    report = check_fidelity(run, outcome=config.outcome, recorded_steps=steps)
    if as_json:
        _emit_json(report.to_dict())
    else:
        from otelcar.render import fidelity_table

        _console().print(fidelity_table(report))
    if not report.reproducible:
        sys.exit(1)


@cli.command("rollout")
@click.argument("trace_id")
@click.option(
    "-c",
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="otelcar.toml with the policies and the outcome.",
)
@click.option(
    "--resample",
    "resample_steps",
    type=int,
    multiple=True,
    help="Re-decide this step (repeatable).",
)
@click.option("--from-step", type=int, help="Hold the steps before it, re-decide the rest.")
@click.option(
    "--plan",
    "plan_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="A plan as JSON (Plan.to_json()).",
)
@click.option("-n", "--rollouts", type=int, help="Rollouts (default: [replay] rollouts).")
@click.option("--seed", type=int, help="Base seed (default: [replay] seed).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.option(
    "--parquet",
    "parquet_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write every rollout's steps to this Parquet file.",
)
@executor_options()
@source_option()
@click.pass_context
def rollout_command(
    ctx: click.Context,
    trace_id: str,
    config_path: Path | None,
    resample_steps: tuple[int, ...],
    from_step: int | None,
    plan_path: Path | None,
    rollouts: int | None,
    seed: int | None,
    as_json: bool,
    parquet_path: Path | None,
    executor: str | None,
    ray_address: str | None,
) -> None:
    """Run an intervention plan on a trace R times and report how often it fails."""
    from otelcar.replay import Budget, Environment, Plan, Resample, run_plan

    run, config, _ = _run_and_config(ctx, trace_id, config_path)
    plan = Plan.from_json(plan_path.read_text()) if plan_path else Plan()
    plan = plan + Plan(tuple(Resample(s) for s in resample_steps))
    if from_step is not None:
        plan = plan + Plan.resample_from(from_step, [d.step for d in run.decisions])
    settings = config.replay
    env = Environment(config.registry, Budget(settings.max_calls, settings.max_tokens))
    count = rollouts if rollouts is not None else settings.rollouts
    with (
        executor_for(settings, executor, ray_address),
        stderr_progress(
            TextColumn("rollouts"), BarColumn(), TextColumn("{task.completed}/{task.total}")
        ) as progress,
    ):
        task = progress.add_task("rollouts", total=count)
        result = run_plan(
            run,
            plan,
            env,
            rollouts=count,
            seed=seed if seed is not None else settings.seed,
            outcome=config.outcome,
            concurrency=settings.concurrency,
            on_rollout=lambda _: progress.advance(task),
        )
    if parquet_path is not None:
        result.steps().write_parquet(parquet_path)
    summary = result.summary()
    if as_json:
        _emit_json(summary)
        return
    console = _console()
    console.print(f"plan: {plan.describe()}", highlight=False)
    judged = summary["judged"]
    if config.outcome is not None:
        console.print(f"outcome: {config.outcome.describe()}", highlight=False)
        console.print(f"failed in {summary['failed']} of {judged} judged rollouts", highlight=False)
    console.print(
        f"status: {summary['status']}; cost: {summary['cost']}; {summary['wall_s']} s",
        highlight=False,
    )
    for error in summary["errors"][:10]:
        console.print(f"  {error}", style="yellow", highlight=False)


@cli.command("attribute")
@click.argument("trace_id")
@config_option()
@click.option("--base-url", help="OpenAI-compatible server for the 'llm' policy (overrides).")
@click.option("--model", help="Model name for --base-url.")
@fail_if_option()
@click.option("-n", "--rollouts", type=int, help="Fixed-R mode: R rollouts per plan.")
@click.option(
    "--adaptive",
    is_flag=True,
    help="Adaptive mode (the default without --rollouts): looks at doubling rollout counts, "
    "stopping when the culprit is decided or nothing can still become significant.",
)
@click.option(
    "--max-rollouts",
    type=int,
    default=64,
    show_default=True,
    help="Adaptive mode: most rollouts per plan.",
)
@click.option(
    "--first-look",
    type=int,
    default=8,
    show_default=True,
    help="Adaptive mode: rollouts per plan at the first look (then doubling).",
)
@click.option("--confidence", type=float, default=0.95, show_default=True)
@click.option(
    "--mode",
    type=click.Choice(["auto", "curve", "bisect"]),
    default="auto",
    show_default=True,
    help="curve: every step's q; bisect: binary search for the largest jump (long traces), "
    "falling back to the curve when the ends show no rise; auto: bisect above 40 decisions.",
)
@click.option(
    "--shapley",
    is_flag=True,
    help="Also Shapley values of the steps with the largest effects (AND/OR failures).",
)
@click.option(
    "--shapley-pairs",
    type=int,
    default=4,
    show_default=True,
    help="Antithetic permutation pairs for --shapley.",
)
@click.option("--budget", type=int, help="Most policy calls to spend.")
@click.option("--seed", type=int, help="Base seed (default: [replay] seed).")
@click.option("--credit", is_flag=True, help="For a passing run: which step secured success.")
@executor_options()
@json_option("attribution.schema.json")
@html_option()
@source_option()
@click.pass_context
def attribute_command(
    ctx: click.Context,
    trace_id: str,
    config_path: Path | None,
    base_url: str | None,
    model: str | None,
    fail_if: tuple[str, ...],
    rollouts: int | None,
    adaptive: bool,
    max_rollouts: int,
    first_look: int,
    confidence: float,
    mode: str,
    shapley: bool,
    shapley_pairs: int,
    budget: int | None,
    seed: int | None,
    credit: bool,
    executor: str | None,
    ray_address: str | None,
    json_path: Path | None,
    html_path: Path | None,
) -> None:
    """Which step caused the failure: the commitment curve, step effects with intervals and
    Holm-adjusted exact tests, the culprit, and what it cost."""
    from otelcar.attribution import attribute
    from otelcar.policies import OpenAICompatiblePolicy
    from otelcar.render import attribution_report
    from otelcar.replay import Budget
    from otelcar.report import RolloutSampler, with_report_sections, write_html

    if adaptive and rollouts is not None:
        raise click.UsageError("--adaptive and --rollouts exclude each other")
    run, config, steps = _run_and_config(ctx, trace_id, config_path)
    if base_url:
        config.registry.register("llm", OpenAICompatiblePolicy(base_url=base_url, model=model))
    apply_fail_if(config, fail_if, required=True)
    settings = config.replay
    with (
        executor_for(settings, executor, ray_address),
        stderr_progress(
            TextColumn("rollouts"), BarColumn(), TextColumn("{task.completed} done")
        ) as progress,
    ):
        task = progress.add_task("attribute", total=None)
        sampler = RolloutSampler(then=lambda _: progress.advance(task))
        result = attribute(
            run,
            registry=config.registry,
            outcome=config.outcome,
            confidence=confidence,
            rollouts=rollouts,
            first_look=first_look,
            max_rollouts=max_rollouts,
            seed=seed if seed is not None else settings.seed,
            budget=Budget(
                budget if budget is not None else settings.max_calls, settings.max_tokens
            ),
            concurrency=settings.concurrency,
            credit=credit,
            on_rollout=sampler,
            mode=mode,
            shapley=shapley,
            shapley_pairs=shapley_pairs,
        )
    if json_path is not None or html_path is not None:
        document = with_report_sections(
            result.to_dict(), steps=steps, sampler=sampler, outcome=config.outcome
        )
    if html_path is not None:
        write_html(html_path, attribution=document)
    if json_path is not None:
        text = json.dumps(document, indent=2, ensure_ascii=False)
        if str(json_path) == "-":
            click.echo(text)
            return
        json_path.write_text(text + "\n", encoding="utf-8")
    attribution_report(_console(), result)
    if json_path is not None:
        _console().print(f"result written to {json_path}", highlight=False)
    if html_path is not None:
        _console().print(f"report written to {html_path}", highlight=False)


@cli.command("schema")
@click.option(
    "--write",
    "target",
    type=click.Path(file_okay=False, path_type=Path),
    help="Write the schema files into this directory instead of listing them.",
)
def schema_command(target: Path | None) -> None:
    """The JSON contracts: steps table, normalized message, --json outputs."""
    files = render_schema_files()
    if target is None:
        for name in files:
            click.echo(name)
        return
    target.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (target / name).write_text(text, encoding="utf-8")
        click.echo(f"wrote {target / name}")


cli.add_command(model_group)
cli.add_command(report_command)
cli.add_command(aggregate_command)
cli.add_command(why_command)
cli.add_command(fix_command)
cli.add_command(test_command)


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``otelcar`` script."""
    cli.main(args=argv, prog_name="otelcar")


if __name__ == "__main__":
    main()
