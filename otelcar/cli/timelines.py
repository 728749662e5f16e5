"""The commands on kept timelines: ``timelines`` (list, delete) and ``diff`` (where two runs
part). ``rollout --save NAME`` keeps one; ``show TRACE --timeline NAME`` shows one.

Timelines live in the local store (``--store``) whatever ``--source`` the trace is read from
(:mod:`otelcar.replay.timelines`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from otelcar.cli.common import console, emit_json, project, write_json
from otelcar.cli.options import config_option, source_option


def save_rollouts(
    ctx: click.Context,
    name: str,
    result: Any,
    *,
    run: Any,
    config: Any,
    steps: Any,
    seed: int,
    overwrite: bool,
    note: str | None,
) -> Any:
    """Keep ``result`` (a RolloutSet of ``run``) as timeline ``name``, with the recorded
    run judged by the configured outcome (``rollout --save``)."""
    from otelcar.replay.rollout_table import recorded_failed as judge_recorded
    from otelcar.replay.timelines import check_name, save_timeline
    from otelcar.sync import run_sync

    check_name(name)
    recorded_failed = None
    if config.outcome is not None:
        try:
            recorded_failed = run_sync(judge_recorded(config.outcome, run, steps))
        except Exception as exc:  # the user's outcome: its failure is reported, not fatal
            console(stderr=True).print(
                f"note: the outcome raised on the recorded run ({type(exc).__name__}: {exc}); "
                "the timeline keeps its outcome as not judged",
                style="yellow",
                highlight=False,
                markup=False,
            )
    return save_timeline(
        ctx.obj["store"],
        name,
        result,
        trace_id=run.trace_id,
        seed=seed,
        policies=config.registry.describe(),
        outcome=config.outcome.describe() if config.outcome is not None else None,
        recorded_failed=recorded_failed,
        overwrite=overwrite,
        note=note,
    )


def _trace_id(ctx: click.Context, trace_id: str, config_path: Path | None) -> tuple[str, Any]:
    from otelcar.project_config import load_source

    loaded = project(ctx).load(trace_id, load_source(config_path))
    return loaded.trace_id, loaded.steps


@click.command("timelines")
@click.argument("trace_id")
@click.option("--json", "as_json", is_flag=True, help="JSON (schemas/timelines-list.schema.json).")
@click.option("--delete", "delete_name", metavar="NAME", help="Remove the timeline NAME.")
@source_option()
@config_option("otelcar.toml whose [source] to read traces from (default: ./otelcar.toml).")
@click.pass_context
def timelines_command(
    ctx: click.Context,
    trace_id: str,
    as_json: bool,
    delete_name: str | None,
    config_path: Path | None,
) -> None:
    """List the timelines kept for a trace (`otelcar rollout … --save NAME` keeps one):
    name, plan, rollouts, how many failed, seed, when."""
    from otelcar.replay.timelines import delete_timeline, timelines_document
    from otelcar.report.timelines import timelines_table

    full_id, _ = _trace_id(ctx, trace_id, config_path)
    root = ctx.obj["store"]
    if delete_name is not None:
        delete_timeline(root, full_id, delete_name)
        console(stderr=True).print(f"removed timeline {delete_name}", markup=False)
    listing = timelines_document(root, full_id)
    for problem in listing["problems"]:
        console(stderr=True).print(f"warning: {problem}", style="yellow", markup=False)
    documents = listing["timelines"]
    if as_json:
        emit_json(listing)
        return
    if delete_name is not None and not documents:
        return
    console().print(timelines_table(full_id, documents))
    if not documents:
        console(stderr=True).print(
            f"keep one with: otelcar rollout {full_id[:12]} --resample STEP --save NAME",
            markup=False,
            highlight=False,
        )


@click.command("diff")
@click.argument("trace_id")
@click.argument("a")
@click.argument("b", required=False)
@click.option(
    "--rollout",
    type=click.IntRange(min=0),
    help="Which rollout of A to detail (default: its first).",
)
@click.option(
    "--b-rollout",
    type=click.IntRange(min=0),
    help="Which rollout of B to detail (default: the same index as A's, as rollout r of two "
    "plans shares its seeds).",
)
@click.option(
    "--all-steps", is_flag=True, help="Also list the decisions before the runs part (JSON)."
)
@click.option(
    "--json",
    "json_path",
    type=click.Path(path_type=Path),
    metavar="FILE",
    help="Write the diff as JSON (schemas/diff.schema.json); - for stdout.",
)
@click.option(
    "--html",
    "html_path",
    type=click.Path(dir_okay=False, path_type=Path),
    metavar="FILE",
    help="Write the diff as a self-contained HTML page.",
)
@source_option()
@config_option("otelcar.toml whose [source] to read traces from (default: ./otelcar.toml).")
@click.pass_context
def diff_command(
    ctx: click.Context,
    trace_id: str,
    a: str,
    b: str | None,
    rollout: int | None,
    b_rollout: int | None,
    all_steps: bool,
    json_path: Path | None,
    html_path: Path | None,
    config_path: Path | None,
) -> None:
    """Where timeline A and B part (B: another timeline, default the recorded run).

    The first decision whose context or action differs, then each later decision side by
    side (how the contexts differ, each side's action and tool results) and how each run
    ended; and where every rollout of A parted from B.
    """
    from otelcar.replay import load_run
    from otelcar.replay.divergence import diff_kept
    from otelcar.report.html_diff import write_diff_html
    from otelcar.report.prose import document as result_document
    from otelcar.report.timelines import diff_report

    full_id, steps = _trace_id(ctx, trace_id, config_path)
    diff = diff_kept(
        ctx.obj["store"],
        load_run(full_id, steps),
        a,
        b,
        rollout=rollout,
        b_rollout=b_rollout,
        all_steps=all_steps,
    )
    document = result_document(diff)
    if html_path is not None:
        write_diff_html(html_path, document)
    if write_json(document, json_path):
        return
    diff_report(console(), document)
    for path, what in ((json_path, "diff"), (html_path, "report")):
        if path is not None:
            console().print(f"{what} written to {path}", highlight=False, markup=False)
