"""The small pytest plugin the tester loads into the suite's own pytest (-p), which makes the
junit report it reads (verify_dag/phases/tester/junit.py) exact.

It writes these into the report:
- each testcase's real node id (``item.nodeid``). xunit1 only names a test by its classname and
  the file its function is defined in, so a test inherited from a base class in another module
  (``tests/__init__.py`` defines ``test_clear``, ``tests/test_x.py`` has ``class TestX(Base)``)
  cannot be named from them: rebuilt, it becomes ``tests/__init__.py::test_clear``, which pytest
  rejects and which merges every class's copy of the test into one;
- each test's own outcome, subtests left out: junit marks a test skipped when one of its
  subtests skipped, and a non-strict xpass is a plain pass there;
- pytest's own summary counts, from its terminal reporter, as one testsuite property. junit's
  ``tests`` attribute counts every subtest report as a test (476 tests and 24 subtests become
  "500 passed"); pytest prints "476 passed, 24 subtests passed";
- the line a failure names in the item's own file, for an item without a line of its own.
"""

from __future__ import annotations

from pathlib import Path

PLUGIN = "_verify_dag_outcomes"
NODEID = "verify_dag_nodeid"
OUTCOME = "verify_dag_outcome"
COUNTS = "verify_dag_counts"
LINE = "verify_dag_line"
# The plugin runs in the suite's own pytest, whatever its version (pytest 7 on), so it keeps to
# public hooks and names junitxml's internals only where there is no public way: the LogXML
# object, for a testsuite property (record_testsuite_property is a fixture, for tests).
_PLUGIN_SOURCE = f"""\
import json

import pytest

# pytest >= 9's own subtests (the subtests fixture, unittest's subTest) and pytest-subtests:
# reports of a part of a test, never a test of their own.
_SUBTEST_REPORTS = ("SubtestReport", "SubTestReport")
_RANK = {{"passed": 0, "xpassed": 1, "skipped": 2, "xfailed": 3, "error": 4, "failed": 5}}
_worst = {{}}
_lines = {{}}


def _subtest(report):
    return type(report).__name__ in _SUBTEST_REPORTS


def _outcome(report):
    xfail = hasattr(report, "wasxfail")
    if report.when == "call":
        if xfail:
            return "xfailed" if report.skipped else "xpassed" if report.passed else "failed"
        return report.outcome
    if report.failed:
        return "error"
    if report.skipped:
        return "xfailed" if xfail else "skipped"
    return "passed"


def _add(report, *props):
    # Under xdist the worker's copy of this plugin has already added them.
    if not any(name == {NODEID!r} for name, _ in report.user_properties):
        report.user_properties.extend(props)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_logreport(report):
    # tryfirst: junit writes a report's user_properties into the testcase it closes, so they
    # must be there before junitxml sees the report. It closes a testcase on the teardown
    # report, or on the call report too when a failure is followed by a teardown error (two
    # testcases then): both carry the node id.
    if _subtest(report):
        return
    key = (report.nodeid, getattr(report, "node", None))
    now, seen = _outcome(report), _worst.get(key, "passed")
    worst = now if _RANK[now] > _RANK[seen] else seen
    if report.failed and report.location[1] is None and key not in _lines:
        _lines[key] = _failure_line(report)
    line = _lines.get(key)
    said = [({LINE!r}, str(line))] if line is not None else []
    if report.when == "call":
        _add(report, ({NODEID!r}, report.nodeid), *said)
    if report.when == "teardown":
        _worst.pop(key, None)
        _lines.pop(key, None)
        _add(report, ({NODEID!r}, report.nodeid), ({OUTCOME!r}, worst), *said)
    else:
        _worst[key] = worst


def _failure_line(report):
    # An item without a line of its own (a YAML case of pytest-mypy-plugins reports none): the
    # line its failure names in the item's own file, where the plugin's traceback gives one.
    entries = getattr(getattr(report.longrepr, "reprtraceback", None), "reprentries", ())
    for entry in reversed(entries):
        where = getattr(entry, "reprfileloc", None)
        path = str(getattr(where, "path", "")).replace("\\\\", "/")
        if where is not None and path.endswith(report.location[0]):
            return where.lineno
    return None


def _logxml(config):
    try:
        from _pytest.junitxml import xml_key
    except ImportError:
        return None
    stash = getattr(config, "stash", None) or getattr(config, "_store", None)
    return stash.get(xml_key, None) if stash is not None else None


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session):
    # tryfirst: before junitxml writes the report at its own sessionfinish.
    xml = _logxml(session.config)
    terminal = session.config.pluginmanager.get_plugin("terminalreporter")
    if xml is None or terminal is None:
        return
    counts = {{}}
    for category, reports in terminal.stats.items():
        for report in reports:
            if category:
                if not getattr(report, "count_towards_summary", True):
                    continue
                word = category
            elif _subtest(report) and report.when == "call":
                # pytest 9 files passed and skipped subtests under no word at verbosity 0
                # only: they are counted as it counts them at -q and -v.
                if report.passed:
                    word = "subtests passed"
                elif report.skipped:
                    word = "xfailed" if hasattr(report, "wasxfail") else "skipped"
                else:
                    continue
            else:
                continue
            counts[word] = counts.get(word, 0) + 1
    xml.add_global_property({COUNTS!r}, json.dumps(counts, sort_keys=True))
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
