"""The plugin door (otelcar.plugins): hooks called once, in order, each plugin's errors isolated;
and the example plugin (examples/otelcar-plugin-example) installed for real with pip into a
temporary directory and used from the command line: its mapper, format, policy type, outcome,
executor, source and command, from flags and from otelcar.toml.

The example plugin is never installed where the other tests could see it: the command line
runs in a subprocess whose PYTHONPATH holds the temporary directory.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
import pytest

from otelcar.ingest.formats import derived_id
from otelcar.plugins.hookspecs import hookimpl
from otelcar.plugins.manager import PluginHost
from tests.conftest import NEW_CONTENT, OTLP

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "otelcar-plugin-example"
SAMPLE = EXAMPLE / "samples" / "order-status.acme.jsonl"
ACME_TRACE = derived_id("acme-run-1", size=16)


# -- the door itself, in process (hosts of their own: the process's registries untouched) ----


class Recorder:
    """A ``register`` callback keeping what it was given, and a report keeping messages."""

    def __init__(self) -> None:
        self.registered: list[tuple[Any, ...]] = []
        self.messages: list[str] = []

    def register(self, name: str, factory: Any) -> None:
        self.registered.append((name, factory))

    def report(self, message: str, error: BaseException | None) -> None:
        self.messages.append(message)


def _host(recorder: Recorder, *plugins: tuple[str, Any]) -> PluginHost:
    return PluginHost(builtins=[], group=None, plugins=plugins, report=recorder.report)


class _Good:
    @hookimpl
    def register_outcomes(self, register: Callable[..., None]) -> None:
        register("good", "factory-1")


class _Raising:
    @hookimpl
    def register_outcomes(self, register: Callable[..., None]) -> None:
        register("half-done", "factory-2")
        raise RuntimeError("the plugin's own bug")


class _Replacing:
    @hookimpl
    def register_outcomes(self, register: Callable[..., None]) -> None:
        register("good", "factory-3")


def test_a_hook_that_raises_registers_nothing_and_the_others_still_run():
    recorder = Recorder()
    host = _host(recorder, ("raising", _Raising()), ("good", _Good()))
    host.ensure("register_outcomes", recorder.register)
    assert recorder.registered == [("good", "factory-1")]  # not "half-done"
    assert recorder.messages == [
        "error: plugin 'raising' (no entry point) raised in register_outcomes: RuntimeError: "
        "the plugin's own bug; otelcar goes on without it"
    ]
    raising, good = host.plugins()
    assert (
        raising.errors
        and not raising.registered
        and good.registered == {"register_outcomes": ["good"]}
    )


def test_hooks_run_once_in_plugin_order_and_a_later_name_wins_with_a_note():
    recorder = Recorder()
    host = _host(recorder, ("good", _Good()), ("replacing", _Replacing()))
    host.ensure("register_outcomes", recorder.register)
    host.ensure("register_outcomes", recorder.register)  # a second call runs nothing
    assert recorder.registered == [("good", "factory-1"), ("good", "factory-3")]
    assert recorder.messages == [
        "note: plugin 'replacing' (no entry point) replaces the outcome 'good' registered by "
        "plugin 'good' (no entry point)"
    ]
    good, replacing = host.plugins()
    assert good.registered == {"register_outcomes": []}
    assert replacing.registered == {"register_outcomes": ["good"]}
    assert host.hooks_called() == {"register_outcomes"}


def test_a_plugin_that_misspells_a_hook_is_refused_whole():
    class Misspelled:
        @hookimpl
        def register_outcome(self, register: Callable[..., None]) -> None:
            register("never", None)

    recorder = Recorder()
    host = _host(recorder, ("misspelled", Misspelled()), ("good", _Good()))
    host.ensure("register_outcomes", recorder.register)
    assert recorder.registered == [("good", "factory-1")]
    (message,) = recorder.messages
    assert message.startswith("error: plugin 'misspelled' (no entry point) failed to load: ")
    assert "unknown hook(s) register_outcome; otelcar's hooks: register_mappers" in message


def test_plugin_commands_may_not_replace_built_in_ones():
    class Commands:
        @hookimpl
        def register_commands(self, cli: click.Group) -> None:
            cli.add_command(click.Command("hello", callback=lambda: None))
            cli.add_command(click.Command("show", callback=lambda: None))

    class Broken:
        @hookimpl
        def register_commands(self, cli: click.Group) -> None:
            cli.add_command(click.Command("half", callback=lambda: None))
            raise ValueError("no")

    group = click.Group("otelcar")
    recorder = Recorder()
    host = _host(recorder, ("commands", Commands()), ("broken", Broken()))
    host.ensure_commands(group, reserved={"show"})
    assert sorted(group.commands) == ["hello"]
    assert recorder.messages == [
        "error: plugin 'commands' (no entry point) may not replace the built-in command "
        "'show'; otelcar goes on without it",
        "error: plugin 'broken' (no entry point) raised in register_commands: ValueError: no; "
        "otelcar goes on without it",
    ]


def test_two_distributions_with_one_plugin_name_load_the_first(tmp_path, monkeypatch):
    group = "otelcar-tests-duplicate"
    for dist, module in (("dist_one", "plugin_one"), ("dist_two", "plugin_two")):
        (tmp_path / f"{module}.py").write_text(
            "from otelcar.plugins import hookimpl\n\n\n@hookimpl\n"
            f"def register_outcomes(register):\n    register({module!r}, None)\n"
        )
        info = tmp_path / f"{dist}-1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
        (info / "entry_points.txt").write_text(f"[{group}]\nsame = {module}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    recorder = Recorder()
    host = PluginHost(builtins=[], group=group, report=recorder.report)
    host.ensure("register_outcomes", recorder.register)
    first = recorder.registered[0][0]
    assert len(recorder.registered) == 1 and first in ("plugin_one", "plugin_two")
    loser = {"plugin_one": "dist_two", "plugin_two": "dist_one"}[first]
    (message,) = recorder.messages
    assert message.startswith("error: plugin 'same' (entry point 'same = ")
    assert f"of {loser} 1.0) is not loaded: its name is taken by plugin 'same'" in message


def test_import_and_version_load_no_plugin():
    """Plugins load when a registry is first consulted, never at start-up."""
    probe = (
        "import sys\n"
        "import otelcar\n"
        "from otelcar.cli import main\n"
        "try:\n    main(['--version'])\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in sys.modules if m.startswith(('pluggy', 'otelcar.plugins'))))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.splitlines()[-1] == "[]", done.stdout


def test_the_built_ins_come_in_through_the_same_hooks():
    """Every built-in registry entry is registered by the built-in plugin, and only by it."""
    from otelcar.conventions import mapper_names
    from otelcar.executors import executor_names
    from otelcar.ingest.formats import export_formats
    from otelcar.outcome import outcome_types
    from otelcar.plugins.manager import default_host
    from otelcar.policies.registry import policy_types
    from otelcar.sources import source_schemes

    recorder = Recorder()
    host = PluginHost(group=None, report=recorder.report)  # the built-ins only
    expected = {
        "register_mappers": mapper_names(),
        "register_formats": [f.name for f in export_formats()],
        "register_policy_types": list(policy_types()),
        "register_outcomes": outcome_types(),
        "register_executors": executor_names(),
        "register_sources": source_schemes(),
    }
    for hook in expected:
        host.ensure(hook, lambda *args, **kwargs: None)
    (builtin,) = host.plugins()
    assert builtin.builtin and builtin.registered == expected and not recorder.messages
    assert "chdb" in expected["register_sources"] and "ray" in expected["register_executors"]
    assert [p.name for p in default_host().plugins()] == ["otelcar"]  # nothing else installed


def test_unknown_names_list_the_registered_ones():
    from otelcar.errors import SourceError
    from otelcar.executors import ExecutorError, make_executor
    from otelcar.outcome import OutcomeError, outcome_from_config
    from otelcar.sources import SourceSettings, open_source

    with pytest.raises(ExecutorError, match="unknown executor 'nope'; known: local, ray"):
        make_executor("nope")
    with pytest.raises(OutcomeError, match="known: tool_called, tool_not_called, final_answer"):
        outcome_from_config({"type": "nope"})
    with pytest.raises(
        SourceError, match=r"no source is registered for pg://\); known: clickhouse://, "
    ):
        open_source(SourceSettings("pg://user:s3cret@db/otel"))


# -- the example plugin, installed for real ---------------------------------------------------


def _wheel_building_setuptools() -> bool:
    """Whether this interpreter's setuptools builds wheels without the ``wheel`` package."""
    try:
        version = importlib.metadata.version("setuptools")
    except importlib.metadata.PackageNotFoundError:
        return False
    major, minor = (int(part) for part in version.split(".")[:2])
    return (major, minor) >= (70, 1) or importlib.util.find_spec("wheel") is not None


