"""Phase 2: find the repository's ``*-engineer`` skill and read what it declares.

Read straight from the commit being verified (no checkout needed): the skill is found at
``.*/skills/*-engineer/`` or ``*/skills/*-engineer/`` at the top of the repository. From SKILL.md,
the reference files it points to inside the skill directory (TESTING.md, ...) and VERIFICATION.md
we extract test/build/lint commands, the app's START/HEALTH/EXERCISE declarations and the gate
rules. Nothing here runs a command: the exerciser does, in a throwaway worktree.
"""

from __future__ import annotations

import fnmatch
import posixpath
import re
from collections.abc import Iterable

from verify_dag import git
from verify_dag.models import EngineerContext
from verify_dag.phases import gates

_GLOBS = (".*/skills/*-engineer/SKILL.md", "*/skills/*-engineer/SKILL.md")
SUMMARY_LINES = 40
MAX_REFERENCES = 8
MAX_COMMANDS = 20  # per kind
_READ_MAX = 200_000  # characters of one Markdown file that are parsed

_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.*?)[\s#]*$")
_FENCE = re.compile(r"^\s*(```|~~~)\s*([\w+-]*)")
_SHELL_LANGS = frozenset({"", "sh", "bash", "shell", "console", "zsh", "shell-session"})
# `Test: <cmd>` lines (a bullet and bold markers allowed); the kind comes from the key.
_KEY = re.compile(
    r"^\s*(?:[-*+]\s+)?(?:\*\*)?(tests?|build|lint|typecheck|type check)(?:\*\*)?"
    r"\s*:(?:\*\*)?\s*(.+?)\s*$",
    re.IGNORECASE,
)
_LINK = re.compile(r"\]\(\s*<?([^)\s#>]+)")
_BARE = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)*[\w.-]+\.md)\b")


def find_skill_dirs(paths: list[str]) -> list[str]:
    dirs = {
        p.rsplit("/", 1)[0]
        for p in paths
        if p.count("/") == 3 and any(fnmatch.fnmatchcase(p, g) for g in _GLOBS)
    }
    return sorted(dirs)


def _kind_of_heading(title: str) -> str | None:
    t = title.lower()
    if "test" in t:
        return "test"
    if any(
        w in t
        for w in ("lint", "type check", "typecheck", "type-check", "static analysis", "format")
    ):
        return "lint"
    if "build" in t or "install" in t:
        return "build"
    return None


def _kind_of_key(key: str) -> str:
    k = key.lower()
    return "test" if k.startswith("test") else "build" if k == "build" else "lint"


def _fenced_commands(lang: str, body: list[str]) -> list[str]:
    """Shell lines of a fenced block; in a console transcript only the `$ ` lines."""
    if lang.lower() not in _SHELL_LANGS:
        return []
    prompted = [ln for ln in body if ln.lstrip().startswith("$ ")]
    lines = [ln.lstrip()[2:] for ln in prompted] if prompted else body
    out: list[str] = []
    pending = ""
    for raw in lines:
        line = raw.strip()
        if pending:
            line = f"{pending} {line}"
        if line.endswith("\\"):
            pending = line[:-1].rstrip()
            continue
        pending = ""
        if line and not line.startswith("#"):
            out.append(line)
    return out


def extract_commands(markdown: str) -> dict[str, list[str]]:
    """test/build/lint commands: fenced shell blocks and `Test: cmd` lines under a Testing,
    Build or Lint heading, and `Test: \\`cmd\\`` (inline code) lines anywhere."""
    found: dict[str, list[str]] = {"test": [], "build": [], "lint": []}
    kind: str | None = None
    fence: tuple[str, list[str]] | None = None
    for line in markdown[:_READ_MAX].splitlines():
        opener = _FENCE.match(line)
        if fence is not None:
            if opener and opener.group(1) and not opener.group(2):
                if kind is not None:
                    found[kind].extend(_fenced_commands(*fence))
                fence = None
            else:
                fence[1].append(line)
            continue
        if opener:
            fence = (opener.group(2), [])
            continue
        heading = _HEADING.match(line)
        if heading:
            kind = _kind_of_heading(heading.group(1))
            continue
        key = _KEY.match(line)
        if key:
            value = key.group(2)
            quoted = len(value) >= 2 and value[0] == value[-1] == "`"
            if kind is not None or quoted:
                found[_kind_of_key(key.group(1))].append(gates.unquote(value))
    return found


def referenced_files(skill_dir: str, skill_md: str, paths: Iterable[str]) -> list[str]:
    """Markdown files SKILL.md points to (links or bare names) that exist inside the skill dir."""
    existing = set(paths)
    own = {f"{skill_dir}/SKILL.md", f"{skill_dir}/VERIFICATION.md"}
    out: list[str] = []
    for ref in [*_LINK.findall(skill_md), *_BARE.findall(skill_md)]:
        if "://" in ref or ref.startswith("/"):
            continue
        path = posixpath.normpath(posixpath.join(skill_dir, ref))
        # Only files of the skill itself: a reference must not walk out of its directory.
        if (
            path.startswith(skill_dir + "/")
            and path in existing
            and path not in own
            and path not in out
        ):
            out.append(path)
    return out[:MAX_REFERENCES]


def _unique(items: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(i for i in items if i))[:MAX_COMMANDS]


def run(repo: str, commit: str) -> EngineerContext:
    files = git.list_files(repo, commit)
    dirs = find_skill_dirs(files)
    if not dirs:
        return EngineerContext(
            summary="No engineer skill found — toolchain discovered via exploration"
        )
    skill_dir = dirs[0]
    notes = []
    if len(dirs) > 1:
        notes.append(f"several engineer skills found, using {skill_dir}: {', '.join(dirs)}")
    skill_md = git.read_file(repo, commit, f"{skill_dir}/SKILL.md") or ""
    summary = "\n".join(skill_md.splitlines()[:SUMMARY_LINES]).strip()
    verification = git.read_file(repo, commit, f"{skill_dir}/VERIFICATION.md")
    references = referenced_files(skill_dir, skill_md, files)
    texts = [
        verification or "",
        skill_md,
        *(git.read_file(repo, commit, p) or "" for p in references),
    ]
    commands: dict[str, list[str]] = {"test": [], "build": [], "lint": []}
    for text in texts:
        for kind, found in extract_commands(text).items():
            commands[kind].extend(found)
    # VERIFICATION.md is the most specific source, so its app declarations win over SKILL.md's,
    # and SKILL.md's over a reference file's.
    declared = [gates.parse(t[:_READ_MAX]) for t in texts]
    start = next((d for d in declared if d.start), None)
    own = gates.parse(verification[:_READ_MAX]) if verification else gates.ParsedGates()
    return EngineerContext(
        skill_dir=skill_dir,
        summary=summary,
        verification_md=verification,
        notes=tuple(notes),
        references=tuple(references),
        test_commands=_unique(commands["test"]),
        build_commands=_unique(commands["build"]),
        lint_commands=_unique(commands["lint"]),
        start=start.start if start else None,
        health=start.health
        if start and start.health
        else next((d.health for d in declared if d.health), None),
        start_timeout=start.start_timeout if start else None,
        exercise=next((d.exercise for d in declared if d.exercise), ()),
        exerciser_gates=tuple(g.rule for g in own.exerciser),
        review_gates=tuple(g.rule for g in own.review),
    )
