"""Phase 7b: the debugger tells pre-existing failures from new ones by re-running them at the base.

It fires only on observed failures of severity 7+ (tester, exerciser, and ux-reviewer at deep), so
it runs after the exerciser. Each distinct failure signature is re-run once in a scratch worktree
of the merge base (``old_commit`` for staged/unstaged snapshots), through util.run with a time
limit and a scrubbed environment, and gets a Diagnosis: PRE_EXISTING yes | no | undetermined,
COMMAND, EVIDENCE and TOUCHED_BY_DIFF.

Tests. A failing test is re-run alone (under its old path when the diff renamed its file). One
that does not exist at the base is "no": it cannot have failed there. A test that fails at the
base is "yes" only when it fails the same way: the exception class named on pytest's crash line
(``path:line: ExcType``) is the same on both sides (line numbers are not compared: they move
between commits). When the branch's failure records no class (a repository that sets
``--tb=short``), the first line of the failure message is compared instead.

Exerciser failures (a gate, an EXERCISE command, the completion criterion). The exerciser's own
exercise runs once at the base with the verified commit's declarations: START and HEALTH, the
EXERCISE commands, then every gate, as the exerciser did, because a gate may query the app or
read what an EXERCISE command wrote. A check that passes there is "no"; one that fails is "yes"
only with the same exit codes and the same output once paths and numbers are set aside.

Either way, a failure with a different or unreadable signature at the base is "undetermined",
never "yes": the change may have turned one failure into another. So is anything that could not
be run there (no base commit, a checkout or environment that fails, a timeout, a usage error).
"""

from __future__ import annotations

import logging
import re
import shlex
import time
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Literal

from verify_dag import git, util
from verify_dag.errors import VerifyDagError
from verify_dag.models import Diagnosis, EngineerContext, Finding, RunState, SkillOutcome
from verify_dag.models.scope import Scope
from verify_dag.models.toolchain import Toolchain
from verify_dag.phases import exerciser, gates, testenv
from verify_dag.tools.base import python_tool_argv

log = logging.getLogger(__name__)
PreExisting = Literal["yes", "no", "undetermined"]

SKILL = "debugger"
MAX_RERUNS = 20  # distinct signatures re-run per verification; the rest are "not re-run: cap"
RERUN_TIMEOUT = 600.0  # one test, not a suite: a single re-run never gets more than this
EVIDENCE_CAP = 1500
_TEST_TITLE = "Test failed: "  # the tester's title for one failing test (nodeid follows)
_COMMAND_TITLE = "Test command failed: "  # the tester's title for a non-pytest runner
_CRASH = re.compile(r"^(?P<path>[^\s:]+\.py):\d+: (?P<exc>[A-Za-z_][\w.]*)[ \t]*$", re.MULTILINE)
_TRACE_PATH = re.compile(r"^(?P<path>[^\s:]+\.py):\d+:", re.MULTILINE)
_EXC_MESSAGE = re.compile(r"^(?P<exc>[A-Za-z_][\w.]*)(?::|$)")  # "ValueError: x" -> ValueError
_E_LINE = re.compile(r"^E\s+(?P<text>\S.*)$", re.MULTILINE)
_COUNT = re.compile(r"(\d+) (passed|failed|errors?|skipped|xfailed|xpassed)")
# pytest's exit 4 when the node id names no file or no test: the test is not at the base.
_NOT_FOUND = re.compile(r"^ERROR: (?:file or directory )?not found: ", re.MULTILINE)
# pytest's exit codes that mean "the test could not be run as asked" at the base.
_UNRUNNABLE = {
    2: "collection errors at the merge base (or the run was interrupted)",
    3: "pytest hit an internal error at the merge base",
    4: "usage error at the merge base (its options, plugins or configuration differ)",
    5: "no tests collected at the merge base (deselected or ignored there)",
}
# Exerciser evidence: the exit codes it names, a timeout, and what the rest is compared without.
_EXIT = re.compile(r"\bexit(?:ed)? -?\d+(?: \(expected -?\d+\))?")
_TIMED_OUT = re.compile(r"`(?:: fail:)? timed out\b")
_DIRS = re.compile(r"[^\s'\"`(\[<>=,;]*/")  # directories: the two worktrees differ
_NUMBERS = re.compile(r"\d+")  # ports, pids, timings, line numbers


