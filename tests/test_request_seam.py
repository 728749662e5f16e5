"""The analyses' request types are the one seam of every front end (issue 38): the CLI's
options, the MCP tools' arguments and the console's run form are made from them, and the
same request gives the same result through the library, ``otelcar … --json``, the MCP tool
and the console."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import click
import pytest
from click.testing import CliRunner
from pydantic import TypeAdapter

from otelcar import Store, import_files
from otelcar.analyses import (
    REQUESTS,
    SAMES,
    AggregateRequest,
    AttributeRequest,
    DecisionRequest,
    FixRequest,
    PairsRequest,
    ReplayCheckRequest,
    Request,
    RequestError,
    RolloutRequest,
    WhyRequest,
    run,
    specs,
)
from otelcar.cli import cli
from otelcar.cli.options import click_option
from otelcar.cli.repair import SHARED
from otelcar.report.notes import worded
from otelcar.report.prose import document as result_document
from tests.conftest import NEW_CONTENT, OTLP
from tests.helpers.scripted_refund import POLICY as REFUND_POLICY

pytest.importorskip("starlette", reason="otelcar ui needs the 'ui' extra")
from starlette.testclient import TestClient

from otelcar.ui.forms import form_fields, form_name

#: A scripted policy: the refund trace's agent, which issues the refund (the failure) at step
#: 4 in about a third of its re-decisions, whatever its context says.
POLICY = REFUND_POLICY.replace("< 0.1:", "< 0.35:")
assert POLICY != REFUND_POLICY

CONFIG = """[policies.llm]
type = "python"
function = "seam_policy:decide"
[replay]
seed = 4
[outcome]
type = "tool_called"
tool = "issue_refund"
"""
#: One small request of each analysis, every option the same in every front end.
CASES = [
    AttributeRequest(rollouts=6, refute=False, policy_check=0, seed=3, budget=2000),
    WhyRequest(step=4, samples=8, same="tool", seed=1, fill="marker", budget=2000),
    FixRequest(step=4, samples=12, seed=2, max_rate=0.5, budget=3000),
]
#: What differs between two runs of the same request: how long it took.
TIMES = {"wall_s", "seconds", "elapsed_s", "started", "finished"}


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """``(store, otelcar.toml)``: the refund trace imported, :data:`POLICY`, an outcome."""
    root = tmp_path_factory.mktemp("seam")
    (root / "seam_policy.py").write_text(POLICY)
    (root / "otelcar.toml").write_text(CONFIG)
    import_files([OTLP / "new_content.traces.jsonl"], store=Store(root / "store"))
    return root / "store", root / "otelcar.toml"


def _timeless(value: Any) -> Any:
    """``value`` without the keys that say how long something took."""
    if isinstance(value, dict):
        return {k: _timeless(v) for k, v in value.items() if k not in TIMES}
    if isinstance(value, list):
        return [_timeless(v) for v in value]
    return value


def _changed(request: Request) -> dict[str, Any]:
    """The options of ``request`` that are not their default, by spec."""
    return {
        s: getattr(request, s.name)
        for s in specs(type(request))
        if getattr(request, s.name) != s.default
    }


# -- the same request through every front end --------------------------------------------------
def _library(project: tuple[Path, Path], request: Request) -> dict[str, Any]:
    from otelcar.project_config import load_config
    from otelcar.replay import load_run
    from otelcar.store.live_requests import LiveRequestStore
    from otelcar.sync import run_sync

    store, config_path = project
    config = load_config(config_path)
    config.live_requests = LiveRequestStore(store)
    loaded = Store(store, create=False).load(NEW_CONTENT)
    recorded = load_run(loaded.trace_id, loaded.steps, config.agent)
    return result_document(run_sync(run(request, recorded, config)))


def _cli(project: tuple[Path, Path], request: Request, out: Path) -> dict[str, Any]:
    store, config = project
    argv = ["--store", str(store), request.kind, NEW_CONTENT, "-c", str(config)]
    for spec, value in _changed(request).items():
        flag = (spec.option.flags or ("--" + spec.name.replace("_", "-"),))[0]
        if spec.kind is bool:
            on, _, off = flag.partition("/")
            argv.append(on if value else off)
        else:
            argv += [flag.split("/")[0], str(value)]
    done = CliRunner().invoke(cli, [*argv, "--json", str(out)], catch_exceptions=False)
    assert done.exit_code == 0, done.output
    return json.loads(out.read_text())


def _mcp(project: tuple[Path, Path], request: Request) -> dict[str, Any]:
    from mcp import Client

    from otelcar.mcp.runs import RunContext
    from otelcar.mcp.server import build_server

    store, config = project
    arguments = {s.name_in("mcp"): v for s, v in _changed(request).items()}

    async def call() -> dict[str, Any]:
        async with Client(build_server(RunContext(store, config))) as client:
            result = await client.call_tool(request.kind, {"trace_id": NEW_CONTENT, **arguments})
            assert not result.is_error, result.content
            return result.structured_content["result"]

    return anyio.run(call)


def _console(project: tuple[Path, Path], request: Request) -> dict[str, Any]:
    from otelcar.ui import create_app

    store, config = project
    app = create_app(
        open_source=lambda: Store(store, create=False),
        runs_dir=store / "runs",
        config_path=config,
        allowed_hosts=["testserver"],
        store_root=store,
    )
    form = {"kind": request.kind}
    for spec, value in _changed(request).items():
        if spec.kind is bool:
            if value is not spec.default:
                form[form_name(spec)] = "1"
        else:
            form[form_name(spec)] = str(value)
    with TestClient(app) as client:
        started = client.post(f"/traces/{NEW_CONTENT}/runs", data=form, follow_redirects=False)
        assert started.status_code == 303, started.text
        ended = client.app.state.runs.wait(started.headers["location"].rsplit("/", 1)[1], 120)
        assert ended.status == "done", ended.error
        return ended.result


@pytest.mark.parametrize("request_", CASES, ids=[c.kind for c in CASES])
def test_the_same_request_gives_the_same_result_in_every_front_end(
    project: tuple[Path, Path], request_: Request, tmp_path: Path
):
    library = _timeless(_library(project, request_))
    assert library.get("trace_id") == NEW_CONTENT
    for name, document in [
        ("cli", _cli(project, request_, tmp_path / "result.json")),
        ("mcp", _mcp(project, request_)),
        ("console", _console(project, request_)),
    ]:
        # the CLI's --json and the console keep the report's sections beside the result
        same = {k: v for k, v in _timeless(document).items() if k in library}
        assert same == library, name


def test_aggregate_gives_the_same_result_through_the_library_and_the_cli(
    project: tuple[Path, Path], tmp_path: Path
):
    """``aggregate`` has no MCP tool or console form: the library's
    :func:`~otelcar.analyses.aggregate_run` and ``otelcar aggregate --json`` agree."""
    from otelcar.analyses import aggregate_run
    from otelcar.project_config import load_config
    from otelcar.sync import run_sync

    store, config_path = project
    request = AggregateRequest(rollouts=4, refute=False, seed=3, budget=2000)
    steps = Store(store, create=False).steps(NEW_CONTENT)
    result = run_sync(aggregate_run(request, [(NEW_CONTENT, steps)], load_config(config_path)))
    library = _timeless(result_document(result))
    assert library["counts"]["attributed"] == 1, library["traces"]
    document = _timeless(_cli(project, request, tmp_path / "aggregate.json"))
    assert {k: v for k, v in document.items() if k in library} == library


def test_pairs_are_the_same_through_the_library_and_the_cli(
    project: tuple[Path, Path], tmp_path: Path
):
    """``export pairs`` has no MCP tool or console form: the library's
    :func:`~otelcar.analyses.pairs_run` and ``otelcar export pairs`` write the same pairs
    for the same :class:`PairsRequest`, tested on fresh rollouts of an attribution."""
    from otelcar.analyses import pairs_run
    from otelcar.project_config import load_config
    from otelcar.replay import load_run
    from otelcar.sync import run_sync

    store, config_path = project
    attribution = tmp_path / "attribution.json"
    culprit = AttributeRequest(rollouts=24, refute=False, policy_check=0, seed=3, budget=2000)
    _cli(project, culprit, attribution)
    request = PairsRequest(rollouts=8, seed=5, alpha=0.2, budget=2000)
    loaded = Store(store, create=False).load(NEW_CONTENT)
    made = run_sync(
        pairs_run(
            request,
            load_run(loaded.trace_id, loaded.steps),
            load_config(config_path),
            result=json.loads(attribution.read_text()),
        )
    )
    library = [pair.to_line("otelcar") for pair in made.pairs]
    assert library, worded(made.notes)  # the culprit's other action is tested and kept
    out = tmp_path / "pairs.jsonl"
    argv = ["--store", str(store), "export", "pairs", str(attribution), "-c", str(config_path)]
    for spec, value in _changed(request).items():
        argv += ["--" + spec.name.replace("_", "-"), str(value)]
    done = CliRunner().invoke(cli, [*argv, "-o", str(out)], catch_exceptions=False)
    assert done.exit_code == 0, done.output
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert lines == library


# -- no front end declares an option of its own ------------------------------------------------
def _command(name: str) -> click.Command:
    """The command ``name`` (``"export pairs"``: a group's subcommand)."""
    command: Any = cli
    for part in name.split():
        command = command.get_command(click.Context(command), part)
    return command


def _declared(spec: Any) -> dict[str, Any]:
    """The click option :func:`click_option` makes of ``spec``, as click describes it."""

    def command() -> None: ...

    return click_option(spec)(command).__click_params__[0].to_info_dict()


@pytest.mark.parametrize(
    ("command", "request_type", "only"),
    [
        ("attribute", AttributeRequest, ()),
        ("why", WhyRequest, ()),
        ("fix", FixRequest, ()),
        ("test", DecisionRequest, SHARED),
        ("rollout", RolloutRequest, ()),
        ("replay", ReplayCheckRequest, ()),
        ("aggregate", AggregateRequest, ()),
        ("export pairs", PairsRequest, ()),
    ],
)
def test_cli_options_are_the_request_types(command: str, request_type: type, only: tuple):
    params = {p.name: p for p in _command(command).params}
    for spec in specs(request_type):
        if only and spec.name not in only:
            continue
        assert spec.name in params, f"otelcar {command} lacks --{spec.name}"
        assert params[spec.name].to_info_dict() == _declared(spec), (command, spec.name)
    flags = {f for p in params.values() for f in (*p.opts, *p.secondary_opts)}
    ours = {f for s in specs(request_type) for f in _declared(s)["opts"]}
    mcp_names = {"--" + s.name_in("mcp").replace("_", "-") for s in specs(request_type)}
    assert not (mcp_names - ours) & flags, "an option under another front end's name"


def test_mcp_tool_arguments_are_the_request_types(project: tuple[Path, Path]):
    from otelcar.mcp.runs import RunContext
    from otelcar.mcp.server import build_server

    store, config = project
    tools = {t.name: t for t in anyio.run(build_server(RunContext(store, config)).list_tools)}
    for kind, request_type in REQUESTS.items():
        schema = tools[kind].input_schema["properties"]
        options = {s.name_in("mcp"): s for s in specs(request_type)}
        assert set(schema) == {"trace_id", "agent", *options}, kind
        for name, spec in options.items():
            expected = TypeAdapter(spec.annotation).json_schema()
            found = {k: v for k, v in schema[name].items() if k not in ("title", "description")}
            bounds = {
                "ge": "minimum",
                "gt": "exclusiveMinimum",
                "le": "maximum",
                "lt": "exclusiveMaximum",
            }
            for bound, value in spec.bounds().items():
                assert _has(found, bounds[bound], value), (kind, name, bound)
            assert found.get("default") == spec.default, (kind, name)
            assert schema[name]["description"] == spec.help, (kind, name)
            assert _kinds(found) == _kinds(expected), (kind, name)


def _has(schema: dict[str, Any], key: str, value: float) -> bool:
    """Whether ``schema`` or one of its ``anyOf`` branches has ``key: value``."""
    return schema.get(key) == value or any(b.get(key) == value for b in schema.get("anyOf", ()))


def _kinds(schema: dict[str, Any]) -> set[str]:
    """The JSON types (and enums) a schema allows."""
    found = set()
    for branch in schema.get("anyOf", [schema]):
        found.add(branch.get("type", ""))
        found |= {f"enum:{e}" for e in branch.get("enum", ())}
    return found


def test_console_form_is_the_request_types(project: tuple[Path, Path]):
    from otelcar.ui import create_app

    store, config = project
    wanted = {form_name(s) for r in REQUESTS.values() for s in specs(r)}
    assert {f.name for f in form_fields()} == wanted
    app = create_app(
        open_source=lambda: Store(store, create=False),
        runs_dir=store / "runs",
        config_path=config,
        allowed_hosts=["testserver"],
    )
    with TestClient(app) as client:
        page = client.get(f"/traces/{NEW_CONTENT}").text
    form = page[page.index('id="run-form"') : page.index("</form>", page.index('id="run-form"'))]
    import re

    names = set(re.findall(r'name="([a-z_]+)"', form))
    assert names == {"kind", *wanted}
    for field in form_fields():
        specs_of = [s for r in REQUESTS.values() for s in specs(r) if form_name(s) == field.name]
        defaults = {s.default for s in specs_of}
        if field.control in ("number", "text") and len(defaults) == 1:
            (default,) = defaults
            shown = "" if default is None else str(default)
            assert f'name="{field.name}" id="{field.id}" value="{shown}"' in form, field.name


def test_the_same_decision_choice_offers_only_values_the_run_accepts(project):
    """Every value the console's choice of the same decision offers is a rule the analysis
    takes for the recorded decision (and a value it does not take is refused on the form)."""
    from otelcar.attribution.context.decisions import same_decision
    from otelcar.project_config import load_config
    from otelcar.replay import load_run

    store, config_path = project
    config = load_config(config_path)
    loaded = Store(store, create=False).load(NEW_CONTENT)
    decision = next(d for d in load_run(loaded.trace_id, loaded.steps).decisions if d.step == 4)
    [field] = [f for f in form_fields() if f.name == "same"]
    assert field.choices == SAMES
    for value in field.choices:
        same_decision(value, decision.action, config.registry, outcome=config.outcome)
        assert WhyRequest(same=value).same == value


def test_a_request_refuses_a_value_out_of_its_bounds_in_one_line():
    for bad in ({"rollouts": 0}, {"margin": 0.0}, {"mode": "guess"}, {"shapley": "yes"}):
        with pytest.raises(RequestError) as raised:
            AttributeRequest(**bad)
        [name] = bad
        assert str(raised.value).startswith(f"{name}: ") and "\n" not in str(raised.value)
    with pytest.raises(RequestError, match="step: a whole number or one of culprit, last"):
        WhyRequest(step="first")
    assert FixRequest(step="last").step == "last"


# -- the library's own defaults ------------------------------------------------------------------
@pytest.mark.parametrize(
    ("request_type", "function"),
    [
        (AttributeRequest, "otelcar.attribution.steps.attribute:attribute_async"),
        (WhyRequest, "otelcar.attribution.context.why:why_async"),
        (FixRequest, "otelcar.attribution.fixes.fix:fix_async"),
        (ReplayCheckRequest, "otelcar.attribution.faithfulness:check_policy"),
        (AggregateRequest, "otelcar.attribution.steps.attribute:attribute_async"),
        (AggregateRequest, "otelcar.attribution.aggregate:aggregate"),
        (PairsRequest, "otelcar.attribution.pairs:export_pairs_async"),
    ],
)
def test_a_request_default_is_the_library_default(request_type: type, function: str):
    """The library's functions keep their own keyword defaults (a layer below the requests):
    each option with a default of its own (not one ``otelcar.toml`` fills in) has the
    library's, so ``otelcar.attribute(run, …)`` and ``otelcar attribute`` agree."""
    import importlib
    import inspect

    module, _, name = function.partition(":")
    parameters = inspect.signature(getattr(importlib.import_module(module), name)).parameters
    library_names = {"check_policy": "samples", **request_type.library_names}
    compared = 0
    for spec in specs(request_type):
        parameter = parameters.get(library_names.get(spec.name, spec.name))
        if parameter is None or spec.default is None:
            continue  # not the library's, or one [replay] fills in (budget, seed)
        if parameter.default is inspect.Parameter.empty:
            continue
        compared += 1
        assert spec.default == parameter.default, (request_type.kind, spec.name)
    assert compared, request_type.kind


def test_declaring_the_options_loads_no_replay_machinery():
    """The commands declare their options from the request types when they are loaded
    (``otelcar why --help``): that loads neither the replay machinery nor Polars."""
    import subprocess
    import sys

    probe = (
        "import sys\n"
        "import otelcar.cli.repair, otelcar.cli.replay\n"
        "print(sorted(m for m in ('polars', 'otelcar.replay', 'otelcar.attribution') "
        "if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]", done.stdout


def test_the_mcp_docs_list_every_argument_of_the_run_tools():
    """docs/mcp.md's rows of ``attribute``, ``why`` and ``fix`` name exactly their arguments."""
    import re

    docs = (Path(__file__).resolve().parents[1] / "docs" / "mcp.md").read_text()
    for kind, request_type in REQUESTS.items():
        row = re.search(rf"^\| `{kind}\(([^)]*)\)`", docs, re.MULTILINE)
        assert row is not None, kind
        named = {re.match(r"\s*([a-z_]+)", a).group(1) for a in row.group(1).split(",")}
        assert named == {"trace_id", "agent", *(s.name_in("mcp") for s in specs(request_type))}
