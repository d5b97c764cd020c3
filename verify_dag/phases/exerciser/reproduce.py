"""Issue reproduction for the exerciser (phase 7c): each reported issue tried once, without a
model, in the exerciser's throwaway worktree of the verified commit.

The attempt is the claim verifier (phases/claims/, shared with shadow verification),
the one implementation of "does this finding hold": the cited file and line must exist; failing
tests are re-run alone with pytest in the environment the tester used, "unused"/"untested" claims
are searched for; anything else needs judgement and is BLOCKED with that reason. Its verdicts
map to the report's statuses: an anchor that does not hold is NOT_APPLICABLE, CONFIRMED is
CONFIRMED, REFUTED or STALE is NOT_REPRODUCED, UNVERIFIABLE is BLOCKED.

A finding of static analysis itself is NOT_APPLICABLE without an attempt: re-running the tool
that reported it on the same input is no independent evidence (it would make a false alarm look
confirmed), and it has no runtime behaviour to reproduce (docs/verify.md).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any, Literal

from verify_dag import processes
from verify_dag.models import Finding, RunState, Verification
from verify_dag.phases import gates, rerun_cache
from verify_dag.phases.claims import phrasing, verifiers
from verify_dag.phases.claims.budget import Budget
from verify_dag.phases.claims.models import ClaimVerdict
from verify_dag.phases.exerciser.exercise import SKILL
from verify_dag.phases.tester.env.base import Runner

MAX_ATTEMPTS = 30  # reported issues tried per run; the rest are named in the notes
VERIFY_BUDGET = 900.0  # seconds for all reproduction attempts together
TOOL_CAP = 120.0  # seconds per analyser re-run (and at most the run's --tool-timeout)
TEST_CAP = 300.0  # seconds per test re-run (and at most the run's --test-timeout)
LABEL = "the verified commit"

VStatus = Literal["CONFIRMED", "NOT_REPRODUCED", "NOT_APPLICABLE", "BLOCKED"]
STATIC = "static-analysis"
_SAME_TOOL = (
    "a static-analysis finding: re-running {tool} on the same code is no independent evidence, "
    "and there is no runtime behaviour to reproduce"
)

# A test the tester stopped at its per-test limit would only hang again for as long: never
# re-run (the debugger tries it at the merge base under a short limit of its own).
_TIMED_OUT = (
    "not re-run: the test hit the tester's per-test time limit ({limit:g}s), and a re-run "
    "would wait as long again"
)


def verify_issues(
    state: RunState,
    wt: Path,
    env: dict[str, str],
    python: str = sys.executable,
    runner: Runner | None = None,
) -> tuple[list[Verification], str]:
    """Try each reported issue once, deterministically; returns the entries and a summary."""
    seen = reported(state)
    request, deadline = state.request, time.monotonic() + VERIFY_BUDGET
    assert state.scope is not None
    # One surface for every issue: an analyser runs once per file, a test once per node id.
    surface = verifiers.Surface(
        repo=Path(request.repo),
        commit=state.scope.new_commit,
        label=LABEL,
        history=False,
        workdir=wt,
        env=env,
        python=python,
        runner=runner,
        toolchain=state.toolchain,
        tool_cap=min(request.tool_timeout, TOOL_CAP),
        test_cap=min(request.test_timeout, TEST_CAP),
    )
    out: list[Verification] = []
    for n, f in enumerate(seen[:MAX_ATTEMPTS], start=1):
        left = deadline - time.monotonic()
        if left <= 0:
            break
        if f.source == STATIC:
            status, evidence = "NOT_APPLICABLE", _SAME_TOOL.format(tool=f.tool or "its analyser")
        elif f.timed_out is not None:
            status, evidence = "BLOCKED", _TIMED_OUT.format(limit=f.timed_out)
        else:
            claim = phrasing.from_finding(f, f"issue-{n}")
            status, evidence = status_of(f, verifiers.verify(claim, surface, Budget(left)))
        loc = f.location
        out.append(
            Verification(
                path=loc.path if loc else None,
                line=loc.line if loc else None,
                title=f.title,
                status=status,
                evidence=gates.cap(processes.redact(evidence)),
            )
        )
    counts = ", ".join(
        f"{[v.status for v in out].count(s)} {s}" for s in dict.fromkeys(v.status for v in out)
    )
    note = f"verified {len(out)} of {len(seen)} reported issue(s)" + (f" ({counts})" if out else "")
    if len(out) < len(seen):
        note += f"; {len(seen) - len(out)} not attempted (cap {MAX_ATTEMPTS} or time budget)"
    return out, note


def reported(state: RunState) -> list[Finding]:
    """The issues the earlier phases reported, one per path, line and title."""
    seen: dict[tuple[str | None, int | None, str], Finding] = {}
    earlier = [
        *(state.static.findings if state.static else ()),
        # Reproduction is part of the exerciser: its own findings are not re-tried.
        *(f for o in state.outcomes if o.skill != SKILL for f in o.findings),
    ]
    for f in earlier:
        loc = f.location
        seen.setdefault((loc.path if loc else None, loc.line if loc else None, f.title), f)
    return list(seen.values())


def entry(state: RunState) -> str | None:
    """The reproduction's entry in the result cache (verify_dag/phases/rerun_cache.py)."""
    if state.scope is None or not state.scope.new_commit:
        return None
    asked = rerun_cache.dump(reported(state))
    return rerun_cache.key(rerun_cache.REPRODUCTION, state, (state.scope.new_commit,), asked)


def kept(value: Any) -> tuple[list[Verification], str]:
    return [Verification.model_validate(v) for v in value["verified"]], str(value["note"])


def keep(state: RunState, key: str | None, verified: list[Verification], note: str) -> None:
    """Keep a reproduction that settled every issue: none BLOCKED (a time-out, no env, a
    question for judgement), none left unattempted."""
    if len(verified) == len(reported(state)) and all(v.status != "BLOCKED" for v in verified):
        value = {"verified": rerun_cache.dump(verified), "note": note}
        rerun_cache.put(rerun_cache.REPRODUCTION, key, value)


def status_of(f: Finding, v: ClaimVerdict) -> tuple[VStatus, str]:
    """A shadow verdict as an exerciserVerification status and its evidence."""
    if v.method == "anchor" and v.verdict in ("REFUTED", "STALE"):
        return "NOT_APPLICABLE", v.detail
    if v.verdict == "CONFIRMED":
        return "CONFIRMED", v.detail
    if v.verdict in ("REFUTED", "STALE"):
        return "NOT_REPRODUCED", v.detail
    if v.method == "none":
        return "BLOCKED", f"needs judgement; no deterministic reproduction ({f.source} finding)"
    return "BLOCKED", v.detail
