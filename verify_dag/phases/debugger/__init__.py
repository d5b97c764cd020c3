"""Phase 7b: the debugger tells pre-existing failures from new ones by re-running them at the base.

It fires only on observed failures of severity 7+ (tester, exerciser, and ux-reviewer at deep), so
it runs after the exerciser. Each distinct failure signature is re-run once in a scratch worktree
of the merge base (``old_commit`` for staged/unstaged snapshots), through processes.run with a time
limit and a scrubbed environment, and gets a Diagnosis: PRE_EXISTING yes | no | undetermined,
COMMAND, EVIDENCE and TOUCHED_BY_DIFF.

Tests. A failing test is re-run alone (under its old path when the diff renamed its file), in
the base's own env built the way the verified commit's was (the same builder, and the same env
where the base declares it; through tox when tox builds it). A test that timed out in the
tester's run is re-run under a short limit (:data:`HANG_LIMIT`), never the full one again. One
the base lacks is "no" only when the diff adds its definition or its file, or when the base's
own configuration collects nothing from its file (no collector there takes a YAML file a
plugin collects here), else "undetermined". One that
fails at the base is "yes" only when it fails the same way: the exception class of pytest's
crash line (``path:line: ExcType``; line numbers move), or without one (``--tb=short``) the
first line of the failure message.

Exerciser failures (a gate, an EXERCISE command, the completion criterion) re-run the whole
exercise at the base (:mod:`~verify_dag.phases.debugger.exercise`). Either way, a different or
unreadable signature at the base is "undetermined", never "yes" (the change may have turned one
failure into another), as is anything that could not run there (no base, a checkout or env that
fails, a timeout, a usage error).
"""

from __future__ import annotations

import logging
import re
import shlex
import time
from collections.abc import Callable
from pathlib import Path

from verify_dag import git, processes, skills, workspace
from verify_dag.errors import VerifyDagError
from verify_dag.models import Diagnosis, Finding, RunState, SkillOutcome
from verify_dag.models.findings import BuiltEnv
from verify_dag.models.scope import Scope
from verify_dag.models.toolchain import Toolchain
from verify_dag.phases.debugger import exercise as debugger_exercise
from verify_dag.phases.debugger.signature import (
    PreExisting,
    Signature,
    base_signature,
    branch_signature,
    counts,
    defines,
    excerpt,
    hung,
    summary,
    touched,
    undetermined,
    unsafe,
)
from verify_dag.phases.exerciser import exercise
from verify_dag.phases.tester import env as testenv
from verify_dag.phases.tester import pytest_command
from verify_dag.phases.tester.env import host
from verify_dag.phases.tester.env.base import Runner
from verify_dag.sandbox import Policy

log = logging.getLogger(__name__)

SKILL = "debugger"
MAX_RERUNS = 20  # distinct signatures re-run per verification; the rest are "not re-run: cap"
RERUN_TIMEOUT = 600.0  # one test, not a suite: a single re-run never gets more than this
# A test that hit the tester's per-test limit is re-run at the base under this limit instead:
# waiting the full limit again to learn that it hangs there too is what it must not cost.
HANG_LIMIT = 30.0
_TEST_TITLE = "Test failed: "  # the tester's title for one failing test (nodeid follows)
_COMMAND_TITLE = "Test command failed: "  # the tester's title for a non-pytest runner
# pytest's exit 4 when the node id names no file or no test: the test is not at the base.
_NOT_FOUND = re.compile(r"^ERROR: (?:file or directory )?not found: ", re.MULTILINE)
# pytest 8's words when an argument's file is never collected: the match stopped at its
# directory, not at a module (``(no match in any of [<Module test_x.py>])`` is a missing test).
_UNCOLLECTED = re.compile(r"^\(no match in any of \[<(?:Dir|Package) [^\]]*\]\)$", re.MULTILINE)
# pytest's exit codes that mean "the test could not be run as asked" at the base.
_UNRUNNABLE = {
    2: "collection errors at the merge base (or the run was interrupted)",
    3: "pytest hit an internal error at the merge base",
    4: "usage error at the merge base (its options, plugins or configuration differ)",
    5: "no tests collected at the merge base (deselected or ignored there)",
}


def failures(state: RunState) -> list[Finding]:
    # The registry's triggers, as the report's "was the debugger needed" check reads them.
    triggers = skills.fires_debugger(state.request.depth)
    return [f for o in state.outcomes if o.skill in triggers for f in o.findings if f.severity >= 7]


