"""The tester's reading of a real pytest run: counts in pytest's own words (subtests apart), node
ids pytest itself accepts (inherited and parametrised tests), the debugger re-running those ids
at the merge base, and skipped tests as findings. Real pytest runs in tmp_path."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

from conftest import Repo, write

from verify_dag import git
from verify_dag.models import RunState, VerifyRequest
from verify_dag.models.scope import FileChange, Scope
from verify_dag.models.toolchain import Command, Toolchain
from verify_dag.phases import debugger, scope, tester
from verify_dag.phases.tester import junit, junit_plugin, skips

PYTEST = Toolchain(
    commands=(
        Command(
            kind="test", argv=("pytest",), source="tests directory", exists=True, tool="pytest"
        ),
    )
)
_WORDS = re.compile(r"(\d+) ([a-z]+(?: [a-z]+)?)")


def scope_of(*paths: str) -> Scope:
    return Scope(
        mode="branch",
        new_commit="0" * 40,
        included=tuple(FileChange(path=p, status="modified") for p in paths),
    )


def pytest_words(root: Path, *args: str) -> dict[str, int]:
    """pytest's own summary line of a direct run at -q (the tester's verbosity) as {word: n}."""
    res = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
        cwd=root,
        capture_output=True,
        text=True,
    )
    last = res.stdout.strip().splitlines()[-1]
    return _words(last.split(" in ")[0])


def _words(text: str) -> dict[str, int]:
    # pytest's plural "errors" is our notes' word for its "error".
    return {w.replace("errors", "error"): int(n) for n, w in _WORDS.findall(text) if int(n)}


def collected(root: Path) -> list[str]:
    """The node ids pytest itself collects."""
    res = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--collect-only"],
        cwd=root,
        capture_output=True,
        text=True,
    )
    return [ln for ln in res.stdout.splitlines() if "::" in ln]


def junit_root(root: Path, *args: str) -> ET.Element:
    """The junit report of a run with the tester's plugin, as the tester has pytest write it."""
    with tempfile.TemporaryDirectory() as tmp:
        lib = junit_plugin.install_plugin(Path(tmp) / "plugin")
        report = Path(tmp) / "junit.xml"
        subprocess.run(
            [
                *(sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args),
                *(f"--junitxml={report}", "-o", "junit_family=xunit1", "-p", junit_plugin.PLUGIN),
            ],
            cwd=root,
            env={**os.environ, "PYTHONPATH": str(lib)},
            capture_output=True,
            check=False,
        )
        found = junit.read(report)
    assert found is not None
    return found


SUBTESTS = {
    "tests/test_sub.py": """\
import unittest

import pytest


def test_fixture(subtests):
    for i in range(3):
        with subtests.test(i=i):
            assert i >= 0


def test_one_skipped_part(subtests):
    for i in range(2):
        with subtests.test(i=i):
            if i:
                pytest.skip("part two needs a network")


class TestCase(unittest.TestCase):
    def test_sub(self):
        for i in range(4):
            with self.subTest(i=i):
                self.assertGreaterEqual(i, 0)


def test_plain():
    pass
""",
}


def test_subtests_are_counted_apart_as_pytest_prints_them(tmp_path: Path) -> None:
    write(tmp_path, SUBTESTS)
    words = pytest_words(tmp_path)
    # pytest >= 9's own words: 4 tests, the subtests beside them (the skipped part is its skip).
    assert words == {"passed": 4, "skipped": 1, "subtests passed": 8}
    out = tester.run(scope_of(), PYTEST, tmp_path, 60)
    assert out.status == "PASSED", out.findings
    assert out.notes == "4 passed, 0 failed, 0 errors, 1 skipped, 8 subtests passed (pytest junit)"
    assert _words(out.notes) == words
    # The bundle holds the four tests, each once: a test with a skipped part passed.
    assert out.evidence is not None
    assert {c.nodeid: c.outcome for c in out.evidence.tests} == {
        "tests/test_sub.py::test_fixture": "passed",
        "tests/test_sub.py::test_one_skipped_part": "passed",
        "tests/test_sub.py::TestCase::test_sub": "passed",
        "tests/test_sub.py::test_plain": "passed",
    }
    assert out.evidence.counts.total == 4


