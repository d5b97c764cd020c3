"""The debugger's check of exerciser failures (a gate, an EXERCISE command, the completion
criterion) at the merge base.

The whole exercise runs once at the base with the verified commit's declarations: START and
HEALTH, the EXERCISE commands, then every gate, as the exerciser did, because a gate may query
the app or read what an EXERCISE command wrote; re-running one gate alone would test a different
thing. A check that passes there is "no"; one that fails is "yes" only with the same exit codes
and the same output once paths and numbers are set aside, else "undetermined".
"""

from __future__ import annotations

import re

from verify_dag import processes, workspace
from verify_dag.errors import VerifyDagError
from verify_dag.models import Diagnosis, EngineerContext, RunState
from verify_dag.phases import gates
from verify_dag.phases.debugger.signature import (
    PreExisting,
    Signature,
    excerpt,
    touched,
    undetermined,
)
from verify_dag.phases.exerciser import sandboxed
from verify_dag.phases.exerciser.derived import FAILED_TITLE, NEW_AT_BASE
from verify_dag.phases.exerciser.exercise import COMPLETION_CHECKER, Exercise, failure_finding

# Exerciser evidence: the exit codes it names, a timeout, and what the rest is compared without.
_EXIT = re.compile(r"\bexit(?:ed)? -?\d+(?: \(expected -?\d+\))?")
_TIMED_OUT = re.compile(r"`(?:: fail:)? timed out\b")
_DIRS = re.compile(r"[^\s'\"`(\[<>=,;]*/")  # directories: the two worktrees differ
_NUMBERS = re.compile(r"\d+")  # ports, pids, timings, line numbers


def diagnose(
    state: RunState, sigs: list[Signature], base: str | None, no_base: str, scoped: set[str]
) -> dict[str, Diagnosis]:
    """Exerciser failures: the exerciser's exercise, run once at the base, checks them all;
    a derived exercise's failure was already run at the base by the exerciser itself."""
    if base is None:
        return {s.key: undetermined(s, no_base, scoped) for s in sigs}
    found = {s.key: _derived(s, base, scoped) for s in sigs if s.key.startswith(FAILED_TITLE)}
    sigs = [s for s in sigs if s.key not in found]
    if not sigs:
        return found
    return {**found, **_declared(state, sigs, base, scoped)}


def _derived(sig: Signature, base: str, scoped: set[str]) -> Diagnosis:
    """The exerciser ran a failing derived probe again at the merge base (exerciser/derived.py):
    its finding says when the probe did not fail so there; one failing there too is no
    finding at all."""
    if NEW_AT_BASE not in sig.findings[0].description:
        return undetermined(
            sig,
            "the derived exercise could not run this probe at the merge base "
            "(the exerciser's notes say why)",
            scoped,
        )
    return Diagnosis(
        failure=sig.key,
        pre_existing="no",
        command=f"{sig.key.removeprefix(FAILED_TITLE)}  (the derived exercise at {base})",
        evidence="does not fail this way at the merge base",
        touched_by_diff=touched(sig, scoped),
    )


def _declared(
    state: RunState, sigs: list[Signature], base: str, scoped: set[str]
) -> dict[str, Diagnosis]:
    eng = state.engineer or EngineerContext()
    criterion = state.request.completion
    env = processes.scrubbed_env({"PYTHONDONTWRITEBYTECODE": "1"})  # as the exerciser's
    try:
        with workspace.checkout(state.run_id, state.request.repo, base) as wt:
            # The one implementation of "the exercise" (exerciser/exercise.py), with the verified
            # commit's declarations: the same commands, against the base's code.
            ex = sandboxed.exercise(eng, wt, env, criterion)
            where = f"cwd: {wt}, a scratch worktree of {base}" + (
                f", the app started with `{eng.start}`" if eng.start else ""
            )
            checked = _checked(ex, eng, criterion)
            return {s.key: _compare(s, checked.get(s.key), where, ex.note, scoped) for s in sigs}
    except VerifyDagError as exc:
        why = f"could not check out the merge base {base}: {exc.message}"
    # Whatever broke the exercise there, the tests' diagnoses must still be reported.
    except Exception as exc:  # noqa: BLE001
        why = f"the exercise could not run at the merge base: {type(exc).__name__}: {exc}"
    return {s.key: undetermined(s, processes.redact(why), scoped) for s in sigs}


_Check = tuple[str, str, str]  # (PASS | FAIL | BLOCKED | NOT_CHECKED, command, evidence)


def _checked(ex: Exercise, eng: EngineerContext, criterion: str | None) -> dict[str, _Check]:
    """Each check of the base's exercise under the title its failure has
    (failure_finding)."""

    def title(text: str) -> str:
        return failure_finding(text, "").title

    declared = gates.parse(eng.verification_md or "")
    commands = {(g.kind, g.rule): g.check for g in (*declared.exerciser, *declared.review)}
    failed = {f.title: f.description for f in ex.findings}
    out: dict[str, _Check] = {}
    for g in ex.gates:
        if g.checker == COMPLETION_CHECKER and criterion is not None:
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
        out.setdefault(
            key, (status, command, failed.get(key, f"`{command}` exited 0" if ran else ex.note))
        )
    return out


def _compare(
    sig: Signature, check: _Check | None, where: str, note: str, scoped: set[str]
) -> Diagnosis:
    if check is None:
        return undetermined(
            sig, f"the exercise at the merge base did not check this ({note})", scoped
        )
    status, command, there = check

    def verdict(pre: PreExisting, why: str) -> Diagnosis:
        return Diagnosis(
            failure=sig.key,
            pre_existing=pre,
            command=f"{command}  ({where})",
            evidence=excerpt(why, there),
            touched_by_diff=touched(sig, scoped),
        )

    if status == "PASS":
        return verdict("no", "passes at the merge base")
    if status != "FAIL":
        return verdict("undetermined", f"could not be checked at the merge base ({status}: {note})")
    if _TIMED_OUT.search(there):
        return verdict("undetermined", "timed out at the merge base")
    here = sig.findings[0].description
    here_exits, there_exits = _EXIT.findall(here), _EXIT.findall(there)
    if here_exits == there_exits and _normalised(here) == _normalised(there):
        return verdict(
            "yes",
            f"fails at the merge base the same way: {'; '.join(there_exits) or 'the same output'}",
        )
    if here_exits == there_exits:
        return verdict(
            "undetermined",
            "fails at the merge base too, with the same exit codes but different output",
        )
    return verdict(
        "undetermined",
        "fails at the merge base too, but differently: "
        f"{'; '.join(there_exits) or 'no exit code'} there, "
        f"{'; '.join(here_exits) or 'no exit code'} here",
    )


def _normalised(evidence: str) -> str:
    return _NUMBERS.sub("#", _DIRS.sub("", evidence))
