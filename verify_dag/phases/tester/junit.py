"""The junit report the tester has pytest write (xunit1), read: counts in pytest's own words,
per-test results, the failures; and the small plugin that makes the xpassed count exact."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

from verify_dag import util
from verify_dag.models.evidence import CaseOutcome, CaseResult
from verify_dag.models.findings import Finding, Location
from verify_dag.models.scope import Scope
from verify_dag.phases.tester import records

_MAX = 64 * 1024 * 1024  # a report bigger than this is not one pytest wrote for a test suite
# A non-strict xpass is a plain pass in junit; this plugin, loaded into the suite's pytest with
# -p, marks it with a property so its count is exact. Properties reach the report from the
# item (junit reads them off the teardown report), hence item.user_properties.
PLUGIN = "_verify_dag_outcomes"
_XPASS = ("verify_dag_outcome", "xpassed")
_PLUGIN_SOURCE = f"""\
import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.when == "call" and report.passed and hasattr(report, "wasxfail"):
        item.user_properties.append({_XPASS!r})
"""


def install_plugin(dest: Path) -> Path:
    """Write the plugin under ``dest``; the directory returned goes on the suite's PYTHONPATH.
    A pyvenv.cfg above it makes coverage.py treat it as installed code, as it treats a venv on
    sys.path: otherwise the plugin would be measured, and once this scratch directory is gone
    every report of the kept coverage data (``coverage xml`` without -i) would fail on it."""
    lib = dest / "lib"
    lib.mkdir(parents=True)
    (dest / "pyvenv.cfg").write_text(
        "# verify-dag's pytest plugin, not the suite's code\n", encoding="utf-8"
    )
    (lib / f"{PLUGIN}.py").write_text(_PLUGIN_SOURCE, encoding="utf-8")
    return lib


@dataclass(frozen=True)
class Counts:
    tests: int
    failures: int
    errors: int
    skipped: int  # junit's figure: xfailed tests are in it
    xfailed: int = 0
    xpassed: int = 0  # non-strict; junit counts them as passed (a strict one is a failure)

    @property
    def passed(self) -> int:
        return max(0, self.tests - self.failures - self.errors - self.skipped - self.xpassed)

    def notes(self) -> str:
        # pytest's own words; xfailed and xpassed only when there are any, as pytest does.
        extra = "".join(
            f", {n} {word}"
            for n, word in ((self.xfailed, "xfailed"), (self.xpassed, "xpassed"))
            if n
        )
        return (
            f"{self.passed} passed, {self.failures} failed, {self.errors} errors, "
            f"{self.skipped - self.xfailed} skipped{extra} (pytest junit)"
        )


_RANK: dict[CaseOutcome, int] = {"passed": 0, "skipped": 1, "xfailed": 2, "error": 3, "failed": 4}


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
    if tc.find("failure") is not None:
        return "failed", None  # a strict xpass is a failure too ([XPASS(strict)])
    if tc.find("error") is not None:
        return "error", None
    skipped = tc.find("skipped")
    if skipped is None:
        return "passed", None
    kind: CaseOutcome = "xfailed" if skipped.get("type") == "pytest.xfail" else "skipped"
    return kind, skipped.get("message") or None


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
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))

    def total(attr: str) -> int:
        return sum(int(s.get(attr, "0") or 0) for s in suites)

    testcases = list(root.iter("testcase"))
    xfailed = sum(
        1 for tc in testcases for sk in tc.findall("skipped") if sk.get("type") == "pytest.xfail"
    )
    xpassed = sum(
        1
        for tc in testcases
        if problem(tc) is None
        and any((p.get("name"), p.get("value")) == _XPASS for p in tc.iter("property"))
    )
    return Counts(
        total("tests"), total("failures"), total("errors"), total("skipped"), xfailed, xpassed
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
    return util.redact("\n".join(out))


def nodeid(tc: ET.Element) -> str:
    """Rebuild pytest's node id (path::Class::test) from the xunit1 attributes."""
    file, classname, name = tc.get("file"), tc.get("classname", ""), tc.get("name", "")
    if not file:
        return "::".join(p for p in (classname, name) if p)
    module = file.removesuffix(".py").replace("/", ".")
    inner = classname[len(module) + 1 :] if classname.startswith(module + ".") else ""
    return "::".join(p for p in (file, *inner.split("."), name) if p)


_TRACE_PATH = re.compile(r"^(?P<path>[^\s:]+\.py):(?P<line>\d+):", re.MULTILINE)


def failure(tc: ET.Element, scope: Scope, source: str) -> Finding:
    """A failed or erroring testcase as a finding of ``source`` (the tester)."""
    found = problem(tc)
    assert found is not None
    file, line = tc.get("file"), tc.get("line")
    text = found.text or ""
    message = (found.get("message") or "").strip().splitlines()[:10]
    # The last `path:line: Exception` line is where it broke; keep it with the message.
    where = [m.group(0) + text[m.end() :].split("\n", 1)[0] for m in _TRACE_PATH.finditer(text)]
    scoped = {f.path for f in scope.included if f.status != "deleted"}
    touched = {m["path"] for m in _TRACE_PATH.finditer(text)}
    if found.tag == "error":
        message.insert(0, "Error outside the test body (fixture setup or teardown):")
    return Finding(
        title=f"Test failed: {nodeid(tc)}",
        severity=9,
        description=util.redact("\n".join([*message, *where[-1:]]))[:4000],
        source=source,
        issue_class="test-failure",
        # pytest writes 0-based line numbers in the junit report.
        location=Location(path=file, line=int(line) + 1 if line and line.isdigit() else None)
        if file
        else None,
        in_scope=bool(file in scoped or touched & scoped),
        nodeid=nodeid(tc),
    )
