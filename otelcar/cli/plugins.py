"""``otelcar plugins``: the installed plugins and what each registered. Registered in
:mod:`otelcar.cli`; parses arguments, calls the library, prints."""

from __future__ import annotations

from typing import Any

import click

from otelcar.cli.common import console, emit_json


def load_every_hook(ctx: click.Context) -> None:
    """Consult every registry (and list the commands), so that every hook of every plugin has
    run and :meth:`~otelcar.plugins.manager.PluginHost.plugins` tells all they registered."""
    from otelcar.conventions import mapper_names
    from otelcar.executors import executor_names
    from otelcar.ingest.formats import export_formats
    from otelcar.outcome import outcome_types
    from otelcar.policies.registry import policy_types
    from otelcar.sources import source_schemes

    mapper_names()
    export_formats()
    policy_types()
    outcome_types()
    executor_names()
    source_schemes()
    root = ctx.find_root().command
    if isinstance(root, click.Group):
        root.list_commands(ctx)


@click.command("plugins")
@click.option("--all", "show_all", is_flag=True, help="List the built-in plugin too.")
@click.option("--json", "as_json", is_flag=True, help="Print the list as JSON.")
@click.pass_context
def plugins_command(ctx: click.Context, show_all: bool, as_json: bool) -> None:
    """List the installed plugins and what each registered.

    For each entry point of the otelcar group: its name, version and distribution, the hooks
    it implements, what it registered (mappers, formats, policy types, outcomes, executors,
    sources, commands) and any error loading it. docs/plugins.md tells how to write one."""
    from otelcar.plugins.manager import default_host

    load_every_hook(ctx)
    plugins = [p for p in default_host().plugins() if show_all or not p.builtin]
    if as_json:
        emit_json([p.as_dict() for p in plugins])
        return
    out = console()
    if not plugins:
        out.print("No plugins installed (otelcar plugins --all lists the built-in one).")
        return
    out.print(_table(plugins))


def _table(plugins: list[Any]) -> Any:
    from rich.table import Table
    from rich.text import Text

    from otelcar.safe_text import visible

    def shown(text: str) -> Text:  # control characters of a package's metadata made visible
        return Text(visible(text))

    title = f"{len(plugins)} plugin{'s' if len(plugins) != 1 else ''}"
    table = Table(title=title, header_style="bold")
    for column in ("plugin", "version", "distribution", "hooks", "registered", "status"):
        table.add_column(column, no_wrap=column in ("plugin", "version"))
    for plugin in plugins:
        data = plugin.as_dict()
        registered = "\n".join(
            f"{what}: {', '.join(names)}" for what, names in data["registered"].items()
        )
        hooks = ", ".join(hook.removeprefix("register_") for hook in plugin.hooks)
        status = "built-in" if plugin.builtin else "ok"
        if plugin.errors:
            status = "error: " + "; ".join(plugin.errors)
        table.add_row(
            shown(plugin.name),
            shown(plugin.version or ""),
            shown(plugin.distribution or ""),
            shown(hooks),
            shown(registered),
            shown(status),
        )
    return table
