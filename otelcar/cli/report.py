"""``otelcar report`` (a JSON result back into HTML or terminal output) and ``otelcar
aggregate`` (the systematic weak step across many failing traces). Registered in
:mod:`otelcar.cli`; parses arguments, calls the library, prints."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
from rich.progress import BarColumn, MofNCompleteColumn, TextColumn

from otelcar.analyses.requests import AggregateRequest
from otelcar.cli.common import write_json
from otelcar.cli.options import (
    TimeParam,
    config_option,
    executor_for,
    executor_options,
    fail_if_option,
    fail_if_outcome,
    html_option,
    json_option,
    request_options,
)
from otelcar.safe_console import SafeConsole


@click.command("report")
@click.argument(
    "result_paths",
    nargs=-1,
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
)
@click.option(
    "--html",
    "html_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the self-contained HTML report here.",
)
@click.option(
    "--terminal", is_flag=True, help="Print the terminal report (the default without --html)."
)
@click.pass_context
def report_command(
    ctx: click.Context, result_paths: tuple[Path, ...], html_path: Path | None, terminal: bool
) -> None:
    """Turn JSON results back into an HTML or terminal report.

    RESULT_PATHS: an attribution (`attribute --json`), optionally with the `why` and `fix`
    results of the same trace, or an aggregate (`aggregate --json`), or a diff (`diff
    --json`). A result written without
    its timeline gets it from the store when the trace is there.
    """
    from otelcar.cli.common import console as _console
    from otelcar.cli.common import open_store as _store
    from otelcar.errors import OtelcarError
    from otelcar.report import read_result, write_aggregate_html, write_html
    from otelcar.report.terminal import result_report

    results: dict[str, dict[str, Any]] = {}
    for path in result_paths:
        doc = read_result(path)
        if doc["kind"] in results:
            raise click.UsageError(f"two {doc['kind']} results given; give one of each kind")
        results[doc["kind"]] = doc
    for alone in ("aggregate", "diff"):
        if alone in results and len(results) > 1:
            raise click.UsageError(
                f"a{'n' if alone[0] == 'a' else ''} {alone} result is reported on its own"
            )
    if html_path is not None:
        if "aggregate" in results:
            write_aggregate_html(html_path, results["aggregate"])
        elif "diff" in results:
            from otelcar.report.html_diff import write_diff_html

            write_diff_html(html_path, results["diff"])
        else:
            steps = None
            main = results.get("attribution") or results.get("why") or results.get("fix") or {}
            if not any(d.get("timeline") for d in results.values()) and main.get("trace_id"):
                try:
                    steps = _store(ctx, create=False).steps(main["trace_id"])
                except OtelcarError:
                    steps = None  # no store here: the report says the timeline is missing
            write_html(
                html_path,
                attribution=results.get("attribution"),
                why=results.get("why"),
                fix=results.get("fix"),
                steps=steps,
            )
        _console(stderr=True).print(f"report written to {html_path}", highlight=False)
    if terminal or html_path is None:
        console = _console()
        for doc in results.values():
            result_report(console, doc)


@click.command("aggregate")
@click.argument("trace_ids", nargs=-1)
@click.option("--service", help="Only traces of this service.")
@click.option(
    "--since",
    type=TimeParam(),
    help="Only traces that started then or later: ISO 8601 (2026-11-01, 2026-11-01T12:00Z) "
    "or an age (30m, 1.5h, 7d, 2w).",
)
@click.option(
    "--limit", type=click.IntRange(min=1), help="Only the newest N of the selected traces."
)
@config_option()
@fail_if_option()
@request_options(AggregateRequest)
@executor_options()
@json_option("aggregate.schema.json")
@html_option()
@click.pass_context
def aggregate_command(
    ctx: click.Context,
    trace_ids: tuple[str, ...],
    service: str | None,
    since: int | None,
    limit: int | None,
    config_path: Path | None,
    fail_if: tuple[str, ...],
    executor: str | None,
    ray_address: str | None,
    agent: str | None,
    json_path: Path | None,
    html_path: Path | None,
    **options: Any,
) -> None:
    """Attribute many failing traces of one agent and rank its steps by stable identity
    (agent · step name → tools): how often each is the culprit, its mean effect with an
    interval, and whether it is a design flaw or bad luck (docs/reports.md).

    Without TRACE_IDS every trace in the store is considered (narrow with --service, --since,
    --limit); traces whose recording does not fail are counted as passed.

    With --agent CMD (or [agent] command), live replay (docs/live.md): each failing trace is
    first replayed on your agent with the recorded answers, and attributed with its rollouts
    on your agent only when the agent makes every recorded request again; a trace it does not
    reproduce is counted as skipped, with the first difference as the reason.
    """
    import polars as pl

    from otelcar.analyses import aggregate_run
    from otelcar.analyses.project import configured
    from otelcar.cli.common import console as _console
    from otelcar.cli.common import open_store as _store
    from otelcar.cli.common import refuse_executor, stderr_progress
    from otelcar.project_config import load_config
    from otelcar.report import write_aggregate_html
    from otelcar.report.prose import document as result_document
    from otelcar.report.terminal import aggregate_report
    from otelcar.sync import run_sync

    request = AggregateRequest(**options)
    store = _store(ctx)
    config = configured(
        load_config(config_path),
        agent=agent,
        outcome=fail_if_outcome(fail_if),
        require_outcome=True,
    )
    refuse_executor(config, executor)
    traces = store.traces()
    if trace_ids:
        wanted = [store.resolve(t) for t in trace_ids]
        traces = traces.filter(pl.col("trace_id").is_in(wanted))
    if service:
        traces = traces.filter(pl.col("service") == service)
    if since is not None:
        traces = traces.filter(pl.col("start_ns") >= since)
    ids = traces.sort("start_ns", nulls_last=False)["trace_id"].to_list()
    if limit is not None:
        ids = ids[-limit:]
    if not ids:
        raise click.UsageError("no trace matches the selection")
    since_text = None
    if since is not None:  # the instant the age or date named, in the result as ISO 8601
        from datetime import UTC, datetime

        since_text = datetime.fromtimestamp(since / 1e9, UTC).isoformat(timespec="seconds")
    settings = config.replay
    err = _console(stderr=True)
    log = SafeConsole(stderr=True, highlight=False) if not err.is_terminal else err
    with (
        executor_for(settings, executor, ray_address),
        stderr_progress(
            TextColumn("attributing"), BarColumn(), MofNCompleteColumn(), TextColumn("traces")
        ) as progress,
    ):
        task = progress.add_task("aggregate", total=len(ids))

        def on_trace(verdict: Any) -> None:
            progress.advance(task)
            if verdict.status == "attributed":
                what = (
                    f"culprit step {verdict.culprit_step} ({verdict.culprit_identity}), "
                    f"Δ {verdict.delta:+.2f}"
                    if verdict.culprit_step is not None
                    else verdict.verdict
                )
            else:
                what = f"{verdict.status}: {verdict.reason}"
            log.print(f"{verdict.trace_id[:12]}  {what}", markup=False, highlight=False)

        result = run_sync(
            aggregate_run(
                request,
                ((tid, store.steps(tid)) for tid in ids),
                config,
                on_trace=on_trace,
                service=service,
                since=since_text,
            )
        )
    document = result_document(result)
    if html_path is not None:
        write_aggregate_html(html_path, document)
    if write_json(document, json_path):
        return
    console = _console()
    aggregate_report(console, document)
    for path, what in ((json_path, "result"), (html_path, "report")):
        if path is not None:
            console.print(f"{what} written to {path}", highlight=False)
