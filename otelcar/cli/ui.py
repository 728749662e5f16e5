"""``otelcar ui``: serve the local web console (:mod:`otelcar.ui`) on 127.0.0.1."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from otelcar.cli.options import config_option, source_option


@click.command("ui")
@click.option("--port", type=int, default=8765, show_default=True, help="Port on 127.0.0.1.")
@config_option(
    "otelcar.toml: the policies and outcome runs use, and its [source] (default: "
    "./otelcar.toml if present)."
)
@source_option()
@click.pass_context
def ui_command(ctx: click.Context, port: int, config_path: Path | None) -> None:
    """A local web console: browse traces, read one, start attribute/why/fix on it, watch
    and cancel runs, read their reports. Binds 127.0.0.1 only; runs the policies of
    otelcar.toml (docs/ui.md). Stop it with Ctrl-C."""
    try:
        import uvicorn

        from otelcar.kept_runs import runs_dir
        from otelcar.ui import create_app
    except ImportError as exc:
        raise click.ClickException(
            f"otelcar ui needs the 'ui' extra ({exc}): pip install 'otelcar[ui]'"
        ) from None
    from otelcar.cli.common import project
    from otelcar.project_config import load_source

    configured, where = load_source(config_path), project(ctx, config_path)
    where.open_traces(configured).close()  # a missing store or a bad --source fails now
    store_root = Path(ctx.obj["store"])
    app = create_app(
        open_source=lambda: where.open_traces(configured),
        runs_dir=runs_dir(store_root),
        config_path=config_path,
        allowed_hosts=("127.0.0.1", "localhost"),
        store_root=store_root,
    )
    import socket

    listening = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listening.bind(("127.0.0.1", port))
    except OSError as exc:
        listening.close()
        raise click.ClickException(f"cannot listen on 127.0.0.1:{port}: {exc}") from None
    port = listening.getsockname()[1]  # --port 0: the one the system chose
    click.echo(f"otelcar ui on http://127.0.0.1:{port}/ (Ctrl-C stops it)", err=True)
    # Pages render on threads that share the interpreter: switching every 1 ms (not 5) lets a
    # short request (the list, a run's progress) in while a long trace's page renders.
    sys.setswitchinterval(0.001)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    server.run(sockets=[listening])
