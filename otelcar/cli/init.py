"""``otelcar init TRACE``: a starting ``otelcar.toml`` for one trace
(:mod:`otelcar.starter_config`).

Loaded by :mod:`otelcar.cli` only when it runs.
"""

from __future__ import annotations

from pathlib import Path

import click

from otelcar.cli.common import console, project
from otelcar.cli.options import source_option


@click.command("init")
@click.argument("trace_id")
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("otelcar.toml"),
    show_default=True,
    help="Where to write it; - prints it.",
)
@click.option("--force", is_flag=True, help="Overwrite an existing file.")
@click.option(
    "--base-url",
    default="http://127.0.0.1:8080/v1",
    show_default=True,
    help="The OpenAI-compatible server the LLM policy re-decides with.",
)
@source_option()
@click.pass_context
def init_command(
    ctx: click.Context, trace_id: str, output: Path, force: bool, base_url: str
) -> None:
    """Write a starting otelcar.toml for a trace: its decisions, what each request recorded
    and what otelcar inferred (commented out, with why), the tools with a policy each, and
    an outcome from the trace's errors.

    Check every "inferred" line against your agent and uncomment what is right: otelcar
    replay, attribute, why and fix say in one line which parts of a re-decided request are
    still inferred.
    """
    from otelcar.replay import load_run
    from otelcar.starter_config import starting_config

    loaded = project(ctx).load(trace_id, None)
    full_id, steps = loaded.trace_id, loaded.steps
    text = starting_config(load_run(full_id, steps), base_url=base_url)
    if str(output) == "-":
        click.echo(text, nl=False)
        return
    if output.exists() and not force:
        raise click.ClickException(f"{output} exists: use --force to overwrite it, or -o PATH")
    output.write_text(text, encoding="utf-8")
    console(stderr=True).print(
        f"wrote {output}: check the lines marked inferred, then otelcar replay {full_id[:8]}"
    )
