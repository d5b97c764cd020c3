"""Phase 7c: the exerciser. Starts the app the engineer skill declares, drives it, checks the
custom gates, then tries to reproduce each reported issue without a model.

Everything runs in a throwaway worktree of the verified commit with a scrubbed environment and
time limits. Statuses are PASSED / FAILED / BLOCKED only (seed 8c); an exercise that did not
happen is BLOCKED with its reason, never PASSED.

Two parts live here (exercise, the background app); issue reproduction is in
:mod:`~verify_dag.phases.exerciser.reproduce`.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from verify_dag import git, util
from verify_dag.completion import steps as completion
from verify_dag.models import (
    EngineerContext,
    Finding,
    GateResult,
    RunState,
    SkillOutcome,
    Toolchain,
    VerifyRequest,
)
from verify_dag.phases import gates

# Re-exported: both are the exerciser's, and callers and tests name them from here.
from verify_dag.phases.exerciser.reproduce import SKILL as SKILL
from verify_dag.phases.exerciser.reproduce import verify_issues as verify_issues
from verify_dag.phases.tester import env as testenv

REASON = "exercises the change end to end"
DEFAULT_START_TIMEOUT = 30.0
MAX_START_TIMEOUT = 300.0
COMPLETION_CHECKER = "completion"  # the checker of the --completion criterion's gate
APP_LOG_CAP = 64_000  # bytes of the app's output kept (the tail: where a crash is reported)
_TITLE_MAX = 160

ExStatus = Literal["PASSED", "FAILED", "BLOCKED"]


def run(state: RunState) -> SkillOutcome:
    """Never raises: an exerciser that broke is BLOCKED with what happened."""
    try:
        return _run(state)
    # Any failure, whatever its type, must leave a result for the report (chord semantics).
    except Exception as exc:  # noqa: BLE001
        why = f"{type(exc).__name__}: {util.redact(str(exc))}"
        return _blocked(f"EXERCISER_ERROR: {why}; {lens(state.request)}", state.request.completion)


def _blocked(notes: str, criterion: str | None = None) -> SkillOutcome:
    # A --completion criterion that never ran is shown as such, not left out.
    shown = (
        ()
        if criterion is None
        else (_completion_blocked(criterion, "not run: the exerciser was blocked"),)
    )
    return SkillOutcome(skill=SKILL, status="BLOCKED", reason=REASON, notes=notes, gates=shown)


def lens(request: VerifyRequest) -> str:
    if request.depth == "deep":
        return "visual lens inactive"
    if request.skip_visual:
        return "visual lens suppressed"
    return "visual lens active: nothing rendered (exercised through CLI/API)"


@dataclass
class Exercise:
    """What one exercise found. Public: the debugger re-runs the exercise at the merge base."""

    status: ExStatus
    note: str
    gates: list[GateResult] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    details: list[str] = field(default_factory=list)


def _run(state: RunState) -> SkillOutcome:
    # The driver that runs this module's exercise() inside one sandbox imports this module.
    from verify_dag.phases.exerciser import sandboxed as exercise_sandbox

    scope = state.scope
    if scope is None or not scope.new_commit:
        return _blocked(
            f"NO_COMMIT: no verified commit to exercise; {lens(state.request)}",
            state.request.completion,
        )
    eng = state.engineer or EngineerContext()
    # Scripts the repository declares may read this; nothing of ours is in it (DESIGN §5).
    env = util.scrubbed_env({"PYTHONDONTWRITEBYTECODE": "1"})
    with git.worktree(state.request.repo, scope.new_commit) as wt:
        # Issues first, on the pristine checkout: whatever the app or an EXERCISE command writes
        # into the worktree must not change whether a finding reproduces.
        # A failing test is re-run where the tester ran it: in the provisioned environment.
        with testenv.runtime(wt, state.toolchain or Toolchain()) as tenv:
            if tenv.error is None and tenv.python is not None:
                test_env = testenv.suite_env(tenv, {"PYTHONDONTWRITEBYTECODE": "1"})
                verified, vnote = verify_issues(state, wt, test_env, str(tenv.python))
            else:
                verified, vnote = verify_issues(state, wt, env)
        ex = exercise_sandbox.exercise(eng, wt, env, state.request.completion)
    notes = "; ".join([ex.note, *ex.details, vnote, lens(state.request)])
    return SkillOutcome(
        skill=SKILL,
        status=ex.status,
        reason=REASON,
        notes=notes,
        findings=tuple(ex.findings),
        gates=tuple(ex.gates),
        verifications=tuple(verified),
    )


def exercise(
    eng: EngineerContext, wt: Path, env: dict[str, str], criterion: str | None = None
) -> Exercise:
    """START and HEALTH, the EXERCISE commands, then every gate, in ``wt``. The debugger runs
    this same code at the merge base, so what it compares there is what was checked here."""
    parsed = gates.parse(eng.verification_md or "")
    declared = bool(eng.start or eng.exercise or parsed.exerciser or criterion)
    app: _App | None = None
    try:
        if eng.start:
            limit = min(eng.start_timeout or DEFAULT_START_TIMEOUT, MAX_START_TIMEOUT)
            app, up, evidence = _start_healthy(eng.start, eng.health, wt, env, limit)
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
            _stop(app)
    ex.findings += [
        failure_finding(f"{g.kind.capitalize()} gate failed: {g.rule}", g.evidence)
        for g in ex.gates
        if g.status == "FAIL"
    ]
    ex.details.extend(_gate_counts(ex.gates))
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
    """verify --completion: seed 001's criterion with its validation, limits (30 s, 100 KB per
    stream) and verdict rule, in the worktree. Shown as an exerciser gate checked by
    "completion", with its verdict line and, when it failed, a finding."""
    _, run, result = completion.criterion(criterion, cwd=wt, env=env)
    passed = result.verdict == "pass"
    # A failure is explained at the end of its output (a test summary, a traceback).
    seen = gates.excerpt(run.stdout, tail=not passed) or gates.excerpt(run.stderr, tail=True)
    evidence = gates.cap(
        util.redact(
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


def _completion_blocked(criterion: str, why: str) -> GateResult:
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
    details = _gate_counts(results)
    if criterion is not None:
        results.insert(0, _completion_blocked(criterion, why))
    return Exercise("BLOCKED", f"SERVICE_UNAVAILABLE: {evidence}", gates=results, details=details)


def _gate_counts(results: list[GateResult]) -> list[str]:
    out = []
    for kind in ("exerciser", "review"):
        mine = [g.status for g in results if g.kind == kind]
        if mine:
            counts = ", ".join(f"{mine.count(s)} {s}" for s in dict.fromkeys(mine))
            out.append(f"{kind} gates: {counts}")
    return out


def failure_finding(title: str, evidence: str) -> Finding:
    """An exerciser failure. Public: the debugger matches its base checks by these titles."""
    if len(title) > _TITLE_MAX:
        title = title[: _TITLE_MAX - 3] + "..."
    return Finding(
        title=title,
        severity=8,
        description=util.redact(evidence),
        source=SKILL,
        issue_class="correctness",
    )


# --- the application under test ---------------------------------------------------------------
# This is the one place the product keeps a child process running past a single call: util.run
# waits for its child, and an app must stay up while it is exercised. Same rules otherwise: its
# own process group (killed whole in a finally), scrubbed environment, capped output.


@dataclass
class _App:
    proc: subprocess.Popen[bytes]
    log: bytearray
    reader: threading.Thread

    def tail(self, limit: int = 400) -> str:
        text = bytes(self.log).decode("utf-8", "replace")[-4000:]
        return gates.excerpt(text, limit, tail=True)


def _drain(proc: subprocess.Popen[bytes], log: bytearray) -> None:
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    # os.read returns what is there: the log is current when the app dies or stays unhealthy.
    with contextlib.suppress(OSError, ValueError):
        while chunk := os.read(fd, 65536):
            log.extend(chunk)
            if len(log) > APP_LOG_CAP:
                del log[: len(log) - APP_LOG_CAP]


def start_background(command: str, cwd: Path, env: dict[str, str]) -> _App:
    proc = subprocess.Popen(
        ["bash", "-c", command],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    log = bytearray()
    reader = threading.Thread(target=_drain, args=(proc, log), daemon=True)
    reader.start()
    return _App(proc, log, reader)


def _stop(app: _App) -> None:
    """TERM the whole group, then KILL it: children that ignored TERM or outlived the leader go
    too (the group id stays valid while any member lives)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(app.proc.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        app.proc.wait(timeout=5)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(app.proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        app.proc.wait(timeout=5)
    app.reader.join(timeout=2)
    if not app.reader.is_alive() and app.proc.stdout is not None:
        app.proc.stdout.close()


def _start_healthy(
    start: str, health: str | None, wt: Path, env: dict[str, str], limit: float
) -> tuple[_App | None, bool, str]:
    """(app, healthy, evidence). The caller stops the app whatever the answer."""
    began = time.monotonic()
    try:
        app = start_background(start, wt, env)
    except OSError as exc:
        return None, False, f"could not start `{start}`: {exc}"
    last = "no HEALTH attempt finished"
    while True:
        code = app.proc.poll()
        if code is not None:
            return (
                app,
                False,
                (
                    f"`{start}` exited {code} before it was healthy; app output: "
                    f"{app.tail() or 'none'}"
                ),
            )
        waited = time.monotonic() - began
        if health is None:
            if waited >= 1.0:  # no HEALTH: the app must at least stay up for a moment
                return app, True, "no HEALTH declared; still running after 1s"
            time.sleep(0.1)
            continue
        if waited >= limit:
            return (
                app,
                False,
                (
                    f"HEALTH `{health}` not ok within {limit:g}s (last: {last}); "
                    f"app output: {app.tail() or 'none'}"
                ),
            )
        res = gates.run_command(health, wt, env, timeout=max(1.0, min(10.0, limit - waited)))
        if res.returncode == 0 and not res.timed_out:
            return app, True, f"healthy after {time.monotonic() - began:.1f}s"
        said = gates.excerpt(res.stderr or res.stdout, 160, tail=True)
        last = (
            "timed out"
            if res.timed_out
            else (f"exit {res.returncode}" + (f": {said}" if said else ""))
        )
        time.sleep(0.25)
