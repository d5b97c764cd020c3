"""Custom gates from VERIFICATION.md: a plain format that can be checked without a model.

The format is documented in docs/gates.md. In short: list items under ``## Exerciser Gates`` and
``## Review Gates`` are gates; an indented ``CHECK: <bash command>`` line makes a gate checkable and
``EXPECT: exit N; output contains "..."; output matches /regex/`` says what counts as a pass (exit 0
is implied when no ``exit`` clause is given). ``START:``, ``HEALTH:``, ``START_TIMEOUT:`` and
``EXERCISE:`` lines declare how to run and drive the application.

Parsing is pure; :func:`check` runs one CHECK through the subprocess chokepoint.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

from verify_dag import processes
from verify_dag.models import GateResult
from verify_dag.sandbox import Policy

DEFAULT_TIMEOUT = 30.0  # seconds per command, as a completion criterion gets
OUTPUT_CAP = 100_000  # bytes kept per stream (a completion criterion's cap); the rest is drained
EVIDENCE_MAX = 600
MAX_GATES = 50  # per kind: a runaway file must not become hours of commands

GateKind = Literal["exerciser", "review"]


@dataclass(frozen=True)
class Expect:
    exit_code: int = 0
    contains: tuple[str, ...] = ()
    matches: tuple[str, ...] = ()


@dataclass(frozen=True)
class Gate:
    kind: GateKind
    rule: str
    check: str | None = None
    expect: Expect = Expect()
    problem: str | None = None  # the gate is malformed: reported BLOCKED with this reason


@dataclass(frozen=True)
class ParsedGates:
    exerciser: tuple[Gate, ...] = ()
    review: tuple[Gate, ...] = ()
    start: str | None = None
    health: str | None = None
    start_timeout: float | None = None
    exercise: tuple[str, ...] = ()


_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)[\s#]*$")
_FENCE = re.compile(r"^\s*(```|~~~)")
_ITEM = re.compile(r"^(\s*)(?:[-*+]|\d+[.)])\s+(.*)$")
_KEY = re.compile(
    r"^\s*(?:[-*+]\s+)?(?:\*\*)?(CHECK|EXPECT|START|HEALTH|START_TIMEOUT|EXERCISE)(?:\*\*)?:"
    r"(?:\*\*)?\s*(.*?)\s*$"
)
_CLAUSE = re.compile(
    r"\s*(?:exit\s+(?P<exit>-?\d+)"
    r'|output\s+contains\s+"(?P<contains>(?:[^"\\]|\\.)*)"'
    r"|output\s+matches\s+/(?P<regex>(?:[^/\\]|\\.)*)/)\s*(?:;|$)",
    re.IGNORECASE,
)


def unquote(value: str) -> str:
    """A command written as inline code (`cmd`) is the command inside the backticks."""
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] == "`":
        return value.strip("`").strip()
    return value


def parse_expect(text: str) -> tuple[Expect, str | None]:
    """``exit N; output contains "x"; output matches /re/`` -> (Expect, problem or None)."""
    exit_code, contains, matches = 0, [], []
    pos, text = 0, text.strip()
    while pos < len(text):
        m = _CLAUSE.match(text, pos)
        if m is None or m.end() == pos:
            return Expect(), f"unrecognised EXPECT clause: {text[pos:].strip()[:80]!r}"
        pos = m.end()
        if m["exit"] is not None:
            exit_code = int(m["exit"])
        elif m["contains"] is not None:
            contains.append(re.sub(r"\\(.)", r"\1", m["contains"]))
        else:
            pattern = m["regex"].replace("\\/", "/")
            try:
                re.compile(pattern, re.MULTILINE)
            except re.error as exc:
                return Expect(), f"invalid regex /{pattern}/ in EXPECT: {exc}"
            matches.append(pattern)
    return Expect(exit_code, tuple(contains), tuple(matches)), None


@dataclass
class _Draft:
    kind: GateKind
    indent: int
    rule: list[str]
    check: str | None = None
    expect: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def build(self) -> Gate:
        rule = " ".join(" ".join(self.rule).split()).rstrip(":")
        gate = Gate(kind=self.kind, rule=rule, check=self.check)
        if self.expect and self.check is None:
            self.problems.append("EXPECT without a CHECK command")
        if self.expect:
            expect, problem = parse_expect("; ".join(self.expect))
            gate = replace(gate, expect=expect)
            if problem:
                self.problems.append(problem)
        return replace(gate, problem="; ".join(self.problems) or None)


def parse(verification_md: str) -> ParsedGates:
    """Gates and app declarations of a VERIFICATION.md (or any Markdown using the format)."""
    gates: dict[GateKind, list[Gate]] = {"exerciser": [], "review": []}
    app: dict[str, str] = {}
    exercise: list[str] = []
    section: GateKind | None = None
    draft: _Draft | None = None

    def close() -> None:
        nonlocal draft
        if draft is not None and len(gates[draft.kind]) < MAX_GATES:
            gates[draft.kind].append(draft.build())
        draft = None

    for line in verification_md.splitlines():
        if _FENCE.match(line) or not line.strip():
            continue  # fences are transparent; blank lines do not end a gate
        heading = _HEADING.match(line)
        if heading:
            close()
            title = heading.group(2).lower()
            section = (
                "exerciser"
                if "exerciser gates" in title
                else "review"
                if "review gates" in title
                else None
            )
            continue
        key = _KEY.match(line)
        if key:
            name, value = key.group(1), unquote(key.group(2))
            if name in ("CHECK", "EXPECT") and draft is not None:
                if name == "EXPECT":
                    draft.expect.append(value)
                elif draft.check is not None:
                    draft.problems.append("more than one CHECK line")
                else:
                    draft.check = value or None
            elif name == "EXERCISE" and value:
                exercise.append(value)
            elif name in ("START", "HEALTH", "START_TIMEOUT") and value:
                app.setdefault(name, value)
            continue
        item = _ITEM.match(line)
        indent = len(line) - len(line.lstrip())
        if section is not None and item and (draft is None or indent <= draft.indent):
            close()
            draft = _Draft(section, indent, [item.group(2)])
        elif draft is not None and indent > draft.indent:
            draft.rule.append(line.strip())  # wrapped rule text or a sub-item
        else:
            close()  # unindented prose ends the current gate
    close()
    return ParsedGates(
        exerciser=tuple(gates["exerciser"]),
        review=tuple(gates["review"]),
        start=app.get("START"),
        health=app.get("HEALTH"),
        start_timeout=_seconds(app.get("START_TIMEOUT")),
        exercise=tuple(exercise),
    )


def _seconds(text: str | None) -> float | None:
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*s?", text.strip()) if text else None
    return float(m.group(1)) if m else None


def excerpt(text: str, limit: int = 200, *, tail: bool = False) -> str:
    """Output as evidence: redacted, whitespace folded, capped (the end of it with ``tail``:
    where a traceback names the error)."""
    folded = " ".join(processes.redact(text).split())
    if len(folded) <= limit:
        return folded
    return "..." + folded[3 - limit :] if tail else folded[: limit - 3] + "..."


def cap(text: str, limit: int = EVIDENCE_MAX) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def run_command(
    command: str, cwd: Path, env: dict[str, str], timeout: float = DEFAULT_TIMEOUT
) -> processes.Result:
    # The repository declared this command as shell text, so it runs under bash -c; it is its
    # own process group with a time limit and capped output (processes.run).
    return processes.run(
        ["bash", "-c", command], cwd=cwd, env=env, timeout=timeout, cap=OUTPUT_CAP, sandbox=Policy()
    )


def check(
    gate: Gate, cwd: Path, env: dict[str, str], timeout: float = DEFAULT_TIMEOUT
) -> GateResult:
    """Check one gate; evidence is what was observed (redacted, capped)."""

    def result(
        status: Literal["PASS", "FAIL", "BLOCKED", "NOT_CHECKED"],
        evidence: str,
        checker: str = "exerciser",
    ) -> GateResult:
        return GateResult(
            kind=gate.kind,
            rule=gate.rule,
            status=status,
            evidence=cap(processes.redact(evidence)),
            checker=checker,
        )

    if gate.problem is not None:
        return result("BLOCKED", f"malformed gate: {gate.problem}")
    if gate.check is None:
        if gate.kind == "review":
            return result(
                "NOT_CHECKED", "no CHECK command: needs a reviewer's judgement", checker="reviewer"
            )
        return result("BLOCKED", "needs judgement: no CHECK command declared for this gate")
    res = run_command(gate.check, cwd, env, timeout)
    ran = f"`{gate.check}`"
    if res.not_found:
        return result("BLOCKED", f"could not run {ran}: {res.stderr.strip()}")
    if res.timed_out:
        return result("FAIL", f"{ran} timed out ({timeout:g}s budget)")
    output = res.stdout + res.stderr
    failed: list[str] = []
    passed: list[str] = []
    (passed if res.returncode == gate.expect.exit_code else failed).append(
        f"exit {res.returncode} (expected {gate.expect.exit_code})"
    )
    for text in gate.expect.contains:
        (passed if text in output else failed).append(
            f'output {"contains" if text in output else "lacks"} "{text}"'
        )
    for pattern in gate.expect.matches:
        hit = re.search(pattern, output, re.MULTILINE) is not None
        (passed if hit else failed).append(
            f"output {'matches' if hit else 'does not match'} /{pattern}/"
        )
    seen = excerpt(res.stdout) or excerpt(res.stderr, tail=True)
    tail = (f"; output: {seen}" if seen else "; no output") + (
        " (output truncated)" if res.truncated else ""
    )
    if failed:
        return result("FAIL", f"{ran}: " + "; ".join(failed + passed) + tail)
    return result("PASS", f"{ran}: " + "; ".join(passed) + tail)


def settled(results: Iterable[GateResult]) -> list[GateResult]:
    """One result per declared gate, as the report's gate table shows it (customGates): a
    review gate the exerciser could not check (NOT_CHECKED) takes a reviewer's PASS or FAIL, and
    of two verdicts on one gate a FAIL wins over a PASS."""
    rows: dict[tuple[str, str], GateResult] = {}
    for g in results:
        held = rows.get((g.kind, g.rule))
        if (
            held is None
            or held.status == "NOT_CHECKED"
            or (held.status == "PASS" and g.status == "FAIL")
        ):
            rows[(g.kind, g.rule)] = g
    return list(rows.values())


def counts(results: Iterable[GateResult]) -> list[str]:
    """``exerciser gates: 1 PASS, 1 FAIL`` and ``review gates: ...``, for notes."""
    out = []
    listed = list(results)
    for kind in ("exerciser", "review"):
        mine = [g.status for g in listed if g.kind == kind]
        if mine:
            said = ", ".join(f"{mine.count(s)} {s}" for s in dict.fromkeys(mine))
            out.append(f"{kind} gates: {said}")
    return out


def failure(g: GateResult) -> tuple[str, int]:
    """A failed gate's finding title and severity, whoever checked it (docs/gates.md): a review
    gate is 9, the specification's rule for custom review gates; an exerciser gate 8."""
    return f"{g.kind.capitalize()} gate failed: {g.rule}", 9 if g.kind == "review" else 8


def judged_by_reviewers(verification_md: str | None) -> list[str]:
    """The review gates a reviewer judges: those declared without a CHECK command (a CHECK is
    run by the exerciser, and its result stands), well-formed, in the file's order."""
    if not verification_md:
        return []
    return [g.rule for g in parse(verification_md).review if g.check is None and g.problem is None]


def _plain(rule: str) -> str:
    return " ".join(re.sub(r"[`*_\"']", "", rule).lower().split()).rstrip(".:")


def declared_rule(said: str, rules: list[str]) -> str | None:
    """The declared rule a reviewer's GATE line names: the same words (case, emphasis and
    spacing aside), or the start of one when the reviewer shortened it; None for a gate the
    file does not declare."""
    wanted = _plain(said)
    if not wanted:
        return None
    exact = [r for r in rules if _plain(r) == wanted]
    if exact:
        return exact[0]
    prefix = [r for r in rules if _plain(r).startswith(wanted) or wanted.startswith(_plain(r))]
    return prefix[0] if len(prefix) == 1 else None
