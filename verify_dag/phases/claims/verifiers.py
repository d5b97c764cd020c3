"""The claim verifiers: one claim re-derived at one commit, deterministically where possible.

Shared by ``verify-dag shadow`` (one Celery task per claim) and the verify DAG's exerciser
(phases/exerciser/reproduce.py), so there is one implementation of "does this finding hold".
Each returns a :class:`ClaimVerdict` and never raises: a verifier that ran out of budget is
UNVERIFIABLE with stop reason ``budget-exhausted``.

Order: the anchor first (anchors.py), then by kind: ``static`` re-runs the finding's analyser on
the file through the tool runner; ``test`` re-runs the one test with pytest (in the
environment the caller provisioned); ``unused``/``untested`` search the repository (search.py);
``size`` counts lines; ``judgement`` goes to the model arm when one is configured, else it is
UNVERIFIABLE. An artifact-internal CONFIRMED from the model gets the composition-boundary read
the guards need.
"""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from verify_dag import processes, tools
from verify_dag.models.toolchain import Toolchain
from verify_dag.phases import gates
from verify_dag.phases.claims import rederive, search
from verify_dag.phases.claims.anchors import (
    Anchor,
    Where,
    check,
    lines_of,
    pointer,
    short,
)
from verify_dag.phases.claims.budget import Budget, BudgetExhausted
from verify_dag.phases.claims.models import Claim, ClaimVerdict
from verify_dag.phases.tester.env import host
from verify_dag.phases.tester.env.base import Runner
from verify_dag.sandbox import Policy, SandboxRequired
from verify_dag.tools import runner
from verify_dag.tools.base import ToolSpec

Judge = Callable[[Claim, Anchor, "Surface", Budget, "str | None"], ClaimVerdict]


@dataclass(frozen=True)
class Surface(Where):
    """Where and with what a verifier works: the commit, its checkout and the test runtime."""

    workdir: Path | None = None  # a checkout of the commit (static and test claims)
    env: dict[str, str] = field(default_factory=processes.scrubbed_env)
    python: str = sys.executable  # the tests' interpreter (a provisioned venv's, when any)
    # Set when tox built the tests' env: a test re-runs through tox, with the env's set_env and
    # commands_pre, as the tester ran it.
    runner: Runner | None = None
    toolchain: Toolchain | None = None  # to find analysers that are not in tools.REGISTRY
    tool_cap: float = math.inf  # a caller's own per-command limits; the budget bounds them too
    test_cap: float = math.inf
    goal: str = ""
    paths: tuple[str, ...] = ()  # the search surface: the inventory the claim came from
    judge: Judge | None = None
    no_judge: str = "no model backend configured"
    # One analyser run per (tool, file) and one test run per node id, however many claims share
    # them (the exerciser verifies many findings on one surface).
    memo: dict[tuple[str, ...], object] = field(default_factory=dict)


def verify(
    claim: Claim, s: Surface, budget: Budget, *, outside: str | None = None, round: int = 1
) -> ClaimVerdict:
    try:
        verdict = _verify(claim, s, budget, outside)
    except BudgetExhausted as exc:
        verdict = exhausted(claim, s, exc.why)
    # The claim needs the repository's code run on a host that may not run it; claims that
    # only read git still verify.
    except SandboxRequired as exc:
        verdict = unverifiable(claim, s, exc.line().removeprefix("verify-dag: error: "))
    # A verifier that broke has no verdict; it must never take the run down with it.
    except Exception as exc:  # noqa: BLE001
        if budget.spent():
            verdict = exhausted(claim, s, f"{type(exc).__name__} after the budget ran out")
        else:
            verdict = unverifiable(
                claim,
                s,
                f"the verifier failed: {type(exc).__name__}: {processes.redact(str(exc))[:300]}",
            )
    return verdict.model_copy(update={"round": round, "seconds": round_s(budget.used())})


def round_s(seconds: float) -> float:
    return float(f"{seconds:.3f}")


def exhausted(claim: Claim, s: Where, why: str) -> ClaimVerdict:
    return unverifiable(claim, s, f"budget exhausted: {why}", stop="budget-exhausted")


def unverifiable(
    claim: Claim, s: Where, detail: str, *, method: str = "none", stop: str = "completed"
) -> ClaimVerdict:
    where = pointer(s, claim.path, claim.line) if claim.path else f"{claim.evidence_ref}"
    return ClaimVerdict.model_validate(
        {
            "claim_id": claim.id,
            "verdict": "UNVERIFIABLE",
            "evidence_pointer": where,
            "evidence_base": "artifact-internal",
            "method": method,
            "detail": detail,
            "artifact": claim.path,
            "stop_reason": stop,
        }
    )


