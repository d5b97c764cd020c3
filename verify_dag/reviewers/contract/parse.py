"""The CONTRACT file: a Markdown format read without a model (documented in docs/contract.md).

``## REQUEST`` and ``## ACCEPTANCE CRITERIA`` are required; criteria are numbered items
(``1. ...``), each optionally followed by ``CHECK:``, ``EXPECT:`` and ``EVIDENCE:`` lines;
``## FILE SCOPE`` holds one glob a line, ``## CLARIFICATIONS`` free sentences, and
``ABANDON: <n> — <reason>`` lines may stand anywhere. Parsing is pure: text in, :class:`Contract`
out, or :class:`ContractError` with the reason the verdict prints as ``ERROR(<reason>)``.

Line numbers are 1-based indexes into ``text.split("\\n")``: ``gates run`` rewrites exactly
those lines, so the parser and the writer must agree on what a line is.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from verify_dag.errors import ContractError

MAX_CRITERIA = 200  # a runaway file must not become hours of commands


@dataclass(frozen=True)
class KeyLine:
    """One ``CHECK:`` / ``EXPECT:`` / ``EVIDENCE:`` line: its value and where it stands."""

    value: str
    line: int
    prefix: str  # everything up to and including "KEY:" (indentation, bullet, bold)


@dataclass(frozen=True)
class Criterion:
    number: int
    text: str
    line: int
    check: KeyLine | None = None
    expect: tuple[KeyLine, ...] = ()
    evidence: KeyLine | None = None
    last_line: int = 0  # the criterion's last CHECK/EXPECT line: where EVIDENCE is inserted
    problems: tuple[str, ...] = ()  # a malformed oracle, reported NOT-MET with the reason


@dataclass(frozen=True)
class Abandon:
    number: int
    reason: str
    line: int


@dataclass(frozen=True)
class Contract:
    request: str
    criteria: tuple[Criterion, ...]
    scope: tuple[str, ...] = ()
    scope_declared: bool = False
    clarifications: str = ""
    abandons: tuple[Abandon, ...] = ()

    def abandoned(self, number: int) -> Abandon | None:
        return next((a for a in self.abandons if a.number == number), None)


_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)[\s#]*$")
_FENCE = re.compile(r"^\s*(```|~~~)")
_ITEM = re.compile(r"^( {0,3})(\d+)[.)]\s+(.*)$")
_KEY = re.compile(
    r"^(?P<prefix>\s*(?:[-*+]\s+)?(?:\*\*)?(?P<key>CHECK|EXPECT|EVIDENCE)(?:\*\*)?:"
    r"(?:\*\*)?)\s*(?P<value>.*?)\s*$"
)
_ABANDON = re.compile(r"^\s*(?:[-*+]\s+)?(?:\*\*)?ABANDON(?:\*\*)?:(?:\*\*)?\s*(?P<rest>.*?)\s*$")
_ABANDON_BODY = re.compile(
    r"^#?(?P<n>\d+)\s*(?:\u2014|\u2013|--|-|:)\s*(?P<reason>.*)$"
    r"|^#?(?P<n2>\d+)\s*$"
)
_SECTIONS = {
    "REQUEST": "request",
    "ACCEPTANCE CRITERIA": "criteria",
    "FILE SCOPE": "scope",
    "CLARIFICATIONS": "clarifications",
}


def read(path: Path) -> Contract:
    """Read and parse the contract at ``path``; every problem is a ContractError."""
    return parse(read_text(path))


def read_text(path: Path) -> str:
    """The contract's text exactly as stored (no newline translation: ``gates run`` writes it
    back byte for byte apart from the EVIDENCE lines)."""
    try:
        with path.open(encoding="utf-8", newline="") as fh:
            return fh.read()
    except FileNotFoundError:
        raise ContractError(f"contract not found: {path}") from None
    except IsADirectoryError:
        raise ContractError(f"contract unreadable: {path} is a directory") from None
    except UnicodeDecodeError:
        raise ContractError(f"contract unreadable: {path} is not UTF-8 text") from None
    except OSError as exc:
        raise ContractError(f"contract unreadable: {path}: {exc.strerror or exc}") from None


def lines_of(text: str) -> list[str]:
    """The contract's lines as both the parser and ``gates run`` count them."""
    return [line.removesuffix("\r") for line in text.split("\n")]


