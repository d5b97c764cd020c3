"""The keys of a JSON v1 document that are not fields of the Report model: the aliases v1 keeps
for consumers of the earlier, partial report, and the shape of documents stored before
skillDetails existed, read back as today's."""

from __future__ import annotations

import copy
from typing import Any

# The aliases of JSON v1. scope.files / scope.excluded repeat includedFiles / excludedFiles
# record for record, and triage.skills_run / skills_skipped list the names of skillsRun /
# skillsSkipped in the same order: consumers of the earlier, partial report read those names, and
# the specification keeps them until those consumers have moved (docs/report.md, "The aliases").
# This table is the one place they are written (after the key named first) and read back, so
# they never disagree with what they alias. part: (after, ((alias, field it repeats), ...)).
ALIASES: dict[str, tuple[str, tuple[tuple[str, str], ...]]] = {
    "scope": ("excludedFiles", (("files", "includedFiles"), ("excluded", "excludedFiles"))),
    "triage": ("skillsSkipped", (("skills_run", "skillsRun"), ("skills_skipped", "skillsSkipped"))),
}


def earlier_shape(data: dict[str, Any]) -> dict[str, Any]:
    """A document stored by a version before skillDetails, in today's shape: skillResults items
    and findings[] had keys of their own (isolation, cached; rule, tool, location.column) and an
    issue's location could lack its line. The store keeps reports for days; reading one must
    not fail on the shape it was written in."""
    if "skillDetails" in data or not isinstance(data.get("skillResults"), list):
        return data
    results = [dict(r) if isinstance(r, dict) else r for r in data["skillResults"]]
    data["skillResults"] = results
    data["skillDetails"] = [
        {
            "skill": r.get("skill"),
            "isolation": r.pop("isolation", None),
            "cached": r.pop("cached", []),
            "durationS": None,
        }
        for r in results
        if isinstance(r, dict)
    ]
    findings = []
    for f in data.get("findings") or ():
        if isinstance(f, dict):
            f = {k: v for k, v in f.items() if k not in ("rule", "tool")}
            if isinstance(f.get("location"), dict):
                f["location"] = {k: f["location"].get(k) for k in ("path", "line")}
        findings.append(f)
    issues = []
    for n, i in enumerate(data.get("issues") or ()):
        loc = i.get("location") if isinstance(i, dict) else None
        if isinstance(loc, dict) and loc.get("line") is None:
            # Today's rule for a path without a line: line 1 of the file, in both projections.
            i = {**i, "location": {"path": loc.get("path"), "line": 1}}
            if n < len(findings) and isinstance(findings[n], dict):
                findings[n] = {**findings[n], "location": i["location"]}
        issues.append(i)
    data["findings"], data["issues"] = findings, issues
    return data


def repeat(part: str, value: Any) -> Any:
    """An alias's value: triage's list the skill names of their field, scope's copy it whole."""
    if part == "triage":
        return [entry["skill"] for entry in value]
    return copy.deepcopy(value)


def insert_after(doc: dict[str, Any], key: str, extra: dict[str, Any]) -> dict[str, Any]:
    """``doc`` with ``extra`` inserted right after ``key``: v1's key order is part of its bytes."""
    out: dict[str, Any] = {}
    for k, v in doc.items():
        out[k] = v
        if k == key:
            out.update(extra)
    return out