def _verify(claim: Claim, s: Surface, budget: Budget, outside: str | None) -> ClaimVerdict:
    anchor = check(claim, s, budget)
    if anchor.verdict is not None:
        return anchor.verdict
    route = claim.route()
    if route == "static" and anchor.line:
        verdict = _static(claim, anchor, s, budget)
    elif route == "test":
        verdict = _test(claim, s, budget)
    elif route == "search" and claim.kind == "unused":
        verdict = search.unused(claim, anchor, s, budget)
    elif route == "search" and claim.kind == "untested":
        verdict = search.untested(claim, s, budget)
    elif route == "search" and anchor.text is not None:
        verdict = _size(claim, anchor, s)
    elif s.judge is not None:
        verdict = _judged(claim, anchor, s, budget, outside)
    else:
        return unverifiable(claim, s, f"needs judgement: {s.no_judge}")
    if anchor.note:
        verdict = verdict.model_copy(
            update={"detail": f"{verdict.detail} (cited lines {anchor.note})"}
        )
    return verdict


def _judged(
    claim: Claim, anchor: Anchor, s: Surface, budget: Budget, outside: str | None
) -> ClaimVerdict:
    assert s.judge is not None
    verdict = s.judge(claim, anchor, s, budget, outside)
    if (
        verdict.verdict == "CONFIRMED"
        and verdict.evidence_base == "artifact-internal"
        and verdict.scope_guard is None
    ):
        read, refs = search.boundary(claim, anchor, s, budget)
        verdict = verdict.model_copy(update={"boundary_checked": read, "boundary": refs})
    return verdict


def spec_for(tool: str, s: Surface) -> ToolSpec | None:
    if tool in tools.REGISTRY:
        return tools.REGISTRY[tool]
    for command in (
        *(s.toolchain or Toolchain()).of("lint"),
        *(s.toolchain or Toolchain()).of("typecheck"),
    ):
        spec = tools.spec_for(command)
        if spec.name == tool:
            return spec
    return None


_ENVIRONMENT_RULES = frozenset({"import-not-found", "import-untyped"})


def _static(claim: Claim, anchor: Anchor, s: Surface, budget: Budget) -> ClaimVerdict:
    tool, rule, path, line = claim.tool or "", claim.rule or "", claim.path or "", anchor.line
    spec = spec_for(tool, s)
    if spec is None or s.workdir is None:
        return unverifiable(
            claim, s, f"{tool} is not an analyser verify-dag can re-run here", method="static"
        )
    if rule in _ENVIRONMENT_RULES:
        # One finding for a dependency the analyser could not import, anchored on whatever
        # changed line it touched: not a fact about that line a re-run could check.
        return unverifiable(
            claim,
            s,
            f"{tool} {rule} says the environment lacks a dependency; a re-run cannot check that "
            "against one line",
            method="static",
        )
    key = ("static", spec.name, path)
    cached = s.memo.get(key)
    if not isinstance(cached, runner.ToolRun):
        timeout = budget.limit(s.tool_cap)
        # In the project's env when the surface has one, as the static phase ran it.
        python = Path(s.python) if s.python != sys.executable else None
        cached = runner.run(spec, [path], s.workdir, timeout, python)
        if cached.failure is not None and cached.failure.startswith("timed out"):
            budget.cut(timeout, s.tool_cap, f"{tool} on {path}")
        s.memo[key] = cached
    ran = cached
    if ran.failure is not None:
        return unverifiable(
            claim, s, f"could not re-run {tool} on {path}: {ran.failure}", method="static"
        )
    mine = [r for r in ran.raw if r.path == path and r.code == rule]
    if anchor.changed is not None:
        return rederive.static(claim, s, anchor, mine, len(ran.raw))
    hit = next((r for r in mine if r.line == line), None)
    common = {
        "claim_id": claim.id,
        "evidence_base": "artifact-internal",
        "method": "static",
        "artifact": path,
        "scope_guard": f"external referent: {tool} rule {rule}",
    }
    if hit is not None:
        return ClaimVerdict.model_validate(
            {
                **common,
                "verdict": "CONFIRMED",
                "evidence_pointer": pointer(s, path, line),
                "detail": f"re-ran {tool} on {path}: {rule} at line {line}: {hit.message}",
            }
        )
    lines = ", ".join(str(r.line) for r in mine[:5])
    elsewhere = f"; {rule} at line(s) {lines}" if mine else ""
    return ClaimVerdict.model_validate(
        {
            **common,
            "verdict": "REFUTED",
            "evidence_pointer": pointer(s, path, line),
            "detail": f"re-ran {tool} on {path}: no {rule} at line {line} ({len(ran.raw)} "
            f"finding(s) in the file{elsewhere})",
            "corrected": (
                f"{tool} reports {rule} at line(s) {lines} of {path}, not at line {line}"
                if mine
                else f"{tool} reports no {rule} in {path} in {s.label}"
            ),
        }
    )


