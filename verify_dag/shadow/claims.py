"""Pre-flight: each finding normalised to ``[CLAIM_ID] subject :: predicate :: evidence_ref``.

The kind of a claim decides how it can be re-derived, first match wins:

- ``static``: a static-analysis finding naming its tool and rule (``ruff F841: ...`` in a verify
  report; ``tool`` and ``rule`` in a findings document), anchored at a line;
- ``test``: a failing test (``Test failed: <node id>``, or ``nodeid``);
- ``unused``: "`name` is unused / never used / never called", "unused function `name`", ...;
- ``untested``: "no tests cover `name`", "`name` is untested / has no tests", ...;
- ``size``: "`path` exceeds / has more than N lines";
- ``judgement``: anything else, which only a model backend can weigh.

The predicate is the claim stripped of confidence language ("clearly", "I am confident that");
the finding's description (its reasoning) never enters a claim. A finding with nothing concrete to
point at (no file, line, node id, git ref, config key or endpoint) is unanchored: UNVERIFIABLE at
once, and never dispatched.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from verify_dag.errors import UsageError, VerifyDagError
from verify_dag.models.findings import Finding
from verify_dag.shadow.inputs import Findings, Record, split_ref
from verify_dag.shadow.models import Claim, Kind

MAX_CLAIMS = 50  # the seed's scale cap
EXIT_SCALE = 5  # documented in docs/shadow.md and the subcommand's help

_STATIC_TITLE = re.compile(
    r"(?P<tool>[A-Za-z][\w.+-]*) (?P<rule>[^\s:]+): (?P<message>.+)", re.DOTALL
)
_TEST_TITLE = re.compile(r"Test failed: (?P<nodeid>\S.*)")
_NAME = r"`(?P<q>[^`\s]+)`|(?P<w>[A-Za-z_][\w.]*)(?P<call>\(\))?"
_UNUSED_WORDS = (
    r"(?:unused|never used|not used|never called|not called|never referenced|"
    r"unreferenced|dead code|assigned to but never used|imported but unused)"
)
_UNUSED = [
    re.compile(
        rf"(?:{_NAME})\s+(?:is\s+|are\s+|looks\s+|seems\s+|appears\s+to\s+be\s+)?"
        rf"(?:\w+\s+)?{_UNUSED_WORDS}",
        re.IGNORECASE,
    ),
    re.compile(
        rf"\b(?:unused|dead)\s+(?:local\s+)?(?:function|variable|import|class|method|"
        rf"parameter|argument|symbol|constant|helper|code)\s*:?\s+(?:{_NAME})",
        re.IGNORECASE,
    ),
]
_UNTESTED = [
    re.compile(
        rf"\bno\s+tests?\s+(?:\w+\s+)?(?:covers?|for|exercises?|references?|calls?)\s+"
        rf"(?:{_NAME})",
        re.IGNORECASE,
    ),
    re.compile(
        rf"(?:{_NAME})\s+(?:is|are)\s+(?:not\s+tested|untested|not\s+covered\s+by\s+"
        rf"(?:any\s+)?tests?)",
        re.IGNORECASE,
    ),
    re.compile(rf"(?:{_NAME})\s+(?:has|have)\s+no\s+(?:unit\s+)?tests?", re.IGNORECASE),
    re.compile(
        rf"\buntested\s+(?:function|method|class|module|code)?\s*:?\s*(?:{_NAME})", re.IGNORECASE
    ),
]
_SIZE = re.compile(
    r"(?:exceeds|is\s+over|is\s+longer\s+than|has\s+more\s+than|is\s+more\s+than|"
    r"over)\s+(?P<n>\d+)\s+lines",
    re.IGNORECASE,
)
_LOCAL = re.compile(r"\b(?:local\s+variable|variable|parameter|argument)\b", re.IGNORECASE)
_CONFIDENCE = re.compile(
    r"\(\s*(?:\d{1,3}\s*%\s*(?:confident|sure|certain)?|confidence:?\s*\w+)\s*\)|"
    r"\b(?:I\s+am|I'm|we\s+are)\s+(?:very\s+)?(?:confident|certain|sure)\s+(?:that\s+)?|"
    r"\b(?:clearly|obviously|certainly|definitely|undoubtedly|surely|absolutely)\b,?\s*",
    re.IGNORECASE,
)


class ScaleError(VerifyDagError):
    """More claims than the seed's cap: the operator scopes the investigation first."""

    exit_code = EXIT_SCALE


@dataclass(frozen=True)
class Candidate:
    """A normalised claim on the coordinator's side, with what selection may read."""

    claim: Claim
    title: str  # the finding as stated, shown alongside a refutation
    record: Record
    unanchored: str | None = None  # why no evidence_ref could be found: UNVERIFIABLE at once


def normalise(findings: Findings, only: tuple[str, ...] = ()) -> list[Candidate]:
    """Every finding as a candidate claim (only the ids in ``only``, when given); more than
    MAX_CLAIMS is a ScaleError."""
    records = list(findings.records)
    if only:
        known = {r.id for r in records}
        unknown = [i for i in only if i not in known]
        if unknown:
            raise UsageError(
                f"--claims: no claim {unknown[0]!r} in the input (its ids: "
                f"{', '.join(sorted(known)[:10]) or 'none'})"
            )
        records = [r for r in records if r.id in only]
    if len(records) > MAX_CLAIMS:
        raise ScaleError(
            f"{len(records)} claims exceed the limit of {MAX_CLAIMS}: scope the "
            "investigation first",
            hint="verify fewer files, or name the claims to check with --claims=ID,ID,...",
        )
    return [candidate(r, findings.ref) for r in records]


