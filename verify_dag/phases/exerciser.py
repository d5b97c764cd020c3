"""Phase 7c: the exerciser. Starts the app the engineer skill declares, drives it, checks the
custom gates, then tries to reproduce each reported issue without a model.

Everything runs in a throwaway worktree of the verified commit with a scrubbed environment and
time limits. Statuses are PASSED / FAILED / BLOCKED only (seed 8c); an exercise that did not
happen is BLOCKED with its reason, never PASSED.

Three parts live here (exercise, the background app, issue reproduction) because the phase's
files were fixed when it was planned; issue reproduction is the natural module to split off.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Literal

from verify_dag import git, tools, util
from verify_dag.models import (
    EngineerContext,
    Finding,
    GateResult,
    Location,
    RunState,
    SkillOutcome,
    Toolchain,
    Verification,
    VerifyRequest,
)
from verify_dag.phases import gates, testenv
from verify_dag.tools.base import RawFinding

SKILL = "exerciser"
REASON = "exercises the change end to end"
DEFAULT_START_TIMEOUT = 30.0
MAX_START_TIMEOUT = 300.0
MAX_ATTEMPTS = 30  # reported issues tried per run; the rest are named in the notes
VERIFY_BUDGET = 900.0  # seconds for all reproduction attempts together
APP_LOG_CAP = 64_000  # bytes of the app's output kept (the tail: where a crash is reported)
_TITLE_MAX = 160

ExStatus = Literal["PASSED", "FAILED", "BLOCKED"]
VStatus = Literal["CONFIRMED", "NOT_REPRODUCED", "NOT_APPLICABLE", "BLOCKED"]


def run(state: RunState) -> SkillOutcome:
    """Never raises: an exerciser that broke is BLOCKED with what happened."""
    try:
        return _run(state)
    # Any failure, whatever its type, must leave a result for the report (chord semantics).
    except Exception as exc:  # noqa: BLE001
        why = f"{type(exc).__name__}: {util.redact(str(exc))}"
        return _blocked(f"EXERCISER_ERROR: {why}; {lens(state.request)}")


def _blocked(notes: str) -> SkillOutcome:
    return SkillOutcome(skill=SKILL, status="BLOCKED", reason=REASON, notes=notes)


def lens(request: VerifyRequest) -> str:
    if request.depth == "deep":
        return "visual lens inactive"
    if request.skip_visual:
        return "visual lens suppressed"
    return "visual lens active: nothing rendered (exercised through CLI/API)"


@dataclass
class _Exercise:
    status: ExStatus
    note: str
    gates: list[GateResult] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    details: list[str] = field(default_factory=list)


def _run(state: RunState) -> SkillOutcome:
    scope = state.scope
    if scope is None or not scope.new_commit:
        return _blocked(f"NO_COMMIT: no verified commit to exercise; {lens(state.request)}")
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
        ex = _exercise(eng, wt, env)
    notes = "; ".join([ex.note, *ex.details, vnote, lens(state.request)])
    return SkillOutcome(skill=SKILL, status=ex.status, reason=REASON, notes=notes,
                        findings=tuple(ex.findings), gates=tuple(ex.gates),
                        verifications=tuple(verified))


def _exercise(eng: EngineerContext, wt: Path, env: dict[str, str]) -> _Exercise:
    parsed = gates.parse(eng.verification_md or "")
    declared = bool(eng.start or eng.exercise or parsed.exerciser)
    app: _App | None = None
    try:
        if eng.start:
            limit = min(eng.start_timeout or DEFAULT_START_TIMEOUT, MAX_START_TIMEOUT)
            app, up, evidence = _start_healthy(eng.start, eng.health, wt, env, limit)
            if not up:
                return _unavailable(parsed, evidence)
            started = [f"app started with `{eng.start}` ({evidence})"]
        else:
            started = []
        ex = _Exercise("PASSED", "", details=started)
        for command in eng.exercise:
            res = gates.run_command(command, wt, env)
            if res.returncode != 0 or res.timed_out:
                got = "timed out" if res.timed_out else f"exited {res.returncode}"
                seen = (gates.excerpt(res.stderr, tail=True) or gates.excerpt(res.stdout, tail=True)
                        or "no output")
                ex.findings.append(_finding(f"Exercise command failed: {command}",
                                            f"`{command}` {got}: {seen}"))
        exercise_failed = len(ex.findings)
        if eng.exercise:
            ex.details.append(f"{len(eng.exercise) - exercise_failed}/{len(eng.exercise)} "
                              "exercise command(s) succeeded")
        # Gates are checked while the app is still up: they may well query it.
        ex.gates = [gates.check(g, wt, env) for g in (*parsed.exerciser, *parsed.review)]
    finally:
        if app is not None:
            _stop(app)
    ex.findings += [_finding(f"{g.kind.capitalize()} gate failed: {g.rule}", g.evidence)
                    for g in ex.gates if g.status == "FAIL"]
    ex.details.extend(_gate_counts(ex.gates))
    own = [g.status for g in ex.gates if g.kind == "exerciser"]
    if exercise_failed or "FAIL" in own:
        ex.status, ex.note = "FAILED", (f"FAILED: {exercise_failed} exercise command(s) and "
                                        f"{own.count('FAIL')} exerciser gate(s) failed")
    elif not declared:
        where = (f"engineer skill at {eng.skill_dir} declares none" if eng.skill_dir
                 else "no engineer skill found")
        ex.status, ex.note = "BLOCKED", ("NO_EXERCISE_STRATEGY: no START, EXERCISE or exerciser "
                                         f"gate declared ({where})")
    elif "BLOCKED" in own:
        ex.status, ex.note = "BLOCKED", (f"GATE_BLOCKED: {own.count('BLOCKED')} exerciser "
                                         "gate(s) could not be checked")
    else:
        ex.note = "PASSED: the declared exercise succeeded"
    return ex


def _unavailable(parsed: gates.ParsedGates, evidence: str) -> _Exercise:
    why = "not checked: the app did not become healthy (SERVICE_UNAVAILABLE)"
    results = [
        gates.check(g, Path("."), {}) if g.kind == "review" and g.check is None
        else GateResult(kind=g.kind, rule=g.rule, status="BLOCKED", evidence=why,
                        checker="exerciser")
        for g in (*parsed.exerciser, *parsed.review)
    ]
    return _Exercise("BLOCKED", f"SERVICE_UNAVAILABLE: {evidence}", gates=results,
                     details=_gate_counts(results))


def _gate_counts(results: list[GateResult]) -> list[str]:
    out = []
    for kind in ("exerciser", "review"):
        mine = [g.status for g in results if g.kind == kind]
        if mine:
            counts = ", ".join(f"{mine.count(s)} {s}" for s in dict.fromkeys(mine))
            out.append(f"{kind} gates: {counts}")
    return out


def _finding(title: str, evidence: str) -> Finding:
    if len(title) > _TITLE_MAX:
        title = title[: _TITLE_MAX - 3] + "..."
    return Finding(title=title, severity=8, description=util.redact(evidence), source=SKILL,
                   issue_class="correctness")


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
    proc = subprocess.Popen(["bash", "-c", command], cwd=cwd, env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True)
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


def _start_healthy(start: str, health: str | None, wt: Path, env: dict[str, str],
                   limit: float) -> tuple[_App | None, bool, str]:
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
            return app, False, (f"`{start}` exited {code} before it was healthy; app output: "
                                f"{app.tail() or 'none'}")
        waited = time.monotonic() - began
        if health is None:
            if waited >= 1.0:  # no HEALTH: the app must at least stay up for a moment
                return app, True, "no HEALTH declared; still running after 1s"
            time.sleep(0.1)
            continue
        if waited >= limit:
            return app, False, (f"HEALTH `{health}` not ok within {limit:g}s (last: {last}); "
                                f"app output: {app.tail() or 'none'}")
        res = gates.run_command(health, wt, env, timeout=max(1.0, min(10.0, limit - waited)))
        if res.returncode == 0 and not res.timed_out:
            return app, True, f"healthy after {time.monotonic() - began:.1f}s"
        said = gates.excerpt(res.stderr or res.stdout, 160, tail=True)
        last = "timed out" if res.timed_out else (
            f"exit {res.returncode}" + (f": {said}" if said else ""))
        time.sleep(0.25)


# --- issue verification ------------------------------------------------------------------------


def verify_issues(state: RunState, wt: Path, env: dict[str, str],
                  python: str = sys.executable) -> tuple[list[Verification], str]:
    """Try each reported issue once, deterministically; returns the entries and a summary."""
    seen: dict[tuple[str | None, int | None, str], Finding] = {}
    earlier = [*(state.static.findings if state.static else ()),
               *(f for o in state.outcomes if o.skill != SKILL for f in o.findings)]
    for f in earlier:
        loc = f.location
        seen.setdefault((loc.path if loc else None, loc.line if loc else None, f.title), f)
    request, deadline = state.request, time.monotonic() + VERIFY_BUDGET
    repro = _Reproducer(wt, env, min(request.tool_timeout, 120.0),
                        min(request.test_timeout, 300.0), python)
    out: list[Verification] = []
    for f in list(seen.values())[:MAX_ATTEMPTS]:
        if time.monotonic() > deadline:
            break
        status, evidence = repro.attempt(f)
        loc = f.location
        out.append(Verification(path=loc.path if loc else None, line=loc.line if loc else None,
                                title=f.title, status=status,
                                evidence=gates.cap(util.redact(evidence))))
    counts = ", ".join(f"{[v.status for v in out].count(s)} {s}"
                       for s in dict.fromkeys(v.status for v in out))
    note = f"verified {len(out)} of {len(seen)} reported issue(s)" + (f" ({counts})" if out else "")
    if len(out) < len(seen):
        note += f"; {len(seen) - len(out)} not attempted (cap {MAX_ATTEMPTS} or time budget)"
    return out, note


@dataclass
class _Reproducer:
    wt: Path
    env: dict[str, str]
    tool_timeout: float
    test_timeout: float
    python: str  # the tests' interpreter: the provisioned env's, as the tester used
    # One tool run per (tool, file), one pytest run per node id, however many issues share them.
    _lint: dict[tuple[str, str], tuple[list[RawFinding] | None, str]] = field(default_factory=dict)
    _tests: dict[str, tuple[VStatus, str]] = field(default_factory=dict)

    def attempt(self, f: Finding) -> tuple[VStatus, str]:
        loc = f.location
        gone = self._gone(loc) if loc is not None else None
        if gone is not None:
            return "NOT_APPLICABLE", gone
        if (f.source == "static-analysis" and f.tool in tools.REGISTRY and f.rule
                and loc is not None and loc.line is not None):
            return self._static(f.tool, f.rule, loc.path, loc.line)
        nodeid = f.nodeid or (f.title.removeprefix("Test failed: ")
                              if f.title.startswith("Test failed: ") else None)
        if f.source == "tester" and nodeid and not nodeid.startswith("-"):
            if nodeid not in self._tests:
                self._tests[nodeid] = self._test(nodeid)
            return self._tests[nodeid]
        return "BLOCKED", f"needs judgement; no deterministic reproduction ({f.source} finding)"

    def _gone(self, loc: Location) -> str | None:
        rel = PurePosixPath(loc.path)
        path = self.wt / loc.path
        if rel.is_absolute() or ".." in rel.parts or not path.resolve().is_relative_to(
                self.wt.resolve()):
            return f"{loc.path} is not a path inside the repository"
        if not path.is_file():
            return f"{loc.path} does not exist in the verified commit"
        if loc.line is not None:
            data = path.read_bytes()
            lines = data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)
            if loc.line > lines:
                return f"line {loc.line} is beyond the end of {loc.path} ({lines} lines)"
        return None

    def _static(self, tool: str, rule: str, path: str, line: int) -> tuple[VStatus, str]:
        if (tool, path) not in self._lint:
            self._lint[tool, path] = self._run_tool(tool, path)
        raw, why = self._lint[tool, path]
        if raw is None:
            return "BLOCKED", f"could not re-run {tool} on {path}: {why}"
        mine = [r for r in raw if r.path == path and r.code == rule]
        hit = next((r for r in mine if r.line == line), None)
        if hit is not None:
            return "CONFIRMED", f"re-ran {tool} on {path}: {rule} at line {line}: {hit.message}"
        lines = ", ".join(str(r.line) for r in mine[:5])
        elsewhere = f"; {rule} at line(s) {lines}" if mine else ""
        return "NOT_REPRODUCED", (f"re-ran {tool} on {path}: no {rule} at line {line} "
                                  f"({len(raw)} finding(s) in the file{elsewhere})")

    def _run_tool(self, tool: str, path: str) -> tuple[list[RawFinding] | None, str]:
        spec = tools.REGISTRY[tool]
        argv = spec.argv([path])
        if argv is None:
            return None, f"{tool} is not installed (not importable, not on PATH)"
        res = util.run(argv, cwd=self.wt, timeout=self.tool_timeout, env=self.env)
        if res.not_found or res.timed_out:
            return None, "timed out" if res.timed_out else f"{argv[0]} was not found"
        raw = spec.parse(res.stdout, res.stderr, self.wt)
        if res.returncode not in spec.ok_exit_codes and not any(
                r.code in spec.blocking_rules for r in raw):
            return None, f"exited {res.returncode}: {gates.excerpt(res.stderr or res.stdout)}"
        return raw, ""

    def _test(self, nodeid: str) -> tuple[VStatus, str]:
        argv = [self.python, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                f"--rootdir={self.wt.resolve()}", nodeid]
        res = util.run(argv, cwd=self.wt, timeout=self.test_timeout, env=self.env)
        shown = f"`python -m pytest -q -p no:cacheprovider {nodeid}`"
        lines = [ln for ln in res.stdout.splitlines() if ln.strip()]
        summary = lines[-1].strip() if lines else gates.excerpt(res.stderr, 160)
        error = next((ln.strip() for ln in lines if ln.startswith("E ")), "")
        if res.timed_out:
            return "BLOCKED", f"{shown} timed out after {self.test_timeout:g}s"
        if res.returncode == 0:
            return "NOT_REPRODUCED", f"{shown} passes on re-run: {summary}"
        if res.returncode == 1:
            return "CONFIRMED", f"{shown} fails on re-run: {summary}" + (
                f"; {error}" if error else "")
        if res.returncode in (4, 5) and "not found" in (res.stdout + res.stderr):
            return "NOT_APPLICABLE", f"{shown}: the test no longer exists ({summary})"
        return "BLOCKED", f"{shown} exited {res.returncode}: {summary}"
