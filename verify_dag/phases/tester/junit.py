"""The junit report the tester has pytest write (xunit1), read: counts in pytest's own words,
per-test results under pytest's own node ids, the failures; and the small plugin that makes
those exact.

The plugin that writes them is verify_dag/phases/tester/junit_plugin.py.
A report without them (pytest run without our plugin, no terminal reporter) is read from its
testcases alone.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

from verify_dag import processes
from verify_dag.models.evidence import CaseOutcome, CaseResult
from verify_dag.models.findings import Finding, Location
from verify_dag.models.scope import Scope
from verify_dag.phases.tester import records
from verify_dag.phases.tester.junit_plugin import COUNTS, LINE, NODEID, OUTCOME

_MAX = 64 * 1024 * 1024  # a report bigger than this is not one pytest wrote for a test suite
# pytest's words for what its summary counts beside the tests, in the order it prints them.
# Warnings are not results, and deselected tests are left to the declared selection.
_BESIDE = ("subtests passed", "subtests failed", "subtests skipped")
_NOT_RESULTS = frozenset(("warnings", "deselected", *_BESIDE))
_WORD = re.compile(r"^[a-z][a-z ]{0,39}$")  # a plugin's own category ("rerun"), not free text


@dataclass(frozen=True)
class Counts:
    """pytest's summary figures. ``failed`` is pytest's too: it counts a failed subtest there."""

    passed: int
    failed: int
    errors: int
    skipped: int  # xfailed apart, as pytest prints them
    xfailed: int = 0
    xpassed: int = 0  # non-strict; junit counts them as passed (a strict one is a failure)
    # What pytest counts apart from the tests, nonzero only: ("subtests passed", 24), ...
    beside: tuple[tuple[str, int], ...] = ()

    def notes(self) -> str:
        # pytest's own words; the others only when there are any, as pytest does.
        extra = "".join(
            f", {n} {word}"
            for word, n in (("xfailed", self.xfailed), ("xpassed", self.xpassed), *self.beside)
            if n
        )
        return (
            f"{self.passed} passed, {self.failed} failed, {self.errors} errors, "
            f"{self.skipped} skipped{extra} (pytest junit)"
        )


_RANK: dict[CaseOutcome, int] = {"passed": 0, "skipped": 1, "xfailed": 2, "error": 3, "failed": 4}
_OUTCOMES: dict[str, CaseOutcome] = {
    "passed": "passed",
    "xpassed": "passed",
    "skipped": "skipped",
    "xfailed": "xfailed",
    "error": "error",
    "failed": "failed",
}


def cases(root: ET.Element, workdir: Path) -> list[CaseResult]:
    """Per-test results in run order. pytest writes a second testcase for a teardown error of
    the same test: the worse outcome stands for the test."""
    merged: dict[str, CaseResult] = {}
    for tc in root.iter("testcase"):
        outcome, reason = _case_outcome(tc)
        props = [
            p.get("value", "")
            for p in tc.iter("property")
            if p.get("name", "").lower() in ("requirement", "requirements")
        ]
        case = CaseResult(
            nodeid=nodeid(tc),
            outcome=outcome,
            reason=records.sanitize(reason, workdir) if reason else None,
            requirements=tuple(dict.fromkeys(records.REQ_ID.findall(" ".join(props)))),
        )
        known = merged.get(case.nodeid)
        if known is None or _RANK[outcome] > _RANK[known.outcome]:
            merged[case.nodeid] = case
    return list(merged.values())


def _case_outcome(tc: ET.Element) -> tuple[CaseOutcome, str | None]:
    # A failure or error element is the test's, or one of its subtests': either way the test
    # did not pass (pytest exits 1).
    if tc.find("failure") is not None:
        return "failed", None  # a strict xpass is a failure too ([XPASS(strict)])
    if tc.find("error") is not None:
        return "error", None
    skipped = tc.find("skipped")
    own = _OUTCOMES.get(_property(tc, OUTCOME) or "")
    if own is None:
        if skipped is None:
            return "passed", None
        own = "xfailed" if skipped.get("type") == "pytest.xfail" else "skipped"
    # A skipped subtest leaves a skipped element in a test that passed: the test's own outcome
    # decides.
    reason = skipped.get("message") if skipped is not None else None
    return own, (reason or None if own in ("skipped", "xfailed") else None)


def _property(tc: ET.Element, name: str) -> str | None:
    """The last value the testcase records under ``name`` (ours come after the test's own)."""
    values = [p.get("value") for p in tc.iter("property") if p.get("name") == name]
    return values[-1] if values else None


def read(path: Path) -> ET.Element | None:
    # defusedxml is not a dependency; expat (>= 2.4) in CPython 3.11 already refuses the
    # entity-expansion bombs a hostile suite could write over its report, and the size cap
    # bounds the rest.
    try:
        if not path.is_file() or path.stat().st_size > _MAX:
            return None
        return ET.parse(path).getroot()
    except (ET.ParseError, OSError):
        return None


def counts(root: ET.Element) -> Counts:
    """pytest's summary counts as the plugin recorded them, else counted from the testcases."""
    found = _summary(root)
    if found is None:
        return _counted(root)
    beside = [(w, found[w]) for w in _BESIDE if found.get(w)]
    beside += sorted(
        (w, n) for w, n in found.items() if w not in _NOT_RESULTS and w not in _OUTCOMES
    )
    return Counts(
        passed=found.get("passed", 0),
        failed=found.get("failed", 0),
        errors=found.get("error", 0),
        skipped=found.get("skipped", 0),
        xfailed=found.get("xfailed", 0),
        xpassed=found.get("xpassed", 0),
        beside=tuple(beside),
    )


def _summary(root: ET.Element) -> dict[str, int] | None:
    """The plugin's counts, summed over the report's testsuites; None unless every suite has
    them in the shape the plugin writes."""
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    total: dict[str, int] = {}
    for suite in suites:
        props = suite.find("properties")
        raw = next(
            (
                p.get("value", "")
                for p in (props if props is not None else ())
                if p.get("name") == COUNTS
            ),
            None,
        )
        try:
            found = json.loads(raw) if raw is not None else None
        except ValueError:
            return None
        if not isinstance(found, dict) or not all(
            isinstance(w, str) and _WORD.match(w) and type(n) is int and n >= 0
            for w, n in found.items()
        ):
            return None
        for word, n in found.items():
            total[word] = total.get(word, 0) + n
    return total if suites else None


def _counted(root: ET.Element) -> Counts:
    # One testcase per test (two for a failure then a teardown error, as pytest counts it);
    # junit's own `tests` attribute would count every subtest as a test.
    seen = {"passed": 0, "xpassed": 0, "skipped": 0, "xfailed": 0, "error": 0, "failed": 0}
    for tc in root.iter("testcase"):
        outcome, _ = _case_outcome(tc)
        xpass = outcome == "passed" and _property(tc, OUTCOME) == "xpassed"
        seen["xpassed" if xpass else outcome] += 1
    return Counts(
        passed=seen["passed"],
        failed=seen["failed"],
        errors=seen["error"],
        skipped=seen["skipped"],
        xfailed=seen["xfailed"],
        xpassed=seen["xpassed"],
    )


def problem(tc: ET.Element) -> ET.Element | None:
    return tc.find("failure") if tc.find("failure") is not None else tc.find("error")


def error_messages(root: ET.Element, limit: int = 5) -> str:
    """Collection errors and the like, as pytest recorded them in the report."""
    out: list[str] = []
    for tc in root.iter("testcase"):
        bad = problem(tc)
        if bad is not None and len(out) < limit:
            text = (bad.text or bad.get("message") or "").strip().splitlines()[-12:]
            out.append(f"{nodeid(tc)}:\n" + "\n".join(text))
    return processes.redact("\n".join(out))


def nodeid(tc: ET.Element) -> str:
    """pytest's node id of the test: the one the plugin recorded, else rebuilt from the xunit1
    attributes (a collection error, a report written without the plugin)."""
    recorded = _property(tc, NODEID)
    if recorded:
        return recorded
    file, classname, name = tc.get("file"), tc.get("classname", ""), tc.get("name", "")
    if not file:
        return "::".join(p for p in (classname, name) if p)
    module = file.removesuffix(".py").replace("/", ".")
    if classname == module or classname.startswith(module + "."):
        inner = classname[len(module) + 1 :]
        return "::".join(p for p in (file, *inner.split("."), name) if p)
    # Defined in another module than the one that collected it (a base class's test, an
    # imported test function): the classname is the collecting module's dotted path then the
    # classes, and classes are the trailing capitalised parts.
    parts = classname.split(".")
    split = len(parts)
    while split > 1 and parts[split - 1][:1].isupper():
        split -= 1
    path = "/".join(parts[:split]) + ".py"
    return "::".join(p for p in (path, *parts[split:], name) if p)


def _location(tc: ET.Element, file: str | None, line: str | None) -> Location | None:
    """Where a failed test is: pytest writes its item's 0-based line into the junit report; an
    item with none gets the line its failure names in its own file (the plugin's property),
    and else no line: the report says line 1 of the file, and that it was not given."""
    if not file:
        return None
    if line and line.isdigit():
        return Location(path=file, line=int(line) + 1)
    named = _property(tc, LINE)
    return Location(path=file, line=int(named) if named and named.isdigit() else None)


_TRACE_PATH = re.compile(r"^(?P<path>[^\s:]+\.py):(?P<line>\d+):", re.MULTILINE)
# pytest-timeout's words for a test it stopped at its limit.
_TIMEOUT = re.compile(r"Timeout \(>(?P<seconds>\d+(?:\.\d+)?)s\) from pytest-timeout")


def failure(tc: ET.Element, scope: Scope, source: str) -> Finding:
    """A failed or erroring testcase as a finding of ``source`` (the tester)."""
    found = problem(tc)
    assert found is not None
    file, line = tc.get("file"), tc.get("line")
    text = found.text or ""
    message = (found.get("message") or "").strip().splitlines()[:10]
    if not message:
        # A plugin's item that blanks the crash message (pytest-mypy-plugins keeps only its
        # own report of expected and actual output): that report is the message.
        message = text.strip().splitlines()[-12:]
    # The last `path:line: Exception` line is where it broke; keep it with the message.
    where = [m.group(0) + text[m.end() :].split("\n", 1)[0] for m in _TRACE_PATH.finditer(text)]
    scoped = {f.path for f in scope.included if f.status != "deleted"}
    touched = {m["path"] for m in _TRACE_PATH.finditer(text)}
    if found.tag == "error":
        message.insert(0, "Error outside the test body (fixture setup or teardown):")
    limit = _TIMEOUT.search(found.get("message") or "")
    return Finding(
        title=f"Test failed: {nodeid(tc)}",
        severity=9,
        description=processes.redact("\n".join([*message, *where[-1:]]))[:4000],
        source=source,
        issue_class="test-failure",
        location=_location(tc, file, line),
        in_scope=bool(file in scoped or touched & scoped),
        nodeid=nodeid(tc),
        timed_out=float(limit["seconds"]) if limit else None,
    )
