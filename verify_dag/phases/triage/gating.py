"""Phase 3, Job B: per-skill file assignments and the ux-reviewer / visual-verify gating.

At light Job B does not run (nobody reads its routing table there): every skill of the light
composition gets the full scoped file list and gating stays empty. At deep each changed
file's content is read from the checkout of ``scope.new_commit`` and two simple, real heuristics
decide whether the gated skills apply, each with a factual reason naming the file and evidence.
ux-reviewer looks at the changed lines (the surface the change touches); visual-verify looks at
what kind of file it is and whether it really renders (a .tsx that only exports types does not).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from verify_dag import skills
from verify_dag.models.scope import FileChange, Scope
from verify_dag.models.state import RunState
from verify_dag.models.triage import Gating, TriageResult

# The skills triage gives files to (verify_dag/skills.py): at light the tester and the one
# judgement slot; at deep those Job B focuses but never suppresses, the tester after the reviewers
# (the order skillAssignments has always been reported in), then the gated ones.
LIGHT = tuple(s.name for s in skills.SKILLS.values() if s.assigned and "light" in s.gates)
ALWAYS_ON = tuple(
    s.name
    for s in sorted(skills.SKILLS.values(), key=lambda s: s.queue != "review")
    if s.assigned and s.gates.get("deep") == "always"
)
READ_CAP = 200 * 1024
_REASON_FILES = 3  # evidence items named in a reason before "and N more"

# --- ux-reviewer: user-facing surfaces, matched on the changed lines -----------------------
# Ordered: the first pattern that matches a line names the evidence for that file.
_UX_LINE: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "CLI help text",
        re.compile(
            r"\b(?:help|usage|epilog|description|short_help)\s*=\s*[rfbu]?['\"]"
            r"|\bArgumentParser\s*\(|@(?:click|app|cli)\.(?:command|option|argument|group)\b"
            r"|\btyper\.(?:Option|Argument)\s*\(|\.(?:description|usage|option)\s*\(\s*['\"`]"
        ),
    ),
    (
        "CLI/console output",
        re.compile(
            r"(?<![\w.])print\s*\(|\b(?:click|typer)\.(?:echo|secho)\s*\("
            r"|\bsys\.(?:stdout|stderr)\.write\s*\(|\bconsole\.(?:log|info|warn|error)\s*\("
            r"|\bprocess\.(?:stdout|stderr)\.write\s*\(|\bfmt\.(?:Print|Fprint)\w*\s*\("
            r"|\be?println!\s*\("
        ),
    ),
    (
        "user-facing error message",
        re.compile(
            r"\braise\s+\w+(?:Error|Exception|Exit)\s*\(\s*[rfbu]?['\"]"
            r"|\bthrow\s+new\s+\w*Error\s*\(\s*['\"`]|\berrors\.New\s*\(\s*\"|\bfmt\.Errorf\s*\("
        ),
    ),
    (
        "API response message",
        re.compile(
            r"['\"](?:error|message|detail|msg)['\"]\s*:\s*[rfbu]?['\"`]"
            r"|[{,]\s*(?:error|message|detail)\s*:\s*['\"`]"
            r"|\bHTTPException\s*\([^)]*detail\s*=|\bjsonify\s*\(|\.status\(\s*\d+\s*\)\.(?:json|send)\("
        ),
    ),
    (
        "user-visible log output",
        re.compile(
            r"\b(?:log|logger|logging|LOG|LOGGER|_log|_logger)\s*\.\s*"
            r"(?:warning|warn|error|exception|critical|fatal)\s*\("
        ),
    ),
)
_LOCALE_EXT = frozenset({".po", ".pot", ".ftl", ".xliff", ".xlf", ".arb", ".strings"})
_LOCALE_DIR = frozenset({"locale", "locales", "i18n", "l10n", "lang", "translations", "messages"})
_LOCALE_DATA = frozenset({".json", ".yaml", ".yml", ".properties", ".toml"})
_TEST_FILE = re.compile(
    r"(?:^|/)(?:tests?|__tests__|spec)/|(?:^|/)test_[^/]*$|_test\.\w+$"
    r"|\.(?:test|spec)\.\w+$"
)

# --- visual-verify: files whose change affects the rendered page ---------------------------
_JSX = re.compile(r"</[A-Za-z][\w.]*\s*>|<[A-Za-z][\w.]*(?:\s[^<>]*)?/>|<>")
_MARKUP = re.compile(r"<[A-Za-z!][^<>]*>|\{\{|\{%")
_SFC = {".vue": "Vue component", ".svelte": "Svelte component", ".astro": "Astro component"}
_TEMPLATE_EXT = frozenset(
    {
        ".html",
        ".htm",
        ".j2",
        ".jinja",
        ".jinja2",
        ".njk",
        ".hbs",
        ".ejs",
        ".erb",
        ".liquid",
        ".twig",
        ".mustache",
    }
)
_STYLE_EXT = frozenset({".css", ".scss", ".sass", ".less", ".styl", ".pcss"})
_ASSET_EXT = frozenset(
    {
        ".svg",
        ".png",
        ".jpg",
        ".jpeg",
        ".gif",
        ".webp",
        ".avif",
        ".ico",
        ".woff",
        ".woff2",
        ".ttf",
        ".otf",
    }
)
_ASSET_DIR = frozenset({"public", "static", "assets"})
# Design tokens: a design-tokens file or directory, tokens.json/yaml/css-like data, or a tailwind
# config. Not any "token" in a path: auth tokens are no design surface.
_TOKENS = re.compile(
    r"(?:^|/)design[-_.]?tokens|(?:^|/)tokens(?:/|\.(?:json|ya?ml|css|scss|less)$)"
    r"|(?:^|/)tailwind\.config\.[cm]?[jt]s$",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class _File:
    change: FileChange
    text: str | None  # None: binary, unreadable or missing in the checkout


def scoped_files(scope: Scope) -> tuple[str, ...]:
    """The full scoped file list: included paths that still exist on the new side."""
    return tuple(c.path for c in scope.included if c.status != "deleted")


def run(state: RunState, workdir: Path) -> TriageResult:
    """TRIAGE_RESULT for the run's depth; a pure function of the state and the checkout."""
    scope = state.scope
    if scope is None or state.stopped:
        return TriageResult()
    files = scoped_files(scope)
    req = state.request
    if req.depth == "light":
        return TriageResult(skill_assignments={s: files for s in LIGHT}, job_b=False)
    assignments = {s: files for s in ALWAYS_ON}
    if scope.mode == "all":
        # --scope=all is a comprehensive audit: no triage, every skill on everything.
        why = "--scope=all: comprehensive audit skips triage and runs every skill on everything"
        ux = Gating(applies=True, reason=why, files=files)
        visual = Gating(applies=True, reason=why, files=files)
        job_b = False
    else:
        read = [_read(workdir, c) for c in scope.included if c.status != "deleted"]
        ux, visual, job_b = _ux(read), _visual(read), True
    ux = _override(ux, req.skip_ux, "--skip-ux")
    visual = _override(visual, req.skip_visual, "--skip-visual")
    assignments["ux-reviewer"] = ux.files if ux.applies else ()
    assignments["visual-verify"] = visual.files if visual.applies else ()
    return TriageResult(
        skill_assignments=assignments,
        gating={"ux-reviewer": ux, "visual-verify": visual},
        job_b=job_b,
    )


