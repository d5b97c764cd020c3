"""Phase 4: run each discovered linter and type checker on the scoped files -> STATIC_SUMMARY.

Only findings on scoped files AND on added or modified lines are kept (seed Phase 4: "report only
findings in scoped files"; a finding on an untouched line is not this change's). A tool that could
not run is never silent: it becomes a severity 7 environment finding, and a phase in which no tool
ran is NOT_RUN, never an empty pass.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from verify_dag import tools, util
from verify_dag.models.findings import Finding, Location, SkillOutcome
from verify_dag.models.scope import Scope
from verify_dag.models.toolchain import Command, Toolchain
from verify_dag.phases.static import baseline
from verify_dag.sandbox import Policy
from verify_dag.tools.base import RawFinding, ToolSpec

SKILL = "static-analysis"
# Characters of file arguments per invocation: far below ARG_MAX, so `--scope=all` on a large
# repository becomes several runs instead of an E2BIG.
_ARGV_BUDGET = 100_000
_TITLE_MAX = 160


@dataclass
class ToolRun:
    name: str
    raw: list[RawFinding] = field(default_factory=list)
    failure: str | None = None  # why the tool could not run (or stopped part way)
    detail: str = ""  # the first lines of its stderr (stdout if stderr was empty), redacted


def run(scope: Scope, toolchain: Toolchain, workdir: Path, timeout: float) -> SkillOutcome:
    commands = [*toolchain.of("lint"), *toolchain.of("typecheck")]
    if not commands:
        return _skip("no linter or type checker discovered")
    files = [
        f.path
        for f in scope.included
        if f.status != "deleted" and not f.binary and (workdir / f.path).is_file()
    ]
    findings: list[Finding] = []
    # (tool, its findings' slice of `findings`, dropped-lines remark, failure); notes are
    # written once the baseline has classified the findings.
    runs: list[tuple[str, slice, str, str | None]] = []
    applicable = ran = 0
    for command in commands:
        spec = tools.spec_for(command)
        targets = [p for p in files if spec.applies_to(p)]
        if not targets:
            continue
        applicable += 1
        result = run_tool(spec, targets, workdir, timeout)
        kept, outside = _in_scope(result.raw, scope)
        start = len(findings)
        findings.extend(_finding(spec, command, r) for r in kept)
        dropped = f"{outside} outside scoped lines not reported" if outside else ""
        runs.append((spec.name, slice(start, len(findings)), dropped, result.failure))
        if result.failure is None:
            ran += 1
        else:
            findings.append(_cannot_run(spec.name, command, result))
    problems: list[str] = []
    if scope.old_commit is not None and any(f.location is not None for f in findings):
        # The workdir is a worktree of the verified repository: its object store has old_commit.
        findings = baseline.classify(scope, toolchain, findings, str(workdir), timeout, problems)
    notes = [_note(name, findings[part], dropped, failure) for name, part, dropped, failure in runs]
    notes.extend(problems)
    names = ", ".join(tools.spec_for(c).name for c in commands)
    if not applicable:
        return _skip(
            f"no files a discovered analyser covers ({len(files)} scoped file(s); "
            f"analysers: {names})"
        )
    if not ran:
        return SkillOutcome(
            skill=SKILL,
            status="NOT_RUN",
            notes=", ".join(notes),
            ran=False,
            reason="no discovered analyser could run",
            findings=tuple(findings),
        )
    return SkillOutcome(
        skill=SKILL,
        status="COMPLETED",
        notes=", ".join(notes),
        reason=f"analysers discovered: {names}",
        findings=tuple(findings),
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


def _skip(reason: str) -> SkillOutcome:
    return SkillOutcome(skill=SKILL, status="SKIPPED", notes=reason, reason=reason, ran=False)


def _count(n: int) -> str:
    return f"{n} finding" if n == 1 else f"{n} findings"


def _chunks(files: Sequence[str], takes_files: bool) -> Iterator[list[str]]:
    if not takes_files:
        yield []
        return
    chunk: list[str] = []
    size = 0
    for path in files:
        if chunk and size + len(path) > _ARGV_BUDGET:
            yield chunk
            chunk, size = [], 0
        chunk.append(path)
        size += len(path) + 1
    if chunk:
        yield chunk


def run_tool(spec: ToolSpec, files: Sequence[str], workdir: Path, timeout: float) -> ToolRun:
    result = ToolRun(spec.name)
    for chunk in _chunks(files, spec.takes_files):
        argv = spec.argv(chunk)
        if argv is None:
            result.failure = f"{spec.name} is not installed (not importable, not on PATH)"
            return result
        # The project's config (mypy plugins, make recipes, npm scripts) executes repository
        # code, so these run like the test suite: scrubbed environment, time limit, capped output.
        res = util.run(
            argv, cwd=workdir, timeout=timeout, env=util.scrubbed_env(), sandbox=Policy()
        )
        result.detail = _head(res.stderr) or _head(res.stdout)
        if res.not_found:
            result.failure = f"{argv[0]} was not found"
            return result
        if res.timed_out:
            result.failure = f"timed out after {timeout:g}s"
            return result
        raw = spec.parse(res.stdout, res.stderr, workdir)
        result.raw.extend(raw)
        if res.returncode not in spec.ok_exit_codes and not _explained(spec, raw):
            result.failure = f"exited {res.returncode}" + (
                ", output truncated" if res.truncated else ""
            )
            return result
    return result


def _explained(spec: ToolSpec, raw: list[RawFinding]) -> bool:
    """A non-ok exit code that the tool's own diagnostics account for."""
    if spec.findings_explain_exit and raw:
        return True
    return any(r.code in spec.blocking_rules for r in raw)


def _head(text: str, lines: int = 6) -> str:
    return util.redact("\n".join(text.strip().splitlines()[:lines]))


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


def _finding(spec: ToolSpec, command: Command, r: RawFinding) -> Finding:
    severity, issue_class = spec.rate(r)
    message = util.redact(r.message)
    title = f"{spec.name} {r.code}: {message}" if r.code else f"{spec.name}: {message}"
    if len(title) > _TITLE_MAX:
        title = title[: _TITLE_MAX - 3] + "..."
    where = ":".join(str(x) for x in (r.path, r.line, r.col) if x is not None)
    return Finding(
        title=title,
        severity=severity,
        description=f"{spec.name} ({command.source}) reported at {where}: {message}",
        source=SKILL,
        issue_class=issue_class,
        location=Location(path=r.path, line=r.line),
        rule=r.code,
        tool=spec.name,
    )


def _cannot_run(name: str, command: Command, result: ToolRun) -> Finding:
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
