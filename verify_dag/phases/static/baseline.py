"""Static baseline: was a static finding on changed code already there at the merge base?

For each tool with findings on changed files, the same tool runs once on the old versions of the
files the change touched (modified, deleted, renamed or copied from: the code that could have
moved) in a throwaway worktree of ``scope.old_commit``, through the tool runner the static phase
uses; files the change does not touch are not linted. A finding is "pre-existing" when the old run
reported the same rule on a line with the same text (whitespace removed, so a line that moved or
was re-indented still matches) and that old line does not survive unchanged into what its file
became: an unchanged old line is still there outside the scoped lines, so it cannot be the
origin of a finding on an added line. The origin may be in another file, so a line moved into a
new file stays pre-existing. Each old finding accounts for at most one new finding (two copies
of one old line: one is introduced), preferring a finding in the file the old line was in.
Whole-file scopes (no old commit) are left unclassified.

When the baseline cannot be established (the tool fails at the merge base, the checkout fails),
the findings keep ``baseline=None`` and the reason is appended to ``problems``: unknown is never
reported as introduced.
"""

from __future__ import annotations

import difflib
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

from verify_dag import git, tools
from verify_dag.errors import FatalError
from verify_dag.models.findings import Finding
from verify_dag.models.scope import Scope
from verify_dag.models.toolchain import Command, Toolchain
from verify_dag.tools import runner
from verify_dag.tools.base import RawFinding

_Key = tuple[str, str]  # (rule, or title when the tool gives none; normalised line text)


def classify(
    scope: Scope,
    toolchain: Toolchain,
    findings: Sequence[Finding],
    repo: str,
    timeout: float,
    problems: list[str] | None = None,
    python: Path | None = None,
) -> list[Finding]:
    """``findings`` with ``baseline`` set where it can be decided (see the module docstring);
    ``python`` is the interpreter the static phase ran its tools with."""
    out = list(findings)
    if scope.old_commit is None:
        return out
    changes = {f.path: f for f in scope.included}
    sources = _sources(scope)
    pending: dict[str, list[int]] = {}  # tool -> indexes of findings to compare with the base
    for i, f in enumerate(out):
        change = changes.get(f.location.path) if f.location is not None else None
        if f.tool is None or change is None or change.status == "deleted":
            continue
        if f.location is not None and f.location.line and sources:
            pending.setdefault(f.tool, []).append(i)
        elif change.status == "added":  # no line text to match, or no old code to move
            out[i] = f.model_copy(update={"baseline": "introduced"})
    if not pending:
        return out
    notes = problems if problems is not None else []
    try:
        with git.worktree(repo, scope.old_commit) as old_dir:
            for tool, indexes in pending.items():
                _classify_tool(
                    scope,
                    toolchain,
                    tool,
                    indexes,
                    out,
                    sources,
                    repo,
                    old_dir,
                    timeout,
                    python,
                    notes,
                )
    except FatalError as exc:
        notes.append(
            f"baseline not established: cannot check out the merge base "
            f"{scope.old_commit[:12]}: {exc.message}"
        )
    return out


def _sources(scope: Scope) -> dict[str, str | None]:
    """Old paths the change touched -> the path that code has now (None: the file was deleted)."""
    out: dict[str, str | None] = {}
    for c in scope.included:
        if c.status == "deleted":
            out[c.path] = None
        elif c.status == "copied" and c.old_path:
            out.setdefault(c.old_path, c.old_path)  # the source stays (a rename of it wins)
        elif c.status != "added":
            out[c.old_path or c.path] = c.path
    return out