def _override(gate: Gating, forced: bool, flag: str) -> Gating:
    # The user's flag wins, but what triage saw stays visible in the reason.
    if not forced:
        return gate
    return Gating(applies=False, reason=f"{flag} (triage: {gate.reason})", files=gate.files)


def _read(workdir: Path, change: FileChange) -> _File:
    if change.binary:
        return _File(change, None)
    try:
        with (workdir / change.path).open("rb") as fh:
            data = fh.read(READ_CAP)
    except OSError:
        return _File(change, None)
    if b"\0" in data[:8192]:
        return _File(change, None)
    return _File(change, data.decode("utf-8", errors="replace"))


def _changed_lines(f: _File) -> list[tuple[int, str]]:
    """(line number, text) of the new side's added or modified lines: whole file when new."""
    lines = (f.text or "").splitlines()
    ranges = f.change.lines
    if ranges is None:
        return list(enumerate(lines, 1))
    return [(n, lines[n - 1]) for r in ranges for n in range(r.start, r.end + 1) if n <= len(lines)]


def _ux_evidence(f: _File) -> str | None:
    path = PurePosixPath(f.change.path)
    suffix = path.suffix.lower()
    dirs = {p.lower() for p in path.parts[:-1]}
    if suffix in _LOCALE_EXT or (suffix in _LOCALE_DATA and dirs & _LOCALE_DIR):
        return f"i18n/locale strings modified in {f.change.path}"
    if f.text is None or _TEST_FILE.search(f.change.path):
        return None  # tests and binaries are no user's surface
    markup = _markup_evidence(f)
    if markup is not None:
        return f"UI component/template modified in {f.change.path} ({markup})"
    for number, line in _changed_lines(f):
        for kind, pattern in _UX_LINE:
            m = pattern.search(line)
            if m:
                what = _clip(m.group(0).rstrip("'\"`( "))
                return f"{kind} modified in {f.change.path} ({what}, line {number})"
    return None


