"""``otelcar export``: what otelcar learned, in other tools' formats. ``export pairs`` writes
preference pairs (:mod:`otelcar.attribution.pairs`) from attribution and fix results."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click
from rich.progress import BarColumn, TextColumn

from otelcar.analyses.requests import PairsRequest
from otelcar.cli.common import console, prepared, stderr_progress
from otelcar.cli.options import config_option, fail_if_option, request_options, source_option


def _count(n: int) -> str:
    return f"{n} pair" + ("" if n == 1 else "s")


@click.group("export")
def export_group() -> None:
    """Export what otelcar learned for other tools (preference pairs for fine-tuning)."""


def _read(path: Path) -> Any:
    from otelcar.attribution.pairs import PairsError

    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise PairsError(f"{path}: no such file") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise PairsError(f"{path}: not JSON ({exc})") from None


@export_group.command("pairs")
@click.argument(
    "result_paths",
    nargs=-1,
    required=True,
    metavar="RESULT...",
    type=click.Path(dir_okay=False, path_type=Path),
)
@click.option(
    "-o",
    "--output",
    "output",
    type=click.Path(dir_okay=False, path_type=Path),
    default="-",
    show_default=True,
    help="The JSONL file to write (- for stdout).",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["otelcar", "dpo", "chat"]),
    default="otelcar",
    show_default=True,
    help="otelcar: everything; dpo: prompt/chosen/rejected (TRL); chat: messages ending "
    "with the chosen action (supervised chat fine-tuning). Every line carries its evidence.",
)
@request_options(PairsRequest)
@config_option("otelcar.toml with the policies and the outcome (attribution results).")
@fail_if_option(
    "Attribution results: the outcome rule the attribution used, if not [outcome] "
    "(tool_called:NAME, tool_not_called:NAME, final_answer:REGEX; any of them fails)."
)
@source_option()
@click.pass_context
def pairs_command(
    ctx: click.Context,
    result_paths: tuple[Path, ...],
    output: Path,
    fmt: str,
    config_path: Path | None,
    fail_if: tuple[str, ...],
    **options: Any,
) -> None:
    """Preference pairs (context, tools, rejected and chosen action, evidence) as JSONL,
    from `otelcar fix --json` and `otelcar attribute --json` results or kept runs.

    A fix's PASS candidates give pairs at no cost. An attribution's culprit gives pairs only
    after its other actions fail significantly less often than the recorded one on fresh
    rollouts (Holm-adjusted Fisher tests), judged by the outcome the attribution used; the
    rollouts that chose the culprit are not reused (docs/why-fix.md). Never a pair whose
    evidence is not significant.
    """
    from otelcar.analyses import pairs_run
    from otelcar.attribution.pairs import needs_rollouts, result_of
    from otelcar.cost import policy_calls_text
    from otelcar.report.notes import worded
    from otelcar.sync import run_sync

    request = PairsRequest(**options)

    documents = [(path, result_of(_read(path), where=str(path))) for path in result_paths]
    lines: list[dict[str, Any]] = []
    err = console(stderr=True)
    spent: dict[str, int] = {}
    for path, doc in documents:
        fresh = needs_rollouts(doc)
        ready = prepared(ctx, doc["trace_id"], config_path, fail_if=fail_if if fresh else ())
        run, config = ready.run, ready.config
        if fresh and config.outcome is None:
            raise click.UsageError(
                f"{path}: pairs from an attribution are tested on fresh rollouts, judged "
                f"by the outcome it used: add [outcome] to otelcar.toml or pass --fail-if"
            )
        with (
            config.replay.executor_scope(),
            stderr_progress(
                TextColumn(f"fresh rollouts {path.name}"),
                BarColumn(),
                TextColumn("{task.completed}/{task.total}"),
            ) as progress,
        ):
            task = progress.add_task("pairs", total=2 * request.rollouts, visible=fresh)
            made = run_sync(
                pairs_run(
                    request,
                    run,
                    config,
                    result=doc,
                    on_rollout=lambda _, task=task: progress.advance(task),
                )
            )
        for key, value in made.cost.items():
            spent[key] = spent.get(key, 0) + value
        lines.extend(pair.to_line(fmt) for pair in made.pairs)
        err.print(f"{path}: {_count(len(made.pairs))}", highlight=False, markup=False)
        for note in worded(made.notes):
            err.print(f"  note: {note}", style="yellow", highlight=False, markup=False)
    text = "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines)
    if str(output) == "-":
        sys.stdout.write(text)
    else:
        output.write_text(text, encoding="utf-8")
    where = "stdout" if str(output) == "-" else str(output)
    err.print(
        f"{_count(len(lines))} ({fmt}) written to {where}; cost: {policy_calls_text(spent)}",
        highlight=False,
        markup=False,
    )
