"""Fix options for one issue, made on a worker against the verified commit (never the user's
checkout): the tool's own fix where the tool knows it (ruff's, for fixable rules), then the model
backend's. Each option is a patch that ``git apply --check`` accepted on the verified commit.

A model is asked for line-range replacements, not a diff (:mod:`.patches` makes the diff); an
option whose edits do not fit the file is dropped with the reason in the notes.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from verify_dag import git, processes
from verify_dag.backends import config
from verify_dag.backends.invoke import invoke
from verify_dag.fixes import patches
from verify_dag.models.fixes import FixOption, Proposals
from verify_dag.models.report import ReportIssue
from verify_dag.tools.base import python_tool_argv

MAX_OPTIONS = 3
RUFF_TIMEOUT = 60.0
CONTEXT_LINES = 20  # lines of code either side of the issue the model sees
# The name the backend settings know the fixer by ([skills.fixer] model/effort, docs/fixes.md).
SKILL = "fixer"
PROMPT_MARK = "Propose fixes for one issue"


def propose(workdir: Path, issue: ReportIssue) -> Proposals:
    """Up to three options for ``issue`` in the checkout ``workdir`` of the verified commit."""
    notes: list[str] = []
    options = _ruff(workdir, issue, notes)
    if len(options) < MAX_OPTIONS:
        options += _model(workdir, issue, MAX_OPTIONS - len(options), notes)
    if not options and not notes:
        notes.append("no tool knows a fix for it and no model was asked")
    return Proposals(issue=issue.id, options=tuple(options), notes=tuple(notes))


# --- the tool's own fix -------------------------------------------------------------------------


def _ruff(workdir: Path, issue: ReportIssue, notes: list[str]) -> list[FixOption]:
    loc = issue.location
    if issue.tool != "ruff" or not issue.rule or loc is None or loc.line is None:
        return []
    base = python_tool_argv("ruff")
    if base is None:
        notes.append("ruff is not installed on the worker, so its fix could not be read")
        return []
    argv = [*base, "check", "--output-format=json", "--no-cache", "--no-fix", "--force-exclude"]
    res = processes.run(
        [*argv, f"--select={issue.rule}", "--", loc.path],
        cwd=workdir,
        timeout=RUFF_TIMEOUT,
        env=processes.scrubbed_env(),
    )
    try:
        found = json.loads(res.stdout or "[]")
    except json.JSONDecodeError:
        notes.append(f"ruff gave no JSON (exit {res.returncode}): {res.stderr.strip()[:200]}")
        return []
    hit = next(
        (
            v
            for v in found
            if v.get("code") == issue.rule and (v.get("location") or {}).get("row") == loc.line
        ),
        None,
    )
    fix = (hit or {}).get("fix")
    if not fix or not fix.get("edits"):
        notes.append(f"ruff has no fix for {issue.rule} here")
        return []
    text = (workdir / loc.path).read_text(encoding="utf-8")
    patch_text = patches.unified(loc.path, text, _ruff_edits(text, fix["edits"]))
    safe = fix.get("applicability") == "safe"
    label = "Apply ruff's fix" if safe else "Apply ruff's unsafe fix"
    why = fix.get("message") or f"ruff's fix for {issue.rule}"
    caution = "" if safe else " (ruff marks it unsafe: it may change behaviour)"
    desc = f"{why} at {loc.path}:{loc.line}{caution}"
    return [
        FixOption(
            label=label,
            description=desc,
            origin="ruff",
            patch=patch_text,
            files=(loc.path,),
            unsafe=not safe,
        )
    ]


def _ruff_edits(text: str, edits: list[dict[str, Any]]) -> str:
    """``text`` with ruff's edits made (rows and columns 1-based, columns in characters)."""
    starts = [0]
    for line in text.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))

    def offset(pos: dict[str, int]) -> int:
        row = min(pos["row"], len(starts))
        return min(starts[row - 1] + pos["column"] - 1, len(text))

    out = text
    for e in sorted(edits, key=lambda e: offset(e["location"]), reverse=True):
        out = (
            out[: offset(e["location"])]
            + (e.get("content") or "")
            + out[offset(e["end_location"]) :]
        )
    return out


# --- the model's ------------------------------------------------------------------------------


