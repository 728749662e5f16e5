"""Render the CLI reference (``docs/cli.md``) from the click commands themselves.

``python -m otelcar.cli.reference > docs/cli.md`` regenerates it (with no third-party plugin
loaded, whatever is installed: ``OTELCAR_PLUGINS=""``); a test checks it is current.
"""

from __future__ import annotations

import click

from otelcar.cli import cli

WIDTH = 100


def render() -> str:
    """The whole reference as Markdown."""
    lines = [
        "# otelcar command reference",
        "",
        "Generated from the code by `python -m otelcar.cli.reference`; do not edit.",
        "",
    ]
    root = click.Context(
        cli,
        info_name="otelcar",
        terminal_width=WIDTH,
        max_content_width=WIDTH,
        help_option_names=["-h", "--help"],
    )
    lines += ["```text", cli.get_help(root).rstrip(), "```", ""]
    lines += _commands(root)
    return "\n".join(lines)


def _commands(parent: click.Context) -> list[str]:
    """The sections of ``parent``'s subcommands, a group's own subcommands after it."""
    group = parent.command
    assert isinstance(group, click.Group)
    lines: list[str] = []
    for name in group.list_commands(parent):
        command = group.get_command(parent, name)
        if command is None:
            continue
        context = click.Context(
            command, info_name=name, parent=parent, terminal_width=WIDTH, max_content_width=WIDTH
        )
        lines += [
            f"## {context.command_path}",
            "",
            "```text",
            command.get_help(context).rstrip(),
            "```",
            "",
        ]
        if isinstance(command, click.Group):
            lines += _commands(context)
    return lines


if __name__ == "__main__":
    import os

    from otelcar.config import ENV_PLUGINS

    os.environ[ENV_PLUGINS] = ""  # otelcar's own reference: no plugin's commands or names
    print(render(), end="")
