"""GitLab Code Quality JSON (the ``codequality`` report artifact), rendered from the Report: one
entry per issue, with the issue's fingerprint (stable when its line moves) so GitLab tells new
issues from old ones between a merge request and its target branch.

Severities: 9-10 critical, 7-8 major, 4-6 minor, 1-3 info (GitLab's blocker is left to the
project's own tools). An issue with no file is placed at the repository's top (``.``, line 1),
since every entry needs a location; its description says so.
"""

from __future__ import annotations

import json
from typing import Any

from verify_dag.models.findings import IssueClass
from verify_dag.models.report import Report, ReportIssue
from verify_dag.report import sarif

# Code Climate's category of every class (tests/test_house.py checks it covers them all).
CATEGORY: dict[IssueClass, str] = {
    "correctness": "Bug Risk",
    "security": "Security",
    "coverage": "Bug Risk",
    "comment": "Style",
    "ux": "Clarity",
    "visual": "Clarity",
    "test-failure": "Bug Risk",
    "environment": "Compatibility",
    "style": "Style",
    "plan-completeness": "Complexity",
}


def gitlab(report: Report) -> str:
    return json.dumps([_entry(i) for i in report.issues], indent=2, ensure_ascii=False) + "\n"


def severity(issue: ReportIssue) -> str:
    if issue.severity >= 9:
        return "critical"
    if issue.severity >= 7:
        return "major"
    return "minor" if issue.severity >= 4 else "info"


def _entry(issue: ReportIssue) -> dict[str, Any]:
    loc = issue.location
    begin = loc.line if loc is not None and loc.line is not None else 1
    end = loc.end_line if loc is not None and loc.end_line is not None else begin
    description = f"{issue.id} {issue.title}"
    if loc is None:
        description += " (no file: placed at the repository's top)"
    return {
        "description": description,
        "check_name": f"{sarif.driver_name(issue)}:{sarif.rule_id(issue)}",
        # GitLab needs one: a report stored before fingerprints existed gets its id's.
        "fingerprint": issue.fingerprint or issue.id,
        "severity": severity(issue),
        "categories": [CATEGORY[issue.issue_class]],
        "location": {
            "path": loc.path if loc is not None else ".",
            "lines": {"begin": begin, "end": end},
        },
        "content": {"body": issue.description},
    }
