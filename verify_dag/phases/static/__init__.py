"""Phase 4: run each discovered linter and type checker on the scoped files -> STATIC_SUMMARY.

Each tool checks what the project's configuration gives it (mypy's ``files`` and ``exclude``,
ruff's excludes); only findings on scoped files AND on added or modified lines are kept: a
finding on an untouched line is not this change's. A tool that could not run is never silent: it
becomes a severity 7 environment finding, and a phase in which no tool ran is NOT_RUN, never an
empty pass (see docs/report.md for the statuses, docs/static.md for how each tool is run and
rated). Each tool runs through :mod:`verify_dag.tools.runner`.
"""

from __future__ import annotations

import contextvars
import functools
import os
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Literal

from verify_dag import declarations, git, tools
from verify_dag.models.findings import Finding, Location, SkillOutcome, ToolUse
from verify_dag.models.scope import Scope
from verify_dag.models.toolchain import Command, Toolchain
from verify_dag.paths import cache_root
from verify_dag.phases.static import baseline
from verify_dag.phases.tester.env import registry
from verify_dag.tools import pinned, runner
from verify_dag.tools.base import RawFinding, ToolSpec

SKILL = "static-analysis"


# The project env's interpreter (None: verify-dag's own) and whether that is a fallback from an
# env the project declares but that could not be built; asked for only when a tool must run.
ProjectPython = Callable[[], tuple[Path | None, bool]]


def _known(python: Path | None) -> ProjectPython:
    return lambda: (python, False)


def run(
    scope: Scope,
    toolchain: Toolchain,
    workdir: Path,
    timeout: float,
    python: Path | ProjectPython | None = None,
    run_id: str | None = None,
    project: str | None = None,
) -> SkillOutcome:
    """``python``: the project's test-environment interpreter (see
    :func:`verify_dag.tools.runner.run`), or how to get it: it is built only when a tool run is
    not in the result cache. ``run_id``: the run whose checkout of the merge base the baseline
    shares; ``project``: the repository (path or URL) whose tool caches the tools keep."""
    env = python if callable(python) else _known(python)
    commands = [*toolchain.of("lint"), *toolchain.of("typecheck")]
    declared = _declarations(scope, toolchain, workdir)
    if not commands:
        return _with_declarations(_skip("no linter or type checker discovered"), declared)
    # A tool that cannot read its configuration because the change broke the file it is in
    # did not run for that reason: one finding on the file says so, not one per tool.
    configuring = declarations.named(toolchain.broken, declarations.CONFIGURING)
    files = [
        f.path
        for f in scope.included
        if f.status != "deleted" and not f.binary and (workdir / f.path).is_file()
    ]
    findings: list[Finding] = []
    pins = pinned.read(workdir)
    # (tool, its findings' slice of `findings`, dropped-lines remark, failure); notes are
    # written once the baseline has classified the findings.
    runs: list[tuple[str, slice, str, str | None]] = []
    left_out: list[str] = []  # tools the project's configuration gives none of the files
    used: list[ToolUse] = []  # every tool that was run (or answered from the cache)
    applicable = ran = 0
    # (command, its spec, remark on its targets, its run when known before any tool runs).
    planned: list[tuple[Command, ToolSpec, str, runner.ToolRun | None]] = []
    pending: dict[int, tuple[str, Callable[[], runner.ToolRun]]] = {}
    for command in commands:
        spec = tools.spec_for(command)
        targets, remark = runner.targets(spec, files, workdir)
        if not targets:
            if remark:
                left_out.append(f"{spec.name}: {remark}")
            continue
        applicable += 1
        memo = runner.Memo.of(command, workdir, project)
        result = runner.cached(spec, targets, memo)
        if result is None:
            # Not (wholly) in the result cache: the tool runs, in the env it runs in.
            env_python, degraded = env()
            tool_python, unprovisioned = _declared_env(command, workdir, env_python, timeout)
            if unprovisioned is not None:
                result = runner.ToolRun(spec.name, failure=unprovisioned)
            else:
                pending[len(planned)] = (
                    spec.name,
                    functools.partial(
                        runner.run,
                        spec,
                        targets,
                        workdir,
                        timeout,
                        tool_python,
                        memo,
                        store=not degraded,
                    ),
                )
        planned.append((command, spec, remark, result))
    done = _side_by_side(pending)
    for n, (command, spec, remark, known) in enumerate(planned):
        result = known if known is not None else done[n]
        kept, outside = _in_scope(result.raw, scope)
        if spec.settle is not None:
            kept = spec.settle(kept, result.raw, workdir)
        kept, unhooked = _hooked(kept, pins.get(spec.name))
        if unhooked:
            remark = ", ".join(x for x in (remark, unhooked) if x)
        start = len(findings)
        findings.extend(runner.finding(spec, command, r, SKILL) for r in kept)
        dropped = ", ".join(
            x
            for x in (f"{outside} outside scoped lines not reported" if outside else "", remark)
            if x
        )
        failure = result.failure
        # A tool that is not installed did not stop on the broken file; one that ran did.
        stopped = configuring if command.exists else ()
        if failure is not None and stopped:
            failure = f"{failure}; {declarations.because(stopped)}"
        runs.append((spec.name, slice(start, len(findings)), dropped, failure))
        used.append(ToolUse(tool=spec.name, version=result.version, completed=failure is None))
        if result.failure is None:
            ran += 1
        elif not stopped:
            findings.append(_cannot_run(spec.name, command, result))
    problems: list[str] = []
    if scope.old_commit is not None and any(f.location is not None for f in findings):
        # The workdir is a worktree of the verified repository: its object store has old_commit.
        findings = baseline.classify_cached(
            scope, toolchain, findings, str(workdir), timeout, problems, env, run_id, project
        )
    notes = [_note(name, findings[part], dropped, failure) for name, part, dropped, failure in runs]
    notes.extend(left_out)
    notes.extend(problems)
    names = ", ".join(tools.spec_for(c).name for c in commands)
    if not applicable:
        why = f"; {'; '.join(left_out)}" if left_out else ""
        skipped = _skip(
            f"no files a discovered analyser covers ({len(files)} scoped file(s); "
            f"analysers: {names}){why}"
        )
        return _with_declarations(skipped, declared)
    if not ran:
        outcome = SkillOutcome(
            skill=SKILL,
            status="NOT_RUN",
            notes=", ".join(notes),
            ran=False,
            reason="no discovered analyser could run",
            findings=tuple(findings),
            tools=tuple(used),
        )
        return _with_declarations(outcome, declared)
    outcome = SkillOutcome(
        skill=SKILL,
        status="COMPLETED",
        notes=", ".join(notes),
        reason=f"analysers discovered: {names}",
        findings=tuple(findings),
        tools=tuple(used),
    )
    return _with_declarations(outcome, declared)


