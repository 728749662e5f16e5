"""The commands that rebuild the agent and replay it: ``replay`` (fidelity), ``rollout``
(any plan) and ``attribute`` (which step caused the failure).

Loaded by :mod:`otelcar.cli` only when one of them runs.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click
from rich.progress import BarColumn, TextColumn

from otelcar.analyses.requests import AttributeRequest, ReplayCheckRequest, RolloutRequest
from otelcar.cli.common import (
    console,
    emit_json,
    prepared,
    stderr_progress,
    write_json,
)
from otelcar.cli.options import (
    agent_option,
    config_option,
    executor_for,
    executor_options,
    fail_if_option,
    html_option,
    json_option,
    request_options,
    source_option,
)


@click.command("replay")
@click.argument("trace_id")
@config_option("otelcar.toml (default: ./otelcar.toml if present).")
@click.option("--json", "as_json", is_flag=True, help="Print the fidelity report as JSON.")
@request_options(ReplayCheckRequest)
@agent_option()
@source_option()
@click.pass_context
def replay_command(
    ctx: click.Context,
    trace_id: str,
    config_path: Path | None,
    as_json: bool,
    agent: str | None,
    **options: Any,
) -> None:
    """Fidelity check: replay the trace with every step held and compare with the recording.

    Each LLM step gets a verdict: ok, held-only (reproduced, but changes upstream of it would
    not propagate faithfully) or unreproducible, with the reason. With an outcome configured,
    the recorded and replayed outcomes must agree. Exit status 1 when not reproducible.

    With --check-policy N, every recorded decision is also re-decided N times on its exact
    recorded context by the registered policy: how often it reproduces the recorded action,
    with its interval, what it does instead, and at temperature 0 the residual
    nondeterminism (docs/replay.md). A step it rarely reproduces is one where a
    counterfactual describes another agent.

    With --agent CMD (or [agent] command), the live check too: the agent runs once with
    every model call answered from the trace, and must make every recorded request again
    (messages, and tools and tool choice where the trace has them); each request's tools
    and tool choice are shown, and the first that differs is named (docs/live.md). When
    it does, its requests are kept in the store, and later runs without --agent use them.
    """
    from otelcar.analyses import kept_ready, live_check
    from otelcar.replay import check_fidelity
    from otelcar.sync import run_sync

    request = ReplayCheckRequest(**options)
    seed = request.seed
    ready = prepared(ctx, trace_id, config_path, request, agent=agent)
    run, config, steps = ready.run, ready.config, ready.steps
    live = None
    if config.agent_command is not None:  # its requests are kept when it reproduces the run
        live, run, notes = run_sync(live_check(run, config, seed=config.replay.seed_or(seed)))
    else:
        run, notes = kept_ready(run, config)
    report = check_fidelity(run, outcome=config.outcome, recorded_steps=steps)
    report.notes[:0] = notes
    check = None
    if request.check_policy is not None:
        from otelcar.attribution.faithfulness import check_policy

        settings = config.replay
        check = run_sync(
            check_policy(
                run,
                registry=config.registry,
                samples=request.check_policy,
                same=request.same,
                seed=settings.seed_or(seed),
                outcome=config.outcome,
                budget=ready.env.budget,
            )
        )
    from otelcar.report.prose import document as result_document

    if as_json:
        document = result_document(report)
        if check is not None:
            document["policy_check"] = result_document(check)
        if live is not None:
            document["live"] = result_document(live)
        emit_json(document)
    else:
        from otelcar.render import fidelity_table, live_check_table, policy_check_table

        console().print(fidelity_table(result_document(report)))
        if check is not None:
            console().print(policy_check_table(result_document(check)))
        if live is not None:
            console().print(live_check_table(result_document(live)))
    if not report.reproducible or (live is not None and not live.reproduced):
        sys.exit(1)


@click.command("rollout")
@click.argument("trace_id")
@config_option("otelcar.toml with the policies and the outcome.")
@request_options(RolloutRequest, only=("resample", "from_step"))
@click.option(
    "--plan",
    "plan_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="A plan as JSON (Plan.to_json()).",
)
@request_options(RolloutRequest, only=("rollouts", "seed"))
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.option(
    "--parquet",
    "parquet_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write every rollout's steps to this Parquet file.",
)
@click.option(
    "--save",
    "save_name",
    metavar="NAME",
    help="Keep the rollouts in the store as the timeline NAME (`otelcar timelines`, "
    "`otelcar diff`, `otelcar show --timeline`).",
)
@click.option("--overwrite", is_flag=True, help="With --save: replace a timeline of that name.")
@click.option("--note", help="With --save: a line kept with the timeline.")
@executor_options()
@source_option()
@click.pass_context
def rollout_command(
    ctx: click.Context,
    trace_id: str,
    config_path: Path | None,
    plan_path: Path | None,
    as_json: bool,
    parquet_path: Path | None,
    save_name: str | None,
    overwrite: bool,
    note: str | None,
    executor: str | None,
    ray_address: str | None,
    agent: str | None,
    **options: Any,
) -> None:
    """Run an intervention plan on a trace R times and report how often it fails; with
    --save NAME, keep the rollouts as a named timeline to show and diff later."""
    from otelcar.replay import Plan, Resample, run_plan

    request = RolloutRequest(**options)
    seed, from_step = request.seed, request.from_step

    if (overwrite or note) and save_name is None:
        raise click.UsageError("--overwrite and --note go with --save NAME")
    if save_name is not None:
        from otelcar.replay.timelines import check_name

        check_name(save_name)
    ready = prepared(ctx, trace_id, config_path, request, agent=agent, executor=executor)
    run, config, steps, env = ready.run, ready.config, ready.steps, ready.env
    if save_name is not None:  # before any rollout runs
        from otelcar.replay.timelines import check_free

        check_free(ctx.obj["store"], run.trace_id, save_name, overwrite=overwrite)
    plan = Plan.from_json(plan_path.read_text()) if plan_path else Plan()
    plan = plan + Plan(tuple(Resample(s) for s in request.resample))
    if from_step is not None:
        plan = plan + Plan.resample_from(from_step, [d.step for d in run.decisions])
    settings = config.replay
    count = request.rollouts if request.rollouts is not None else settings.rollouts
    from otelcar.analyses import live_ready, live_rollouts
    from otelcar.report.notes import worded
    from otelcar.sync import run_sync

    run, live_notes = run_sync(live_ready(run, config, seed=settings.seed_or(seed)))
    for line in worded(live_notes):
        console(stderr=True).print(line, markup=False, highlight=False)
    with (
        executor_for(settings, executor, ray_address),
        live_rollouts(config),
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
            seed=settings.seed_or(seed),
            outcome=config.outcome,
            concurrency=settings.concurrency,
            on_rollout=lambda _: progress.advance(task),
        )
    if parquet_path is not None:
        result.steps().write_parquet(parquet_path)
    saved = None
    if save_name is not None:
        from otelcar.cli.timelines import save_rollouts

        saved = save_rollouts(
            ctx,
            save_name,
            result,
            run=run,
            config=config,
            steps=steps,
            seed=settings.seed_or(seed),
            overwrite=overwrite,
            note=note,
        )
    summary = result.summary()
    if saved is not None:
        summary["timeline"] = saved.name
    if as_json:
        emit_json(summary)
        return
    out = console()
    out.print(f"plan: {plan.describe()}", highlight=False)
    judged = summary["judged"]
    if config.outcome is not None:
        out.print(f"outcome: {config.outcome.describe()}", highlight=False)
        out.print(f"failed in {summary['failed']} of {judged} judged rollouts", highlight=False)
    out.print(
        f"status: {summary['status']}; cost: {summary['cost']}; {summary['wall_s']} s",
        highlight=False,
    )
    for error in summary["errors"][:10]:
        out.print(f"  {error}", style="yellow", highlight=False)
    if saved is not None:
        out.print(
            f"kept as timeline {saved.name}: otelcar diff {run.trace_id[:12]} {saved.name}",
            highlight=False,
            markup=False,
        )


@click.command("attribute")
@click.argument("trace_id")
@config_option()
@click.option("--base-url", help="OpenAI-compatible server for the 'llm' policy (overrides).")
@click.option("--model", help="Model name for --base-url.")
@fail_if_option()
@click.option(
    "--adaptive",
    is_flag=True,
    help="Adaptive mode (the default without --rollouts): looks at doubling rollout counts, "
    "stopping when the culprit is decided or nothing can still become significant.",
)
@request_options(AttributeRequest)
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
    adaptive: bool,
    executor: str | None,
    ray_address: str | None,
    agent: str | None,
    json_path: Path | None,
    html_path: Path | None,
    **options: Any,
) -> None:
    """Which step caused the failure: the commitment curve, step effects with intervals and
    Holm-adjusted exact tests, the culprit, and what it cost."""
    from otelcar.analyses import run
    from otelcar.attribution.steps.attribute import bisects
    from otelcar.cli.progress import AnalysisProgress
    from otelcar.policies import OpenAICompatiblePolicy
    from otelcar.render import attribution_report
    from otelcar.report import RolloutSampler, with_report_sections, write_html
    from otelcar.report.prose import document as result_document
    from otelcar.sync import run_sync

    request = AttributeRequest(**options)
    if adaptive and request.rollouts is not None:
        raise click.UsageError("--adaptive and --rollouts exclude each other")
    ready = prepared(
        ctx, trace_id, config_path, request, fail_if=fail_if, agent=agent, executor=executor
    )
    recorded, config, steps = ready.run, ready.config, ready.steps
    if base_url:
        config.registry.register("llm", OpenAICompatiblePolicy(base_url=base_url, model=model))
    settings = config.replay
    spent = ready.env.budget  # the progress display reads its calls
    last = request.rollouts if request.rollouts is not None else request.max_rollouts
    # the curve's rollouts (n plans and the factual one), and bisection's confirmation arm
    most = recorded.horizon * last + 1 + (2 * last if bisects(recorded, request.mode, 40) else 0)
    with (
        executor_for(settings, executor, ray_address),
        AnalysisProgress(
            "attribute", calls=lambda: spent.calls, budget=spent.max_calls, most=most
        ) as progress,
    ):
        sampler = RolloutSampler(then=progress.tick)
        result = run_sync(
            run(request, recorded, config, budget=spent, on_progress=sampler, env=ready.env)
        )
    document = result_document(result)
    if json_path is not None or html_path is not None:
        document = with_report_sections(document, steps=steps, sampler=sampler)
    if html_path is not None:
        write_html(html_path, attribution=document)
    if json_path is not None and write_json(document, json_path):
        return
    attribution_report(console(), document)
    if json_path is not None:
        console().print(f"result written to {json_path}", highlight=False)
    if html_path is not None:
        console().print(f"report written to {html_path}", highlight=False)