def failures(state: RunState) -> list[Finding]:
    # Same triggers as the report's "was the debugger needed" check: ux-reviewer only at deep.
    triggers = {"tester", "exerciser"}
    if state.request.depth == "deep":
        triggers.add("ux-reviewer")
    return [f for o in state.outcomes if o.skill in triggers for f in o.findings if f.severity >= 7]


def pytest_argv() -> list[str] | None:
    """How a single failing test is re-run.

    When the repository declares what its tests need, the provisioned environment's own
    interpreter is used instead (see ``_diagnose``); this is the interpreter otherwise, the same
    one the tester falls back to.
    """
    return python_tool_argv("pytest")


@dataclass
class _Signature:
    key: str  # the nodeid for pytest failures, else the command or title
    nodeid: str | None
    findings: list[Finding] = field(default_factory=list)
    why_not: str = ""  # why it cannot be re-run, when nodeid is None and it is not exercised
    exercised: bool = False  # an exerciser failure: checked by the exercise at the base


def _nodeid(f: Finding) -> str | None:
    if f.nodeid:
        return f.nodeid
    # The tester's findings name the test in the title; older states carry no nodeid field.
    if f.source == "tester" and f.title.startswith(_TEST_TITLE):
        return f.title.removeprefix(_TEST_TITLE).strip() or None
    return None


def signatures(found: list[Finding]) -> list[_Signature]:
    """Distinct failure signatures, in first-seen order."""
    out: dict[str, _Signature] = {}
    for f in found:
        nodeid = _nodeid(f)
        if f.source == exerciser.SKILL:
            sig = out.setdefault(f.title, _Signature(f.title, None, exercised=True))
        elif nodeid is not None:
            sig = out.setdefault(nodeid, _Signature(nodeid, nodeid))
        elif f.title.startswith(_COMMAND_TITLE):
            command = f.title.removeprefix(_COMMAND_TITLE)
            sig = out.setdefault(command, _Signature(command, None, why_not=(
                "the test runner is not pytest: a single failing test cannot be re-run in "
                "isolation")))
        else:
            sig = out.setdefault(f.title, _Signature(f.title, None, why_not=(
                "no single test to re-run in isolation (the failure carries no test id)")))
        sig.findings.append(f)
    return list(out.values())


def run(state: RunState) -> SkillOutcome:
    found = failures(state)
    if not found:
        return SkillOutcome(skill=SKILL, status="SKIPPED", ran=False,
                            notes="N/A: no failures of severity 7+",
                            reason="no failures of severity 7+")
    reason = f"{len(found)} failure(s) of severity 7+ to investigate"
    try:
        diagnoses = _diagnose(state, signatures(found))
    except Exception as exc:  # the report must still be written: never raise into the chain
        log.exception("debugger crashed")
        return SkillOutcome(skill=SKILL, status="NOT_RUN", reason=reason,
                            notes=f"debugger could not run: {type(exc).__name__}: {exc}")
    counts = {k: sum(d.pre_existing == k for d in diagnoses) for k in ("yes", "no", "undetermined")}
    n = len(diagnoses)
    notes = (f"{n} failure{'s' if n != 1 else ''}: {counts['yes']} pre-existing, "
             f"{counts['no']} new" + (f", {counts['undetermined']} undetermined"
                                      if counts["undetermined"] else ""))
    return SkillOutcome(skill=SKILL, status="COMPLETED", notes=notes, reason=reason,
                        diagnoses=tuple(diagnoses))


def _base(scope: Scope | None) -> tuple[str | None, str]:
    if scope is None:
        return None, "no scope was resolved"
    base = scope.merge_base or scope.old_commit
    if base is None:
        return None, f"a whole-file scope ({scope.mode}) has no base commit to compare with"
    return base, ""