def pytest_argv() -> list[str] | None:
    """How a single failing test is re-run.

    When the repository declares what its tests need, the provisioned environment's own
    interpreter is used instead (see ``_diagnose``); this is the interpreter otherwise, the same
    one the tester falls back to, with the same plugins turned off (:mod:`..tester.env.host`).
    """
    return host.pytest_argv()


def _nodeid(f: Finding) -> str | None:
    if f.nodeid:
        return f.nodeid
    # The tester's findings name the test in the title; older states carry no nodeid field.
    if f.source == "tester" and f.title.startswith(_TEST_TITLE):
        return f.title.removeprefix(_TEST_TITLE).strip() or None
    return None


def signatures(found: list[Finding]) -> list[Signature]:
    """Distinct failure signatures, in first-seen order."""
    out: dict[str, Signature] = {}
    for f in found:
        nodeid = _nodeid(f)
        if f.source == exercise.SKILL:
            sig = out.setdefault(f.title, Signature(f.title, None, exercised=True))
        elif nodeid is not None:
            sig = out.setdefault(nodeid, Signature(nodeid, nodeid))
        elif f.title.startswith(_COMMAND_TITLE):
            command = f.title.removeprefix(_COMMAND_TITLE)
            sig = out.setdefault(
                command,
                Signature(
                    command,
                    None,
                    why_not=(
                        "the test runner is not pytest: a single failing test cannot be re-run in "
                        "isolation"
                    ),
                ),
            )
        else:
            sig = out.setdefault(
                f.title,
                Signature(
                    f.title,
                    None,
                    why_not=(
                        "no single test to re-run in isolation (the failure carries no test id)"
                    ),
                ),
            )
        sig.findings.append(f)
    return list(out.values())


def run(state: RunState) -> SkillOutcome:
    found = failures(state)
    if not found:
        return SkillOutcome(
            skill=SKILL,
            status="SKIPPED",
            ran=False,
            notes="N/A: no failures of severity 7+",
            reason="no failures of severity 7+",
        )
    reason = f"{len(found)} failure(s) of severity 7+ to investigate"
    said: list[str] = []  # what holds for every re-run (the merge base's env), said once
    try:
        diagnoses = _diagnose(state, signatures(found), said)
    except Exception as exc:  # the report must still be written: never raise into the chain
        log.exception("debugger crashed")
        return SkillOutcome(
            skill=SKILL,
            status="NOT_RUN",
            reason=reason,
            notes=f"debugger could not run: {type(exc).__name__}: {exc}",
        )
    tally = {k: sum(d.pre_existing == k for d in diagnoses) for k in ("yes", "no", "undetermined")}
    n = len(diagnoses)
    notes = (
        f"{n} failure{'s' if n != 1 else ''}: {tally['yes']} pre-existing, "
        f"{tally['no']} new"
        + (f", {tally['undetermined']} undetermined" if tally["undetermined"] else "")
        + "".join(f"; {n}" for n in said)
    )
    return SkillOutcome(
        skill=SKILL, status="COMPLETED", notes=notes, reason=reason, diagnoses=tuple(diagnoses)
    )


def _base(scope: Scope | None) -> tuple[str | None, str]:
    if scope is None:
        return None, "no scope was resolved"
    base = scope.merge_base or scope.old_commit
    if base is None:
        return None, f"a whole-file scope ({scope.mode}) has no base commit to compare with"
    return base, ""


def _head_env(state: RunState) -> BuiltEnv | None:
    """The env the verified commit's suite ran in, to build the merge base's alike."""
    return next((o.env for o in state.outcomes if o.skill == "tester" and o.env), None)


