"""An exercise derived from the project's own declarations, when it declares none.

004 7c: "Determine exercise strategy based on change type", and "If you cannot determine HOW to
exercise the change, that is severity 9-10". A repository without a VERIFICATION.md still says
how its code is used: its console scripts and its importable modules give the probes
(:mod:`~verify_dag.phases.exerciser.strategy`), run here in the run's environment. A probe that
fails runs again at the merge base: failing there too, it shows nothing of the change.

A web app is what the engineer skill declares (START, HEALTH, EXERCISE), the declared exercise.
Only when nothing can be derived for a change to code is it the specification's finding; a
change to no code at all (documentation, tests, configuration) has nothing to exercise.
"""

from __future__ import annotations

import contextvars
import json
import os
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

from verify_dag import limits, processes, resultcache, sandbox, workspace
from verify_dag.errors import VerifyDagError
from verify_dag.models import EngineerContext, Finding, RunState, Toolchain
from verify_dag.models.findings import BuiltEnv
from verify_dag.phases import gates
from verify_dag.phases.exerciser import probes
from verify_dag.phases.exerciser.exercise import SKILL, Exercise, declares, failure_finding
from verify_dag.phases.exerciser.probes import DOCTEST, Probe
from verify_dag.phases.exerciser.strategy import Strategy, strategy
from verify_dag.phases.tester import env as testenv
from verify_dag.phases.tester.env.base import Env

NO_STRATEGY_SEVERITY = 9


def exercise(
    plan: Strategy, wt: Path, env: Env, entry: str | None = None
) -> list[processes.Result]:
    """Run the probes in the run's environment (the suite's variables, bytecode in the run's
    prefix: ``probes.Where``), each in the sandbox, and give their results in order.
    ``entry``: where the result cache keeps them."""
    # No env to install: the suite runs on our interpreter, and so does this.
    python = str(env.python) if env.python is not None else sys.executable
    inner = {**testenv.suite_env(env), "PYTHONPATH": str(plan.root)}
    with tempfile.TemporaryDirectory(prefix="verify-dag-probes-") as tmp:
        scratch = Path(tmp)
        where = probes.Where(wt, env, python, inner, testenv.run_pycache(wt, scratch, env))

        def probed(probe: Probe, own: Path) -> processes.Result:
            script = probes.one_line(probes.script(probe))
            return where.run(["-c", script, *probe.argv], own, probes.PROBE_TIMEOUT)

        results = probes.batched(plan.probes, where, scratch / "batch")
        if results is None:
            # The batch said nothing readable: each probe alone, as many at once as there are
            # cores, so what failed is told apart from what did not; each in a copy of this
            # context, which holds the sandbox the run requires, and with a scratch of its own.
            workers = max(1, min(len(plan.probes), os.cpu_count() or 1))
            contexts = [contextvars.copy_context() for _ in plan.probes]
            own = [scratch / str(i) for i in range(len(plan.probes))]
            with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="exercise") as pool:
                results = list(
                    pool.map(lambda c, p, d: c.run(probed, p, d), contexts, plan.probes, own)
                )
    if entry is not None and not any(r.timed_out for r in results):
        kept = [[r.returncode, r.stdout[-probes.KEPT :], r.stderr[-probes.KEPT :]] for r in results]
        resultcache.put(probes.KIND, entry, kept)
    return results


def failed(res: processes.Result) -> bool:
    return res.returncode != 0 or res.timed_out


# A derived failure's title, and what its description says when the same probe ran at the merge
# base and did not fail so there: the debugger answers such a failure from it ("no") without
# running anything again.
FAILED_TITLE = "Derived exercise failed: "
NEW_AT_BASE = "Run at the merge base, the same probe does not fail this way: this change's failure."