def _diagnose(state: RunState, sigs: list[_Signature]) -> list[Diagnosis]:
    included = state.scope.included if state.scope is not None else ()
    scoped = {f.path for f in included if f.status != "deleted"}
    base, no_base = _base(state.scope)
    results = _diagnose_exercised(state, [s for s in sigs if s.exercised], base, no_base, scoped)
    # A test file the diff renamed (or copied) is found at the base under its old path.
    renamed = {f.path: f.old_path for f in included
               if f.status in ("renamed", "copied") and f.old_path}
    argv = pytest_argv()
    todo: list[_Signature] = []
    for sig in (s for s in sigs if not s.exercised):
        why = sig.why_not or _unsafe(sig.key) or no_base
        if not why and argv is None:
            why = "pytest is not installed (not importable, not on PATH)"
        if not why and len(todo) >= MAX_RERUNS:
            why = f"not re-run: cap of {MAX_RERUNS} re-runs reached"
        if why:
            results[sig.key] = _undetermined(sig, why, scoped)
        else:
            todo.append(sig)
    if todo:
        assert base is not None and argv is not None
        # The whole debugger gets one suite's time budget, so it never costs more than a re-run
        # of the suite would.
        deadline = time.monotonic() + state.request.test_timeout
        toolchain = state.toolchain or Toolchain()
        try:
            # The base runs in the environment its own declarations provision, as the suite did
            # at HEAD: otherwise a missing package would pass for a pre-existing failure.
            with git.worktree(state.request.repo, base) as wt, \
                    testenv.runtime(wt, toolchain) as env:
                if env.error is not None:
                    why = f"the merge base's test environment could not be set up: {env.error}"
                    for sig in todo:
                        results[sig.key] = _undetermined(sig, why, scoped)
                    todo = []
                run_argv = [str(env.python), "-m", "pytest"] if env.python else argv
                run_env = testenv.suite_env(env, {"PYTHONDONTWRITEBYTECODE": "1"})
                for sig in todo:
                    left = deadline - time.monotonic()
                    results[sig.key] = (_rerun(run_argv, run_env, wt, base, sig,
                                               min(left, RERUN_TIMEOUT), scoped, renamed)
                                        if left > 1 else
                                        _undetermined(sig, "not re-run: time budget spent",
                                                      scoped))
        except VerifyDagError as exc:
            for sig in todo:
                results.setdefault(sig.key, _undetermined(
                    sig, f"could not check out the merge base {base}: {exc.message}", scoped))
    return [results[s.key] for s in sigs]


def _diagnose_exercised(state: RunState, sigs: list[_Signature], base: str | None, no_base: str,
                        scoped: set[str]) -> dict[str, Diagnosis]:
    """Exerciser failures: the exerciser's exercise, run once at the base, checks them all."""
    if not sigs:
        return {}
    if base is None:
        return {s.key: _undetermined(s, no_base, scoped) for s in sigs}
    eng = state.engineer or EngineerContext()
    criterion = state.request.completion
    env = util.scrubbed_env({"PYTHONDONTWRITEBYTECODE": "1"})  # as the exerciser's
    try:
        with git.worktree(state.request.repo, base) as wt:
            # The one implementation of "the exercise" (exerciser.py), with the verified
            # commit's declarations: the same commands, against the base's code.
            ex = exerciser._exercise(eng, wt, env, criterion)
            where = f"cwd: {wt}, a scratch worktree of {base}" + (
                f", the app started with `{eng.start}`" if eng.start else "")
            checked = _checked(ex, eng, criterion)
            return {s.key: _compare(s, checked.get(s.key), where, ex.note, scoped) for s in sigs}
    except VerifyDagError as exc:
        why = f"could not check out the merge base {base}: {exc.message}"
    # Whatever broke the exercise there, the tests' diagnoses must still be reported.
    except Exception as exc:  # noqa: BLE001
        why = f"the exercise could not run at the merge base: {type(exc).__name__}: {exc}"
    return {s.key: _undetermined(s, util.redact(why), scoped) for s in sigs}


_Check = tuple[str, str, str]  # (PASS | FAIL | BLOCKED | NOT_CHECKED, command, evidence)


