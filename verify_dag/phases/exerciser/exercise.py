"""The exercise itself: START and HEALTH, the EXERCISE commands, the gates, the completion
criterion, in one worktree; what it found is an :class:`Exercise`.

The exerciser runs it on the verified commit (phases/exerciser/__init__.py), through
:mod:`~verify_dag.phases.exerciser.sandboxed` when this host has a sandbox; the debugger runs the
same code at the merge base, so what it compares there is what was checked here. Statuses are
PASSED / FAILED / BLOCKED only: an exercise that did not happen is BLOCKED with its reason, never
PASSED (docs/report.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from verify_dag import processes
from verify_dag.models import EngineerContext, Finding, GateResult
from verify_dag.phases import gates
from verify_dag.phases.exerciser import app as under_test
from verify_dag.phases.exerciser import criterion as completion

SKILL = "exerciser"
DEFAULT_START_TIMEOUT = 30.0
MAX_START_TIMEOUT = 300.0
COMPLETION_CHECKER = "completion"  # the checker of the --completion criterion's gate
_TITLE_MAX = 160

ExStatus = Literal["PASSED", "FAILED", "BLOCKED"]


@dataclass
class Exercise:
    """What one exercise found; the debugger compares the merge base's with it."""

    status: ExStatus
    note: str
    gates: list[GateResult] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    details: list[str] = field(default_factory=list)


def declares(eng: EngineerContext, criterion: str | None = None) -> bool:
    """Whether the run has an exercise of its own to run (an app, EXERCISE commands, an
    exerciser gate, the completion criterion); without one, the exercise is derived from the
    project's declarations (:mod:`~verify_dag.phases.exerciser.derived`)."""
    parsed = gates.parse(eng.verification_md or "")
    return bool(eng.start or eng.exercise or parsed.exerciser or criterion)


def exercise(
    eng: EngineerContext, wt: Path, env: dict[str, str], criterion: str | None = None
) -> Exercise:
    """START and HEALTH, the EXERCISE commands, then every gate, in ``wt``."""
    parsed = gates.parse(eng.verification_md or "")
    declared = declares(eng, criterion)
    app: processes.Background | None = None
    try:
        if eng.start:
            limit = min(eng.start_timeout or DEFAULT_START_TIMEOUT, MAX_START_TIMEOUT)
            app, up, evidence = under_test.start_healthy(eng.start, eng.health, wt, env, limit)
            if not up:
                return _unavailable(parsed, evidence, criterion)
            started = [f"app started with `{eng.start}` ({evidence})"]
        else:
            started = []
        ex = Exercise("PASSED", "", details=started)
        for command in eng.exercise:
            res = gates.run_command(command, wt, env)
            if res.returncode != 0 or res.timed_out:
                got = "timed out" if res.timed_out else f"exited {res.returncode}"
                seen = (
                    gates.excerpt(res.stderr, tail=True)
                    or gates.excerpt(res.stdout, tail=True)
                    or "no output"
                )
                ex.findings.append(
                    failure_finding(
                        f"Exercise command failed: {command}", f"`{command}` {got}: {seen}"
                    )
                )
        exercise_failed = len(ex.findings)
        if eng.exercise:
            ex.details.append(
                f"{len(eng.exercise) - exercise_failed}/{len(eng.exercise)} "
                "exercise command(s) succeeded"
            )
        # Gates are checked while the app is still up: they may well query it.
        ex.gates = [gates.check(g, wt, env) for g in (*parsed.exerciser, *parsed.review)]
        checked = None if criterion is None else _completion(criterion, wt, env)
    finally:
        if app is not None:
            app.stop()
    ex.findings += [
        failure_finding(title, g.evidence, severity)
        for g in ex.gates
        if g.status == "FAIL"
        for title, severity in [gates.failure(g)]
    ]
    own = [g.status for g in ex.gates if g.kind == "exerciser"]
    if exercise_failed or "FAIL" in own:
        ex.status, ex.note = (
            "FAILED",
            (
                f"FAILED: {exercise_failed} exercise command(s) and "
                f"{own.count('FAIL')} exerciser gate(s) failed"
            ),
        )
    elif not declared:
        where = (
            f"engineer skill at {eng.skill_dir} declares none"
            if eng.skill_dir
            else "no engineer skill found"
        )
        ex.status, ex.note = (
            "BLOCKED",
            (f"NO_EXERCISE_STRATEGY: no START, EXERCISE or exerciser gate declared ({where})"),
        )
    elif "BLOCKED" in own:
        ex.status, ex.note = (
            "BLOCKED",
            (f"GATE_BLOCKED: {own.count('BLOCKED')} exerciser gate(s) could not be checked"),
        )
    else:
        ex.note = "PASSED: the declared exercise succeeded"
    if checked is not None:
        _add_completion(ex, *checked)
    return ex


