"""The fleet summary: one dict (schemas/fleet-summary.v1.schema.json) rendered as Markdown.

One entry per repository of the fleet file, in the file's order: its result (pass, issues-found,
error, blocked, or reused when its head had not moved since the last audit), issue counts by
severity, the skills that did not run and why, and where its report is stored.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from jsonschema.exceptions import best_match

from verify_dag import exitcodes, jsonschemas, store
from verify_dag.errors import EXIT_ERROR
from verify_dag.files import write_atomic
from verify_dag.fleet import Entry, fleet_dir
from verify_dag.models import Report
from verify_dag.report import exit_code

SCHEMA_PATH = "schemas/fleet-summary.v1.schema.json"
RESULTS = ("pass", "issues-found", "error", "blocked", "reused")
NOT_RAN = ("NOT_RUN", "BLOCKED", "SKIPPED")
SUMMARY_MD = "summary.md"
SUMMARY_JSON = "summary.json"


@dataclass(frozen=True)
class RepoAudit:
    """What became of one repository in one fleet run."""

    entry: Entry
    result: str  # one of RESULTS
    head: str | None = None
    error: str | None = None  # why there is no usable report, or the report's own error
    run_id: str | None = None
    report: Report | None = None  # the report, fresh or reused
    report_dir: Path | None = None  # the run's directory in the store; None when not stored
    audited_at: str | None = None  # when the report was written


def _issues(doc: Report | None, fail_on: int) -> dict[str, Any]:
    severities = [i.severity for i in doc.issues] if doc is not None else []
    by = {str(s): severities.count(s) for s in sorted(set(severities), reverse=True)}
    return {
        "total": len(severities),
        "atOrAboveFailOn": sum(s >= fail_on for s in severities),
        "bySeverity": by,
    }


def _tokens(doc: Report | None) -> dict[str, int] | None:
    spent = doc.review_tokens if doc is not None else None
    if spent is None:
        return None
    return {"input": spent.input_tokens, "output": spent.output_tokens}


def _repo(o: RepoAudit, fail_on: int) -> dict[str, Any]:
    doc = o.report
    not_run = [
        {"skill": s.skill, "status": s.status, "reason": s.notes}
        for s in (doc.skill_results if doc is not None else ())
        if s.status in NOT_RAN
    ]
    where = None
    if o.report_dir is not None:
        where = {
            "dir": str(o.report_dir),
            "json": str(o.report_dir / store.REPORT_JSON),
            "markdown": str(o.report_dir / store.REPORT_MD),
        }
    return {
        "number": o.entry.number,
        "url": o.entry.shown,
        "scope": o.entry.scope,
        "base": o.entry.base,
        "depth": o.entry.depth,
        "result": o.result,
        "reportResult": doc.overall.result if doc is not None else None,
        "head": o.head,
        "runId": o.run_id,
        "auditedAt": o.audited_at,
        "error": o.error,
        "issues": _issues(doc, fail_on),
        "notRun": not_run,
        "report": where,
        "exitCode": exit_code(doc, fail_on) if doc is not None else EXIT_ERROR,
        # The report's review tokens: for a reused report, what its own audit spent.
        "reviewTokens": _tokens(doc),
    }


def build(
    outcomes: list[RepoAudit],
    *,
    fleet_file: str,
    store_dir: Path,
    summary_dir: Path,
    started: str,
    fail_on: int,
    max_review_tokens: int | None = None,
) -> dict[str, Any]:
    repos = [_repo(o, fail_on) for o in outcomes]
    # What this audit spent: a reused report's tokens were spent by an earlier one.
    fresh = [r["reviewTokens"] for r in repos if r["reviewTokens"] and r["result"] != "reused"]
    codes = {r["exitCode"] for r in repos}
    code = exitcodes.FLEET.worst(codes)
    return {
        "schemaVersion": 1,
        "fleetFile": fleet_file,
        "store": str(store_dir),
        "summaryDir": str(summary_dir),
        "started": started,
        "finished": store.now(),
        "failOn": fail_on,
        "exitCode": code,
        "totals": {r: sum(x["result"] == r for x in repos) for r in RESULTS},
        "reviewTokens": {
            "maxTokens": max_review_tokens,
            "input": sum(t["input"] for t in fresh),
            "output": sum(t["output"] for t in fresh),
        },
        "repos": repos,
    }


def validate(summary: dict[str, Any]) -> None:
    """Raise ValueError naming the failing path when ``summary`` does not match its schema."""
    error = best_match(jsonschemas.validator(SCHEMA_PATH).iter_errors(summary))
    if error is not None:
        raise ValueError(
            f"fleet summary does not match {SCHEMA_PATH} at {error.json_path}: {error.message}"
        )


def _spent(tokens: dict[str, Any] | None) -> list[str]:
    if not tokens:
        return []
    budget = tokens.get("maxTokens")
    said = f" (budget {budget:,})" if budget else ""
    return [
        f"Review tokens this audit: {tokens['input']:,} in, {tokens['output']:,} out{said}.",
        "",
    ]


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _counts(issues: dict[str, Any], has_report: bool = True) -> str:
    if not has_report:
        return "-"
    if not issues["total"]:
        return "0"
    parts = ", ".join(f"sev {s}: {n}" for s, n in issues["bySeverity"].items())
    return f"{issues['total']} ({parts})"


def _repositories(n: int) -> str:
    return f"{n} repository" if n == 1 else f"{n} repositories"


def _link(r: dict[str, Any], base: Path | None, name: str) -> str:
    target = Path(r["report"][name])
    shown = os.path.relpath(target, base) if base is not None else str(target)
    return f"[report.{'md' if name == 'markdown' else 'json'}]({shown})"


def markdown(summary: dict[str, Any], here: Path | None = None) -> str:
    """The summary for people; report links are relative to ``here`` (the summary's directory)."""
    t = summary["totals"]
    lines = [
        "# Fleet audit",
        "",
        f"Fleet file `{summary['fleetFile']}`, report store `{summary['store']}`; "
        f"started {summary['started']}, finished {summary['finished']} (UTC); "
        f"this summary: `{summary['summaryDir']}`.",
        "",
        f"**{_repositories(len(summary['repos']))}: "
        + ", ".join(f"{t[r]} {r}" for r in RESULTS)
        + f"; fail on severity >= {summary['failOn']}; exit {summary['exitCode']}.**",
        "",
        *_spent(summary.get("reviewTokens")),
        "| # | Repository | Scope | Depth | Result | Issues | Run |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in summary["repos"]:
        scope = r["scope"] + (f" vs {r['base']}" if r["base"] else "")
        result = r["result"] + (f" ({r['reportResult']})" if r["result"] == "reused" else "")
        run = f"`{r['runId']}`" if r["runId"] else "-"
        lines.append(
            f"| {r['number']} | {_cell(r['url'])} | {_cell(scope)} | {r['depth']} | "
            f"{result} | {_counts(r['issues'], r['reportResult'] is not None)} | {run} |"
        )
    for r in summary["repos"]:
        lines += ["", f"## {r['number']}. {r['url']}: {r['result']}", ""]
        if r["result"] == "reused":
            lines.append(
                f"- Head `{r['head']}` has not moved since the audit of "
                f"{r['auditedAt']} (run `{r['runId']}`, {r['reportResult']}): "
                "its report is reused, not audited again."
            )
        elif r["head"]:
            lines.append(f"- Head: `{r['head']}`")
        if r["error"]:
            lines.append(f"- Error: {r['error']}")
        if r["report"]:
            lines.append(
                f"- Report: {_link(r, here, 'markdown')}, {_link(r, here, 'json')} "
                f"(`verify-dag report {r['runId']}`)"
            )
        elif r["runId"]:
            lines.append(f"- Run `{r['runId']}`: no report in the store")
        issues = r["issues"]
        if r["reportResult"] is not None:
            lines.append(
                f"- Issues: {_counts(issues)}; {issues['atOrAboveFailOn']} at or above "
                f"severity {summary['failOn']}"
            )
        if r.get("reviewTokens"):
            spent = r["reviewTokens"]
            lines.append(f"- Review tokens: {spent['input']:,} in, {spent['output']:,} out")
        if r["notRun"]:
            lines.append("- Did not run:")
            lines += [f"  - {n['skill']}: {n['status']}: {_cell(n['reason'])}" for n in r["notRun"]]
    return "\n".join(lines) + "\n"


def new_dir(store_dir: Path) -> Path:
    """A new, empty ``<store>/fleet/<UTC timestamp>/`` for one fleet run's summary."""
    parent = fleet_dir(store_dir)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    for n in range(1, 1000):
        directory = parent / (stamp if n == 1 else f"{stamp}-{n}")
        try:
            directory.mkdir(parents=True)
        except FileExistsError:
            continue
        return directory
    raise FileExistsError(f"no free summary directory under {parent}")  # pragma: no cover


def write(summary: dict[str, Any]) -> None:
    """Write summary.json and summary.md into the summary's directory, validated first."""
    validate(summary)
    directory = Path(summary["summaryDir"])
    text = json.dumps(summary, indent=2, ensure_ascii=False) + "\n"
    # The store's own atomic write: readers never see half a summary.
    write_atomic(directory / SUMMARY_JSON, text.encode("utf-8"))
    write_atomic(directory / SUMMARY_MD, markdown(summary, directory).encode("utf-8"))