def judged(
    plan: Strategy,
    results: list[processes.Result],
    at_base: dict[int, processes.Result] | None = None,
    unchecked: str = "",
) -> Exercise:
    """The exercise the probes' results make: a failing probe is a finding unless the same
    probe fails at the merge base too (``at_base``, by the probe's index;
    :func:`~verify_dag.phases.exerciser.probes.fails_there_too`): then it says nothing of this
    change (a module of another platform, a script that reads its argv at import, doctests
    that need the project's own runner) and is told in the notes only.
    PASSED when no probe failed for the change and at least one succeeded. ``unchecked``: why
    the failures could not be looked at the base."""
    ex = Exercise("PASSED", "")
    done: list[str] = []
    before = 0
    for index, (probe, res) in enumerate(zip(plan.probes, results, strict=True)):
        said = _said(probe, res)
        if failed(res):
            seen = gates.excerpt(res.stderr, tail=True) or gates.excerpt(res.stdout, tail=True)
            got = "timed out" if res.timed_out else f"exited {res.returncode}"
            there = (at_base or {}).get(index)
            if there is not None and probes.fails_there_too(res, there):
                said_here = probes.last_line(res) or "no output"
                said_there = probes.last_line(there) or "no output"
                seen_there = (
                    said_here
                    if said_here == said_there
                    else f"{said_here} here; {said_there} there"
                )
                done.append(
                    f"{probe.label}: {got}, and fails at the merge base too ({seen_there}): "
                    "no check of this change"
                )
                before += 1
                continue
            new = f"\n{NEW_AT_BASE}" if there is not None else ""
            ex.findings.append(
                failure_finding(
                    f"{FAILED_TITLE}{probe.label}",
                    f"`{probe.label}` {got}: {seen or 'no output'}{new}",
                )
            )
            done.append(f"{probe.label}: FAIL ({got})")
        else:
            done.append(f"{probe.label}: ok{said}")
    count = len(ex.findings)
    ok = len(plan.probes) - count - before
    also = f"; {before} fail at the merge base too" if before else ""
    if count:
        ex.status = "FAILED"
        ex.note = f"FAILED: {count} of {len(plan.probes)} derived exercise(s) failed{also}"
    elif ok:
        ex.note = (
            f"PASSED: {ok} of {len(plan.probes)} derived exercise(s) succeeded{also}"
            if before
            else f"PASSED: {ok} derived exercise(s) succeeded"
        )
    else:
        # Nothing ran that shows the change working: not a pass.
        ex.status = "BLOCKED"
        ex.note = (
            "NO_EXERCISE_STRATEGY: every exercise derived from the project's declarations "
            "fails at the merge base too, so none shows the change working"
        )
    ex.details.append(
        "exercised as the project declares it (nothing declared to exercise it): " + "; ".join(done)
    )
    if count and unchecked:
        ex.details.append(f"the failures were not looked at the merge base: {unchecked}")
    return ex


def _said(probe: Probe, res: processes.Result) -> str:
    if probe.kind != "module":
        return ""
    last = res.stdout.strip().splitlines()[-1:] or [""]
    try:
        counted = json.loads(last[0])
    except ValueError:
        return ""
    if probe.argv[-1:] != (DOCTEST,):
        return ""
    if not isinstance(counted, dict) or not counted.get("attempted"):
        return " (no doctests)"
    return f" ({counted['attempted']} doctest example(s))"


def no_strategy(why: str, where: str) -> Exercise:
    """Nothing could be derived for a change to code: the specification's severity 9 finding
    ("If you cannot determine HOW to exercise the change, that is severity 9-10")."""
    text = (
        f"No START, EXERCISE or exerciser gate is declared ({where}), and {why}: "
        "nothing shows the change working. Declare how to exercise it in the engineer "
        "skill's VERIFICATION.md (docs/gates.md)."
    )
    finding = Finding(
        title="Cannot determine how to exercise the change",
        severity=NO_STRATEGY_SEVERITY,
        description=text,
        source=SKILL,
        issue_class="correctness",
    )
    return Exercise(
        "BLOCKED",
        f"NO_EXERCISE_STRATEGY: no START, EXERCISE or exerciser gate declared ({where}), and {why}",
        findings=[finding],
    )


