"""A finding as a claim: which kind of claim it makes, first match wins, and its wording.

- ``static``: a static-analysis finding naming its tool and rule (``ruff F841: ...`` in a verify
  report; ``tool`` and ``rule`` in a findings document), anchored at a line;
- ``test``: a failing test (``Test failed: <node id>``, or ``nodeid``);
- ``unused``: "`name` is unused / never used / never called", "unused function `name`", ...;
- ``untested``: "no tests cover `name`", "`name` is untested / has no tests", ...;
- ``size``: "`path` exceeds / has more than N lines";
- ``judgement``: anything else, which only a model backend can weigh.

The predicate is the claim stripped of confidence language ("clearly", "I am confident that");
the finding's description (its reasoning) never enters a claim. Shadow's pre-flight
(verify_dag/shadow/preflight.py) reads findings documents through here; the exerciser reads the
verify DAG's own findings with :func:`from_finding`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Protocol

from verify_dag.models.findings import Finding
from verify_dag.phases.claims.models import Claim, Kind

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


class Stated(Protocol):
    """What a finding says, as far as its kind and wording go."""

    @property
    def title(self) -> str: ...
    @property
    def sources(self) -> tuple[str, ...]: ...
    @property
    def line(self) -> int | None: ...
    @property
    def evidence_ref(self) -> str | None: ...
    @property
    def tool(self) -> str | None: ...
    @property
    def rule(self) -> str | None: ...
    @property
    def nodeid(self) -> str | None: ...
    @property
    def kind(self) -> str | None: ...
    @property
    def symbol(self) -> str | None: ...


@dataclass(frozen=True)
class _Said:
    title: str
    sources: tuple[str, ...]
    line: int | None
    tool: str | None
    rule: str | None
    nodeid: str | None
    evidence_ref: str | None = None
    kind: str | None = None
    symbol: str | None = None


def claim(
    claim_id: str,
    r: Stated,
    path: str | None,
    line: int | None,
    end: int | None,
    evidence_ref: str,
    ref: str | None,
) -> Claim:
    """``r`` as a claim on ``path`` (lines ``line``-``end``); ``evidence_ref`` as the finding
    wrote it ("" when it gave none: then the path and lines are the reference)."""
    kind, fields = _classify(r)
    nodeid = fields.get("nodeid")
    if path is None and isinstance(nodeid, str) and "::" in nodeid:
        path = nodeid.split("::", 1)[0]
    subject, predicate = _wording(kind, r, fields, path)
    return Claim(
        id=claim_id,
        subject=subject,
        predicate=predicate,
        evidence_ref=evidence_ref or _ref_text(path, line, end),
        kind=kind,
        path=path,
        line=line,
        end_line=end,
        ref=ref,
        **fields,
    )


def from_finding(finding: Finding, claim_id: str) -> Claim:
    """A finding of the verify DAG as a claim (the exerciser verifies them at the very commit
    they were made on, so no ref)."""
    loc = finding.location
    said = _Said(
        title=finding.title,
        sources=(finding.source,),
        line=loc.line if loc else None,
        tool=finding.tool,
        rule=finding.rule,
        nodeid=finding.nodeid,
    )
    if loc is None:
        return claim(claim_id, said, None, None, None, "", None)
    return claim(claim_id, said, loc.path, loc.line, loc.end_line, "", None)


def _ref_text(path: str | None, line: int | None, end: int | None) -> str:
    if path is None:
        return ""
    if line is None:
        return path
    return f"{path}:{line}" if end is None or end == line else f"{path}:{line}-{end}"


def _classify(r: Stated) -> tuple[Kind, dict[str, object]]:
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


def _wording(kind: Kind, r: Stated, fields: dict[str, object], path: str | None) -> tuple[str, str]:
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