def _checked(ex: exerciser._Exercise, eng: EngineerContext,
             criterion: str | None) -> dict[str, _Check]:
    """Each check of the base's exercise under the title its failure has (exerciser._finding)."""
    def title(text: str) -> str:
        return exerciser._finding(text, "").title

    declared = gates.parse(eng.verification_md or "")
    commands = {(g.kind, g.rule): g.check for g in (*declared.exerciser, *declared.review)}
    failed = {f.title: f.description for f in ex.findings}
    out: dict[str, _Check] = {}
    for g in ex.gates:
        if g.checker == exerciser.COMPLETION_CHECKER and criterion is not None:
            key, command = title(f"Completion criterion failed: {criterion}"), criterion
        else:
            key = title(f"{g.kind.capitalize()} gate failed: {g.rule}")
            command = commands.get((g.kind, g.rule)) or "no CHECK command declared"
        out.setdefault(key, (g.status, command, failed.get(key, g.evidence)))
    # An app that never came up at the base ran no EXERCISE command there.
    ran = not ex.note.startswith("SERVICE_UNAVAILABLE")
    for command in eng.exercise:
        key = title(f"Exercise command failed: {command}")
        status = "FAIL" if key in failed else "PASS" if ran else "BLOCKED"
        out.setdefault(key, (status, command, failed.get(key, f"`{command}` exited 0" if ran
                                                          else ex.note)))
    return out


def _compare(sig: _Signature, check: _Check | None, where: str, note: str,
             scoped: set[str]) -> Diagnosis:
    if check is None:
        return _undetermined(sig, f"the exercise at the merge base did not check this ({note})",
                             scoped)
    status, command, there = check

    def verdict(pre: PreExisting, why: str) -> Diagnosis:
        return Diagnosis(failure=sig.key, pre_existing=pre, command=f"{command}  ({where})",
                         evidence=_excerpt(why, there), touched_by_diff=_touched(sig, scoped))

    if status == "PASS":
        return verdict("no", "passes at the merge base")
    if status != "FAIL":
        return verdict("undetermined", f"could not be checked at the merge base ({status}: "
                                       f"{note})")
    if _TIMED_OUT.search(there):
        return verdict("undetermined", "timed out at the merge base")
    here = sig.findings[0].description
    here_exits, there_exits = _EXIT.findall(here), _EXIT.findall(there)
    if here_exits == there_exits and _normalised(here) == _normalised(there):
        return verdict("yes", "fails at the merge base the same way: "
                              f"{'; '.join(there_exits) or 'the same output'}")
    if here_exits == there_exits:
        return verdict("undetermined", "fails at the merge base too, with the same exit codes "
                                       "but different output")
    return verdict("undetermined", "fails at the merge base too, but differently: "
                                   f"{'; '.join(there_exits) or 'no exit code'} there, "
                                   f"{'; '.join(here_exits) or 'no exit code'} here")


def _normalised(evidence: str) -> str:
    return _NUMBERS.sub("#", _DIRS.sub("", evidence))


def _unsafe(nodeid: str) -> str:
    # Node ids become arguments: one that looks like an option or leaves the worktree is refused.
    path = PurePosixPath(nodeid.split("::", 1)[0])
    if nodeid.startswith("-") or path.is_absolute() or ".." in path.parts:
        return f"refused to re-run {nodeid!r}: not a repository-relative test id"
    return ""


def _touched(sig: _Signature, scoped: set[str]) -> tuple[str, ...]:
    paths: set[str] = set()
    for f in sig.findings:
        if f.location is not None:
            paths.add(f.location.path)
        paths.update(m["path"] for m in _TRACE_PATH.finditer(f.description))
    paths = {p.removeprefix("./") for p in paths}
    return tuple(sorted(paths & scoped))


def _undetermined(sig: _Signature, why: str, scoped: set[str]) -> Diagnosis:
    return Diagnosis(failure=sig.key, pre_existing="undetermined", command="not run",
                     evidence=why, touched_by_diff=_touched(sig, scoped))


