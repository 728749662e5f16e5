"""The HTML report in a real browser (headless Chromium driven by Selenium), the report
sections of the JSON result, ``otelcar report``, and untrusted traces rendering as text.

The browser tests skip, saying why, only when Chromium or ChromeDriver cannot be found
(Debian packages ``chromium`` and ``chromium-driver``; ``make test`` installs them).
Screenshots go to ``test-artifacts/`` (git-ignored).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from click.testing import CliRunner

from otelcar import read_otlp
from otelcar.attribution import attribute
from otelcar.attribution.aggregate import TraceVerdict, aggregate
from otelcar.attribution.experiment.rollouts import curve_plan_key
from otelcar.attribution.steps.curve import curve_plans
from otelcar.cli import cli
from otelcar.outcome import FunctionOutcome
from otelcar.policies.python import CallableLLMPolicy, CallableToolPolicy
from otelcar.policies.registry import PolicyRegistry
from otelcar.replay import load_run
from otelcar.report import (
    RolloutSampler,
    read_result,
    render_html,
    with_report_sections,
    write_aggregate_html,
    write_html,
)
from otelcar.report.data import full_context
from otelcar.report.markup import script_json
from otelcar.report.prose import document
from otelcar.testing import scenarios as synthetic
from tests.helpers.generated_agent import agent_trace_otlp, write_dump
from tests.helpers.markup import payload
from tests.parts import headless_chromium

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "test-artifacts"


# -- a real attribution -----------------------------------------------------------------------
@pytest.fixture(scope="module")
def attribution_doc() -> dict[str, Any]:
    """An AND failure (steps 3 and 7 both needed) attributed with Shapley values, with the
    report sections a result writer adds."""
    scenario = synthetic.and_case(4, 1, 3)
    steps, registry, outcome = synthetic.build(scenario)
    sampler = RolloutSampler()
    result = attribute(
        load_run(synthetic.TRACE_ID, steps),
        registry=registry,
        outcome=outcome,
        seed=1,
        shapley=True,
        shapley_pairs=3,
        shapley_rollouts=12,
        on_rollout=sampler,
    )
    return with_report_sections(document(result), steps=steps, sampler=sampler)


def why_doc(step: int, text: str) -> dict[str, Any]:
    """A ``why`` result (schemas/why.schema.json shape) naming ``text`` as the cause."""
    effect = {
        "base_rate": 1.0,
        "rate": 0.0,
        "rate_ci": [0.0, 0.28],
        "difference": 1.0,
        "difference_ci": [0.6, 1.0],
        "p": 5.4e-6,
        "counts": {"base_bad": 10, "base_n": 10, "bad": 0, "n": 10},
    }
    cause = {
        "kind": "cause",
        "joint": False,
        "label": "#4 tool result",
        "text": text,
        "parts": [{"label": "#4", "level": "message", "message": 4, "role": "tool", "text": text}],
        "effect": effect,
        "alternative": "calls act with v=ok",
        "chain": [],
    }
    return {
        "version": 1,
        "kind": "why",
        "trace_id": synthetic.TRACE_ID,
        "step": step,
        "decision": "act(i=3, v=BAD)",
        "verdict": "cause",
        "headline": f'Step {step} was caused by "{text}".',
        "cause": cause,
        "causes": [cause],
        "base": {"bad": 10, "n": 10, "rate": 1.0, "ci": [0.72, 1.0], "intermittent": False},
        "tests": [],
        "cost": {"llm_calls": 40},
    }


def fix_doc(step: int) -> dict[str, Any]:
    """A ``fix`` result (schemas/fix.schema.json shape) with a passing and a failing fix."""

    def candidate(name: str, bad: int, verdict: str) -> dict[str, Any]:
        return {
            "name": name,
            "kind": "guard",
            "description": f"{name} rule",
            "rule": f"Never call act with v=BAD ({name}).",
            "plan": {},
            "verdict": verdict,
            "decision": {
                "bad": bad,
                "n": 10,
                "ci": [0.0, 0.3],
                "base_bad": 10,
                "base_n": 10,
                "difference": 1 - bad / 10,
                "difference_ci": [0.5, 1.0],
                "p": 1e-5,
                "p_adjusted": 2e-5,
                "verdict": verdict,
            },
            "forward": None,
        }

    return {
        "version": 1,
        "kind": "fix",
        "trace_id": synthetic.TRACE_ID,
        "step": step,
        "headline": f"Step {step}: best fix 'guard'.",
        "best": "guard",
        "candidates": [candidate("guard", 0, "PASS"), candidate("untrusted", 7, "FAIL")],
        "cost": {"llm_calls": 60},
    }


# -- the browser ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    with headless_chromium(tmp_path_factory.mktemp("chromium-profile")) as driver:
        yield driver


def open_page(driver: Any, path: Path) -> list[dict[str, Any]]:
    """Load ``path``, wait for the page script, and return the console errors."""
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get_log("browser")  # drop what an earlier page logged
    driver.get(path.resolve().as_uri())
    WebDriverWait(driver, 10).until(
        lambda d: d.execute_script("return document.documentElement.dataset.ready") == "1"
    )
    return [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]


def js(driver: Any, script: str, *args: Any) -> Any:
    return driver.execute_script(script, *args)


def shot(driver: Any, name: str) -> Path:
    """A full-page screenshot in test-artifacts/."""
    ARTIFACTS.mkdir(exist_ok=True)
    height = js(driver, "return document.documentElement.scrollHeight")
    driver.set_window_size(1280, min(max(height, 800), 9000))
    path = ARTIFACTS / name
    driver.save_screenshot(str(path))
    driver.set_window_size(1280, 1600)
    return path


def visible_size(driver: Any, selector: str) -> tuple[float, float]:
    rect = js(
        driver,
        "var r = document.querySelector(arguments[0]).getBoundingClientRect();"
        "return [r.width, r.height];",
        selector,
    )
    return rect[0], rect[1]


# -- tests ------------------------------------------------------------------------------------
def test_result_json_carries_the_report_sections(attribution_doc: dict[str, Any]):
    schema = json.loads((ROOT / "schemas" / "attribution.schema.json").read_text())
    jsonschema.validate(json.loads(json.dumps(attribution_doc)), schema)
    timeline = attribution_doc["timeline"]
    assert [s["step"] for s in timeline["steps"]] == list(range(10))
    # Contexts are delta-encoded and rebuild exactly.
    llm = [s for s in timeline["steps"] if s["kind"] == "llm"]
    assert llm[1]["context"]["same_as_step"] == 1 and llm[1]["context"]["shared"] == 2
    assert len(full_context(timeline, 9)) == 10  # system, user, 4 × (action, result)
    alternatives = attribution_doc["alternatives"]
    assert {a["resample_from"] for a in alternatives} == {7, 9, 1}
    assert any(a["failed"] for a in alternatives) and any(
        a["failed"] is False for a in alternatives
    )


def test_alternatives_carry_the_analysis_judgement_and_the_report_judges_nothing():
    """The kept rollouts keep the outcome the analysis judged them by (issue 38): the report
    shows it as judged, with no outcome of its own, so it makes no uncounted call and
    cannot disagree with the analysis."""
    scenario = synthetic.single_culprit(4, 2, p_bad=0.7)
    steps, registry, outcome = synthetic.build(scenario)
    judged: list[Any] = []
    sampler = RolloutSampler(then=judged.append)
    result = attribute(
        load_run(synthetic.TRACE_ID, steps),
        registry=registry,
        outcome=outcome,
        seed=3,
        on_rollout=sampler,
    )
    by_rollout = {(j.rollout.plan, j.rollout.index): j.failed for j in judged}
    kept = [j for plan in sampler.kept.values() for j in plan.values()]
    assert kept and all((j.rollout.plan, j.rollout.index) in by_rollout for j in kept)
    views = sampler.alternatives(result.to_dict())
    assert views and {v["failed"] for v in views} <= {True, False}
    for key in sampler.plans_for(result.to_dict()):
        for index, j in sampler.kept[key].items():
            view = next(v for v in views if v["resample_from"] == key and v["rollout"] == index)
            assert view["failed"] is by_rollout[(j.rollout.plan, index)]


@pytest.mark.parametrize("mode", ["adaptive", "bisect"])
def test_rollouts_reach_the_sampler_with_the_plan_key_attribution_gave_them(mode: str):
    """Attribution labels each rollout with its plan (issue 38): every keyed rollout ran
    the curve plan its key names, bisection's confirmation arm is labelled apart, and the
    sampler keeps only the curve's, by key, never guessing from a plan's shape."""
    scenario = synthetic.single_culprit(6, 3, p_bad=0.7)
    steps, registry, outcome = synthetic.build(scenario)
    run = load_run(synthetic.TRACE_ID, steps)
    judged: list[Any] = []
    sampler = RolloutSampler(then=judged.append)
    attribute(run, registry=registry, outcome=outcome, seed=5, mode=mode, on_rollout=sampler)
    plans = {curve_plan_key(run, k): plan for k, plan in curve_plans(run).items()}
    stages = {j.plan_key[0] for j in judged if j.plan_key is not None}
    assert stages == ({"curve", "confirm"} if mode == "bisect" else {"curve"})
    for j in judged:
        if j.plan_key is not None:
            assert j.rollout.plan == plans[j.plan_key[1]]
    kept = [(key, j) for key, plan in sampler.kept.items() for j in plan.values()]
    assert kept and all(j.plan_key == ("curve", key) for key, j in kept)
    assert None in sampler.kept  # the factual replay (the fidelity check's, adopted)


def test_html_report_in_chromium(browser: Any, attribution_doc: dict[str, Any], tmp_path: Path):
    why, fix = why_doc(7, "done 1:BAD"), fix_doc(7)
    page = write_html(tmp_path / "report.html", attribution=attribution_doc, why=why, fix=fix)
    html = page.read_text()
    assert "http://" not in html.replace("http://www.w3.org/2000/svg", "")
    assert "https://" not in html and "<link" not in html and " src=" not in html
    errors = open_page(browser, page)
    assert errors == []
    # The verdict, at the top, visible.
    verdict = browser.find_element("id", "verdict")
    assert verdict.is_displayed() and "Step 7 caused the failure" in verdict.text
    assert "WHAT IT COST" in verdict.text.upper() and "policy calls" in verdict.text
    assert verdict.location["y"] < 200
    # The charts: drawn, visible, one mark per estimate.
    effects = attribution_doc["steps"]
    for chart in ("#curve-chart", "#effects-chart", "#shapley-chart"):
        width, height = visible_size(browser, chart)
        assert width > 200 and height > 100, chart
    assert js(browser, "return document.querySelectorAll('#curve-chart circle.pt').length") == (
        len(effects) + 1
    )
    assert js(browser, "return document.querySelectorAll('#curve-chart path').length") >= 3 + len(
        effects
    )  # grid, band, line, a whisker per point
    assert js(browser, "return document.querySelectorAll('#effects-chart rect.bar').length") == (
        len(effects)
    )
    assert js(browser, "return document.querySelectorAll('#shapley-chart rect.bar').length") == (
        len(attribution_doc["shapley"]["values"])
    )
    bar = js(
        browser,
        "var r = document.querySelector('#effects-chart rect.bar.culprit')"
        ".getBoundingClientRect(); return r.width;",
    )
    assert bar > 50  # Δ = +1: a long bar
    # The timeline: one expandable row per step; the culprit's is open with its context.
    assert js(browser, "return document.querySelectorAll('details.step').length") == 10
    culprit = browser.find_element("id", "step-7")
    assert culprit.get_attribute("open") is not None and "Context" in culprit.text
    marks = js(browser, "return [...document.querySelectorAll('#step-7 mark.cause')].length")
    assert marks >= 1  # the why cause highlighted in the culprit's context
    assert browser.find_element("id", "step-2").get_attribute("open") is None
    browser.find_element("id", "expand-all").click()
    assert js(browser, "return [...document.querySelectorAll('details.step')].every(d => d.open)")
    browser.find_element("id", "collapse-all").click()
    assert (
        js(browser, "return [...document.querySelectorAll('details.step')].some(d => d.open)")
        is False
    )
    # Why, fixes and alternative timelines are there; the embedded JSON reads back.
    assert "guard" in browser.find_element("id", "fixes-table").text
    assert "done 1:BAD" in browser.find_element("id", "causes").text
    assert "failed" in browser.find_element("id", "alternatives").text.lower()
    data = js(browser, "return JSON.parse(document.getElementById('otelcar-data').textContent)")
    assert data["attribution"]["culprit"] == 7 and data["why"]["step"] == 7
    browser.find_element("id", "expand-all").click()
    assert shot(browser, "report.png").stat().st_size > 10_000


def test_aggregate_report_in_chromium(browser: Any, tmp_path: Path):
    ids = [f"support · model → tool{i}" for i in range(4)]
    flat = dict.fromkeys(ids, 0.0)
    verdicts = [
        TraceVerdict(
            f"{n:032x}",
            "attributed",
            verdict="culprit",
            culprit_step=3,
            culprit_identity=ids[0] if n < 7 else ids[1 + n % 3],
            delta=0.6,
            effects={**flat, (ids[0] if n < 7 else ids[1 + n % 3]): 0.6 + n / 50},
            decisions=dict.fromkeys(ids, 1),
        )
        for n in range(10)
    ]
    page = write_aggregate_html(tmp_path / "aggregate.html", aggregate(verdicts))
    assert open_page(browser, page) == []
    assert "fails this agent systematically" in browser.find_element("id", "verdict").text
    for chart in ("#share-chart", "#mean-effect-chart"):
        assert visible_size(browser, chart)[0] > 200
        assert js(browser, f"return document.querySelectorAll('{chart} rect.bar').length") == 4
    assert "design flaw" in browser.find_element("id", "ranking").text.lower()
    shot(browser, "aggregate.png")


def test_cli_report_rebuilds_the_html_from_the_json(attribution_doc: dict[str, Any], tmp_path):
    result = tmp_path / "result.json"
    result.write_text(json.dumps(attribution_doc))
    why = tmp_path / "why.json"
    why.write_text(json.dumps(why_doc(7, "done 1:BAD")))
    out = CliRunner().invoke(
        cli, ["report", str(result), str(why), "--html", str(tmp_path / "r.html"), "--terminal"]
    )
    assert out.exit_code == 0, out.output
    assert "Step 7 caused the failure" in out.output and "recorded action" in out.output
    assert (tmp_path / "r.html").read_text() == render_html(
        attribution=attribution_doc, why=why_doc(7, "done 1:BAD")
    )
    wrong = tmp_path / "old.json"
    wrong.write_text(json.dumps({**attribution_doc, "version": 99}))
    refused = CliRunner().invoke(cli, ["report", str(wrong)])
    assert refused.exit_code == 2 and "version 99" in refused.output
    assert read_result(result)["kind"] == "attribution"


# -- untrusted input --------------------------------------------------------------------------


STRUCTURAL = {"kind", "verdict", "version", "trace_id"}


def poison(value: Any, key: str = "") -> Any:
    """Every string of a result with a payload appended (but its kind, verdict, version)."""
    if isinstance(value, dict):
        return {k: poison(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [poison(v, key) for v in value]
    if isinstance(value, str) and key not in STRUCTURAL:
        return value + payload(key)
    return value


def hostile_attribution(directory: Path) -> dict[str, Any]:
    """A real attribution of a trace whose agent, model, tools, prompts, tool results, final
    answer and outcome all carry payloads."""
    tools = [payload("tool-a"), payload("tool-b"), payload("tool-c")]

    def decide(request: Any) -> Any:
        from otelcar.messages import Message, ToolCall

        i = sum(1 for m in request.messages if m.role == "assistant")
        if i >= len(tools):
            return Message("assistant", payload("final"))
        choice = "BAD" if i == 1 and request.seed % 5 == 0 else "ok"
        return Message("assistant", None, (ToolCall(tools[i], {"choice": choice}, f"c{i}"),))

    def fails(steps: Any) -> bool:
        rows = steps.filter(steps["kind"] == "tool")["tool_args"].to_list()
        return any(a and json.loads(a).get("choice") == "BAD" for a in rows)

    trace = "d" * 32
    entry = agent_trace_otlp(
        trace,
        ["ok", "BAD", "ok"],
        tools=tools,
        agent=payload("agent"),
        model=payload("model"),
        system=payload("system"),
        user=payload("user"),
        result=lambda tool, choice: payload("result") + choice,
        final=payload("final"),
    )
    steps = read_otlp(write_dump(directory / "hostile.traces.json", [entry]))
    registry = PolicyRegistry()
    registry.register("llm", CallableLLMPolicy(decide, name=payload("policy")))
    registry.register(
        "tool:*", CallableToolPolicy(lambda r: payload("result") + r.arguments["choice"])
    )
    outcome = FunctionOutcome(fails, payload("outcome"))
    sampler = RolloutSampler()
    result = attribute(
        load_run(trace, steps), registry=registry, outcome=outcome, seed=2, on_rollout=sampler
    )
    assert result.verdict == "culprit"
    return with_report_sections(document(result), steps=steps, sampler=sampler)


def test_hostile_strings_in_every_field_render_as_text(browser: Any, tmp_path: Path):
    attribution = poison(hostile_attribution(tmp_path))
    why = poison(why_doc(attribution["culprit"], payload("cause")))
    fix = poison(fix_doc(attribution["culprit"]))
    page = write_html(tmp_path / "hostile.html", attribution=attribution, why=why, fix=fix)
    errors = open_page(browser, page)
    assert errors == []  # nothing blocked by the CSP either: nothing tried to run
    browser.find_element("id", "expand-all").click()
    assert js(browser, "return window.__pwned === undefined")
    assert "PWNED" not in browser.title
    created = js(
        browser,
        "return document.querySelectorAll('img, iframe, object, embed, #pwned, #pwned-link, "
        "svg:not(.chart)').length",
    )
    assert created == 0
    handlers = js(
        browser,
        "return [...document.querySelectorAll('*')].filter(e => [...e.attributes]"
        ".some(a => a.name.startsWith('on'))).length",
    )
    assert handlers == 0
    assert js(browser, "return document.scripts.length") == 2
    # Visible as text where people read it: the verdict (outcome), the timeline (agent, tool
    # names, prompts, results), the alternative timelines and the fixes.
    for section in ("verdict", "timeline", "alternatives", "fixes", "why"):
        text = browser.find_element("id", section).text
        assert "</script><script>document.title='PWNED'" in text, section
        assert '<img src=x onerror="window.__pwned=1">' in text, section
    html = page.read_text()
    # Statically: only otelcar's own two script elements, no element from the payloads.
    assert html.count("<script") == 2 and html.count("</script>") == 2
    for tag in ("<img", "<iframe", "<svg onload", "<!--", '<a href="javascript'):
        assert tag not in html, tag
    assert "&lt;/script&gt;" in html and "\\u003c/script\\u003e" in html
    # The embedded JSON survives the trip through the page intact.
    data = js(browser, "return JSON.parse(document.getElementById('otelcar-data').textContent)")
    assert data["attribution"]["outcome"] == attribution["outcome"]
    assert data["why"]["causes"][0]["text"] == why["causes"][0]["text"]
    shot(browser, "hostile.png")


def test_script_json_cannot_close_or_comment_its_element():
    text = script_json({"a": "</script><!-- <script>", "b": "\u2028", "c": float("nan")})
    assert "<" not in text and ">" not in text and "\u2028" not in text
    assert json.loads(text) == {"a": "</script><!-- <script>", "b": "\u2028", "c": None}