def candidate(record: Record, ref: str | None = None) -> Candidate:
    """One finding normalised; ``ref`` is the document's commit unless the finding names one."""
    kind, fields = _classify(record)
    path, line, end = record.path, record.line, record.end_line
    explicit = (record.evidence_ref or "").strip()
    if path is None and explicit:
        path, line, end = split_ref(explicit)
    nodeid = fields.get("nodeid")
    if path is None and isinstance(nodeid, str) and "::" in nodeid:
        path = nodeid.split("::", 1)[0]
    evidence = explicit or _ref_text(path, line, end)
    subject, predicate = _wording(kind, record, fields, path)
    claim = Claim(
        id=record.id,
        subject=subject,
        predicate=predicate,
        evidence_ref=evidence,
        kind=kind,
        path=path,
        line=line,
        end_line=end,
        ref=record.ref or ref,
        **fields,
    )
    unanchored = (
        None
        if evidence
        else (
            "no concrete evidence_ref: the finding names no file, line, test, git ref, config key "
            "or endpoint"
        )
    )
    return Candidate(claim=claim, title=record.title, record=record, unanchored=unanchored)


def from_finding(finding: Finding, claim_id: str) -> Claim:
    """A finding of the verify DAG as a claim (the exerciser verifies them at the very commit
    they were made on, so no ref)."""
    loc = finding.location
    return candidate(
        Record(
            id=claim_id,
            title=finding.title,
            severity=finding.severity,
            sources=(finding.source,),
            path=loc.path if loc else None,
            line=loc.line if loc else None,
            end_line=loc.end_line if loc else None,
            tool=finding.tool,
            rule=finding.rule,
            nodeid=finding.nodeid,
        )
    ).claim


def _ref_text(path: str | None, line: int | None, end: int | None) -> str:
    if path is None:
        return ""
    if line is None:
        return path
    return f"{path}:{line}" if end is None or end == line else f"{path}:{line}-{end}"


def _classify(r: Record) -> tuple[Kind, dict[str, object]]:
    """The kind and its structured fields; an explicit ``kind`` in a findings document wins
    when the fields it needs are there."""
    title = " ".join(r.title.split())
    static = _STATIC_TITLE.fullmatch(title) if "static-analysis" in r.sources else None
    tool = r.tool or (static["tool"] if static else None)
    rule = r.rule or (static["rule"] if static else None)
    test = _TEST_TITLE.fullmatch(title)
    nodeid = r.nodeid or (test["nodeid"] if test else None)
    symbol, local = r.symbol, bool(_LOCAL.search(title))
    unused = _symbol(_UNUSED, title)
    untested = _symbol(_UNTESTED, title)
    size = _SIZE.search(title)
    wanted = r.kind
    if (wanted in (None, "static")) and tool and rule and r.line is not None:
        return "static", {"tool": tool, "rule": rule}
    if wanted in (None, "test") and nodeid and not nodeid.startswith("-"):
        return "test", {"nodeid": nodeid}
    if wanted in (None, "unused") and (symbol or unused):
        return "unused", {"symbol": _last(symbol or unused), "local": local}
    if wanted in (None, "untested") and (symbol or untested):
        return "untested", {"symbol": _last(symbol or untested)}
    if wanted in (None, "size") and size:
        return "size", {"limit": int(size["n"])}
    return "judgement", {}


def _symbol(patterns: list[re.Pattern[str]], title: str) -> str | None:
    for pattern in patterns:
        for m in pattern.finditer(title):
            if m["q"]:
                return m["q"]
            word = m["w"]
            # An unquoted word counts only when it looks like code, not English.
            if word and (
                m["call"] or "_" in word or "." in word.strip(".") or re.search(r"[a-z][A-Z]", word)
            ):
                return word
    return None


def _last(name: str | None) -> str:
    # "module.func" and "path/to/mod.py" are searched by their last component.
    text = (name or "").strip("`()")
    if "/" in text or text.endswith(".py"):
        text = text.rsplit("/", 1)[-1].removesuffix(".py")
    return text.rsplit(".", 1)[-1] if "." in text else text


def _wording(kind: Kind, r: Record, fields: dict[str, object], path: str | None) -> tuple[str, str]:
    if kind == "static":
        static = _STATIC_TITLE.fullmatch(" ".join(r.title.split()))
        said = static["message"] if static else ""
        return (
            path or "(unanchored)",
            f"{fields['tool']} reports {fields['rule']} at line {r.line}"
            + (f": {said}" if said else ""),
        )
    if kind == "test":
        return str(fields["nodeid"]), "fails when run"
    if kind == "unused":
        where = " within its file" if fields.get("local") else ""
        return f"`{fields['symbol']}`", f"is not referenced anywhere but its definition{where}"
    if kind == "untested":
        return f"`{fields['symbol']}`", "is referenced by no test file"
    if kind == "size":
        return path or "(unanchored)", f"has more than {fields['limit']} lines"
    predicate = " ".join(_CONFIDENCE.sub("", r.title).split()) or r.title
    return path or r.evidence_ref or "(unanchored)", predicate