def _side_by_side(
    pending: dict[int, tuple[str, Callable[[], runner.ToolRun]]],
) -> dict[int, runner.ToolRun]:
    """Each pending tool run's result, by its place: the tools are independent of each other
    and mostly wait on one process each, so they run at once, as many as there are cores. Runs
    of one tool stay one after another: they share that tool's cache directory. Each runs in
    a copy of the caller's context, which holds the run's settings (``--no-cache``, the
    sandbox it requires)."""
    by_tool: dict[str, list[int]] = {}
    for n, (name, _) in pending.items():
        by_tool.setdefault(name, []).append(n)

    def in_turn(places: list[int]) -> dict[int, runner.ToolRun]:
        return {n: pending[n][1]() for n in places}

    if len(by_tool) <= 1:
        return {n: call() for n, (_, call) in pending.items()}
    done: dict[int, runner.ToolRun] = {}
    workers = max(1, min(len(by_tool), os.cpu_count() or 1))
    contexts = [contextvars.copy_context() for _ in by_tool]
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="static-tool") as pool:
        for part in pool.map(lambda c, p: c.run(in_turn, p), contexts, by_tool.values()):
            done.update(part)
    return done


def _declarations(scope: Scope, toolchain: Toolchain, workdir: Path) -> list[Finding]:
    """A finding for each declaration file of the checkout that does not parse; introduced when
    the file parsed at the merge base (or was not there), pre-existing when it did not either."""
    out = []
    for b in toolchain.broken:
        baseline: Literal["introduced", "pre-existing"] | None = None
        if scope.old_commit is not None:
            old = git.read_file(workdir, scope.old_commit, b.path)
            before = declarations.check(b.path, old) if old is not None else None
            baseline = "pre-existing" if before is not None else "introduced"
        out.append(
            Finding(
                title=f"{b.path} does not parse",
                severity=9,
                description=(
                    f"{b.path} is not valid {b.parser} (line {b.line}"
                    f"{f', column {b.column}' if b.column else ''}): {b.message}. "
                    f"{declarations.CONSEQUENCE[b.path]} What could not run for this reason "
                    "says so in its notes."
                ),
                source=SKILL,
                issue_class="correctness",
                location=Location(path=b.path, line=b.line, column=b.column),
                rule="declaration-syntax",
                tool="verify-dag",
                baseline=baseline,
            )
        )
    return out