def _rerun(argv: list[str], env: dict[str, str], wt: Path, base: str, sig: _Signature,
           timeout: float, scoped: set[str], renamed: dict[str, str]) -> Diagnosis:
    assert sig.nodeid is not None
    path, sep, rest = sig.nodeid.partition("::")
    old = renamed.get(path)
    nodeid = f"{old}{sep}{rest}" if old else sig.nodeid
    # --tb=long after the repository's addopts: the crash line `path:line: ExcType` is what the
    # signature is read from, and a repository's --tb=short/line/no would drop it.
    cmd = [*argv, "-q", "-p", "no:cacheprovider", f"--rootdir={wt}", "--tb=long", nodeid]
    res = util.run(cmd, cwd=wt, timeout=timeout, env=env)
    command = f"{shlex.join(cmd)}  (cwd: {wt}, a scratch worktree of {base})"
    output = "\n".join(t for t in (res.stdout.strip(), res.stderr.strip()) if t)

    def verdict(pre: PreExisting, why: str) -> Diagnosis:
        why = f"{why} (renamed from {old} by the diff)" if old else why
        return Diagnosis(failure=sig.key, pre_existing=pre, command=command,
                         evidence=_excerpt(why, output), touched_by_diff=_touched(sig, scoped))

    if res.not_found:
        return verdict("undetermined", f"{cmd[0]} was not found")
    if res.timed_out:
        return verdict("undetermined", f"timed out after {timeout:g}s at the merge base")
    if res.returncode == 4 and _NOT_FOUND.search(output):
        # Issue 4: a test the diff added is new, not "unknown": it cannot have failed there.
        return verdict("no", "pytest exited 4: the test does not exist at the merge base, so it "
                             "cannot have failed there")
    if res.returncode in _UNRUNNABLE:
        return verdict("undetermined", f"pytest exited {res.returncode}: "
                                       f"{_UNRUNNABLE[res.returncode]}")
    counts = _counts(res.stdout)
    if res.returncode == 0:
        if counts.get("passed", 0) and not counts.get("failed") and not counts.get("error"):
            return verdict("no", "passes at the merge base")
        return verdict("undetermined", "did not pass or fail at the merge base "
                                       f"({_summary(counts)})")
    if res.returncode != 1:
        return verdict("undetermined", f"pytest exited {res.returncode} at the merge base")
    here_exc, here_msg = _branch_signature(sig.findings)
    there_exc, there_msg = _base_signature(output)
    if here_exc and there_exc:
        if here_exc == there_exc:
            return verdict("yes", f"fails at the merge base with the same signature: {there_exc}")
        return verdict("undetermined", f"fails at the merge base with a different signature: "
                                       f"{there_exc} there, {here_exc} here")
    if here_msg and here_msg == there_msg:
        return verdict("yes", f"fails at the merge base with the same message: {there_msg}")
    return verdict("undetermined", "fails at the merge base too, but the failure signatures "
                                   "could not be matched")


def _branch_signature(findings: list[Finding]) -> tuple[str | None, str]:
    """(exception class, first message line) of the failure as the tester recorded it."""
    for f in findings:
        crash = list(_CRASH.finditer(f.description))
        message = next((ln.strip() for ln in f.description.splitlines()
                        if ln.strip() and not ln.startswith("Error outside the test body")), "")
        if crash:
            return crash[-1]["exc"], message
        m = _EXC_MESSAGE.match(message)
        if m:
            return m["exc"], message
        # pytest's rewritten assertions report "assert <expr>" with no class in the message.
        if message == "assert" or message.startswith("assert "):
            return "AssertionError", message
        if message:
            return None, message
    return None, ""


def _base_signature(output: str) -> tuple[str | None, str]:
    crash = list(_CRASH.finditer(output))
    first_e = _E_LINE.search(output)
    return (crash[-1]["exc"] if crash else None), (first_e["text"].strip() if first_e else "")


def _counts(stdout: str) -> dict[str, int]:
    lines = [ln for ln in stdout.splitlines() if ln.strip()]
    out: dict[str, int] = {}
    for n, kind in _COUNT.findall(lines[-1] if lines else ""):
        out[kind.removesuffix("s") if kind == "errors" else kind] = int(n)
    return out


def _summary(counts: dict[str, int]) -> str:
    return ", ".join(f"{n} {k}" for k, n in counts.items()) or "no result line"


def _excerpt(why: str, output: str) -> str:
    """The verdict, then the tail of the output (where pytest puts the crash line and summary)."""
    why, text = util.redact(why), util.redact(output)
    room = EVIDENCE_CAP - len(why) - 1
    if len(text) > room:
        # Cut on a line boundary: a half line of a traceback reads as a different message.
        text = "...\n" + text[len(text) - room + 4:].split("\n", 1)[-1]
    return f"{why}\n{text}"[:EVIDENCE_CAP] if text else why[:EVIDENCE_CAP]
