"""JUnit XML of the checks and the issues, for CI test-report UIs, rendered from the Report.

Two suites. ``checks``: one test case per skill; COMPLETED and PASSED pass, FAILED fails,
NOT_RUN and BLOCKED are errors (a check that should have run and did not is never a pass), and
SKIPPED (outside the depth's composition, gated out) is skipped, with its reason. ``issues``:
one test case per issue, failing when the run's gates fail on it (--fail-on, --new-only) and
passing otherwise, with its severity and description as output.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from verify_dag.models.report import Report
from verify_dag.report import verdict


def junit(report: Report) -> str:
    root = ET.Element("testsuites", name="verify-dag")
    checks = ET.SubElement(root, "testsuite", name="checks")
    for r in report.skill_results:
        case = ET.SubElement(checks, "testcase", classname="verify-dag.checks", name=r.skill)
        if r.status == "FAILED":
            ET.SubElement(case, "failure", message=r.status).text = r.notes
        elif r.status in ("NOT_RUN", "BLOCKED"):
            ET.SubElement(case, "error", message=f"{r.status}: {r.notes}"[:500]).text = r.notes
        elif r.status == "SKIPPED":
            ET.SubElement(case, "skipped", message=r.notes)
        elif r.notes:
            ET.SubElement(case, "system-out").text = r.notes
    if report.error is not None:
        case = ET.SubElement(checks, "testcase", classname="verify-dag.checks", name="run")
        ET.SubElement(case, "error", message=report.error.code).text = report.error.message
    issues = ET.SubElement(root, "testsuite", name="issues")
    for issue in report.issues:
        attrs = {
            "classname": f"verify-dag.issues.{issue.sources[0]}",
            "name": f"{issue.id} {issue.title}",
        }
        if issue.location is not None:
            attrs["file"] = issue.location.path
            if issue.location.line is not None:
                attrs["line"] = str(issue.location.line)
        case = ET.SubElement(issues, "testcase", attrs)
        said = f"severity {issue.severity}, {issue.issue_class}" + (
            f", {issue.baseline}" if issue.baseline else ""
        )
        if verdict.fails(report, issue):
            failure = ET.SubElement(case, "failure", message=issue.title, type=issue.issue_class)
            failure.text = f"{said}\n{issue.description}"
        else:
            ET.SubElement(
                case, "system-out"
            ).text = f"{said} (below the gates)\n{issue.description}"
    for suite in (checks, issues):
        cases = suite.findall("testcase")
        suite.set("tests", str(len(cases)))
        for kind, attr in (("failure", "failures"), ("error", "errors"), ("skipped", "skipped")):
            suite.set(attr, str(sum(1 for c in cases if c.find(kind) is not None)))
    for attr in ("tests", "failures", "errors", "skipped"):
        root.set(attr, str(sum(int(s.get(attr, "0")) for s in (checks, issues))))
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
