"""Phase 7b: the debugger tells pre-existing failures from new ones by re-running them at the base.

It fires only on observed failures of severity 7+ (tester, exerciser, and ux-reviewer at deep), so
it runs after the exerciser. Each distinct failure signature is re-run once in a scratch worktree
of the merge base (``old_commit`` for staged/unstaged snapshots), through processes.run with a time
limit and a scrubbed environment, and gets a Diagnosis: PRE_EXISTING yes | no | undetermined,
COMMAND, EVIDENCE and TOUCHED_BY_DIFF.

Tests (:mod:`~verify_dag.phases.debugger.rerun`). A failing test is re-run alone (under its
old path when the diff renamed its file), in the base's own env built the way the verified
commit's was (the same builder, and the same env where the base declares it; through tox when
tox builds it). A test that timed out in the tester's run is re-run under a short limit
(:data:`HANG_LIMIT`), never the full one again. One the base lacks is "no" only when the diff
adds its definition or its file, or when the base's own configuration collects nothing from its
file (no collector there takes a YAML file a plugin collects here), else "undetermined". One
that fails at the base is "yes" only when it fails the same way: the exception class of
pytest's crash line (``path:line: ExcType``; line numbers move), or without one
(``--tb=short``) the first line of the failure message.

Exerciser failures (a gate, an EXERCISE command, the completion criterion) re-run the whole
exercise at the base (:mod:`~verify_dag.phases.debugger.exercise`). Either way, a different or
unreadable signature at the base is "undetermined", never "yes" (the change may have turned one
failure into another), as is anything that could not run there (no base, a checkout or env that
fails, a timeout, a usage error).
"""

from __future__ import annotations

import logging
import time
from typing import Any

from verify_dag import git, skills, workspace
from verify_dag.errors import VerifyDagError
from verify_dag.models import Diagnosis, Finding, RunState, SkillOutcome
from verify_dag.models.toolchain import Toolchain
from verify_dag.phases import rerun_cache
from verify_dag.phases.debugger import exercise, rerun
from verify_dag.phases.debugger.signature import (
    Signature,
    excerpt,
    undetermined,
    unsafe,
)
from verify_dag.phases.exerciser.exercise import SKILL as EXERCISER
from verify_dag.phases.tester import env as testenv
from verify_dag.phases.tester import pytest_command
from verify_dag.phases.tester.env import host

log = logging.getLogger(__name__)

SKILL = "debugger"
MAX_RERUNS = 20  # distinct signatures re-run per verification; the rest are "not re-run: cap"
RERUN_TIMEOUT = 600.0  # one test, not a suite: a single re-run never gets more than this
# A test that hit the tester's per-test limit is re-run at the base under this limit instead:
# waiting the full limit again to learn that it hangs there too is what it must not cost.
HANG_LIMIT = 30.0
_TEST_TITLE = "Test failed: "  # the tester's title for one failing test (nodeid follows)
_COMMAND_TITLE = "Test command failed: "  # the tester's title for a non-pytest runner


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
        if f.source == EXERCISER:
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
        sigs = signatures(found)
        entry = _entry(state, sigs, state.base_commit()[0])
        kept = rerun_cache.get(rerun_cache.DEBUGGER, entry, "re-runs at the merge base", _kept)
        if kept is not None:
            diagnoses, said = kept
        else:
            diagnoses = _diagnose(state, sigs, said)
    except Exception as exc:  # the report must still be written: never raise into the chain
        log.exception("debugger crashed")
        return SkillOutcome(
            skill=SKILL,
            status="NOT_RUN",
            reason=reason,
            notes=f"debugger could not run: {type(exc).__name__}: {exc}",
        )
    if kept is None and all(d.pre_existing != "undetermined" for d in diagnoses):
        # Settled answers only: an undetermined one (a time-out, an env that could not be
        # built, a cap) is tried again.
        value = {"diagnoses": rerun_cache.dump(diagnoses), "said": said}
        rerun_cache.put(rerun_cache.DEBUGGER, entry, value)
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


def _entry(state: RunState, sigs: list[Signature], base: str | None) -> str | None:
    """The re-runs' entry in the result cache; None for an exerciser failure (the exercise at
    the base is not kept) or a scope without both commits."""
    if base is None or state.scope is None or any(s.exercised for s in sigs):
        return None
    env = state.tested_env()
    asked = [[s.key, s.nodeid, s.why_not, rerun_cache.dump(s.findings)] for s in sigs] + [
        env.model_dump(mode="json") if env is not None else None
    ]
    return rerun_cache.key(rerun_cache.DEBUGGER, state, (base, state.scope.new_commit), asked)


def _kept(value: Any) -> tuple[list[Diagnosis], list[str]]:
    return (
        [Diagnosis.model_validate(d) for d in value["diagnoses"]],
        [str(n) for n in value["said"]],
    )


def _diagnose(state: RunState, sigs: list[Signature], said: list[str]) -> list[Diagnosis]:
    included = state.scope.included if state.scope is not None else ()
    scoped = {f.path for f in included if f.status != "deleted"}
    base, no_base = state.base_commit()
    exercised = [s for s in sigs if s.exercised]
    results = exercise.diagnose(state, exercised, base, no_base, scoped)
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
            want = state.tested_env()
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
                        results[sig.key] = rerun.as_file(sig, file, scoped)
                    elif reruns >= MAX_RERUNS:
                        why = f"not re-run: cap of {MAX_RERUNS} re-runs reached"
                        results[sig.key] = undetermined(sig, why, scoped)
                    elif left <= 1:
                        why = "not re-run: time budget spent"
                        results[sig.key] = undetermined(sig, why, scoped)
                    else:
                        reruns += 1
                        results[sig.key] = rerun.rerun(
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


def _hang_limit(sig: Signature) -> float | None:
    """The short per-test limit of a re-run of a test that timed out in the tester's run."""
    hit = [f.timed_out for f in sig.findings if f.timed_out is not None]
    return min(HANG_LIMIT, *hit) if hit else None