def prompt(workdir: Path, issue: ReportIssue) -> str:
    loc = issue.location
    where = "no location"
    code = ""
    if loc is not None:
        where = f"{loc.path}:{loc.line}" if loc.line else loc.path
        code = excerpt(workdir / loc.path, loc.line, CONTEXT_LINES)
    return f"""{PROMPT_MARK} found by verifying a code change.

Issue {issue.id} (severity {issue.severity}, found by {", ".join(issue.sources)}):
{issue.title}
{issue.description}
Location: {where}

The code (line numbers on the left):
{code or "(no file to show)"}

Reply with JSON only, no prose around it:
{{"options": [{{"label": "a few words", "description": "the specific change, with file:line",
  "edits": [{{"path": "repo-relative path", "startLine": 1, "endLine": 1,
             "replacement": "the lines that replace startLine..endLine"}}]}}]}}
Give 1 to {MAX_OPTIONS} options, each a different way to fix this issue and nothing else.
endLine = startLine - 1 inserts before startLine; an empty replacement deletes the lines.
"""


def excerpt(path: Path, line: int | None, around: int) -> str:
    """Lines of ``path`` around ``line``, numbered, the line itself marked with ``>``."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return ""
    at = line or 1
    first, last = max(1, at - around), min(len(lines), at + around)
    width = len(str(last))
    return "\n".join(
        f"{'>' if n == line else ' '}{n:>{width}} | {lines[n - 1]}" for n in range(first, last + 1)
    )


def _model(workdir: Path, issue: ReportIssue, room: int, notes: list[str]) -> list[FixOption]:
    backend = config.resolve(config.load_config(workdir), SKILL)
    if backend is None:
        notes.append(f"no model backend is configured ({config.how_to_configure()})")
        return []
    reply = invoke(backend, prompt(workdir, issue), cwd=workdir)
    if reply.status != "ok":
        notes.append(f"the model backend gave no fix ({reply.status}: {reply.reason})")
        return []
    items = _options(reply.text)
    if items is None:
        notes.append("the model's reply held no options in the asked JSON shape")
        return []
    if not items:
        notes.append("the model proposed no fix")
    out: list[FixOption] = []
    for n, item in enumerate(items[:room], start=1):
        try:
            out.append(_option(workdir, item))
        except (patches.BadEdit, KeyError, TypeError, ValueError) as exc:
            notes.append(f"the model's option {n} was dropped: {exc}")
    return out


def _options(text: str) -> list[Any] | None:
    body = re.sub(r"^```(?:json)?\s*|\s*```$", "", text.strip())
    for candidate in (body, body[body.find("{") : body.rfind("}") + 1]):
        try:
            doc = json.loads(candidate)
        except json.JSONDecodeError:
            continue
        if isinstance(doc, dict) and isinstance(doc.get("options"), list):
            return list(doc["options"])
    return None


def _option(workdir: Path, item: dict[str, Any]) -> FixOption:
    by_path: dict[str, list[patches.Edit]] = {}
    for e in item["edits"]:
        path = _inside(workdir, str(e["path"]))
        edit = patches.Edit(path, int(e["startLine"]), int(e["endLine"]), str(e["replacement"]))
        by_path.setdefault(path, []).append(edit)
    if not by_path:
        raise ValueError("it changes nothing")
    text = ""
    for path, edits in by_path.items():
        old = (workdir / path).read_text(encoding="utf-8")
        text += patches.unified(path, old, patches.apply_edits(old, edits))
    if not text:
        raise ValueError("it changes nothing")
    ok, why = git.patch_applies(workdir, text)
    if not ok:
        raise ValueError(f"its patch does not apply: {why}")
    label = " ".join(str(item.get("label") or "Model's fix").split())[:60]
    desc = " ".join(str(item.get("description") or label).split())
    return FixOption(
        label=label, description=desc, origin="model", patch=text, files=tuple(by_path)
    )


def _inside(workdir: Path, path: str) -> str:
    """``path`` as a repository-relative file of the checkout, or ValueError: a model never
    names a file outside it (absolute, ``..``, ``.git``) nor one that is not there."""
    rel = Path(path.removeprefix("./"))
    if rel.is_absolute() or ".." in rel.parts or ".git" in rel.parts:
        raise ValueError(f"{path!r} is not a path inside the repository")
    if not (workdir / rel).is_file():
        raise ValueError(f"{path} is not a file of the repository")
    return rel.as_posix()