def _classify_tool(
    scope: Scope,
    toolchain: Toolchain,
    tool: str,
    indexes: list[int],
    out: list[Finding],
    sources: dict[str, str | None],
    repo: str,
    old_dir: Path,
    timeout: float,
    python: Path | None,
    notes: list[str],
) -> None:
    """Run ``tool`` once at the merge base and set ``baseline`` on ``out[i]`` for ``indexes``."""
    old_files = sorted(p for p in sources if (old_dir / p).is_file())
    old_raw: list[tuple[Command, RawFinding]] = []
    if old_files:
        commands = [
            c
            for c in (*toolchain.of("lint"), *toolchain.of("typecheck"))
            if tools.spec_for(c).name == tool
        ]
        for command in commands:
            spec = tools.spec_for(command)
            # The base's own configuration decides what the tool checked there.
            targets, _ = runner.targets(spec, old_files, old_dir)
            if not targets:
                continue
            result = runner.run(spec, targets, old_dir, timeout, python)
            if result.failure is not None:
                # Part of the old findings may be missing: "introduced" would be a guess.
                notes.append(
                    f"baseline not established for {tool}: it could not run at the "
                    f"merge base ({result.failure})"
                )
                return
            old_raw.extend((command, r) for r in result.raw if r.path in sources)
    new_text: dict[str, list[str]] = {}

    def text(path: str | None) -> list[str]:
        if path is None:
            return []
        if path not in new_text:
            new_text[path] = _lines(git.read_file(repo, scope.new_commit, path))
        return new_text[path]

    by_file = _old_keys(old_raw, sources, text, old_dir)
    anywhere: Counter[_Key] = Counter()
    for (_, key), n in by_file.items():
        anywhere[key] += n
    keys: dict[int, _Key] = {}
    for i in indexes:
        f = out[i]
        lines = text(_path(f))
        line = f.location.line if f.location is not None else None
        keys[i] = (f.rule or f.title, _norm(lines[line - 1] if line and line <= len(lines) else ""))
    # First the old finding's own file (a line moved within it), then anywhere the change touched
    # (a line moved into another file), so a copy elsewhere is the introduced one.
    matched: set[int] = set()
    for i in indexes:
        own = (_own_old_path(scope, _path(out[i])), keys[i])
        if by_file[own] > 0:
            by_file[own] -= 1
            anywhere[keys[i]] -= 1
            matched.add(i)
    for i in indexes:
        if i not in matched and anywhere[keys[i]] > 0:
            anywhere[keys[i]] -= 1
            matched.add(i)
    for i in indexes:
        verdict = "pre-existing" if i in matched else "introduced"
        out[i] = out[i].model_copy(update={"baseline": verdict})


def _own_old_path(scope: Scope, path: str) -> str | None:
    change = scope.file(path)
    if change is None or change.status == "added":
        return None
    return change.old_path or change.path


def _old_keys(
    old_raw: list[tuple[Command, RawFinding]],
    sources: dict[str, str | None],
    text: Callable[[str | None], list[str]],
    old_dir: Path,
) -> Counter[tuple[str | None, _Key]]:
    """Old findings that could be the origin of a new one, by old path and key."""
    keys: Counter[tuple[str | None, _Key]] = Counter()
    old_text: dict[str, list[str]] = {}
    gone: dict[str, set[int]] = {}
    for command, r in old_raw:
        if r.path not in old_text:
            old_text[r.path] = _lines(_read(old_dir / r.path))
            gone[r.path] = _not_surviving(old_text[r.path], text(sources[r.path]))
        if r.line is None or r.line not in gone[r.path]:
            continue
        # Tools that give no rule code are matched on the title static would give the finding.
        rule = r.code or runner.title(tools.spec_for(command), r)
        keys[(r.path, (rule, _norm(old_text[r.path][r.line - 1])))] += 1
    return keys


def _not_surviving(old: list[str], new: list[str]) -> set[int]:
    """1-based old line numbers that are not carried unchanged into ``new``."""
    # autojunk off: with it, frequent lines (blank, "}") are ignored when aligning.
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    kept = {
        n + 1
        for tag, a0, a1, _, _ in matcher.get_opcodes()
        if tag == "equal"
        for n in range(a0, a1)
    }
    return set(range(1, len(old) + 1)) - kept


def _path(f: Finding) -> str:
    assert f.location is not None  # only findings with a location are pending
    return f.location.path


def _read(path: Path) -> str | None:
    try:
        return path.read_bytes().decode("utf-8", "replace")
    except OSError:
        return None


def _lines(text: str | None) -> list[str]:
    return text.split("\n") if text else []


def _norm(text: str) -> str:
    return "".join(text.split())
