"""Static baseline: was a static finding on changed code already there at the merge base?

For each tool with findings on changed files, the same tool runs once at ``scope.old_commit``
(in the run's checkout of it, through the tool runner the static phase uses, so an earlier run's
answer comes from the result cache) on the old versions of the files that could hold a
finding's origin: files the change touched (modified, deleted, renamed or copied from: the code
that could have moved) that lost a line reading like a finding's line. A change whose findings
all sit on lines no touched file lost is classified without running anything at the base, and
files the change does not touch are never linted. A finding is "pre-existing" when the old run
reported the same rule on a line with the same text (whitespace removed, so a line that moved or
was re-indented still matches) and that old line does not survive unchanged into what its file
became: an unchanged old line is still there outside the scoped lines, so it cannot be the
origin of a finding on an added line. The origin may be in another file, so a line moved into a
new file stays pre-existing. Each old finding accounts for at most one new finding (two copies
of one old line: one is introduced), preferring a finding in the file the old line was in.
A finding on a line the change edited in place is pre-existing too when the old line it replaced
had the same finding (same rule, same message: ruff's F401 names the unused import), so adding a
name to an import line does not make its old unused name "introduced". Whole-file scopes (no
old commit) are left unclassified.

When the baseline cannot be established (the tool fails at the merge base, the checkout fails),
the findings keep ``baseline=None`` and the reason is appended to ``problems``: unknown is never
reported as introduced.

A classification established whole is kept in the result cache (:func:`classify_cached`): an
unchanged re-verify neither checks the merge base out nor reads and compares the two sides again.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

from pydantic import ValidationError

from verify_dag import git, resultcache, tools, workspace
from verify_dag.errors import FatalError
from verify_dag.models.findings import Finding
from verify_dag.models.scope import Scope
from verify_dag.models.toolchain import Command, Toolchain
from verify_dag.phases.static.texts import Texts, sources_of
from verify_dag.tools import runner
from verify_dag.tools.base import RawFinding

_Key = tuple[str, str]  # (rule, or title when the tool gives none; normalised line text)


_KIND = "baseline"


def classify_cached(
    scope: Scope,
    toolchain: Toolchain,
    findings: Sequence[Finding],
    repo: str,
    timeout: float,
    problems: list[str],
    python: Path | Callable[[], tuple[Path | None, bool]] | None = None,
    run_id: str | None = None,
    project: str | None = None,
) -> list[Finding]:
    """:func:`classify`, answered from the result cache when the same findings of the same
    change (its two commits and files, the toolchain, verify-dag and its tools) were classified
    before; only a classification that ``problems`` says nothing about is kept."""
    entry = resultcache.key(
        resultcache.host_key(),
        _KIND,
        scope.old_commit or "",
        scope.new_commit,
        json.dumps([c.model_dump(mode="json") for c in scope.included], sort_keys=True),
        toolchain.model_dump_json(),
        json.dumps([f.model_dump(mode="json") for f in findings], sort_keys=True),
        project or "",
    )
    cached = resultcache.get(_KIND, entry, "baseline classification")
    if isinstance(cached, list) and len(cached) == len(findings):
        try:
            return [Finding.model_validate(f) for f in cached]
        except ValidationError:
            pass  # an entry of another shape: classified again, and replaced
    said: list[str] = []
    out = classify(scope, toolchain, findings, repo, timeout, said, python, run_id, project)
    problems.extend(said)
    if not said:
        resultcache.put(_KIND, entry, [f.model_dump(mode="json") for f in out])
    return out


def classify(
    scope: Scope,
    toolchain: Toolchain,
    findings: Sequence[Finding],
    repo: str,
    timeout: float,
    problems: list[str] | None = None,
    python: Path | Callable[[], tuple[Path | None, bool]] | None = None,
    run_id: str | None = None,
    project: str | None = None,
) -> list[Finding]:
    """``findings`` with ``baseline`` set where it can be decided (see the module docstring);
    ``python`` is the interpreter the static phase ran its tools with (or how to get it, when
    a tool must run); ``run_id`` names the run whose checkouts the base shares (None: a
    throwaway one)."""
    out = list(findings)
    if scope.old_commit is None:
        return out
    changes = {f.path: f for f in scope.included}
    sources = sources_of(scope)
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
    texts = Texts(repo, scope)
    wanted: dict[str, list[str]] = {}  # tool -> old files that could hold an origin
    for tool, indexes in pending.items():
        keys = {i: _key(out[i], texts) for i in indexes}
        wanted[tool] = _candidates(sources, texts, {k[1] for k in keys.values()})
        # A finding on a line the change edited may be the old line's own finding, whatever the
        # edit did to its text: its file is looked at too (``_edited``).
        for i in indexes:
            own = _edited(scope, texts, out[i])
            if own is not None and own[0] not in wanted[tool]:
                wanted[tool].append(own[0])
        if not wanted[tool]:
            # No touched file lost a line reading like any of these: nothing at the base can be
            # their origin, and the tool need not run there.
            for i in indexes:
                out[i] = out[i].model_copy(update={"baseline": "introduced"})
    pending = {tool: ix for tool, ix in pending.items() if wanted[tool]}
    if not pending:
        return out
    checkout = (
        workspace.checkout(run_id, repo, scope.old_commit)
        if run_id is not None
        else git.worktree(repo, scope.old_commit)
    )
    try:
        with checkout as old_dir:
            for tool, indexes in pending.items():
                _classify_tool(
                    toolchain,
                    tool,
                    indexes,
                    out,
                    sources,
                    texts,
                    wanted[tool],
                    old_dir,
                    timeout,
                    python,
                    notes,
                    scope,
                    project,
                )
    except FatalError as exc:
        notes.append(
            f"baseline not established: cannot check out the merge base "
            f"{scope.old_commit[:12]}: {exc.message}"
        )
    return out


def _key(f: Finding, texts: Texts) -> _Key:
    lines = texts.new(_path(f))
    line = f.location.line if f.location is not None else None
    return (f.rule or f.title, _norm(lines[line - 1] if line and line <= len(lines) else ""))


def _candidates(sources: dict[str, str | None], texts: Texts, wanted: set[str]) -> list[str]:
    """Old files the change touched that lost a line whose text is one of ``wanted``."""
    out = []
    for path, lines in texts.old(sorted(sources)).items():
        if not lines:
            continue
        gone = texts.gone(path, sources[path])
        if any(_norm(lines[n - 1]) in wanted for n in gone if n <= len(lines)):
            out.append(path)
    return out


def _classify_tool(
    toolchain: Toolchain,
    tool: str,
    indexes: list[int],
    out: list[Finding],
    sources: dict[str, str | None],
    texts: Texts,
    candidates: list[str],
    old_dir: Path,
    timeout: float,
    python: Path | Callable[[], tuple[Path | None, bool]] | None,
    notes: list[str],
    scope: Scope,
    project: str | None = None,
) -> None:
    """Run ``tool`` once at the merge base and set ``baseline`` on ``out[i]`` for ``indexes``."""
    old_files = [p for p in candidates if (old_dir / p).is_file()]
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
            memo = runner.Memo.of(command, old_dir, project)
            result = runner.cached(spec, targets, memo)
            if result is None:
                interpreter, degraded = python() if callable(python) else (python, False)
                result = runner.run(
                    spec, targets, old_dir, timeout, interpreter, memo, store=not degraded
                )
            if result.failure is not None:
                # Part of the old findings may be missing: "introduced" would be a guess.
                notes.append(
                    f"baseline not established for {tool}: it could not run at the "
                    f"merge base ({result.failure})"
                )
                return
            kept = set(old_files)
            old_raw.extend((command, r) for r in result.raw if r.path in kept)
    by_file = _old_keys(old_raw, sources, texts)
    anywhere: Counter[_Key] = Counter()
    for (_, key), n in by_file.items():
        anywhere[key] += n
    keys = {i: _key(out[i], texts) for i in indexes}
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
    # Last, a line the change edited in place (``import os`` became ``import os, sys``): the
    # finding is pre-existing when the old line it replaced had the same finding, the same rule
    # and the same message (ruff's F401 names the unused import), and no other new finding took
    # that old one already.
    for i in indexes:
        edited = None if i in matched else _edited(scope, texts, out[i])
        if edited is None:
            continue
        old_path, old_lines = edited
        for command, r in old_raw:
            spec = tools.spec_for(command)
            if r.path != old_path or r.line not in old_lines:
                continue
            if runner.title(spec, r) != out[i].title:
                continue
            old_key = (
                r.code or runner.title(spec, r),
                _norm(texts.old([r.path])[r.path][r.line - 1]),
            )
            if by_file[(r.path, old_key)] > 0:
                by_file[(r.path, old_key)] -= 1
                anywhere[old_key] -= 1
                matched.add(i)
                break
    for i in indexes:
        verdict = "pre-existing" if i in matched else "introduced"
        out[i] = out[i].model_copy(update={"baseline": verdict})


def _edited(scope: Scope, texts: Texts, f: Finding) -> tuple[str, set[int]] | None:
    """When ``f`` sits on a line the change edited in place (a hunk of git's diff of the file's
    two versions that replaced old lines with new ones): the file's old path and the 1-based old
    lines that hunk replaced."""
    if f.location is None or not f.location.line:
        return None
    old_path = _own_old_path(scope, f.location.path)
    if old_path is None:
        return None
    at = f.location.line
    for a, b, c, d in texts.hunks(old_path, f.location.path):
        if b and d and c <= at < c + d:
            return old_path, set(range(a, a + b))
    return None


def _own_old_path(scope: Scope, path: str) -> str | None:
    change = scope.file(path)
    if change is None or change.status == "added":
        return None
    return change.old_path or change.path


def _old_keys(
    old_raw: list[tuple[Command, RawFinding]],
    sources: dict[str, str | None],
    texts: Texts,
) -> Counter[tuple[str | None, _Key]]:
    """Old findings that could be the origin of a new one, by old path and key."""
    keys: Counter[tuple[str | None, _Key]] = Counter()
    gone: dict[str, set[int]] = {}
    old_text = texts.old(sorted({r.path for _, r in old_raw}))
    for command, r in old_raw:
        if r.path not in gone:
            gone[r.path] = texts.gone(r.path, sources[r.path])
        if r.line is None or r.line not in gone[r.path]:
            continue
        # Tools that give no rule code are matched on the title static would give the finding.
        rule = r.code or runner.title(tools.spec_for(command), r)
        keys[(r.path, (rule, _norm(old_text[r.path][r.line - 1])))] += 1
    return keys


def _path(f: Finding) -> str:
    assert f.location is not None  # only findings with a location are pending
    return f.location.path


def _norm(text: str) -> str:
    return "".join(text.split())
