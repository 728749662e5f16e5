"""``otelcar why``, ``otelcar fix`` and ``otelcar test``: parse options, call
:mod:`otelcar.attribution.context.why`, :mod:`otelcar.attribution.fixes.fix` and
:mod:`otelcar.attribution.fixes.regression`, print. Registered in :mod:`otelcar.cli`."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.console import Console
from rich.panel import Panel
from rich.table import Table

from otelcar.analyses.requests import DecisionRequest, FixRequest, WhyRequest
from otelcar.cli.common import prepared, write_json
from otelcar.cli.options import (
    config_option,
    executor_for,
    executor_options,
    fail_if_option,
    json_option,
    request_options,
    source_option,
)
from otelcar.cost import policy_calls_text
from otelcar.report.notes import worded

if TYPE_CHECKING:  # keep `otelcar --version` fast: the library loads when a command runs
    from otelcar.attribution.context.result import WhyResult
    from otelcar.attribution.fixes.result import FixResult
    from otelcar.cli.progress import AnalysisProgress
    from otelcar.replay import Budget

CONFIG_HELP = "otelcar.toml with the policies (and the outcome, for --step culprit/--forward)."
#: The options of :class:`~otelcar.analyses.requests.DecisionRequest` that ``test`` takes too.
SHARED = ("step", "samples", "same", "seed")


def _common(function: Callable[..., Any]) -> Callable[..., Any]:
    """The options ``why``, ``fix`` and ``test`` share."""
    options = [
        click.argument("trace_id"),
        request_options(DecisionRequest, only=("step",)),
        config_option(CONFIG_HELP),
        request_options(DecisionRequest, only=("samples", "same")),
        fail_if_option(
            "Outcome rule (tool_called:NAME, tool_not_called:NAME, final_answer:REGEX); "
            "overrides [outcome]."
        ),
        request_options(DecisionRequest, only=("seed",)),
        source_option(),
    ]
    for option in reversed(options):
        function = option(function)
    return function


def _attribution_option(function: Callable[..., Any]) -> Callable[..., Any]:
    """``--attribution FILE``: the saved attribution that ``--step culprit`` reads."""
    return click.option(
        "--attribution",
        "attribution_path",
        type=click.Path(dir_okay=False, exists=True, path_type=Path),
        help="A saved `otelcar attribute --json` result of this trace: --step culprit reads "
        "its culprit instead of attributing again.",
    )(function)


def _saved_attribution(path: Path | None) -> dict[str, Any] | None:
    """The saved attribution at ``path`` (``None`` when not given)."""
    if path is None:
        return None
    import json

    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise click.ClickException(f"{path}: not a saved attribution ({exc})") from None
    if not isinstance(data, dict) or "trace_id" not in data:
        raise click.ClickException(f"{path}: not a saved attribution (otelcar attribute --json)")
    return data


def _progress(what: str, budget: Budget) -> AnalysisProgress:
    """The progress of ``why`` or ``fix``: re-decisions and policy calls, against the budget
    when it has a cap (:mod:`otelcar.cli.progress`)."""
    from otelcar.cli.progress import AnalysisProgress

    return AnalysisProgress(
        what, calls=lambda: budget.calls, budget=budget.max_calls, unit="re-decisions"
    )


# -- rendering ---------------------------------------------------------------------------------
def render_why(console: Console, result: WhyResult) -> None:
    """The headline, the chain of the headline cause, every confirmed piece, the cost."""
    from otelcar.render import untrusted_text
    from otelcar.report.prose import headline as headline_of

    style = "green" if result.verdict == "cause" else "yellow"
    headline = untrusted_text(headline_of(result))
    console.print(Panel(headline, title="otelcar why", border_style=style))
    console.print(
        f"step {result.step} ({result.step_reason}); same decision: {result.same}; "
        f"policy {result.policy}",
        highlight=False,
    )
    if result.headline is not None:
        chain = Table(title="narrowing (each link confirmed)", show_lines=False)
        for column in ("t", "removed", "rate", "effect", "p", "level"):
            chain.add_column(column)
        for link in result.headline.chain:
            chain.add_row(
                str(link.t),
                " + ".join(p.label for p in link.removed),
                f"{link.bad}/{link.n}",
                f"{link.effect:+.2f}",
                f"{link.p:.2g}" if link.p is not None else "-",
                f"{link.level:.2g}",
            )
        console.print(chain)
        if result.headline.recheck is not None:
            recheck = result.headline.recheck
            holds = "holds" if recheck.confirmed else "does NOT hold"
            console.print(
                f"recheck with fill '{recheck.fill}': {holds} ({recheck.bad}/{recheck.n})",
                highlight=False,
            )
    if result.causes:
        table = Table(title="confirmed pieces")
        for column in ("kind", "piece", "text", "without it", "p", "instead"):
            table.add_column(column, overflow="fold")
        for cause in result.causes:
            test = cause.test
            text = cause.text if len(cause.text) <= 160 else cause.text[:157] + "…"
            table.add_row(
                cause.kind + (" (joint)" if cause.joint else ""),
                cause.label,
                text,
                f"{test.bad}/{test.n} vs {test.base_bad}/{test.base_n}",
                f"{test.p:.2g}" if test.p is not None else "-",
                test.alternative or "-",
            )
        console.print(table)
    if result.untested:
        console.print(f"untested pieces: {', '.join(result.untested)}", highlight=False)
    for note in worded(result.notes):
        console.print(f"note: {note}", style="yellow", highlight=False)
    cost = result.cost
    console.print(
        f"{cost.get('tests', 0)} tests, {cost.get('samples', 0)} re-decisions, "
        f"{policy_calls_text(cost)} ({cost.get('cache_hits', 0)} cached), "
        f"{cost.get('input_tokens', 0) + cost.get('output_tokens', 0)} tokens; "
        f"{result.correction}, alpha {result.alpha}",
        highlight=False,
    )


def render_fix(console: Console, result: FixResult) -> None:
    from otelcar.render import untrusted_text
    from otelcar.report.prose import headline as headline_of

    style = "green" if result.best else "red"
    headline = untrusted_text(headline_of(result))
    console.print(Panel(headline, title="otelcar fix", border_style=style))
    if result.cause:
        console.print(f'cause (otelcar why): "{result.cause}" [{result.cause_label}]')
    table = Table(title=f"candidates (base: {result.base_bad}/{result.base_n} bad)")
    for column in ("fix", "verdict", "bad", "95% CI", "p (Holm)", "forward", "instead"):
        table.add_column(column, overflow="fold")
    for c in result.candidates:
        d, f = c.decision, c.forward
        table.add_row(
            f"{c.name}: {c.description}",
            c.verdict,
            f"{d.bad}/{d.n}" if d else "-",
            f"[{d.ci.low:.0%}, {d.ci.high:.0%}]" if d else "-",
            f"{d.p_adjusted:.2g}" if d else "-",
            f"{f.verdict} {f.failed}/{f.n} vs {f.base_failed}/{f.base_n} (p {f.p_adjusted:.2g})"
            if f
            else "-",
            (d.alternative if d else None) or "-",
        )
    console.print(table)
    for note in worded(result.notes):
        console.print(f"note: {note}", style="yellow", highlight=False)
    console.print(
        f"PASS: bad-decision rate significantly lower (Fisher, Holm, alpha {result.alpha}) "
        f"and its upper bound ≤ {result.max_rate:.0%}; PART: significantly lower only. "
        f"Cost: {policy_calls_text(result.cost)}.",
        highlight=False,
    )


# -- commands ----------------------------------------------------------------------------------
@click.command("why")
@_common
@request_options(WhyRequest, exclude=SHARED)
@_attribution_option
@executor_options()
@json_option("why.schema.json")
@click.pass_context
def why_command(
    ctx: click.Context,
    trace_id: str,
    config_path: Path | None,
    fail_if: tuple[str, ...],
    attribution_path: Path | None,
    executor: str | None,
    ray_address: str | None,
    agent: str | None,
    json_path: Path | None,
    **options: Any,
) -> None:
    """Which text in the context of a decision made the agent take it.

    Re-decides the step on its unchanged context (base rate), removes pieces of the context
    (messages, JSON items, paragraphs, sentences), confirms causes with one-sided Fisher exact
    tests under an online multiplicity correction, narrows each to the smallest part that
    holds, finds pieces that act only jointly, and labels each a cause or a prerequisite.
    """
    from otelcar.analyses import run
    from otelcar.cli.common import console as _console
    from otelcar.report.prose import document
    from otelcar.sync import run_sync

    request = WhyRequest(**options)
    ready = prepared(
        ctx, trace_id, config_path, request, fail_if=fail_if, agent=agent, executor=executor
    )
    recorded, config, spent = ready.run, ready.config, ready.env.budget
    settings = config.replay
    with executor_for(settings, executor, ray_address), _progress("why", spent) as progress:
        result = run_sync(
            run(
                request,
                recorded,
                config,
                budget=spent,
                on_progress=progress.tick,
                env=ready.env,
                attribution=_saved_attribution(attribution_path),
            )
        )
    if write_json(document(result), json_path):
        return
    render_why(_console(), result)


@click.command("fix")
@_common
@request_options(FixRequest, exclude=SHARED)
@click.option(
    "--write-test",
    "test_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write a pytest regression test with the best fix (or --use) applied; with an "
    "agent command, one that runs the agent --rollouts times with the fix.",
)
@click.option("--use", "use_fix", help="The candidate to write the test with (default: best).")
@click.option(
    "--why-json",
    "why_json_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write the `why` result the fixes were built from (schemas/why.schema.json).",
)
@click.option(
    "--test-max-rate",
    type=float,
    default=0.2,
    show_default=True,
    help="The bound the written test asserts.",
)
@_attribution_option
@executor_options()
@json_option("fix.schema.json")
@click.pass_context
def fix_command(
    ctx: click.Context,
    trace_id: str,
    config_path: Path | None,
    fail_if: tuple[str, ...],
    test_path: Path | None,
    use_fix: str | None,
    why_json_path: Path | None,
    test_max_rate: float,
    attribution_path: Path | None,
    executor: str | None,
    ray_address: str | None,
    agent: str | None,
    json_path: Path | None,
    **options: Any,
) -> None:
    """Candidate fixes for a decision, validated on its exact failed context.

    Runs `why` first, then tries an untrusted-content rule, an action guard, both, removing
    the cause's text, and forcing the good alternative; each is re-decided and compared with
    the unfixed rate (PASS / PART / FAIL), and with --forward rolled out through the rest of
    the run against the outcome. --write-test writes a pytest file that keeps it fixed;
    with --agent (or [agent] command) it runs the agent, --rollouts times (docs/live.md).
    """
    from otelcar.analyses import run
    from otelcar.attribution.fixes.fix import FixError
    from otelcar.attribution.fixes.regression import write_regression_test
    from otelcar.cli.common import console as _console
    from otelcar.report.prose import document
    from otelcar.sync import run_sync

    request = FixRequest(**options)
    ready = prepared(
        ctx, trace_id, config_path, request, fail_if=fail_if, agent=agent, executor=executor
    )
    recorded, config, spent = ready.run, ready.config, ready.env.budget
    settings = config.replay
    base_seed = settings.seed_or(request.seed)
    with executor_for(settings, executor, ray_address), _progress("why + fix", spent) as progress:
        result = run_sync(
            run(
                request,
                recorded,
                config,
                budget=spent,
                on_progress=progress.tick,
                env=ready.env,
                attribution=_saved_attribution(attribution_path),
            )
        )
    quiet = write_json(document(result), json_path)
    if why_json_path is not None and result.why is not None:
        quiet = write_json(document(result.why), why_json_path) or quiet
    if not quiet:
        render_fix(_console(), result)
    if test_path is not None:
        name = use_fix or result.best
        if name is None:
            raise FixError(
                "no fix passed, so there is none to write a test with; pass --use NAME, or "
                "write the failing test with `otelcar test`"
            )
        chosen = result.candidate(name)
        live = config.agent_command  # the test runs the agent too (docs/live.md)
        written = write_regression_test(
            test_path,
            run=recorded,
            step=result.step,
            same=result.same_spec,
            config=config.path,
            fix=chosen,
            samples=max(request.samples, 10),
            max_rate=test_max_rate,
            seed=base_seed,
            summary=_summary(result, chosen),
            live=live is not None,
            agent=agent,  # --agent is written into the file; [agent] command is read then
            agent_cwd=live.cwd if live is not None and agent is not None else None,
            rollouts=request.rollouts,
        )
        if not quiet:
            where = (
                f" ({request.rollouts} rollouts of `{live.describe()}` per run)"
                if live is not None
                else ""
            )
            _console().print(f"regression test{where} written to {written}", highlight=False)


def _summary(result: Any, chosen: Any) -> str:
    lines = [
        f"Regression test for trace {result.trace_id}, step {result.step}.",
        "",
        f"Recorded failure: at step {result.step} the agent did {result.decision}.",
    ]
    if result.cause:
        lines.append(f'Cause found by otelcar why: "{result.cause}" ({result.cause_label}).')
    lines.append(f"Fix: {chosen.description}.")
    if chosen.decision is not None:
        d = chosen.decision
        lines.append(
            f"Checked by otelcar fix: {d.bad}/{d.n} bad re-decisions with the fix vs "
            f"{result.base_bad}/{result.base_n} without (Holm-adjusted Fisher p = "
            f"{d.p_adjusted:.2g}; {d.verdict})."
        )
    return "\n".join(lines)


@click.command("test")
@_common
@click.option(
    "--write-test",
    "test_path",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="Where to write the pytest file (the trace is copied to traces/ beside it).",
)
@click.option(
    "--max-rate",
    type=float,
    default=0.2,
    show_default=True,
    help="The bound the test asserts on the bad-decision rate.",
)
@click.pass_context
def test_command(
    ctx: click.Context,
    trace_id: str,
    step: int | str,
    config_path: Path | None,
    samples: int,
    same: str,
    fail_if: tuple[str, ...],
    seed: int | None,
    test_path: Path,
    max_rate: float,
) -> None:
    """Write a pytest regression test for a decision with no fix applied: it re-decides the
    failed context against the live policy and fails while the bug is there."""
    import asyncio

    from otelcar.attribution.context.decisions import same_decision
    from otelcar.attribution.context.why import resolve_step
    from otelcar.attribution.fixes.regression import write_regression_test
    from otelcar.cli.common import console as _console

    ready = prepared(ctx, trace_id, config_path, fail_if=fail_if)
    run, config = ready.run, ready.config
    base_seed = seed if seed is not None else config.replay.seed
    decision, reason = asyncio.run(
        resolve_step(run, step, registry=config.registry, outcome=config.outcome, seed=base_seed)
    )
    if decision.action is not None:  # validate the rule now, not when the test runs
        same_decision(same, decision.action, config.registry, outcome=config.outcome)
    written = write_regression_test(
        test_path,
        run=run,
        step=decision.step,
        same=same,
        config=config.path,
        fix=None,
        samples=samples,
        max_rate=max_rate,
        seed=base_seed,
        summary=f"Regression test for trace {run.trace_id}, step {decision.step} ({reason}): "
        "no fix applied, so it fails while the bug is there.",
    )
    _console().print(f"regression test written to {written}", highlight=False)