def test_failed_subtests_are_counted_as_pytest_counts_them(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "tests/test_sub.py": SUBTESTS["tests/test_sub.py"]
            .replace("assert i >= 0", "assert i != 1")
            .replace("self.assertGreaterEqual(i, 0)", "self.assertNotEqual(i, 2)"),
        },
    )
    words = pytest_words(tmp_path)
    out = tester.run(scope_of(), PYTEST, tmp_path, 60)
    assert out.status == "FAILED"
    # pytest counts a failed subtest as failed, and so do we: the same words, never the
    # subtests added to the passed tests.
    assert _words(out.notes.removesuffix(" (pytest junit)")) == words
    assert words["subtests passed"] == 6
    assert {f.nodeid for f in out.findings} == {
        "tests/test_sub.py::test_fixture",
        "tests/test_sub.py::TestCase::test_sub",
    }


INHERITED = {
    "tests/__init__.py": "",
    "tests/base.py": """\
import pytest


class Base:
    value = 1

    def test_clear(self):
        assert self.value == 1

    @pytest.mark.parametrize("p", ["1-2", "a::b", "c/d", "[x]", "\\u00fcn"])
    def test_param(self, p):
        assert p


def test_imported():
    pass
""",
    "tests/test_x.py": """\
from tests.base import Base, test_imported


class TestOne(Base):
    value = 2


class TestTwo(Base):
    value = 3


class TestThree(Base):
    pass
""",
}


def test_inherited_and_parametrised_tests_keep_pytest_node_ids(tmp_path: Path) -> None:
    write(tmp_path, INHERITED)
    out = tester.run(scope_of("tests/base.py"), PYTEST, tmp_path, 60)
    assert out.status == "FAILED" and out.evidence is not None
    ids = [c.nodeid for c in out.evidence.tests]
    # Every test of the run, under the id pytest collects it by: none merged, none invented.
    assert ids == collected(tmp_path) and len(ids) == 19
    assert "tests/test_x.py::TestOne::test_param[a::b]" in ids
    assert "tests/test_x.py::test_imported" in ids
    failed = [f.nodeid or "" for f in out.findings]
    assert failed == [
        "tests/test_x.py::TestOne::test_clear",
        "tests/test_x.py::TestTwo::test_clear",
    ]
    assert [f.title for f in out.findings] == [f"Test failed: {n}" for n in failed]
    assert out.notes == "17 passed, 2 failed, 0 errors, 0 skipped (pytest junit)"
    # pytest accepts each id it was given back.
    res = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *failed],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert res.stdout.strip().splitlines()[-1].startswith("2 failed in ")


def test_a_report_without_the_plugin_still_names_inherited_tests(tmp_path: Path) -> None:
    """A testcase without the recorded id (a collection error, a report the plugin did not see)
    is named from the xunit1 attributes: the collecting module and class, not the file the
    base class is defined in."""
    tc = ET.fromstring(
        '<testcase classname="tests.test_x.TestOne" name="test_clear" file="tests/base.py"/>'
    )
    assert junit.nodeid(tc) == "tests/test_x.py::TestOne::test_clear"
    imported = ET.fromstring(
        '<testcase classname="tests.test_x" name="test_imported" file="tests/base.py"/>'
    )
    assert junit.nodeid(imported) == "tests/test_x.py::test_imported"


def verify_branch(repo: Repo) -> RunState:
    request = VerifyRequest.model_validate(
        {"repo": str(repo.path), "scope": "branch", "base": "base"}
    )
    sc = scope.run(request)
    with git.worktree(request.repo, sc.new_commit) as wt:
        tested = tester.run(sc, PYTEST, wt, 60)
    return RunState(run_id="t", request=request, scope=sc, outcomes=(tested,))


