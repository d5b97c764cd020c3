"""Plugin-heavy suites (jaraco's style: pytest.ini with --doctest-modules, pytest-enabler turning
on pytest-ruff, pytest-checkdocs building the project's metadata): the tester's ids, outcomes
and failure locations are those of the same suite run by hand with network, by pytest's own
junit report. Real pip, uv, pytest and plugins from the index."""

from __future__ import annotations

import re
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

from conftest import make_repo, venv_by_hand

from verify_dag.models.scope import Scope
from verify_dag.phases import tester, triage

FILES = {
    "pyproject.toml": (
        '[build-system]\nrequires = ["setuptools>=61"]\nbuild-backend = "setuptools.build_meta"\n\n'
        '[project]\nname = "verify-dag-jx"\nversion = "0.1"\nreadme = "README.rst"\n'
        'description = "jx"\n\n[project.optional-dependencies]\ntest = [\n'
        '    "pytest>=6",\n    "pytest-checkdocs>=2.4",\n    "pytest-enabler>=2.2",\n'
        '    "pytest-ruff>=0.2.1",\n]\n\n'
        '[tool.setuptools.packages.find]\nwhere = ["src"]\n\n'
        '[tool.pytest-enabler.ruff]\naddopts = "--ruff"\n'
    ),
    "pytest.ini": "[pytest]\nnorecursedirs=dist build .tox .eggs\naddopts=\n"
    "\t--doctest-modules\n\t--import-mode importlib\nconsider_namespace_packages=true\n",
    "README.rst": "jx\n==\n\nA package.\n",
    "src/jx/__init__.py": '"""jx."""\n\n\ndef double(x):\n    """\n    >>> double(2)\n    4\n'
    '    >>> double(3)\n    7\n    """\n    return 2 * x\n',
    "tests/test_jx.py": "from jx import double\n\n\ndef test_double():\n"
    "    assert double(1) == 2\n",
}


_SHORT = re.compile(r"^(PASSED|FAILED|ERROR|SKIPPED) (\S+)", re.MULTILINE)


def _location(report: Path, name: str) -> tuple[str | None, str | None]:
    """(file, line) of testcase ``name`` in pytest's junit report (xunit1)."""
    for tc in ET.parse(report).getroot().iter("testcase"):
        if tc.get("name") == name:
            return tc.get("file"), tc.get("line")
    raise AssertionError(f"no testcase {name}")


def test_a_jaraco_style_suite_counts_as_pytest_counts_it(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    for rel, text in FILES.items():
        repo.write(rel, text)
    repo.commit("jaraco-style project")
    outcome, _ = tester.run_with_coverage(
        Scope(mode="all", new_commit="0" * 40),
        triage.discover(repo.path),
        repo.path,
        600,
        cache_dir=tmp_path / "cache",
    )

    # By hand as jaraco's tox env does it (usedevelop): the project installed editable.
    python = venv_by_hand(tmp_path / "by-hand", "-e", ".[test]", cwd=repo.path)
    report = tmp_path / "junit.xml"
    by_hand = subprocess.run(
        [
            python,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-q",
            "-rA",
            f"--junitxml={report}",
            "-o",
            "junit_family=xunit1",
        ],
        cwd=repo.path,
        capture_output=True,
        text=True,
    )
    assert by_hand.returncode == 1, by_hand.stdout
    assert "1 failed, 4 passed" in by_hand.stdout, by_hand.stdout

    assert outcome.notes.startswith("4 passed, 1 failed, 0 errors, 0 skipped"), outcome.notes
    assert outcome.evidence is not None
    ours = {c.nodeid: c.outcome for c in outcome.evidence.tests}
    theirs = {m[1]: m[0].lower() for m in _SHORT.findall(by_hand.stdout)}
    # The checkdocs item builds the project's metadata in an isolated env: it passes here too.
    assert ours == theirs, by_hand.stdout
    assert ours[".::project"] == "passed"
    assert {"src/jx/__init__.py::ruff", "tests/test_jx.py::ruff"} <= set(ours)
    (failed,) = outcome.findings
    assert failed.nodeid == "src/jx/__init__.py::jx.double"
    file, line = _location(report, "jx.double")
    assert failed.location is not None and line is not None
    assert (failed.location.path, failed.location.line) == (file, int(line) + 1)


def test_through_tox_the_checkdocs_item_finds_the_build_requirements_too(tmp_path: Path) -> None:
    """jaraco's projects run through tox (usedevelop, their extras): tox passes a command only
    the variables pass_env names, so the wheelhouse's are named there."""
    repo = make_repo(tmp_path / "repo")
    for rel, text in FILES.items():
        repo.write(rel, text)
    repo.write(
        "tox.ini",
        "[testenv]\nusedevelop = True\nextras =\n\ttest\ncommands =\n\tpytest {posargs}\n",
    )
    repo.commit("jaraco-style project with tox")
    outcome, _ = tester.run_with_coverage(
        Scope(mode="all", new_commit="0" * 40),
        triage.discover(repo.path),
        repo.path,
        600,
        cache_dir=tmp_path / "cache",
    )
    assert outcome.notes.startswith("4 passed, 1 failed, 0 errors, 0 skipped"), outcome.notes
    assert outcome.notes.endswith("; env from tox env py"), outcome.notes
    assert outcome.evidence is not None
    assert {c.nodeid: c.outcome for c in outcome.evidence.tests}[".::project"] == "passed"
