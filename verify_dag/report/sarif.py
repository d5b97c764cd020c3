"""SARIF 2.1.0 for code-scanning UIs (GitHub code scanning, GitLab, IDE viewers), rendered from
the Report: the same deduplicated issues as every other format.

- One run per source: the tool that reported an issue (ruff, mypy, pyright, ...), else the skill
  (tester, reviewer, ...), named ``verify-dag/<skill>``; its rules are the rule ids its results
  use, with the tool's documentation where the tool names one (ruff does). Every tool that ran
  to completion and every skill that ran gets its run even with no result: code scanning closes
  an alert only when a later upload of the same tool and category no longer reports it. A tool
  that did not complete gets a run only for the results it has (an empty run would close alerts
  it never looked at again).
- Each run has a category of its own (``automationDetails.id``: ``verify-dag/<tool>/``), stable
  from run to run, and its driver's version where it is known (the tool's, or verify-dag's).
- Each result: ``ruleId``, ``level`` from the severity (7+ error, 4-6 warning, 1-3 note), the
  location with its region (start line, end line, column where known), the issue's fingerprint
  as ``partialFingerprints`` (its rule and its line's text, not the line's number, so code
  scanning matches it across commits where the line moved), and ``baselineState`` from the
  introduced / pre-existing classification (new / unchanged).
- A last run, ``verify-dag``, says how the verification itself went: every check that did not
  run (NOT_RUN, BLOCKED) is a ``toolExecutionNotification`` of its invocation, so a missing check
  shows in the SARIF too, not only an absent finding.
"""

from __future__ import annotations

import json
from typing import Any

from verify_dag import evidence
from verify_dag.models.report import Report, ReportIssue
from verify_dag.report import verdict

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
FINGERPRINT = "verifyDag/v1"
_BASELINE = {"introduced": "new", "pre-existing": "unchanged"}
# A skill in one of these states ran: its run is emitted, results or not.
_RAN = frozenset({"COMPLETED", "PASSED", "FAILED"})


def sarif(report: Report) -> str:
    return json.dumps(document(report), indent=2, ensure_ascii=False) + "\n"


def document(report: Report) -> dict[str, Any]:
    issues: dict[str, list[ReportIssue]] = {}
    for issue in report.issues:
        issues.setdefault(driver_name(issue), []).append(issue)
    # Every driver that ran: the tools first (with their versions), then the skills; then any
    # driver only an issue names (a tool that did not complete, a report stored before tools
    # were recorded).
    drivers: dict[str, tuple[str | None, bool]] = {}
    for detail in report.skill_details:
        for tool in detail.tools:
            if tool.completed or tool.tool in issues:
                drivers.setdefault(tool.tool, (tool.version, tool.completed))
    own = evidence.version()
    for result in report.skill_results:
        if result.status in _RAN:
            drivers.setdefault(f"verify-dag/{result.skill}", (own, True))
    for name in issues:
        drivers.setdefault(name, (own if name.startswith("verify-dag/") else None, True))
    return {
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [
            _run(name, version, ok, issues.get(name, [])) for name, (version, ok) in drivers.items()
        ]
        + [_own_run(report)],
    }


def category(driver: str) -> str:
    """The run's automationDetails.id: code scanning's category is what comes before its last
    slash, so each driver has one of its own, the same in every run."""
    return f"{driver}/" if driver.startswith("verify-dag") else f"verify-dag/{driver}/"


def driver_name(issue: ReportIssue) -> str:
    return issue.tool or f"verify-dag/{issue.sources[0]}"


def rule_id(issue: ReportIssue) -> str:
    """The tool's rule id; a skill's own findings are ruled by their class."""
    return issue.rule or issue.issue_class


def _run(
    name: str, version: str | None, completed: bool, issues: list[ReportIssue]
) -> dict[str, Any]:
    rules: dict[str, dict[str, Any]] = {}
    for issue in issues:
        rules.setdefault(rule_id(issue), _rule(issue))
    index = {rule: n for n, rule in enumerate(rules)}
    driver: dict[str, Any] = {"name": name}
    if version is not None:
        driver["version"] = version
    driver["rules"] = list(rules.values())
    return {
        "tool": {"driver": driver},
        "automationDetails": {"id": category(name)},
        "invocations": [{"executionSuccessful": completed}],
        "results": [_result(issue, index) for issue in issues],
    }


def _rule(issue: ReportIssue) -> dict[str, Any]:
    rid = rule_id(issue)
    # ruff's documentation link ends in the rule's name (".../rules/unused-import").
    name = issue.help_uri.rstrip("/").rsplit("/", 1)[-1] if issue.help_uri else rid
    about = f"{issue.tool} rule {rid}" if issue.tool and issue.rule else f"{rid} finding"
    rule: dict[str, Any] = {
        "id": rid,
        "name": name,
        "shortDescription": {"text": about},
        "help": {"text": f"{about}; see {issue.help_uri}" if issue.help_uri else about},
        "defaultConfiguration": {"level": verdict.level(issue)},
    }
    if issue.help_uri:
        rule["helpUri"] = issue.help_uri
    return rule


def _result(issue: ReportIssue, index: dict[str, int]) -> dict[str, Any]:
    rid = rule_id(issue)
    text = f"{issue.title}\n\n{issue.description}" if issue.description else issue.title
    result: dict[str, Any] = {
        "ruleId": rid,
        "ruleIndex": index[rid],
        "level": verdict.level(issue),
        "message": {"text": text},
        "properties": {
            "id": issue.id,
            "severity": issue.severity,
            "class": issue.issue_class,
            "sources": list(issue.sources),
        },
    }
    if issue.fingerprint is not None:
        result["partialFingerprints"] = {FINGERPRINT: issue.fingerprint}
    loc = issue.location
    if loc is not None:
        physical: dict[str, Any] = {"artifactLocation": {"uri": loc.path, "uriBaseId": "%SRCROOT%"}}
        if loc.line is not None:
            region: dict[str, Any] = {"startLine": loc.line}
            if loc.end_line is not None:
                region["endLine"] = loc.end_line
            if loc.column is not None:
                region["startColumn"] = loc.column
            physical["region"] = region
        result["locations"] = [{"physicalLocation": physical}]
    if issue.baseline is not None:
        result["baselineState"] = _BASELINE[issue.baseline]
    return result


def _own_run(report: Report) -> dict[str, Any]:
    """verify-dag's own run: did the verification happen, and which checks did not run."""
    notices = [
        {
            "level": "error" if status == "BLOCKED" else "warning",
            "message": {"text": f"{skill} {status}: {notes}" if notes else f"{skill} {status}"},
            "descriptor": {"id": skill},
        }
        for skill, status, notes in verdict.not_run(report)
    ]
    if report.error is not None:
        notices.append(
            {
                "level": "error",
                "message": {"text": f"{report.error.code}: {report.error.message}"},
                "descriptor": {"id": report.error.code},
            }
        )
    invocation: dict[str, Any] = {
        "executionSuccessful": report.status == "ok",
        "toolExecutionNotifications": notices,
    }
    if report.run.exit_code is not None:
        invocation["exitCode"] = report.run.exit_code
    return {
        "tool": {"driver": {"name": "verify-dag", "version": evidence.version()}},
        "automationDetails": {"id": category("verify-dag")},
        "invocations": [invocation],
        "results": [],
        "properties": {"verdict": verdict.words(report), "runId": report.run.id},
    }