def instead(state: RunState, wt: Path, declared: Exercise) -> Exercise:
    """What replaces an exercise that found nothing declared (BLOCKED NO_EXERCISE_STRATEGY):
    the derived one, the specification's finding when none can be derived, or the same
    BLOCKED with the reason when the change has no code to exercise."""
    if declared.status != "BLOCKED" or not declared.note.startswith("NO_EXERCISE_STRATEGY"):
        return declared
    assert state.scope is not None
    eng = state.engineer or EngineerContext()
    where = (
        f"engineer skill at {eng.skill_dir} declares none"
        if eng.skill_dir
        else "no engineer skill found"
    )
    plan = strategy(wt, state.scope)
    if not plan.probes:
        if plan.code_changed:
            out = no_strategy(plan.why_none, where)
        else:
            out = Exercise("BLOCKED", f"NO_EXERCISE_STRATEGY: {plan.why_none}: nothing to exercise")
    else:
        results, error = _results(state, plan, wt)
        if results is None:
            out = Exercise(
                "BLOCKED",
                "NO_EXERCISE_STRATEGY: the exercise derived from the project's "
                f"declarations could not run: its environment failed ({error})",
            )
        else:
            failing = [i for i, res in enumerate(results) if failed(res)]
            at_base, unchecked = _at_base(state, plan, wt, failing) if failing else ({}, "")
            out = judged(plan, results, at_base, unchecked)
    # Review gates with a CHECK ran in the declared exercise: their results and failures stand.
    out.gates = [*declared.gates, *out.gates]
    out.findings = [*declared.findings, *out.findings]
    out.details = [*declared.details, *out.details]
    return out


def _results(
    state: RunState, plan: Strategy, wt: Path, want: BuiltEnv | None = None
) -> tuple[list[processes.Result] | None, str]:
    """The probes' results in ``wt``'s env (its builder's ``want`` env, when given), from the
    result cache when the same probes ran on the same code (without building the env: the tree
    declares it, as for the suite's results); None and why when the env could not be built."""
    entry = probes.memo_key(plan, wt)
    ahead = state.probed
    if want is None and ahead is not None and entry is not None and ahead.key == entry:
        # Run beside the suite (:func:`early`), on this plan and tree, in this run: what they
        # ran under and hit is this phase's as if it had run them. (They are in the result
        # cache too, which would call them an earlier run's.)
        sandbox.record(ahead.isolation)
        limits.record(ahead.limits)
        return [
            processes.Result(r.returncode, r.stdout, r.stderr, timed_out=r.timed_out)
            for r in ahead.results
        ], ""
    known = probes.remembered(entry, len(plan.probes))
    if known is not None:
        return known, ""
    with testenv.runtime(wt, state.toolchain or Toolchain(), want=want) as tenv:
        if tenv.error is not None:
            return None, tenv.error
        return exercise(plan, wt, tenv, entry), ""


def early(state: RunState) -> tuple[str, list[processes.Result]] | None:
    """The derived probes of the verified commit run ahead of the exerciser, beside the suite
    (its result cache entry and their results), when the exerciser would derive its exercise
    (nothing declared) and the results are not already in the result cache. The exerciser
    judges them (:func:`instead`): nothing here decides a status. They run in the env the
    suite holds, as the exerciser would run them, and the suite's machine time that a
    single-process suite leaves idle is theirs. None when there is nothing to run ahead."""
    scope = state.scope
    if scope is None or not scope.new_commit or state.stopped:
        return None
    if declares(state.engineer or EngineerContext(), state.request.completion):
        return None
    with workspace.checkout(state.run_id, state.request.repo, scope.new_commit) as wt:
        plan = strategy(wt, scope)
        entry = probes.memo_key(plan, wt)
        if not plan.probes or entry is None:
            return None
        if probes.remembered(entry, len(plan.probes)) is not None:
            return None
        with testenv.runtime(wt, state.toolchain or Toolchain()) as tenv:
            if tenv.error is not None:
                return None  # the exerciser tells why, as it does without this
            # Nobody waits for them yet: the suite beside them is what the run waits for. The
            # env is held first, at full priority, since the suite may be waiting on its build.
            with processes.in_background():
                return entry, exercise(plan, wt, tenv, entry)


def _at_base(
    state: RunState, plan: Strategy, wt: Path, failing: list[int]
) -> tuple[dict[int, processes.Result], str]:
    """The failing probes run again at the merge base, in its env built as the suite's was
    (the same builder and env): their results by index, or why they could not be."""
    base, why = state.base_commit()
    if base is None:
        return {}, why
    try:
        with workspace.checkout(state.run_id, state.request.repo, base) as bwt:
            there = replace(
                plan,
                probes=tuple(plan.probes[i] for i in failing),
                root=bwt / plan.root.relative_to(wt),
            )
            results, error = _results(state, there, bwt, state.tested_env())
    except VerifyDagError as exc:
        return {}, f"could not check out the merge base {base}: {exc.message}"
    if results is None:
        return {}, f"the merge base's environment could not be built ({error})"
    return dict(zip(failing, results, strict=True)), ""