def _diagnose(state: RunState, sigs: list[Signature], said: list[str]) -> list[Diagnosis]:
    included = state.scope.included if state.scope is not None else ()
    scoped = {f.path for f in included if f.status != "deleted"}
    base, no_base = _base(state.scope)
    exercised = [s for s in sigs if s.exercised]
    results = debugger_exercise.diagnose(state, exercised, base, no_base, scoped)
    # A test file the diff renamed (or copied) is found at the base under its old path.
    renamed = {
        f.path: f.old_path for f in included if f.status in ("renamed", "copied") and f.old_path
    }
    argv = pytest_argv()
    todo: list[Signature] = []
    for sig in (s for s in sigs if not s.exercised):
        why = sig.why_not or unsafe(sig.key) or no_base
        if not why and argv is None:
            why = "pytest is not installed (not importable, not on PATH)"
        if why:
            results[sig.key] = undetermined(sig, why, scoped)
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
            # Built the way the verified commit's was: the same builder, the same env where the
            # base declares it (another env of the base's, a pip install into a uv venv, once
            # made every failure "undetermined").
            want = _head_env(state)
            with (
                workspace.checkout(state.run_id, state.request.repo, base) as wt,
                testenv.runtime(wt, toolchain, want=want) as env,
            ):
                said += [f"at the merge base: {n}" for n in env.notes]
                if env.error is not None:
                    # Why is said once, in the debugger's notes; each failure points there.
                    said.append(
                        f"the merge base's test environment could not be built from "
                        f"{env.source or 'its declarations'}: {excerpt('', env.error)[:1500]}"
                    )
                    why = "the merge base's test environment could not be built (see the notes)"
                    for sig in todo:
                        results[sig.key] = undetermined(sig, why, scoped)
                    todo = []
                run_argv = [str(env.python), "-m", "pytest"] if env.python else argv
                # The repository's own pytest configuration (plugins, ini overrides) applies
                # at the base too; its selection of the suite does not.
                declared = toolchain.test.argv if toolchain.test is not None else ()
                run_argv = [
                    *run_argv,
                    *pytest_command.config_options(pytest_command.args(declared) or ()),
                ]
                run_env = testenv.suite_env(env, {"PYTHONDONTWRITEBYTECODE": "1"})
                assert state.scope is not None
                repo, head = state.request.repo, state.scope.new_commit
                # A verdict on a whole test file (absent at the base, or collected by nothing
                # there) holds for each of its tests: they are not re-run one by one.
                files: dict[str, Diagnosis] = {}
                reruns = 0
                for sig in todo:
                    left = deadline - time.monotonic()
                    limit = _hang_limit(sig)
                    assert sig.nodeid is not None
                    file = files.get(sig.nodeid.partition("::")[0])
                    if file is not None:
                        results[sig.key] = _as_file(sig, file, scoped)
                    elif reruns >= MAX_RERUNS:
                        why = f"not re-run: cap of {MAX_RERUNS} re-runs reached"
                        results[sig.key] = undetermined(sig, why, scoped)
                    elif left <= 1:
                        why = "not re-run: time budget spent"
                        results[sig.key] = undetermined(sig, why, scoped)
                    else:
                        reruns += 1
                        results[sig.key] = _rerun(
                            run_argv,
                            run_env,
                            wt,
                            base,
                            sig,
                            min(left, RERUN_TIMEOUT if limit is None else limit + 30),
                            scoped,
                            renamed,
                            lambda path: git.read_file(repo, head, path),
                            env.runner,
                            limit,
                            files,
                        )
        except VerifyDagError as exc:
            for sig in todo:
                results.setdefault(
                    sig.key,
                    undetermined(
                        sig, f"could not check out the merge base {base}: {exc.message}", scoped
                    ),
                )
    return [results[s.key] for s in sigs]


def _as_file(sig: Signature, file: Diagnosis, scoped: set[str]) -> Diagnosis:
    """The verdict a re-run of another test of the same file gave on the whole file."""
    why = file.evidence.split("\n", 1)[0]
    return Diagnosis(
        failure=sig.key,
        pre_existing=file.pre_existing,
        command=file.command,
        evidence=f"{why} (found re-running {file.failure}, a test of the same file)",
        touched_by_diff=touched(sig, scoped),
    )


def _hang_limit(sig: Signature) -> float | None:
    """The short per-test limit of a re-run of a test that timed out in the tester's run."""
    hit = [f.timed_out for f in sig.findings if f.timed_out is not None]
    return min(HANG_LIMIT, *hit) if hit else None


