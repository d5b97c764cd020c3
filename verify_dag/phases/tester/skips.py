"""Skipped tests as findings: a skipped test is not a pass.

A suite can pass with the very tests that check a change skipped (a missing optional dependency,
a data file the project builds first, a platform mark), and its counts say "passed". Two cases
become findings, both of class ``coverage`` (the code is believed correct but no test ran it),
each naming pytest's skip reasons (junit's ``<skipped message=...>``):

- every test collected from the changed test files was skipped: severity 6, the change's own
  tests checked nothing. A changed test file is a file of the change that pytest collected tests
  from (the path of their node ids), so there is no guessing from file names.
- more than half of the tests that ran were skipped: severity 4, the suite as a whole says
  little. Deselected tests are not counted: the project's own selection left them out.

Skipped means pytest's "skipped": an xfailed test ran, and failed as expected.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from verify_dag.models.evidence import CaseResult
from verify_dag.models.findings import Finding, Location
from verify_dag.models.scope import Scope
from verify_dag.phases.tester import junit

SKILL = "tester"
CHANGED_SEVERITY = 6
SUITE_SEVERITY = 4
_REASONS = 5  # distinct skip reasons quoted in a finding, most frequent first


def findings(root: ET.Element, scope: Scope, workdir: Path) -> list[Finding]:
    """The skip findings of the suite whose junit report is ``root``."""
    tests = junit.cases(root, workdir)
    out: list[Finding] = []
    changed = _changed_tests(tests, scope)
    if changed and all(c.outcome == "skipped" for c in changed):
        out.append(_changed_finding(changed))
    skipped = [c for c in tests if c.outcome == "skipped"]
    if tests and len(skipped) * 2 > len(tests):
        out.append(
            Finding(
                title=f"Most of the suite was skipped: {len(skipped)} of {len(tests)} tests",
                severity=SUITE_SEVERITY,
                description=(
                    f"{len(skipped)} of the {len(tests)} tests that ran were skipped, so the "
                    "suite's pass says little: a skipped test is not a pass. " + _reasons(skipped)
                ),
                source=SKILL,
                issue_class="coverage",
            )
        )
    return out


def _changed_tests(tests: Sequence[CaseResult], scope: Scope) -> list[CaseResult]:
    scoped = {f.path for f in scope.included if f.status != "deleted"}
    return [c for c in tests if c.nodeid.split("::", 1)[0] in scoped]


def _changed_finding(changed: list[CaseResult]) -> Finding:
    files = list(dict.fromkeys(c.nodeid.split("::", 1)[0] for c in changed))
    where = files[0] if len(files) == 1 else f"the {len(files)} changed test files"
    n = len(changed)
    return Finding(
        title=f"Every test in {where} was skipped",
        severity=CHANGED_SEVERITY,
        description=(
            f"{'The only test' if n == 1 else f'All {n} tests'} collected from the changed "
            f"test file{'s' if len(files) != 1 else ''} ({', '.join(files[:10])}"
            f"{', ...' if len(files) > 10 else ''}) {'was' if n == 1 else 'were'} skipped: no "
            "test of the change's own checked it, and a skipped test is not a pass. "
            + _reasons(changed)
        ),
        source=SKILL,
        issue_class="coverage",
        location=Location(path=files[0]),
        in_scope=True,
    )


def _reasons(skipped: Sequence[CaseResult]) -> str:
    """pytest's skip reasons, most frequent first, each with how many tests gave it."""
    counted = Counter(c.reason or "(no reason given)" for c in skipped).most_common()
    shown = "; ".join(f"{reason} ({n})" for reason, n in counted[:_REASONS])
    more = len(counted) - _REASONS
    return f"pytest's skip reasons: {shown}" + (
        f"; and {more} other reason{'s' if more != 1 else ''}" if more > 0 else ""
    )