@dataclass
class _Draft:
    number: int
    line: int
    text: list[str]
    check: KeyLine | None = None
    expect: list[KeyLine] = field(default_factory=list)
    evidence: KeyLine | None = None
    last_line: int = 0
    problems: list[str] = field(default_factory=list)

    def add_key(self, key: str, entry: KeyLine) -> None:
        if key == "CHECK":
            if self.check is not None:
                self.problems.append("more than one CHECK line")
            else:
                self.check = entry
        elif key == "EXPECT":
            self.expect.append(entry)
        elif self.evidence is not None:
            self.problems.append("more than one EVIDENCE line")
        else:
            self.evidence = entry
            return
        self.last_line = entry.line

    def build(self) -> Criterion:
        text = " ".join(" ".join(self.text).split())
        problems = list(self.problems)
        if self.check is not None and not _unquote(self.check.value):
            problems.append("empty CHECK command")
        if self.check is None and self.expect:
            problems.append("EXPECT without a CHECK command")
        if self.check is None and self.evidence is not None:
            problems.append("EVIDENCE without a CHECK command: only `gates run` writes evidence")
        return Criterion(
            number=self.number,
            text=text,
            line=self.line,
            check=self.check,
            expect=tuple(self.expect),
            evidence=self.evidence,
            last_line=self.last_line or self.line,
            problems=tuple(problems),
        )


def _unquote(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] == "`":
        return value.strip("`").strip()
    return value


def parse(text: str) -> Contract:
    bodies: dict[str, list[str]] = {}
    criteria: list[Criterion] = []
    abandons: list[Abandon] = []
    section: str | None = None
    draft: _Draft | None = None
    in_fence = False

    def close() -> None:
        nonlocal draft
        if draft is not None:
            criteria.append(draft.build())
        draft = None

    for number, line in enumerate(lines_of(text), start=1):
        if _FENCE.match(line):
            in_fence = not in_fence
            if section is not None:
                bodies[section].append(line)
            continue
        heading = None if in_fence else _HEADING.match(line)
        if heading and len(heading.group(1)) <= 2:
            close()
            title = " ".join(heading.group(2).rstrip(":").upper().split())
            section = _SECTIONS.get(title)
            if section is not None:
                bodies.setdefault(section, [])
            continue
        abandon = None if in_fence else _ABANDON.match(line)
        if abandon:
            abandons.append(_abandon(abandon.group("rest"), number))
            continue
        if section is not None:
            bodies[section].append(line)
        if section != "criteria" or in_fence or not line.strip():
            continue
        item = _ITEM.match(line)
        key = _KEY.match(line)
        if item and not key:
            close()
            draft = _Draft(int(item.group(2)), number, [item.group(3)])
        elif draft is not None and key:
            entry = KeyLine(_unquote(key.group("value")), number, key.group("prefix"))
            draft.add_key(key.group("key"), entry)
        elif draft is not None and line[:1].isspace():
            if draft.check is None and not draft.expect and draft.evidence is None:
                draft.text.append(line.strip())  # a wrapped criterion
        else:
            close()  # unindented prose ends the current criterion
    close()
    return _contract(bodies, criteria, abandons)


def _abandon(rest: str, line: int) -> Abandon:
    m = _ABANDON_BODY.match(rest)
    if m is None:
        raise ContractError(
            f"malformed ABANDON line {line}: expected "
            f"'ABANDON: <n> \u2014 <reason>', got {rest[:60]!r}"
        )
    number = int(m.group("n") or m.group("n2"))
    reason = " ".join((m.group("reason") or "").split()) or "(no reason recorded)"
    return Abandon(number, reason, line)


def _contract(
    bodies: dict[str, list[str]], criteria: list[Criterion], abandons: list[Abandon]
) -> Contract:
    if "request" not in bodies:
        raise ContractError("contract lacks its REQUEST section")
    if "criteria" not in bodies:
        raise ContractError("contract lacks its ACCEPTANCE CRITERIA section")
    request = "\n".join(bodies["request"]).strip()
    if not request:
        raise ContractError("the REQUEST section is empty")
    if not criteria:
        raise ContractError("the ACCEPTANCE CRITERIA section has no numbered criteria")
    if len(criteria) > MAX_CRITERIA:
        raise ContractError(f"more than {MAX_CRITERIA} acceptance criteria")
    seen: set[int] = set()
    for criterion in criteria:
        if criterion.number in seen:
            raise ContractError(f"duplicate criterion number {criterion.number}")
        seen.add(criterion.number)
    for abandon in abandons:
        if abandon.number not in seen:
            raise ContractError(
                f"ABANDON line {abandon.line} names criterion "
                f"{abandon.number}, which does not exist"
            )
    return Contract(
        request=request,
        criteria=tuple(criteria),
        scope=tuple(_globs(bodies.get("scope", []))),
        scope_declared="scope" in bodies,
        clarifications="\n".join(bodies.get("clarifications", [])).strip(),
        abandons=tuple(abandons),
    )


def _globs(body: list[str]) -> list[str]:
    """One glob a line; bullets, inline code and trailing ``# comments`` are allowed."""
    globs: list[str] = []
    for raw in body:
        line = re.sub(r"^\s*(?:[-*+]|\d+[.)])\s+", "", raw).strip()
        if not line or line.startswith(("#", "<!--", "```", "~~~")):
            continue
        code = re.match(r"`([^`]+)`", line)
        token = code.group(1).strip() if code else line.split()[0]
        if token:
            globs.append(token)
    return globs
