"""Reading the input of ``verify-dag shadow``: a verify JSON v1 report, or a findings document
(schemas/findings.schema.json, docs/shadow.md), into one list of :class:`Record`.

Every problem with the file is a UsageError of one line (exit 2): missing, unreadable, not UTF-8,
not JSON, or not one of the two shapes.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jsonschema.exceptions import best_match

from verify_dag import jsonschemas
from verify_dag.errors import UsageError

FINDINGS_SCHEMA = "schemas/findings.schema.json"
REPORT_SCHEMA = "schemas/report.v1.schema.json"
SURFACE_MAX = 500  # paths of the search surface shipped to each verifier

_WORDS = {"certain": 0.95, "very high": 0.9, "high": 0.85, "medium": 0.6, "low": 0.3}


@dataclass(frozen=True)
class Record:
    """One finding, whatever document it came from."""

    id: str
    title: str
    reasoning: str = ""  # the description: read for selection only, never sent to a verifier
    severity: int | None = None
    confidence: float | None = None  # 0-1
    decision: bool = False
    sources: tuple[str, ...] = ()
    path: str | None = None
    line: int | None = None
    end_line: int | None = None
    evidence_ref: str | None = None  # as written in the document
    tool: str | None = None
    rule: str | None = None
    nodeid: str | None = None
    kind: str | None = None
    symbol: str | None = None
    ref: str | None = None


@dataclass(frozen=True)
class Findings:
    shape: str  # "verify-report-v1" or "findings"
    goal: str
    ref: str | None  # the commit the findings were made against, when the document says
    records: tuple[Record, ...]
    surface: tuple[str, ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)


def load(path: str) -> Findings:
    """The findings of the file at ``path``."""
    p = Path(path)
    if not p.is_file():
        raise UsageError(f"{path}: no such file")
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise UsageError(f"{path}: not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise UsageError(
            f"{path}: not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from None
    except OSError as exc:
        raise UsageError(f"{path}: cannot read: {exc.strerror}") from None
    return parse(doc, path)


def parse(doc: Any, name: str = "input") -> Findings:
    if isinstance(doc, dict) and doc.get("schemaVersion") == 1 and "issues" in doc:
        _check(doc, REPORT_SCHEMA, name, "a verify JSON v1 report")
        return _from_report(doc)
    if isinstance(doc, dict) and "findings" in doc:
        _check(doc, FINDINGS_SCHEMA, name, "a findings document")
        return _from_findings(doc, name)
    raise UsageError(
        f"{name}: neither a verify JSON v1 report (schemaVersion 1 with issues) nor "
        "a findings document (an object with a findings array); see docs/shadow.md"
    )


def _check(doc: dict[str, Any], schema: str, name: str, what: str) -> None:
    error = best_match(jsonschemas.validator(schema).iter_errors(doc))
    if error is not None:
        raise UsageError(
            f"{name}: not {what} ({schema}) at {error.json_path}: "
            f"{' '.join(error.message.split())[:200]}"
        )


def _from_report(doc: dict[str, Any]) -> Findings:
    scope = doc["scope"]
    records = []
    for issue in doc["issues"]:
        loc = issue.get("location") or {}
        records.append(
            Record(
                id=issue["id"],
                title=issue["title"],
                reasoning=issue.get("description", ""),
                severity=issue["severity"],
                sources=tuple(issue["sources"]),
                path=loc.get("path"),
                line=loc.get("line"),
                end_line=loc.get("endLine"),
            )
        )
    files = [
        p for f in scope.get("includedFiles", []) for p in (f.get("path"), f.get("oldPath")) if p
    ]
    mode = scope.get("mode") or "auto"
    base = f", base {scope['baseRef']}" if scope.get("baseRef") else ""
    notes: list[str] = []
    # Only a branch scope verified HEAD itself; the other modes verified a snapshot of the index
    # or the work tree, which the report does not name: staleness is then judged from history.
    ref = scope.get("headSha") if mode == "branch" else None
    if mode != "branch" and scope.get("headSha"):
        notes.append(
            f"the report verified a snapshot (--scope={mode}), not a commit: the "
            "claims' own ref is unknown, so staleness is judged from the history of "
            "the cited files"
        )
    return Findings(
        shape="verify-report-v1",
        goal=f"decide whether the change this report verified ({mode} scope{base}) is done",
        ref=ref,
        records=tuple(records),
        surface=_surface(files, records),
        notes=tuple(notes),
    )


def _from_findings(doc: dict[str, Any], name: str) -> Findings:
    records = []
    seen: set[str] = set()
    for n, f in enumerate(doc["findings"], start=1):
        rid = f.get("id") or f"C{n}"
        if rid in seen:
            raise UsageError(f"{name}: finding id {rid!r} is used twice")
        seen.add(rid)
        path, line, end = _location(f.get("location"))
        records.append(
            Record(
                id=rid,
                title=f.get("title") or f["claim"],
                reasoning=f.get("description", ""),
                severity=f.get("severity"),
                confidence=_confidence(f.get("confidence")),
                decision=bool(f.get("decision", False)),
                sources=tuple(f.get("sources", ())),
                path=path,
                line=line,
                end_line=end,
                evidence_ref=f.get("evidence_ref"),
                tool=f.get("tool"),
                rule=f.get("rule"),
                nodeid=f.get("nodeid"),
                kind=f.get("kind"),
                symbol=f.get("symbol"),
                ref=f.get("ref"),
            )
        )
    return Findings(
        shape="findings",
        goal=doc.get("goal") or "decide whether these findings hold",
        ref=doc.get("ref"),
        records=tuple(records),
        surface=_surface(list(doc.get("surface", [])), records),
    )


def _location(loc: Any) -> tuple[str | None, int | None, int | None]:
    """``{"path", "line", "endLine"}`` or the reviewers' ``"path:line"`` text."""
    if isinstance(loc, dict):
        return loc.get("path"), loc.get("line"), loc.get("endLine")
    if isinstance(loc, str) and loc.strip():
        return split_ref(loc.strip())
    return None, None, None


_FILE_REF = re.compile(
    r"(?P<path>[^\s:#]+?)(?::(?P<line>\d+)(?:-(?P<end>\d+))?(?::\d+)?)?"
    r"(?:#L(?P<hline>\d+)(?:-L?(?P<hend>\d+))?|#(?P<key>\S+))?"
)
_GIT_REF = re.compile(r"[0-9a-f]{7,64}|HEAD|refs/\S+")


def split_ref(text: str) -> tuple[str | None, int | None, int | None]:
    """``path``, ``path:line``, ``path:line-end``, ``path:line:col``, ``path#L3-L5`` or
    ``path#config.key`` as (path, line, end line); (None, None, None) for anything that does not
    name a file (a git ref, a URL, an endpoint such as ``GET /users``)."""
    text = text.strip()
    if "://" in text or _GIT_REF.fullmatch(text):
        return None, None, None
    m = _FILE_REF.fullmatch(text)
    if m is None or not ("/" in m["path"] or "." in m["path"].lstrip(".")):
        return None, None, None
    line, end = m["line"] or m["hline"], m["end"] or m["hend"]
    return m["path"], int(line) if line else None, int(end) if end else None


def _confidence(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return float(value) / 100 if value > 1 else float(value)
    return _WORDS.get(str(value).strip().lower())


def _surface(paths: list[str], records: list[Record]) -> tuple[str, ...]:
    cited = [r.path for r in records if r.path] + [
        r.nodeid.split("::")[0] for r in records if r.nodeid
    ]
    return tuple(dict.fromkeys(p for p in [*paths, *cited] if p))[:SURFACE_MAX]