_PYTEST_SUMMARY = re.compile(r"\b(?:passed|failed|errors?|skipped|no tests ran)\b.* in [\d.]+s")


def _test(claim: Claim, s: Surface, budget: Budget) -> ClaimVerdict:
    nodeid = claim.nodeid or ""
    cached = s.memo.get(("test", nodeid))
    if isinstance(cached, ClaimVerdict):
        return cached.model_copy(update={"claim_id": claim.id})
    if s.workdir is None:
        return unverifiable(claim, s, "no checkout to run the test in", method="test")
    # verify-dag's own interpreter re-runs as the tester ran it (tester/env/host.py): without
    # the plugins of verify-dag's own dependencies, with the pytest on PATH when it has none; a
    # project env always has pytest.
    pytest = [s.python, "-m", "pytest"]
    if s.python == sys.executable and s.runner is None:
        pytest = host.pytest_argv() or pytest
    argv = [
        *pytest,
        "-q",
        "-p",
        "no:cacheprovider",
        f"--rootdir={s.workdir.resolve()}",
        nodeid,
    ]
    timeout = budget.limit(s.test_cap)
    policy = Policy()
    if s.runner is not None:
        argv, policy = s.runner.command(argv), s.runner.policy()
    res = processes.run(argv, cwd=s.workdir, timeout=timeout, env=s.env, sandbox=policy)
    shown = f"`python -m pytest -q -p no:cacheprovider {nodeid}`"
    if res.timed_out:
        budget.cut(timeout, s.test_cap, shown)
        return unverifiable(claim, s, f"{shown} timed out after {timeout:g}s", method="test")
    lines = [ln for ln in res.stdout.splitlines() if ln.strip()]
    # pytest's own summary line: the last line, unless tox printed its own after it.
    ends = [ln for ln in lines if _PYTEST_SUMMARY.search(ln)] or lines
    summary = ends[-1].strip() if ends else gates.excerpt(res.stderr, 160)
    error = next((ln.strip() for ln in lines if ln.startswith("E ")), "")
    path = nodeid.split("::", 1)[0]
    common = {
        "claim_id": claim.id,
        "evidence_pointer": f"pytest {nodeid}@{short(s.commit)}",
        "evidence_base": "independent-rederivation",
        "method": "test",
        "artifact": path,
        "scope_guard": f"external referent: a run of {nodeid}",
    }
    if res.returncode == 0:
        verdict = ClaimVerdict.model_validate(
            {
                **common,
                "verdict": "REFUTED",
                "detail": f"{shown} passes on re-run: {summary}",
                "corrected": f"{nodeid} passes in {s.label}",
            }
        )
    elif res.returncode == 1 and ends and _PYTEST_SUMMARY.search(ends[-1]):
        # pytest's own summary, not only its exit code: a Python without pytest exits 1 too
        # ("No module named pytest"), which is no evidence that the test fails.
        verdict = ClaimVerdict.model_validate(
            {
                **common,
                "verdict": "CONFIRMED",
                "detail": f"{shown} fails on re-run: {summary}" + (f"; {error}" if error else ""),
            }
        )
    elif res.returncode in (4, 5) and "not found" in (res.stdout + res.stderr):
        moved = claim.ref is not None and claim.ref != s.commit
        verdict = ClaimVerdict.model_validate(
            {
                **common,
                "verdict": "STALE" if moved else "REFUTED",
                "method": "anchor",
                "scope_guard": "purely local: whether the cited test exists",
                "detail": f"{shown}: the test no longer exists ({summary})",
                "corrected": f"{nodeid} does not exist in {s.label}",
            }
        )
    else:
        verdict = unverifiable(
            claim, s, f"{shown} exited {res.returncode}: {summary}", method="test"
        )
    s.memo[("test", nodeid)] = verdict
    return verdict


def _size(claim: Claim, anchor: Anchor, s: Surface) -> ClaimVerdict:
    count = lines_of(anchor.text or "")
    limit, path = claim.limit or 0, claim.path or "?"
    held = count > limit
    return ClaimVerdict.model_validate(
        {
            "claim_id": claim.id,
            "verdict": "CONFIRMED" if held else "REFUTED",
            "evidence_pointer": pointer(s, path),
            "evidence_base": "artifact-internal",
            "method": "size",
            "artifact": path,
            "scope_guard": "purely local: the line count of the file itself",
            "detail": f"{path} has {count} lines in {s.label} (the claim: more than {limit})",
            "corrected": None if held else f"{path} has {count} lines, not more than {limit}",
        }
    )