def _completion(
    criterion: str, wt: Path, env: dict[str, str]
) -> tuple[GateResult, str, Finding | None]:
    """verify --completion: the criterion with its validation, limits (30 s, 100 KB per stream)
    and verdict rule (docs/completion.md), in the worktree. Shown as an exerciser gate checked by
    "completion", with its verdict line and, when it failed, a finding."""
    _, run, result = completion.criterion(criterion, cwd=wt, env=env)
    passed = result.verdict == "pass"
    # A failure is explained at the end of its output (a test summary, a traceback).
    seen = gates.excerpt(run.stdout, tail=not passed) or gates.excerpt(run.stderr, tail=True)
    evidence = gates.cap(
        processes.redact(
            f"`{criterion}`: {result.verdict}: {result.reason}"
            + (f"; output: {seen}" if seen else "; no output")
            + (" (output truncated)" if run.truncated else "")
        )
    )
    gate = GateResult(
        kind="exerciser",
        rule=f"Completion criterion: {criterion}",
        status="PASS" if passed else "FAIL",
        evidence=evidence,
        checker=COMPLETION_CHECKER,
    )
    finding = (
        None if passed else failure_finding(f"Completion criterion failed: {criterion}", evidence)
    )
    return gate, f"completion criterion: {result.verdict} ({result.reason})", finding


def completion_blocked(criterion: str, why: str) -> GateResult:
    return GateResult(
        kind="exerciser",
        rule=f"Completion criterion: {criterion}",
        status="BLOCKED",
        evidence=why,
        checker=COMPLETION_CHECKER,
    )


def _add_completion(ex: Exercise, gate: GateResult, line: str, finding: Finding | None) -> None:
    """The criterion's gate goes first; a failed criterion is a finding and fails the
    exerciser, whatever the other checks said."""
    ex.gates.insert(0, gate)
    ex.details.append(line)
    if finding is not None:
        ex.findings.append(finding)
        ex.note = (
            f"{ex.note}; the completion criterion failed"
            if ex.status == "FAILED"
            else "FAILED: the completion criterion failed"
        )
        ex.status = "FAILED"


def _unavailable(
    parsed: gates.ParsedGates, evidence: str, criterion: str | None = None
) -> Exercise:
    why = "not checked: the app did not become healthy (SERVICE_UNAVAILABLE)"
    results = [
        gates.check(g, Path("."), {})
        if g.kind == "review" and g.check is None
        else GateResult(
            kind=g.kind, rule=g.rule, status="BLOCKED", evidence=why, checker="exerciser"
        )
        for g in (*parsed.exerciser, *parsed.review)
    ]
    if criterion is not None:
        results.insert(0, completion_blocked(criterion, why))
    return Exercise("BLOCKED", f"SERVICE_UNAVAILABLE: {evidence}", gates=results)


def failure_finding(title: str, evidence: str, severity: int = 8) -> Finding:
    """An exerciser failure; the debugger matches its base checks by these titles."""
    if len(title) > _TITLE_MAX:
        title = title[: _TITLE_MAX - 3] + "..."
    return Finding(
        title=title,
        severity=severity,
        description=processes.redact(evidence),
        source=SKILL,
        issue_class="correctness",
    )
