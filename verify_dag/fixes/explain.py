"""Explain (interactive triage): one issue again with more context each time it is asked for.

Level 1: the code around the issue in the user's files, the full description and the rule's
documentation link; level 2: more code and the tool's own documentation of the rule (``ruff
rule``); level 3 and on: more code still and the fix options' patches in full.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from pathlib import Path

from verify_dag import processes
from verify_dag.fixes.propose import excerpt
from verify_dag.models.fixes import FixOption
from verify_dag.models.report import ReportIssue
from verify_dag.tools.base import python_tool_argv

WIDTH = 78  # an 80-column terminal, less a margin
DOC_LINES = 30


def explain(repo: Path, issue: ReportIssue, options: Sequence[FixOption], level: int) -> str:
    around = 5 if level <= 1 else 15 * (level - 1)
    out = [f"--- {issue.id}, explained (level {level}; Explain again digs deeper) ---"]
    out += _wrapped(f"{issue.title} (severity {issue.severity}, {issue.issue_class})")
    out += _wrapped(f"Found by: {', '.join(issue.sources)}")
    out += _wrapped(issue.description)
    if issue.help_uri:
        out.append(f"Documentation: {issue.help_uri}")
    loc = issue.location
    if loc is not None:
        code = excerpt(repo / loc.path, loc.line, around)
        out += [f"In {loc.path} as it is now:", code or "  (the file is not there now)"]
    if level >= 2:
        out += _tool_doc(issue)
    if level >= 3:
        for n, o in enumerate(options, start=1):
            out += [f"Fix option {n}, {o.label} ({o.origin}):", o.patch.rstrip("\n")]
    return "\n".join(out) + "\n"


def _wrapped(text: str) -> list[str]:
    return [line for para in text.splitlines() for line in textwrap.wrap(para, WIDTH) or [""]]


def _tool_doc(issue: ReportIssue) -> list[str]:
    if issue.tool != "ruff" or not issue.rule:
        return [f"No tool documentation to add: {issue.tool or 'no tool'} raised it."]
    base = python_tool_argv("ruff")
    if base is None:
        return ["ruff is not installed here, so its documentation of the rule cannot be shown."]
    res = processes.run([*base, "rule", issue.rule], timeout=30, env=processes.scrubbed_env())
    if res.returncode != 0:
        return [f"`ruff rule {issue.rule}` said: {res.stderr.strip()[:200]}"]
    doc = res.stdout.splitlines()[:DOC_LINES]
    return [f"ruff's documentation of {issue.rule}:", *doc]
