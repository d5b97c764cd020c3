"""Issue reproduction for the exerciser (phase 7c): each reported issue tried once, without a
model, in the exerciser's throwaway worktree of the verified commit.

Static findings are re-run with the tool that reported them, failing tests with pytest in the
environment the tester used; anything else needs judgement and is BLOCKED with that reason.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Literal

from verify_dag import tools, util
from verify_dag.models import Finding, Location, RunState, Verification
from verify_dag.phases import gates
from verify_dag.tools.base import RawFinding

SKILL = "exerciser"  # reproduction is part of the exerciser: its own findings are not re-tried
MAX_ATTEMPTS = 30  # reported issues tried per run; the rest are named in the notes
VERIFY_BUDGET = 900.0  # seconds for all reproduction attempts together

VStatus = Literal["CONFIRMED", "NOT_REPRODUCED", "NOT_APPLICABLE", "BLOCKED"]


def verify_issues(state: RunState, wt: Path, env: dict[str, str],
                  python: str = sys.executable) -> tuple[list[Verification], str]:
    """Try each reported issue once, deterministically; returns the entries and a summary."""
    seen: dict[tuple[str | None, int | None, str], Finding] = {}
    earlier = [*(state.static.findings if state.static else ()),
               *(f for o in state.outcomes if o.skill != SKILL for f in o.findings)]
    for f in earlier:
        loc = f.location
        seen.setdefault((loc.path if loc else None, loc.line if loc else None, f.title), f)
    request, deadline = state.request, time.monotonic() + VERIFY_BUDGET
    repro = _Reproducer(wt, env, min(request.tool_timeout, 120.0),
                        min(request.test_timeout, 300.0), python)
    out: list[Verification] = []
    for f in list(seen.values())[:MAX_ATTEMPTS]:
        if time.monotonic() > deadline:
            break
        status, evidence = repro.attempt(f)
        loc = f.location
        out.append(Verification(path=loc.path if loc else None, line=loc.line if loc else None,
                                title=f.title, status=status,
                                evidence=gates.cap(util.redact(evidence))))
    counts = ", ".join(f"{[v.status for v in out].count(s)} {s}"
                       for s in dict.fromkeys(v.status for v in out))
    note = f"verified {len(out)} of {len(seen)} reported issue(s)" + (f" ({counts})" if out else "")
    if len(out) < len(seen):
        note += f"; {len(seen) - len(out)} not attempted (cap {MAX_ATTEMPTS} or time budget)"
    return out, note


@dataclass
class _Reproducer:
    wt: Path
    env: dict[str, str]
    tool_timeout: float
    test_timeout: float
    python: str  # the tests' interpreter: the provisioned env's, as the tester used
    # One tool run per (tool, file), one pytest run per node id, however many issues share them.
    _lint: dict[tuple[str, str], tuple[list[RawFinding] | None, str]] = field(default_factory=dict)
    _tests: dict[str, tuple[VStatus, str]] = field(default_factory=dict)

    def attempt(self, f: Finding) -> tuple[VStatus, str]:
        loc = f.location
        gone = self._gone(loc) if loc is not None else None
        if gone is not None:
            return "NOT_APPLICABLE", gone
        if (f.source == "static-analysis" and f.tool in tools.REGISTRY and f.rule
                and loc is not None and loc.line is not None):
            return self._static(f.tool, f.rule, loc.path, loc.line)
        nodeid = f.nodeid or (f.title.removeprefix("Test failed: ")
                              if f.title.startswith("Test failed: ") else None)
        if f.source == "tester" and nodeid and not nodeid.startswith("-"):
            if nodeid not in self._tests:
                self._tests[nodeid] = self._test(nodeid)
            return self._tests[nodeid]
        return "BLOCKED", f"needs judgement; no deterministic reproduction ({f.source} finding)"

    def _gone(self, loc: Location) -> str | None:
        rel = PurePosixPath(loc.path)
        path = self.wt / loc.path
        if rel.is_absolute() or ".." in rel.parts or not path.resolve().is_relative_to(
                self.wt.resolve()):
            return f"{loc.path} is not a path inside the repository"
        if not path.is_file():
            return f"{loc.path} does not exist in the verified commit"
        if loc.line is not None:
            data = path.read_bytes()
            lines = data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)
            if loc.line > lines:
                return f"line {loc.line} is beyond the end of {loc.path} ({lines} lines)"
        return None

    def _static(self, tool: str, rule: str, path: str, line: int) -> tuple[VStatus, str]:
        if (tool, path) not in self._lint:
            self._lint[tool, path] = self._run_tool(tool, path)
        raw, why = self._lint[tool, path]
        if raw is None:
            return "BLOCKED", f"could not re-run {tool} on {path}: {why}"
        mine = [r for r in raw if r.path == path and r.code == rule]
        hit = next((r for r in mine if r.line == line), None)
        if hit is not None:
            return "CONFIRMED", f"re-ran {tool} on {path}: {rule} at line {line}: {hit.message}"
        lines = ", ".join(str(r.line) for r in mine[:5])
        elsewhere = f"; {rule} at line(s) {lines}" if mine else ""
        return "NOT_REPRODUCED", (f"re-ran {tool} on {path}: no {rule} at line {line} "
                                  f"({len(raw)} finding(s) in the file{elsewhere})")

    def _run_tool(self, tool: str, path: str) -> tuple[list[RawFinding] | None, str]:
        spec = tools.REGISTRY[tool]
        argv = spec.argv([path])
        if argv is None:
            return None, f"{tool} is not installed (not importable, not on PATH)"
        res = util.run(argv, cwd=self.wt, timeout=self.tool_timeout, env=self.env)
        if res.not_found or res.timed_out:
            return None, "timed out" if res.timed_out else f"{argv[0]} was not found"
        raw = spec.parse(res.stdout, res.stderr, self.wt)
        if res.returncode not in spec.ok_exit_codes and not any(
                r.code in spec.blocking_rules for r in raw):
            return None, f"exited {res.returncode}: {gates.excerpt(res.stderr or res.stdout)}"
        return raw, ""

    def _test(self, nodeid: str) -> tuple[VStatus, str]:
        argv = [self.python, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                f"--rootdir={self.wt.resolve()}", nodeid]
        res = util.run(argv, cwd=self.wt, timeout=self.test_timeout, env=self.env)
        shown = f"`python -m pytest -q -p no:cacheprovider {nodeid}`"
        lines = [ln for ln in res.stdout.splitlines() if ln.strip()]
        summary = lines[-1].strip() if lines else gates.excerpt(res.stderr, 160)
        error = next((ln.strip() for ln in lines if ln.startswith("E ")), "")
        if res.timed_out:
            return "BLOCKED", f"{shown} timed out after {self.test_timeout:g}s"
        if res.returncode == 0:
            return "NOT_REPRODUCED", f"{shown} passes on re-run: {summary}"
        if res.returncode == 1:
            return "CONFIRMED", f"{shown} fails on re-run: {summary}" + (
                f"; {error}" if error else "")
        if res.returncode in (4, 5) and "not found" in (res.stdout + res.stderr):
            return "NOT_APPLICABLE", f"{shown}: the test no longer exists ({summary})"
        return "BLOCKED", f"{shown} exited {res.returncode}: {summary}"