def _assemble_wheel(project: Path, out: Path) -> Path:
    """The project's wheel, assembled from its own pyproject.toml (name, version, entry
    points, packages): for an interpreter whose setuptools predates ``bdist_wheel`` and has no
    ``wheel`` package, so pip cannot build it offline. pip then installs it as any wheel."""
    meta = tomllib.loads((project / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    name, version = meta["name"].replace("-", "_"), meta["version"]
    info = f"{name}-{version}.dist-info"
    groups = meta.get("entry-points", {})
    files = {
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {meta['name']}\nVersion: {version}\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: otelcar-tests\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n",
        f"{info}/entry_points.txt": "".join(
            f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in points.items())
            for group, points in groups.items()
        ),
    }
    for package in tomllib.loads((project / "pyproject.toml").read_text())["tool"]["setuptools"][
        "packages"
    ]:
        for path in sorted((project / package).glob("*.py")):
            files[f"{package}/{path.name}"] = path.read_text(encoding="utf-8")
    wheel = out / f"{name}-{version}-py3-none-any.whl"
    record = []
    with zipfile.ZipFile(wheel, "w") as archive:
        for arcname, text in files.items():
            data = text.encode("utf-8")
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
            record.append(f"{arcname},sha256={digest.decode()},{len(data)}")
            archive.writestr(arcname, data)
        archive.writestr(f"{info}/RECORD", "\n".join([*record, f"{info}/RECORD,,"]) + "\n")
    return wheel


@pytest.fixture(scope="module")
def plugin_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example plugin, installed with pip (offline, no dependencies) into a directory."""
    target = tmp_path_factory.mktemp("site")
    project = tmp_path_factory.mktemp("project") / EXAMPLE.name  # setuptools builds in-tree
    shutil.copytree(EXAMPLE, project, ignore=shutil.ignore_patterns("__pycache__", "build"))
    source = (
        project
        if _wheel_building_setuptools()
        else _assemble_wheel(project, tmp_path_factory.mktemp("wheel"))
    )
    command = [sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation"]
    command += ["--no-index", "--disable-pip-version-check", "--target", str(target), str(source)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (target / "otelcar_acme" / "mapper.py").is_file()
    return target


def _otelcar(
    tmp_path: Path,
    *args: str,
    paths: tuple[Path, ...] = (),
    debug: bool = False,
    plugins: str | None = None,
) -> subprocess.CompletedProcess:
    """``otelcar --store TMP/store ARGS`` in a subprocess seeing the plugins under ``paths``
    (only those named by ``plugins``, as ``OTELCAR_PLUGINS``, when given)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([*map(str, paths), str(ROOT)])}
    env.pop("OTELCAR_DEBUG", None)
    env.pop("OTELCAR_PLUGINS", None)
    if plugins is not None:
        env["OTELCAR_PLUGINS"] = plugins
    command = [sys.executable, "-m", "otelcar.cli", "--store", str(tmp_path / "store")]
    command += ["--debug", *args] if debug else list(args)
    return subprocess.run(
        command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )


def _ok(done: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def test_otelcar_plugins_lists_the_example_and_what_it_registered(plugin_dir, tmp_path):
    listed = json.loads(_ok(_otelcar(tmp_path, "plugins", "--json", paths=(plugin_dir,))).stdout)
    (acme,) = listed
    assert (acme["name"], acme["distribution"], acme["version"]) == (
        "acme",
        "otelcar-plugin-example",
        "0.1.0",
    )
    assert acme["entry_point"] == "acme = otelcar_acme" and not acme["errors"]
    assert acme["registered"] == {
        "mapper": ["acme"],
        "format": ["acme-jsonl"],
        "policy type": ["acme-canned"],
        "outcome": ["answer_length"],
        "executor": ["acme-counting"],
        "source": ["dumpdir"],
        "command": ["acme-info"],
    }
    assert len(acme["hooks"]) == 7
    every = json.loads(_otelcar(tmp_path, "plugins", "--all", "--json", paths=(plugin_dir,)).stdout)
    assert [(p["name"], p["builtin"]) for p in every] == [("otelcar", True), ("acme", False)]
    table = _ok(_otelcar(tmp_path, "plugins", paths=(plugin_dir,))).stdout
    assert "otelcar-plugin-example" in table and "answer_length" in table
    info = _ok(_otelcar(tmp_path, "acme-info", paths=(plugin_dir,))).stdout
    assert "MISSING" not in info and "outcome answer_length: registered" in info
    assert "acme-info" in _ok(_otelcar(tmp_path, "--help", paths=(plugin_dir,))).stdout
    without = _ok(_otelcar(tmp_path, "plugins", "--json"))  # not installed: not there
    assert json.loads(without.stdout) == []


def _otlp_json(spans: list[dict[str, Any]]) -> str:
    """An OTLP JSON document (one resource, one scope) of ``spans`` with string attributes."""

    def attributes(values: dict[str, Any]) -> list[dict[str, Any]]:
        return [{"key": k, "value": {"stringValue": v}} for k, v in values.items()]

    return json.dumps(
        {
            "resourceSpans": [
                {
                    "resource": {"attributes": attributes({"service.name": "acme-otlp"})},
                    "scopeSpans": [
                        {
                            "scope": {"name": "acme-sdk"},
                            "spans": [
                                {**span, "attributes": attributes(span["attributes"])}
                                for span in spans
                            ],
                        }
                    ],
                }
            ]
        }
    )


def test_import_maps_the_acme_dialect_from_its_format_and_from_otlp(plugin_dir, tmp_path):
    imported = _ok(_otelcar(tmp_path, "import", "--json", str(SAMPLE), paths=(plugin_dir,)))
    assert json.loads(imported.stdout)["traces"] == [ACME_TRACE]
    shown = json.loads(
        _otelcar(tmp_path, "show", ACME_TRACE[:8], "--json", paths=(plugin_dir,)).stdout
    )
    steps = shown["steps"]
    assert [s["kind"] for s in steps] == ["agent", "llm", "tool", "llm"]
    assert {s["source"] for s in steps} == {"acme"}
    first, tool, last = steps[1], steps[2], steps[3]
    assert [m["role"] for m in first["input_messages"]] == ["system", "user"]
    assert first["input_messages"][1]["content"] == "Where is my order A-1?"
    assert first["output"]["tool_calls"] == [
        {"id": "call-1", "name": "lookup_order", "arguments": {"order_id": "A-1"}}
    ]
    assert (tool["tool_name"], tool["tool_args"]) == ("lookup_order", {"order_id": "A-1"})
    assert [m["role"] for m in last["input_messages"]] == ["system", "user", "assistant", "tool"]
    assert last["input_messages"][3]["tool_call_id"] == "call-1"
    assert last["output"]["content"] == "OK."

    trace = "5b8efff798038dd2d6c1b0c2a4f0e7d1"
    dump = tmp_path / "acme.otlp.json"
    dump.write_text(
        _otlp_json(
            [
                {
                    "traceId": trace,
                    "spanId": "00f067aa0ba902b7",
                    "name": "chat acme-1",
                    "kind": 3,
                    "startTimeUnixNano": "1764600000000000000",
                    "endTimeUnixNano": "1764600001000000000",
                    "attributes": {
                        "acme.llm.model": "acme-1",
                        "acme.llm.prompt": json.dumps([{"role": "user", "text": "Hi"}]),
                        "acme.llm.completion": json.dumps({"text": "Hello!"}),
                    },
                }
            ]
        )
    )
    _ok(_otelcar(tmp_path, "import", str(dump), paths=(plugin_dir,)))
    (step,) = json.loads(_otelcar(tmp_path, "show", trace, "--json", paths=(plugin_dir,)).stdout)[
        "steps"
    ]
    assert (step["kind"], step["source"], step["request_model"]) == ("llm", "acme", "acme-1")
    assert step["input_messages"][0]["content"] == "Hi" and step["output"]["content"] == "Hello!"
    # Without the plugin the same file is read, but no mapper knows the dialect.
    other = tmp_path / "other"
    other.mkdir()
    _ok(_otelcar(other, "import", str(dump)))
    (plain,) = json.loads(_otelcar(other, "show", trace, "--json").stdout)["steps"]
    assert plain["kind"] == "other" and plain["input_messages"] is None


CONFIG = """\
[policies.llm]
type = "acme-canned"
answers = ["OK.", "Your order A-1 has shipped and arrives on Friday."]

[outcome]
type = "answer_length"
min_chars = 20

[replay]
seed = 3
executor = "acme-counting"
"""


def test_rollouts_with_the_plugins_policy_outcome_and_executor(plugin_dir, tmp_path):
    _ok(_otelcar(tmp_path, "import", str(SAMPLE), paths=(plugin_dir,)))
    config = tmp_path / "otelcar.toml"
    config.write_text(CONFIG)
    fidelity = _ok(
        _otelcar(
            tmp_path, "replay", ACME_TRACE[:8], "-c", str(config), "--json", paths=(plugin_dir,)
        )
    )
    report = json.loads(fidelity.stdout)
    assert report["propagates"] and report["recorded_failed"] is True  # "OK." is too short
    args = ["rollout", ACME_TRACE[:8], "-c", str(config), "--from-step", "3", "-n", "12"]
    done = _ok(_otelcar(tmp_path, *args, "--json", paths=(plugin_dir,)))
    summary = json.loads(done.stdout)
    assert summary["judged"] == 12 and 0 < summary["failed"] < 12  # "OK." fails, the rest not
    assert "acme-counting executor: 12 rollouts in 1 batches" in done.stderr
    local = _ok(_otelcar(tmp_path, *args, "--json", "--executor", "local", paths=(plugin_dir,)))
    assert json.loads(local.stdout)["failed"] == summary["failed"]  # same seeds, same rollouts
    assert "acme-counting" not in local.stderr
    bad = tmp_path / "bad.toml"
    bad.write_text(CONFIG.replace("min_chars = 20", "min_chars = 0"))
    refused = _otelcar(tmp_path, "rollout", ACME_TRACE[:8], "-c", str(bad), paths=(plugin_dir,))
    assert refused.returncode == 2
    assert "answer_length needs min_chars = a positive integer" in refused.stderr
    unknown = _otelcar(tmp_path, "rollout", ACME_TRACE[:8], "-c", str(config), "--executor", "x")
    assert unknown.returncode == 2 and "'x' is not one of 'local', 'ray'" in unknown.stderr


def test_attribute_with_the_plugins_outcome_from_otelcar_toml(plugin_dir, tmp_path):
    _ok(_otelcar(tmp_path, "import", str(SAMPLE), paths=(plugin_dir,)))
    config = tmp_path / "otelcar.toml"
    config.write_text(CONFIG)
    done = _ok(
        _otelcar(
            tmp_path,
            "attribute",
            ACME_TRACE[:8],
            "-c",
            str(config),
            "-n",
            "16",
            "--json",
            "-",
            paths=(plugin_dir,),
        )
    )
    result = json.loads(done.stdout)
    assert result["culprit"] == 3 and result["verdict"] == "culprit"
    assert "acme-counting executor:" in done.stderr


def test_the_plugins_source_reads_a_directory_of_dumps(plugin_dir, tmp_path):
    dumps = tmp_path / "dumps"
    dumps.mkdir()
    (dumps / SAMPLE.name).write_bytes(SAMPLE.read_bytes())
    (dumps / "new_content.traces.jsonl").write_bytes(
        (OTLP / "new_content.traces.jsonl").read_bytes()
    )
    url = f"dumpdir://{dumps}"
    listed = json.loads(
        _ok(_otelcar(tmp_path, "traces", "--source", url, "--json", paths=(plugin_dir,))).stdout
    )
    assert sorted(t["trace_id"] for t in listed) == sorted([ACME_TRACE, NEW_CONTENT])
    shown = _otelcar(
        tmp_path, "show", ACME_TRACE[:8], "--source", url, "--json", paths=(plugin_dir,)
    )
    assert [s["kind"] for s in json.loads(_ok(shown).stdout)["steps"]] == [
        "agent",
        "llm",
        "tool",
        "llm",
    ]
    config = tmp_path / "otelcar.toml"
    config.write_text(CONFIG + f'\n[source]\nurl = "{url}"\n')
    fidelity = _otelcar(
        tmp_path, "replay", ACME_TRACE[:8], "-c", str(config), "--json", paths=(plugin_dir,)
    )
    assert json.loads(_ok(fidelity).stdout)["propagates"] is True
    assert not (tmp_path / "store").exists()  # read from the directory, nothing imported
    missing = _otelcar(tmp_path, "traces", "--source", url + "/nope", paths=(plugin_dir,))
    assert missing.returncode == 2 and "no directory at" in missing.stderr


def _broken_plugins(root: Path) -> Path:
    """A directory holding two installed (dist-info) plugins: one whose module is missing,
    one whose outcome hook raises."""
    root.mkdir()
    (root / "raising_plugin.py").write_text(
        "from otelcar.plugins import hookimpl\n\n\n@hookimpl\n"
        "def register_outcomes(register):\n    raise RuntimeError('outcomes exploded')\n"
    )
    for dist, entry in (
        ("broken_plugin", "broken = otelcar_no_such_module"),
        ("raising_plugin", "raising = raising_plugin"),
    ):
        info = root / f"{dist}-1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
        (info / "entry_points.txt").write_text(f"[otelcar]\n{entry}\n")
    return root


def test_a_broken_plugin_is_one_error_line_and_otelcar_goes_on(plugin_dir, tmp_path):
    broken = _broken_plugins(tmp_path / "broken")
    paths = (broken, plugin_dir)
    done = _ok(_otelcar(tmp_path, "import", str(SAMPLE), paths=paths))
    assert "Traceback" not in done.stderr
    assert done.stderr.splitlines() == [
        "error: plugin 'broken' (entry point 'broken = otelcar_no_such_module' of broken_plugin "
        "1.0) failed to load: ModuleNotFoundError: No module named 'otelcar_no_such_module'; "
        "otelcar goes on without it"
    ]
    listed = json.loads(_ok(_otelcar(tmp_path, "plugins", "--json", paths=paths)).stdout)
    by_name = {p["name"]: p for p in listed}
    assert by_name["acme"]["registered"]["outcome"] == ["answer_length"]  # the others work
    assert not by_name["broken"]["loaded"] and by_name["broken"]["errors"] == [
        "failed to load: ModuleNotFoundError: No module named 'otelcar_no_such_module'"
    ]
    assert by_name["raising"]["loaded"] and by_name["raising"]["errors"] == [
        "raised in register_outcomes: RuntimeError: outcomes exploded"
    ]
    config = tmp_path / "otelcar.toml"
    config.write_text(CONFIG)
    rolled = _ok(
        _otelcar(tmp_path, "rollout", ACME_TRACE[:8], "-c", str(config), "-n", "2", paths=paths)
    )
    errors = [line for line in rolled.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 2 and "Traceback" not in rolled.stderr
    debug = _otelcar(tmp_path, "plugins", paths=paths, debug=True)
    assert debug.returncode == 0 and debug.stderr.count("Traceback") == 2
    chosen = _ok(_otelcar(tmp_path, "plugins", "--json", paths=paths, plugins="acme,nope"))
    assert [p["name"] for p in json.loads(chosen.stdout)] == ["acme"] and not chosen.stderr
    none = _ok(_otelcar(tmp_path, "plugins", "--all", "--json", paths=paths, plugins=""))
    assert [p["name"] for p in json.loads(none.stdout)] == ["otelcar"] and not none.stderr