def _with_declarations(outcome: SkillOutcome, declared: list[Finding]) -> SkillOutcome:
    """The phase's outcome with the declaration files that do not parse: reading them is
    analysis that ran, so the phase is COMPLETED with them even where no linter could run."""
    if not declared:
        return outcome
    said = f"{len(declared)} declaration file(s) do not parse: " + ", ".join(
        f.location.path for f in declared if f.location is not None
    )
    return outcome.model_copy(
        update={
            "status": "COMPLETED",
            "ran": True,
            "notes": "; ".join(x for x in (said, outcome.notes) if x),
            "reason": outcome.reason if outcome.ran else "declaration files read",
            "findings": (*declared, *outcome.findings),
        }
    )


def _note(name: str, found: list[Finding], dropped: str, failure: str | None) -> str:
    """E.g. "ruff (3 findings: 2 introduced, 1 pre-existing; 1 outside scoped lines ...)"."""
    if failure is not None:
        partial = f" ({_count(len(found))} from the part that ran)" if found else ""
        return f"{name} could not run: {failure}{partial}"
    detail, sep = _count(len(found)), ", "
    counts = Counter(f.baseline for f in found)
    if counts["introduced"] or counts["pre-existing"]:
        parts = [f"{counts[k]} {k}" for k in ("introduced", "pre-existing") if counts[k]]
        parts += [f"{counts[None]} not classified"] if counts[None] else []
        detail, sep = f"{detail}: {', '.join(parts)}", "; "
    return f"{name} ({detail}{sep + dropped if dropped else ''})"


def _declared_env(
    command: Command, workdir: Path, python: Path | None, timeout: float
) -> tuple[Path | None, str | None]:
    """The interpreter whose env runs ``command``, and why it could not be built (None when it
    was). A tool that a named tox env runs is provisioned from that env's declaration by tox:
    one not installed here (pyright in a typing env) is NOT run only when that fails, with the
    installer's reason; ruff or mypy then run from that env, at the version it pins."""
    if command.exists and command.tool is None:
        return python, None
    # ruff or mypy run by a named env (a tox env's commands): that env holds the version the
    # project pins (and, unless it skips the install, the project and its dependencies for
    # mypy's imports).
    found = registry.tool_env(workdir, command.source, cache_root(), timeout)
    if found is None:
        return python, None
    builder, env = found
    if env.error is None:
        return env.python, None
    if command.exists:
        return python, None  # verify-dag's own copy, as when nothing is pinned
    return None, f"{builder} could not provision env {env.name} that declares it: {env.error}"


def _hooked(raw: list[RawFinding], pin: pinned.Pin | None) -> tuple[list[RawFinding], str]:
    """The findings in files the project's pre-commit hook for the tool is handed (its
    ``files`` and ``exclude``): where the project runs the tool through pre-commit, a file
    the hook never sees is not checked by it. Also (kept, remark on what was left out)."""
    if pin is None:
        return raw, ""
    kept = [r for r in raw if pin.applies(r.path)]
    gone = len(raw) - len(kept)
    return kept, (f"{gone} in files its pre-commit hook excludes not reported" if gone else "")


def _skip(reason: str) -> SkillOutcome:
    return SkillOutcome(skill=SKILL, status="SKIPPED", notes=reason, reason=reason, ran=False)


def _count(n: int) -> str:
    return f"{n} finding" if n == 1 else f"{n} findings"


def _in_scope(raw: list[RawFinding], scope: Scope) -> tuple[list[RawFinding], int]:
    """Findings on scoped files and scoped lines, deduplicated; and how many were dropped."""
    kept: dict[tuple[str, int | None, int | None, str | None, str], RawFinding] = {}
    changes = {f.path: f for f in scope.included}
    outside = 0
    for r in raw:
        change = changes.get(r.path)
        if change is None or not change.covers(r.line):
            outside += 1
            continue
        kept.setdefault((r.path, r.line, r.col, r.code, r.message), r)
    return list(kept.values()), outside


def _cannot_run(name: str, command: Command, result: runner.ToolRun) -> Finding:
    detail = f"\n{result.detail}" if result.detail else ""
    return Finding(
        title=f"{name} could not run",
        severity=7,
        description=(
            f"{name} (discovered in {command.source}) could not run: {result.failure}. "
            f"Its findings are missing from this report, not absent.{detail}"
        ),
        source=SKILL,
        issue_class="environment",
        tool=name,
    )