def test_debugger_finds_inherited_failures_at_the_base_by_their_ids(repo: Repo) -> None:
    """Seen on a real release: two subclasses' copies of a failing mixin test were one failure
    under an id that exists nowhere, which the debugger then could not find at the base."""
    for rel, text in INHERITED.items():
        repo.write(rel, text)
    repo.commit("base: TestOne and TestTwo fail test_clear")
    repo.git("tag", "base")
    repo.write("README.md", "docs only\n")
    repo.commit("docs")
    state = verify_branch(repo)
    (tested,) = state.outcomes
    assert [f.nodeid for f in tested.findings] == [
        "tests/test_x.py::TestOne::test_clear",
        "tests/test_x.py::TestTwo::test_clear",
    ]
    out = debugger.run(state)
    assert [(d.failure, d.pre_existing) for d in out.diagnoses] == [
        ("tests/test_x.py::TestOne::test_clear", "yes"),
        ("tests/test_x.py::TestTwo::test_clear", "yes"),
    ]


def test_debugger_names_a_parametrised_test_whose_id_holds_colons(repo: Repo) -> None:
    repo.write("tests/test_a.py", "def test_a():\n    pass\n")
    repo.commit("base")
    repo.git("tag", "base")
    repo.write(
        "tests/test_a.py",
        "import pytest\n\n\ndef test_a():\n    pass\n\n\n"
        "@pytest.mark.parametrize('p', ['a::b'])\ndef test_new(p):\n    assert p == 'x'\n",
    )
    repo.commit("tests: test_new")
    state = verify_branch(repo)
    (tested,) = state.outcomes
    nodeid = "tests/test_a.py::test_new[a::b]"
    assert [f.nodeid for f in tested.findings] == [nodeid]
    (d,) = debugger.run(state).diagnoses
    # The diff adds test_new (not a test named "b]"): it cannot have failed at the base.
    assert (d.failure, d.pre_existing) == (nodeid, "no")


SKIPPED_SUITE = {
    "tests/test_new.py": """\
import pytest

pytestmark = pytest.mark.skipif(True, reason="needs compiled .mo catalogues")


def test_one():
    pass


def test_two():
    pass
""",
    "tests/test_old.py": """\
import pytest


def test_runs():
    pass


def test_runs_too():
    pass


@pytest.mark.xfail(reason="known")
def test_known():
    assert 0


def test_skips():
    pytest.skip("no network")
""",
}


def test_every_test_of_a_changed_test_file_skipped_is_a_finding(tmp_path: Path) -> None:
    write(tmp_path, SKIPPED_SUITE)
    root = junit_root(tmp_path)
    found = skips.findings(root, scope_of("src/app.py", "tests/test_new.py"), tmp_path)
    assert [(f.title, f.severity, f.issue_class) for f in found] == [
        ("Every test in tests/test_new.py was skipped", 6, "coverage"),
    ]
    (finding,) = found
    assert finding.location is not None and finding.location.path == "tests/test_new.py"
    assert "pytest's skip reasons: needs compiled .mo catalogues (2)" in finding.description
    # A changed test file with one test that ran is not all skipped; a changed file that is not
    # a test file (no test was collected from it) is not one either.
    assert skips.findings(root, scope_of("tests/test_old.py"), tmp_path) == []
    assert skips.findings(root, scope_of("src/app.py"), tmp_path) == []


def test_most_of_the_suite_skipped_is_a_finding(tmp_path: Path) -> None:
    write(tmp_path, SKIPPED_SUITE)
    # Half of the suite skipped is not most of it: 3 of 6 (the xfailed test ran).
    assert skips.findings(junit_root(tmp_path), scope_of(), tmp_path) == []
    # Deselecting the two tests that pass leaves 3 of 4 skipped: deselected tests are not the
    # suite's, the selection left them out and nothing skipped them.
    found = skips.findings(junit_root(tmp_path, "-k", "not test_runs"), scope_of(), tmp_path)
    assert [(f.title, f.severity, f.issue_class) for f in found] == [
        ("Most of the suite was skipped: 3 of 4 tests", 4, "coverage"),
    ]
    assert found[0].description.endswith(
        "pytest's skip reasons: needs compiled .mo catalogues (2); no network (1)"
    )
