"""The words of a result's notes: one wording per note kind (:class:`otelcar.notes.Note`).

The layers below make notes as data (a kind and its facts); this module is the one place
that turns them into the sentences every front end shows, so a note reads the same in the
terminal, the JSON, MCP and the console. :func:`word` words one note; a kind with no
wording here is a bug (``tests/test_notes.py`` finds every kind made in ``otelcar/`` and
words it)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from otelcar.notes import Note

#: Note kind → its wording, a function of the note's facts.
WORDINGS: dict[str, Callable[..., str]] = {}


def words(kind: str) -> Callable[[Callable[..., str]], Callable[..., str]]:
    """Register the decorated function (keyword arguments: the note's facts) as ``kind``'s
    wording."""

    def register(wording: Callable[..., str]) -> Callable[..., str]:
        if kind in WORDINGS:
            raise ValueError(f"the note kind {kind!r} is worded twice")
        WORDINGS[kind] = wording
        return wording

    return register


def word(item: Note) -> str:
    """The sentence for ``item``; :class:`KeyError` for a kind with no wording."""
    wording = WORDINGS.get(item.kind)
    if wording is None:
        raise KeyError(f"no wording for the note kind {item.kind!r}")
    return wording(**item.facts)


def worded(items: Iterable[Note]) -> list[str]:
    """Each of ``items`` worded (:func:`word`), in order."""
    return [word(item) for item in items]


def _steps(steps: Iterable[Any]) -> str:
    return str(list(steps))


# -- the replay and the policies ------------------------------------------------------------


@words("inferred_requests")
def _inferred_requests(parts: list[str]) -> str:
    return (
        "the re-decided requests are partly inferred, not recorded: "
        + "; ".join(parts)
        + " — declare them in otelcar.toml [agent] (otelcar init TRACE writes a start)"
    )


@words("policy")
def _policy(text: str) -> str:
    return text  # the policy's own words (PolicyRegistry.notes)


@words("held_only")
def _held_only(step: int, reasons: list[str]) -> str:
    return f"step {step}: {'; '.join(reasons)}"


@words("tools_without_policy")
def _tools_without_policy(tools: list[str]) -> str:
    return (
        f"no tool policy for {', '.join(tools)}: only the recorded calls can be served; "
        "a rollout calling one with other arguments fails and is counted (register "
        "'tool:NAME', or 'tool:*' = recorded to declare it)"
    )


# -- attribute --------------------------------------------------------------------------------


@words("bisection_fell_back")
def _bisection_fell_back(reason: str) -> str:
    return f"bisection fell back to the full curve: {reason}"


@words("bisection")
def _bisection(searched: int, plans: int, tested: list[int]) -> str:
    return f"bisection: {searched} plans evaluated out of {plans}, " + (
        "the jump confirmed on fresh rollouts of its two plans; only the culprit's "
        "row has an effect estimate"
        if len(tested) == 1
        else f"the jumps at steps {_steps(tested)} (each as large as the largest on the "
        "search) tested on fresh rollouts of their plans; only their rows have "
        "effect estimates"
    )


@words("budget_stop")
def _budget_stop(max_calls: int) -> str:
    return f"stopped by the budget of {max_calls} policy calls"


@words("futility_stop")
def _futility_stop(rollouts: int, futility: float) -> str:
    return (
        f"futility stop after {rollouts} rollouts per plan: no step had a "
        f"{futility:.0%} chance left of becoming significant"
    )


@words("effects_bounded")
def _effects_bounded(steps: list[int]) -> str:
    return (
        f"steps {_steps(steps)}: every re-decision repeated the recorded action, so their "
        "effect is bounded (±u in the table), not known to be 0; more rollouts "
        "(--max-rollouts) would tell"
    )


@words("rollouts_lost")
def _rollouts_lost(failed: int, lost: list[dict[str, int]]) -> str:
    by_step = ", ".join(f"step {x['step']}: {x['pairs']}" for x in lost)
    return f"{failed} rollouts failed and were left out of the estimates" + (
        f" (pairs lost per step: {by_step})" if by_step else ""
    )


@words("refutation_failed")
def _refutation_failed(checks: list[str]) -> str:
    return (
        f"the culprit did not survive its refutation ({', '.join(checks)}): "
        "treat the verdict with suspicion (see `refutations`)"
    )


@words("shapley_subset")
def _shapley_subset(players: int) -> str:
    return f"Shapley values over the {players} steps with the largest effects"


# -- the policy check -------------------------------------------------------------------------


def policy_reason(differences: list[str]) -> str:
    """Why a rare reproduction is an alarm at a decision: what differs in its request, or
    (with no difference) greedy decoding."""
    if differences:
        return "its request differs from the recorded one: " + "; ".join(differences)
    return "it was recorded at temperature 0, where a faithful policy always reproduces"


@words("policy_unfaithful")
def _policy_unfaithful(
    step: int, reproduced: int, n: int, confidence: float, high: float, differences: list[str]
) -> str:
    return (
        f"policy check: the policy reproduced the recorded action of step "
        f"{step} in {reproduced}/{n} re-decisions "
        f"({confidence:.0%} upper bound {high:.0%}) and {policy_reason(differences)}; "
        "a counterfactual there may describe another agent: declare what differs "
        "(otelcar.toml [agent], docs/replay.md; otelcar replay --check-policy N checks every "
        "step)"
    )


@words("policy_rare")
def _policy_rare(step: int, reproduced: int, n: int) -> str:
    return (
        f"policy check: step {step}'s recorded action came back in "
        f"{reproduced}/{n} re-decisions on the recorded request: "
        "consistent with an intermittent decision of the agent that ran (were it its "
        "usual choice, the policy would not be that agent)"
    )


@words("policy_check_not_run")
def _policy_check_not_run(error: str) -> str:
    return f"policy check not run: {error}"


# -- preference pairs -------------------------------------------------------------------------


@words("pairs_not_captured")
def _pairs_not_captured(step: int, part: str) -> str:
    return f"step {step}: its {part} was not captured"


@words("pairs_no_culprit")
def _pairs_no_culprit(verdict: str | None) -> str:
    return f"attribution verdict {verdict!r}: no culprit, no pair"


@words("pairs_credit")
def _pairs_credit() -> str:
    return (
        "a credit attribution (a passing run): its step secured the success, so its "
        "recorded action is not one to reject; no pair"
    )


@words("pairs_refuted")
def _pairs_refuted(checks: list[str]) -> str:
    return f"the culprit failed its refutation ({', '.join(checks)}): no pair"


@words("pairs_fix_no_action")
def _pairs_fix_no_action(fix: str, older: bool) -> str:
    why = (
        "its result has no alternative_action (written by an earlier otelcar: run "
        "`otelcar fix` again)"
        if older
        else "none of its good re-decisions took an action"
    )
    return f"fix '{fix}' passed but gives no good action to learn from: {why}"


@words("pairs_fix_recorded")
def _pairs_fix_recorded(fix: str) -> str:
    return f"fix '{fix}': its good action is the recorded one; no pair"


@words("pairs_fix_same")
def _pairs_fix_same(fix: str, same_as: str) -> str:
    return f"fix '{fix}' passed with the good action of fix '{same_as}': one pair for both"


@words("pairs_no_fix_passed")
def _pairs_no_fix_passed(step: int) -> str:
    return f"no fix of step {step} passed: nothing to learn from"


@words("pairs_rollouts_lost")
def _pairs_rollouts_lost(
    arm: str, step: int, lost: int, of: int, budget: int, failed: int, unjudged: int
) -> str:
    counts = {
        "stopped when the budget ran out": budget,
        "failed": failed,
        "were not judged": unjudged,
    }
    why = ", ".join(f"{n} {what}" for what, n in counts.items() if n)
    return f"of the fresh rollouts {arm} step {step}, {lost} of {of} were left out ({why})"


@words("pairs_no_other_action")
def _pairs_no_other_action(step: int, rollouts: int) -> str:
    return f"no other action at step {step} in {rollouts} fresh rollouts: no pair"


@words("pairs_policy_unfaithful")
def _pairs_policy_unfaithful(step: int) -> str:
    return (
        f"the resample policy rarely reproduces the recorded action at step "
        f"{step} (the attribution's policy check): the chosen actions are what "
        "it does there, which the recorded agent may not"
    )


@words("pairs_none_better")
def _pairs_none_better(
    step: int, failed: int, n: int, alpha: float, tested: list[dict[str, Any]]
) -> str:
    shown = "; ".join(f"{a['action']}: {a['failed']}/{a['n']} failed" for a in tested)
    return (
        f"no other action at step {step} failed significantly less often than "
        f"the recorded one ({failed}/{n} failed) on fresh rollouts "
        f"(Holm-adjusted Fisher, alpha {alpha}), or it never passed: {shown}"
    )


# -- aggregate --------------------------------------------------------------------------------


@words("aggregate_no_culprit")
def _aggregate_no_culprit(without: int, traces: int) -> str:
    return (
        f"{without} of {traces} attributed traces had no culprit "
        "(locked-in or undecided): they count in the shares' denominator only"
    )


@words("aggregate_agents")
def _aggregate_agents(agents: list[str]) -> str:
    return f"the traces involve {len(agents)} agents: {', '.join(agents)}"


# -- the replay check -------------------------------------------------------------------------


@words("no_llm_step")
def _no_llm_step() -> str:
    return "the trace has no LLM step to replay"


@words("process_judged_live")
def _process_judged_live() -> str:
    return (
        "the outcome judges the agent's process: the held replay judged is the live "
        "check's run of the agent"
    )


# -- why --------------------------------------------------------------------------------------


@words("intermittent")
def _intermittent(rate: float, screen: int, confirm: list[int]) -> str:
    return (
        f"intermittent decision (base rate {rate:.2f}): screens of "
        f"{screen}, confirmations on {confirm[0]}–{confirm[1]} samples"
    )


@words("json_reserialized")
def _json_reserialized(label: str) -> str:
    return (
        f"{label}: removing a JSON item re-serializes the document "
        "(json.dumps), so its formatting changes too"
    )


@words("why_stopped")
def _why_stopped(error: str) -> str:
    return f"stopped: {error}"


@words("recheck_skipped")
def _recheck_skipped(error: str) -> str:
    return f"recheck skipped: {error}"


@words("recheck_failed")
def _recheck_failed(label: str, text: str, fill: str) -> str:
    return (
        f"{label} ({text!r}) was confirmed but its recheck with "
        f"fill {fill!r} did not hold (the replacement text, or "
        "chance, made the first result): not reported as a cause"
    )


@words("redecisions_lost")
def _redecisions_lost(failed: int) -> str:
    return (
        f"{failed} re-decisions failed and were left out of the counts (per test: "
        "lost); no answer would change whatever they held"
    )


@words("coarse_same_tool")
def _coarse_same_tool(tool: str, others: int, shown: list[str], want: str) -> str:
    return (
        f"with --same tool every call of {tool} counts as the recorded decision, and "
        f"re-decisions called it with {others} other argument set(s) (e.g. {'; '.join(shown)}) "
        f"than the recorded {want}: --same outcome or tool+args tells them apart"
    )


# -- fix --------------------------------------------------------------------------------------


def _confirmed(prerequisites: bool) -> str:
    return "why confirmed no cause" + (" (only prerequisites)" if prerequisites else "")


@words("no_source")
def _no_source(prerequisites: bool, tests: int) -> str:
    if not tests:
        return f"no source candidate: {_confirmed(prerequisites)} and tested no piece"
    return (
        f"no source candidate: {_confirmed(prerequisites)} and none of its {tests} tests "
        "removed a piece that lowered the bad-decision rate without making the agent "
        "re-fetch, ask or stop"
    )


@words("source_from_strongest")
def _source_from_strongest(
    prerequisites: bool,
    label: str,
    test: int,
    base_bad: int,
    base_n: int,
    bad: int,
    n: int,
    verdict: str,
) -> str:
    return (
        f"{_confirmed(prerequisites)}: the source candidate removes the piece whose removal "
        f"lowered the bad-decision rate most in its tests, {label} (test {test}: {base_bad}/"
        f"{base_n} → {bad}/{n}, {verdict}); it passes only if its own test on fresh draws does"
    )


@words("forced_needs_forward")
def _forced_needs_forward() -> str:
    return "the forced action is validated by --forward rollouts only"


@words("validation_lost")
def _validation_lost(failed: int) -> str:
    return (
        f"{failed} validation re-decisions failed and were left out of the counts "
        "(per candidate: lost); no verdict would change whatever they held"
    )


@words("unfixed_failed")
def _unfixed_failed(failed: int, first: str) -> str:
    return f"{failed} unfixed rollouts failed: {first}"


@words("forward_too_few")
def _forward_too_few(rollouts: int, max_rate: float, needed: int) -> str:
    return (
        f"--rollouts {rollouts} cannot show a forward failure rate below {max_rate:g} "
        f"(even 0 failures need {needed} rollouts): no forward check can PASS, at best PART"
    )


# -- live replay ------------------------------------------------------------------------------


def step_list(steps: Iterable[int]) -> str:
    """``step 3``; ``steps 1–4, 7``: runs of consecutive steps as ranges."""
    ordered = sorted(set(steps))
    runs: list[list[int]] = []
    for step in ordered:
        if runs and step == runs[-1][-1] + 1:
            runs[-1].append(step)
        else:
            runs.append([step])
    text = ", ".join(
        str(r[0]) if len(r) == 1 else f"{r[0]}, {r[1]}" if len(r) == 2 else f"{r[0]}–{r[-1]}"
        for r in runs
    )
    return ("step " if len(ordered) == 1 else "steps ") + text


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


_PART_NAMES = {"tools": "tools", "tool_choice": "tool choice", "params": "parameters"}


@words("live_read")
def _live_read(
    groups: list[dict[str, Any]],
    command: str,
    captured_at: str | None,
    saved_to: str | None,
    loaded_from: str | None,
) -> str:
    clauses = [
        f"{_and([_PART_NAMES[p] for p in g['parts']])} of {step_list(g['steps'])}" for g in groups
    ]
    when = f", captured {captured_at}" if captured_at else ""
    text = f"{'; '.join(clauses)} read from the live agent (`{command}`{when})"
    if saved_to is not None:
        text += f"; kept in {saved_to} for later runs without --agent"
    if loaded_from is not None:
        text += (
            f", kept in {loaded_from} (delete the file to forget them; --agent CMD "
            "captures them anew)"
        )
    return text


@words("live_kept")
def _live_kept(path: str) -> str:
    return f"the live agent's requests are kept in {path} for later runs without --agent"


@words("live_not_kept")
def _live_not_kept(error: str) -> str:
    return f"warning: the live agent's requests could not be kept: {error}"


@words("live_kept_stale")
def _live_kept_stale(steps: list[int], captured_at: str, command: str, trace_id: str) -> str:
    return (
        f"warning: the live requests kept for {step_list(steps)} (captured "
        f"{captured_at} with `{command}`) no longer fit trace {trace_id}: "
        "its recorded decisions there differ (re-imported with other content?), so they "
        "are ignored; run with --agent CMD again to capture them anew"
    )


@words("live_kept_ignored")
def _live_kept_ignored(path: str, why: str) -> str:
    return (
        f"warning: the kept live requests in {path} are ignored: {why}; delete the file, or "
        "run with --agent CMD again to capture them anew"
    )


@words("live_reproduced")
def _live_reproduced(
    trace_id: str,
    command: str,
    requests: int,
    judged_on: str | None,
    returncode: int | None,
    replayed_failed: bool | None,
) -> str:
    return (
        f"live replay of {trace_id} with `{command}`: the agent made every "
        f"recorded request again ({requests}), answered from the trace"
        f"{_judged_on(judged_on, returncode, replayed_failed)}"
    )


def _judged_on(judged_on: str | None, returncode: int | None, replayed_failed: bool | None) -> str:
    """What the rollouts' outcome is judged on, in words (empty without an outcome)."""
    if judged_on == "trace":
        return "; each rollout is judged on the agent's own trace (its spans reached otelcar)"
    if judged_on == "requests":
        return (
            "; the agent sent no spans, so each rollout is judged on the model requests "
            "otelcar answered (a tool call of the last answer counts as made): point its "
            "OTLP exporter at OTEL_EXPORTER_OTLP_ENDPOINT to judge its own trace"
        )
    if judged_on == "process":
        return (
            "; each rollout is judged on the agent's process (its exit status, its output); "
            "the trace records no process, so the recorded run's outcome is this held "
            f"run's (exit status {returncode}: failed={replayed_failed})"
        )
    return ""