def _rerun(
    argv: list[str],
    env: dict[str, str],
    wt: Path,
    base: str,
    sig: Signature,
    timeout: float,
    scoped: set[str],
    renamed: dict[str, str],
    at_head: Callable[[str], str | None],
    runner: Runner | None = None,
    limit: float | None = None,
    files: dict[str, Diagnosis] | None = None,
) -> Diagnosis:
    """``sig``'s test re-run at the base; ``at_head`` reads a file of the verified commit.
    ``runner``: tox built the base's env, and the test runs through tox as the suite did.
    ``limit``: the test timed out in the tester's run; pytest-timeout's limit on this re-run.
    ``files``: where a verdict on the test's whole file is kept, by the file's path."""
    assert sig.nodeid is not None
    path, sep, rest = sig.nodeid.partition("::")
    old = renamed.get(path)
    nodeid = f"{old}{sep}{rest}" if old else sig.nodeid
    # --tb=long after the repository's addopts: the crash line `path:line: ExcType` is what the
    # signature is read from, and a repository's --tb=short/line/no would drop it.
    short = ["-o", f"timeout={limit:g}"] if limit is not None else []
    cmd = [*argv, "-q", "-p", "no:cacheprovider", f"--rootdir={wt}", "--tb=long", *short, nodeid]
    run, policy = (runner.command(cmd), runner.policy()) if runner else (cmd, Policy())
    res = processes.run(run, cwd=wt, timeout=timeout, env=env, sandbox=policy)
    via = f", through tox env {runner.name}" if runner else ""
    command = f"{shlex.join(cmd)}  (cwd: {wt}, a scratch worktree of {base}{via})"
    output = "\n".join(t for t in (res.stdout.strip(), res.stderr.strip()) if t)

    def verdict(pre: PreExisting, why: str) -> Diagnosis:
        why = f"{why} (renamed from {old} by the diff)" if old else why
        if limit is not None:
            why = (
                f"{why} (it timed out in the tester's run: re-run under the debugger's short "
                f"limit of {limit:g}s)"
            )
        return Diagnosis(
            failure=sig.key,
            pre_existing=pre,
            command=command,
            evidence=excerpt(why, output),
            touched_by_diff=touched(sig, scoped),
        )

    if res.not_found:
        return verdict("undetermined", f"{cmd[0]} was not found")
    if res.timed_out:
        return verdict("undetermined", f"timed out after {timeout:g}s at the merge base")
    if limit is not None and hung(output):
        # A hang at the base under a short limit and one here under the full limit are not the
        # same observation: the test may be slow at the base, not stuck.
        return verdict("undetermined", f"timed out at the merge base too, after {limit:g}s")
    if res.returncode == 4 and _NOT_FOUND.search(output):
        # A test the diff added is new: it cannot have failed there. pytest finding no such id
        # says no more than that, though: an inherited or generated test, or an id pytest does
        # not accept, is not found either. So "no" only when the diff adds the definition.
        # The name before the parameters: a parameter id may hold "::" itself (test_p[a::b]).
        name = sig.nodeid.split("[", 1)[0].rsplit("::", 1)[-1]
        at_base = wt / (old or path)
        base_text = at_base.read_text(errors="replace") if at_base.is_file() else None
        if defines(at_head(path), name) and not defines(base_text, name):
            return verdict(
                "no",
                "pytest exited 4: the test does not exist at the merge base, so it "
                "cannot have failed there (the diff adds its definition)",
            )
        whole: Diagnosis | None = None
        if base_text is None and at_head(path) is not None:
            whole = verdict(
                "no",
                f"pytest exited 4: {old or path} does not exist at the merge base, so no test "
                "of it can have failed there (the diff adds the file)",
            )
        elif base_text is not None and _UNCOLLECTED.search(output):
            # pytest matched no node for the file itself: at the base, no collector takes it
            # (a plugin that collects such files is not installed or not configured there, or
            # the base's conftest ignores it), so the base's own suite holds none of its tests.
            whole = verdict(
                "no",
                f"pytest exited 4: the merge base's own configuration collects no test from "
                f"{old or path} (pytest matched no node for the file), so none of its tests "
                "can have failed there",
            )
        if whole is not None:
            if files is not None:
                files[path] = whole
            return whole
        return verdict(
            "undetermined",
            f"pytest exited 4: no test {nodeid} at the merge base, and the diff adds no "
            f"definition of {name} in {path}: an inherited or generated test, or an id pytest "
            "does not accept, cannot be looked for there",
        )
    if res.returncode in _UNRUNNABLE:
        return verdict(
            "undetermined", f"pytest exited {res.returncode}: {_UNRUNNABLE[res.returncode]}"
        )
    found = counts(res.stdout)
    if res.returncode == 0:
        if found.get("passed", 0) and not found.get("failed") and not found.get("error"):
            return verdict("no", "passes at the merge base")
        return verdict("undetermined", f"did not pass or fail at the merge base ({summary(found)})")
    if res.returncode != 1:
        return verdict("undetermined", f"pytest exited {res.returncode} at the merge base")
    here_exc, here_msg = branch_signature(sig.findings)
    there_exc, there_msg = base_signature(output)
    if here_exc and there_exc:
        if here_exc == there_exc:
            return verdict("yes", f"fails at the merge base with the same signature: {there_exc}")
        return verdict(
            "undetermined",
            f"fails at the merge base with a different signature: "
            f"{there_exc} there, {here_exc} here",
        )
    if here_msg and here_msg == there_msg:
        return verdict("yes", f"fails at the merge base with the same message: {there_msg}")
    return verdict(
        "undetermined",
        "fails at the merge base too, but the failure signatures could not be matched",
    )