def _ux(read: Sequence[_File]) -> Gating:
    found = [(f.change.path, e) for f in read if (e := _ux_evidence(f)) is not None]
    if found:
        return Gating(
            applies=True, reason=_join([e for _, e in found]), files=tuple(p for p, _ in found)
        )
    unread = sum(1 for f in read if f.text is None)
    note = f", {unread} binary or unreadable file(s) not inspected" if unread else ""
    return Gating(
        applies=False,
        reason=(
            f"no user-facing surface in the changed lines of {len(read)} file(s): no UI components "
            "or templates, CLI output or help text, error or API response messages, warning/error "
            f"logs or locale files{note}"
        ),
    )


def _visual_evidence(f: _File) -> str | None:
    path = PurePosixPath(f.change.path)
    suffix = path.suffix.lower()
    dirs = {p.lower() for p in path.parts[:-1]}
    text = f.text or ""
    if suffix in _ASSET_EXT and dirs & _ASSET_DIR:
        return f"public asset {suffix} under {'/'.join(path.parts[:-1])}/"
    if _TOKENS.search(f.change.path) and suffix not in _ASSET_EXT:
        return "design tokens / theme"
    if f.text is None or _TEST_FILE.search(f.change.path):
        return None
    if suffix in _STYLE_EXT:
        return "stylesheet" if text.strip() else None
    return _markup_evidence(f)


def _markup_evidence(f: _File) -> str | None:
    """Components and templates that really render markup (content, not just the extension)."""
    suffix = PurePosixPath(f.change.path).suffix.lower()
    text = f.text or ""
    if suffix in _SFC:
        return f"{_SFC[suffix]} markup" if _MARKUP.search(text) else None
    if suffix in (".tsx", ".jsx"):
        return "JSX markup" if _JSX.search(text) else None
    if suffix in _TEMPLATE_EXT:
        return "template markup" if _MARKUP.search(text) else None
    return None


def _visual(read: Sequence[_File]) -> Gating:
    found = [
        (f.change.path, f"{e} in {f.change.path}")
        for f in read
        if (e := _visual_evidence(f)) is not None
    ]
    if found:
        return Gating(
            applies=True, reason=_join([e for _, e in found]), files=tuple(p for p, _ in found)
        )
    # Name the near misses, so the skip says what was looked at and why it does not render.
    near = [
        f"{f.change.path} has no JSX markup"
        for f in read
        if PurePosixPath(f.change.path).suffix.lower() in (".tsx", ".jsx")
    ]
    near += [
        f"{f.change.path} is configuration"
        for f in read
        if PurePosixPath(f.change.path).suffix.lower() in (".json", ".yaml", ".yml", ".toml")
    ]
    detail = f" ({_join(near)})" if near else ""
    return Gating(applies=False, reason=f"no UI-rendering files in scope{detail}")


def _join(items: Sequence[str]) -> str:
    shown = "; ".join(items[:_REASON_FILES])
    rest = len(items) - _REASON_FILES
    return f"{shown}; and {rest} more" if rest > 0 else shown


def _clip(text: str, limit: int = 40) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
