"""The tester skill: real pytest runs on tiny suites in tmp_path."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import Repo, make_repo, verify_json

from verify_dag.models.findings import SkillOutcome
from verify_dag.models.scope import FileChange, LineRange, Scope
from verify_dag.models.toolchain import Command, EngineerContext, Toolchain
from verify_dag.phases import tester, triage
from verify_dag.phases.tester import coverage
from verify_dag.phases.tester.env import host

PYTEST = Toolchain(
    commands=(
        Command(
            kind="test", argv=("pytest",), source="tests directory", exists=True, tool="pytest"
        ),
    )
)


def write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def scope_of(*paths: str) -> Scope:
    return Scope(
        mode="branch",
        new_commit="0" * 40,
        included=tuple(FileChange(path=p, status="modified") for p in paths),
    )


def run(root: Path, tc: Toolchain = PYTEST, *paths: str, timeout: float = 60) -> SkillOutcome:
    return tester.run(scope_of(*paths), tc, root, timeout)


def blocked_finding(out: SkillOutcome) -> str:
    assert out.status == "BLOCKED" and out.skill == "tester"
    (finding,) = out.findings
    assert (finding.title, finding.severity, finding.issue_class) == (
        "Tests could not run",
        10,
        "environment",
    )
    return finding.description


def test_passing_suite_exact_counts(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "calc.py": "def add(a, b):\n    return a + b\n",
            "tests/test_calc.py": "import pytest\nimport calc\n\n"
            "def test_add():\n    assert calc.add(1, 2) == 3\n\n"
            "@pytest.mark.parametrize('n', [1, 2, 3])\n"
            "def test_many(n):\n    assert calc.add(n, 0) == n\n\n"
            "@pytest.mark.skip(reason='later')\ndef test_later():\n    pass\n",
        },
    )
    out = run(tmp_path)
    assert out.status == "PASSED" and out.findings == ()
    assert out.notes == "4 passed, 0 failed, 0 errors, 1 skipped (pytest junit)"
    # The junit report went to a temporary directory, not into the checkout.
    assert not list(tmp_path.rglob("*.xml")) and not list(tmp_path.rglob("__pycache__"))


def test_failing_test_is_a_finding_with_location(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "calc.py": "def add(a, b):\n    return a - b\n",
            "tests/test_calc.py": "import calc\n\n"
            "def test_ok():\n    assert calc.add(0, 0) == 0\n\n"
            "class TestAdd:\n"
            "    def test_add(self):\n        assert calc.add(1, 2) == 3\n",
        },
    )
    out = run(tmp_path, PYTEST, "calc.py")
    assert out.status == "FAILED"
    assert out.notes == "1 passed, 1 failed, 0 errors, 0 skipped (pytest junit)"
    (finding,) = out.findings
    assert finding.title == "Test failed: tests/test_calc.py::TestAdd::test_add"
    assert (finding.severity, finding.issue_class, finding.source) == (9, "test-failure", "tester")
    assert finding.location is not None
    assert (finding.location.path, finding.location.line) == ("tests/test_calc.py", 7)
    assert "assert -1 == 3" in finding.description
    assert "tests/test_calc.py:8: AssertionError" in finding.description
    # calc.py is scoped but not in the traceback; the test file is not scoped.
    assert finding.in_scope is False
    # The debugger re-runs exactly this test.
    assert finding.nodeid == "tests/test_calc.py::TestAdd::test_add"


def test_failure_in_scoped_code_is_in_scope(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "calc.py": "def div(a, b):\n    return a / b\n",
            "tests/test_calc.py": "import calc\n\ndef test_div():\n    assert calc.div(1, 0)\n",
        },
    )
    out = run(tmp_path, PYTEST, "calc.py")
    (finding,) = out.findings
    assert finding.in_scope is True and "ZeroDivisionError" in finding.description


def test_fixture_error_counts_as_error(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "tests/test_fx.py": "import pytest\n\n@pytest.fixture\n"
            "def broken():\n    raise RuntimeError('nope')\n\n"
            "def test_x(broken):\n    pass\n"
        },
    )
    out = run(tmp_path, PYTEST, "tests/test_fx.py")
    assert out.status == "FAILED"
    assert out.notes == "0 passed, 0 failed, 1 errors, 0 skipped (pytest junit)"
    (finding,) = out.findings
    assert finding.title == "Test failed: tests/test_fx.py::test_x" and finding.in_scope is True
    assert "fixture setup or teardown" in finding.description


def test_collection_error_is_blocked(tmp_path: Path) -> None:
    write(
        tmp_path, {"tests/test_broken.py": "import no_such_module_xyz\n\ndef test_x():\n    pass\n"}
    )
    text = blocked_finding(run(tmp_path))
    assert "pytest exited 2" in text and "no_such_module_xyz" in text


def test_no_tests_is_blocked(tmp_path: Path) -> None:
    write(tmp_path, {"tests/helper.py": "X = 1\n"})
    text = blocked_finding(run(tmp_path))
    assert "pytest exited 5: no tests were collected" in text


def test_timeout_is_blocked(tmp_path: Path) -> None:
    write(tmp_path, {"tests/test_slow.py": "import time\n\ndef test_slow():\n    time.sleep(30)\n"})
    out = run(tmp_path, timeout=2)
    assert "timed out after 2s" in blocked_finding(out)
    assert out.notes.startswith("tests could not run")


def test_a_hanging_test_fails_alone_and_the_rest_still_count(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "tests/test_a.py": "import time\n\ndef test_hangs():\n    time.sleep(120)\n\n"
            "def test_fine():\n    pass\n",
            "tests/test_b.py": "def test_also_fine():\n    pass\n",
        },
    )
    out, _ = tester.run_with_coverage(scope_of(), PYTEST, tmp_path, 100, per_test_timeout=2)
    assert out.status == "FAILED", out.notes
    assert out.notes.startswith("2 passed, 1 failed"), out.notes
    (finding,) = out.findings
    assert "test_hangs" in finding.title and "Timeout" in finding.description, finding


def test_no_test_command_is_blocked_not_passed(tmp_path: Path) -> None:
    out = run(tmp_path, Toolchain())
    assert "no test command was discovered" in blocked_finding(out)
    assert not out.ran


def test_secret_environment_is_not_visible_to_the_suite(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_API_TOKEN", "supersecret123")
    write(
        tmp_path,
        {
            "tests/test_env.py": "import os\n\ndef test_env():\n"
            "    assert os.environ.get('MY_API_TOKEN') is None, "
            "os.environ.get('MY_API_TOKEN')\n"
        },
    )
    out = run(tmp_path)
    assert out.status == "PASSED", out.findings


def test_secret_printed_by_a_failing_suite_is_redacted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_API_TOKEN", "supersecret123")
    # The suite cannot see the variable, but it may know the value some other way.
    write(
        tmp_path, {"tests/test_leak.py": "def test_leak():\n    assert 'supersecret123' == 'x'\n"}
    )
    out = run(tmp_path)
    assert out.status == "FAILED"
    assert "supersecret123" not in out.findings[0].description
    assert "[REDACTED]" in out.findings[0].description


def test_other_runner_exit_codes(tmp_path: Path) -> None:
    def cmd(code: str) -> Toolchain:
        return Toolchain(
            commands=(
                Command(
                    kind="test",
                    argv=(sys.executable, "-c", code),
                    source="Makefile target test",
                    exists=True,
                ),
            )
        )

    ok = run(tmp_path, cmd("print('all good')"))
    assert ok.status == "PASSED" and "exited 0" in ok.notes
    bad = run(tmp_path, cmd("print('1 test FAILED: test_thing'); raise SystemExit(2)"))
    assert bad.status == "FAILED"
    (finding,) = bad.findings
    assert (finding.severity, finding.issue_class) == (9, "test-failure")
    assert "1 test FAILED: test_thing" in finding.description
    missing = Toolchain(
        commands=(
            Command(kind="test", argv=("verify-dag-no-such-runner",), source="ci", exists=False),
        )
    )
    assert "verify-dag-no-such-runner was not found" in blocked_finding(run(tmp_path, missing))
    shell_missing = run(tmp_path, cmd("raise SystemExit(127)"))
    assert "missing or not executable" in blocked_finding(shell_missing)


def test_coverage_is_collected_in_the_same_run(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "calc.py": "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n",
            # Counts how often the suite ran: once, even though coverage was collected.
            "tests/test_calc.py": "import calc\n\n"
            "def test_add():\n"
            "    with open('runs.log', 'a') as fh:\n"
            "        fh.write('run\\n')\n"
            "    assert calc.add(1, 2) == 3\n",
        },
    )
    # In the checkout: the sandbox lets the suite write nowhere else.
    log = tmp_path / "runs.log"
    scope = Scope(
        mode="branch",
        new_commit="0" * 40,
        included=(
            FileChange(path="calc.py", status="modified", lines=(LineRange(start=4, end=6),)),
            FileChange(path="README.md", status="modified"),
        ),
    )
    outcome, data = tester.run_with_coverage(scope, PYTEST, tmp_path, 60)
    assert outcome.status == "PASSED"
    assert outcome.notes == "1 passed, 0 failed, 0 errors, 0 skipped (pytest junit)"
    assert log.read_text(encoding="utf-8") == "run\n"
    # Only the scoped Python file, only its changed lines: sub() is defined but never called.
    assert data is not None and data.tool.startswith("coverage.py")
    (measured,) = data.files
    assert (measured.path, measured.statements, measured.executed) == ("calc.py", (5, 6), (5,))
    assert [(f.name, f.start, f.end) for f in measured.functions] == [("sub", 5, 6)]
    # The coverage data lived outside the checkout.
    assert not list(tmp_path.rglob(".coverage*"))


def test_no_coverage_when_the_suite_could_not_run(tmp_path: Path) -> None:
    write(tmp_path, {"tests/helper.py": "X = 1\n"})
    outcome, data = tester.run_with_coverage(scope_of(), PYTEST, tmp_path, 60)
    assert outcome.status == "BLOCKED" and data is None


def direct_counts(root: Path, *args: str) -> dict[str, int]:
    """pytest's own summary line of a direct run, as {word: count}."""
    res = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
        cwd=root,
        capture_output=True,
        text=True,
    )
    last = res.stdout.strip().splitlines()[-1]
    return {word: int(n) for n, word in re.findall(r"(\d+) (\w+)", last.split(" in ")[0])}


def test_xfailed_and_xpassed_are_counted_in_pytest_words(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "tests/test_x.py": (
                "import pytest\n\n"
                "@pytest.mark.parametrize('n', range(8))\ndef test_ok(n):\n    pass\n\n"
                "@pytest.mark.skip(reason='later')\ndef test_later():\n    pass\n\n"
                "@pytest.mark.xfail(reason='known bug')\ndef test_known():\n    assert 0\n\n"
                "@pytest.mark.xfail(reason='fixed?')\ndef test_fixed():\n    pass\n"
            )
        },
    )
    assert direct_counts(tmp_path) == {"passed": 8, "skipped": 1, "xfailed": 1, "xpassed": 1}
    out = run(tmp_path)
    assert out.status == "PASSED"
    assert (
        out.notes == "8 passed, 0 failed, 0 errors, 1 skipped, 1 xfailed, 1 xpassed (pytest junit)"
    )
    assert out.evidence is not None
    assert (out.evidence.counts.skipped, out.evidence.counts.xfailed) == (1, 1)


def test_a_strict_xpass_is_a_failure_as_pytest_says(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "tests/test_x.py": (
                "import pytest\n\ndef test_ok():\n    pass\n\n"
                "@pytest.mark.xfail(strict=True)\ndef test_strict():\n    pass\n"
            )
        },
    )
    assert direct_counts(tmp_path) == {"failed": 1, "passed": 1}
    out = run(tmp_path)
    assert out.status == "FAILED"
    assert out.notes == "1 passed, 1 failed, 0 errors, 0 skipped (pytest junit)"


SPLIT_SUITE = {
    "calc.py": "def add(a, b):\n    return a + b\n",
    "tests/unit/test_calc.py": "import calc\n\ndef test_a():\n    assert calc.add(1, 1) == 2\n\n"
    "def test_b():\n    assert calc.add(0, 1) == 1\n",
    "tests/integration/test_db.py": "def test_needs_a_database():\n"
    "    raise ConnectionError('no database here')\n",
}


def test_an_engineer_skill_pytest_command_keeps_its_selection(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    for rel, text in SPLIT_SUITE.items():
        repo.write(rel, text)
    repo.commit("a split suite")
    engineer = EngineerContext(
        skill_dir=".claude/skills/x-engineer",
        test_commands=("python -m pytest -q tests -k test_a",),
    )
    tc = triage.discover(repo.path, engineer)
    assert tc.test is not None and tc.test.tool == "pytest"
    assert direct_counts(repo.path, "-q", "tests", "-k", "test_a") == {"passed": 1, "deselected": 2}
    out = run(repo.path, tc)
    assert out.status == "PASSED", out.findings
    assert out.notes == "1 passed, 0 failed, 0 errors, 0 skipped (pytest junit)"
    assert out.reason is not None and "python -m pytest -q tests -k test_a" in out.reason
    assert out.evidence is not None
    assert [c.nodeid for c in out.evidence.tests] == ["tests/unit/test_calc.py::test_a"]
    # What ran, with our additions after the repository's own selection; no scratch paths.
    assert out.evidence.command.startswith(
        "python -m pytest -q tests -k test_a "
        "-p no:cacheprovider --rootdir=. --junitxml=junit.xml -o junit_family=xunit1"
    )
    assert str(tmp_path) not in out.evidence.command


def test_a_makefile_pytest_target_keeps_markers_and_drops_what_would_break_the_run(
    tmp_path: Path,
) -> None:
    repo = make_repo(tmp_path / "repo")
    for rel, text in SPLIT_SUITE.items():
        repo.write(rel, text)
    repo.write(
        "tests/unit/test_slow.py",
        "import pytest\n\n@pytest.mark.slow\ndef test_slow():\n    assert False\n",
    )
    repo.write("pytest.ini", "[pytest]\nmarkers =\n    slow: slow tests\n")
    # pytest-cov and xdist are not installed here, and the cache is off in our run: passed
    # on, --cov, -n and --lf would each stop pytest with a usage error.
    repo.write(
        "Makefile",
        "test:\n\t@echo testing\n"
        "\tpytest --cov=calc --cov-report=xml -n 2 --lf -m 'not slow' "
        "--ignore=tests/integration\n",
    )
    repo.commit("make test")
    tc = triage.discover(repo.path)
    assert tc.test is not None and tc.test.source == "Makefile target test"
    outcome, data = tester.run_with_coverage(scope_of("calc.py"), tc, repo.path, 60)
    assert outcome.status == "PASSED", outcome.findings
    assert outcome.notes.startswith(
        "2 passed, 0 failed, 0 errors, 0 skipped (pytest junit); "
        "not passed on from the declared command: --cov=calc ("
    )
    for text in ("--cov-report=xml (", "-n 2 (xdist", "--lf (needs pytest's cache"):
        assert text in outcome.notes
    assert outcome.evidence is not None and "-m 'not slow' --ignore=tests/integration" in (
        outcome.evidence.command
    )
    assert data is not None and [f.path for f in data.files] == ["calc.py"]


def test_cobertura_xml_lets_diff_cover_recheck_the_figure(tmp_path: Path) -> None:
    pytest.importorskip("diff_cover")
    repo = make_repo(tmp_path / "repo")
    repo.write("calc.py", "def add(a, b):\n    return a + b\n")
    repo.write(
        "tests/test_calc.py", "import calc\n\ndef test_add():\n    assert calc.add(1, 2) == 3\n"
    )
    repo.commit("calc")
    repo.git("tag", "base")
    repo.write(
        "calc.py",
        "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n"
        "    if a < b:\n        return 0\n    return a - b\n",
    )
    repo.commit("calc: sub")
    sc = Scope(
        mode="branch",
        new_commit=repo.head(),
        included=(
            FileChange(path="calc.py", status="modified", lines=(LineRange(start=3, end=8),)),
        ),
    )
    xml = tmp_path / "out" / "coverage.xml"
    data_file = tmp_path / "out" / ".coverage"
    outcome, data = tester.run_with_coverage(
        sc, PYTEST, repo.path, 60, xml_file=xml, data_file=data_file
    )
    assert outcome.status == "PASSED" and data is not None
    qa = coverage.diff_coverage(sc, data)
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "diff_cover.diff_cover_tool",
            str(xml),
            "--compare-branch=base",
            f"--json-report={tmp_path / 'dc.json'}",
        ],
        cwd=repo.path,
        capture_output=True,
        text=True,
    )
    assert res.returncode == 0, res.stderr
    report = json.loads((tmp_path / "dc.json").read_text(encoding="utf-8"))
    assert (qa.covered, qa.total) == (1, 4)  # sub's def ran at import; its body never did
    assert (report["total_num_lines"], report["total_num_violations"]) == (4, 3)
    assert report["total_percent_covered"] == qa.diff_cover_percent()
    # Written outside the checkout, named repository-relative inside.
    assert 'filename="calc.py"' in xml.read_text(encoding="utf-8")
    # Only the scoped files: the test module ran under coverage too, but is not in the scope.
    assert "test_calc.py" not in xml.read_text(encoding="utf-8")
    # Our pytest plugin is not measured: the kept data reports without -i once it is gone.
    assert "_verify_dag_outcomes" not in xml.read_text(encoding="utf-8")
    subprocess.run(
        [sys.executable, "-m", "coverage", "report", f"--data-file={data_file}"],
        cwd=repo.path,
        check=True,
        capture_output=True,
    )
    assert not list(repo.path.rglob("*.xml"))


def test_declared_arguments_after_a_double_dash_stay_paths(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "tests/test_a.py": "def test_a():\n    pass\n",
            "tests/test_b.py": "def test_b():\n    assert False\n",
        },
    )
    declared = Toolchain(
        commands=(
            Command(
                kind="test",
                argv=("pytest", "-v", "--", "tests/test_a.py"),
                source="ci",
                exists=True,
                tool="pytest",
            ),
        )
    )
    out = run(tmp_path, declared)
    assert out.status == "PASSED", out.findings
    assert out.notes == "1 passed, 0 failed, 0 errors, 0 skipped (pytest junit)"
    assert out.evidence is not None
    # verify-dag's own options (and, on its interpreter, its dependencies' plugins turned off)
    # come before the `--`, the declared paths after it.
    ours = ["-p", "_verify_dag_outcomes", "-o", "timeout=300", *host.not_ours()]
    assert out.evidence.command.endswith(" ".join([*ours, "--", "tests/test_a.py"]))
    assert " -q " not in out.evidence.command  # the declared -v stands


def test_a_change_of_thousands_of_files_still_measures_coverage(tmp_path: Path) -> None:
    """One --include of every changed path passed Linux's 128 KiB limit for a single argument
    (E2BIG) at about 2,500 files, and the tester came back with no coverage and no finding."""
    names = [f"pkg/module_with_a_long_descriptive_name_{n:04d}.py" for n in range(3000)]
    write(tmp_path, {name: "VALUE = 1\n" for name in names})
    write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "calc.py": "def add(a, b):\n    return a + b\n",
            "tests/test_calc.py": (
                "import calc\n\ndef test_add():\n    assert calc.add(1, 2) == 3\n"
            ),
        },
    )
    changed = ("calc.py", *names)
    assert len(",".join(str(tmp_path / n) for n in changed).encode()) > 128 * 1024
    scope = Scope(
        mode="branch",
        new_commit="0" * 40,
        included=tuple(
            FileChange(path=p, status="added", lines=(LineRange(start=1, end=2),)) for p in changed
        ),
    )
    xml = tmp_path / "out" / "coverage.xml"
    outcome, data = tester.run_with_coverage(scope, PYTEST, tmp_path, 120, xml_file=xml)
    assert outcome.status == "PASSED"
    assert data is not None
    measured = {f.path: f for f in data.files}
    assert measured["calc.py"].executed == (1, 2)
    # The Cobertura file for diff-cover is written too, with the scoped file in it.
    assert 'filename="calc.py"' in xml.read_text(encoding="utf-8")


def test_the_suite_writes_bytecode_as_usual_but_not_into_the_checkout(tmp_path: Path) -> None:
    """Suites test sys.dont_write_bytecode (execnet does): the tester must not change it, and
    the checkout still ends up holding only what was committed."""
    write(
        tmp_path,
        {
            "tests/test_b.py": "import sys\n\n"
            "def test_b():\n    assert not sys.dont_write_bytecode\n",
            "tests/helper.py": "X = 1\n",
            "tests/test_imports.py": "def test_i():\n    from tests import helper  # noqa: F401\n",
            "tests/__init__.py": "",
        },
    )
    out = run(tmp_path)
    assert out.status == "PASSED", out.findings
    assert not list(tmp_path.rglob("__pycache__"))


def test_coverage_is_measured_only_where_something_reads_it(scenario: Repo, tmp_path: Path) -> None:
    """Light runs the suite without coverage.py; deep runs it once, under coverage, for qa's
    changed-line figure. The evidence bundle records the command that ran."""

    def command(doc: dict[str, Any]) -> str:
        bundle = tmp_path / "store" / doc["run"]["id"] / "evidence.json"
        (result,) = json.loads(bundle.read_text(encoding="utf-8"))["results"]
        return str(result["command"])

    _, light = verify_json(scenario, tmp_path, "--scope=branch", "--base=base")
    assert command(light).startswith("python -m pytest ")
    _, deep = verify_json(scenario, tmp_path, "--scope=branch", "--base=base", "--depth=deep")
    assert command(deep).startswith("python -m coverage run --branch")
    qa = next(s for s in deep["skillResults"] if s["skill"] == "qa")
    assert "changed-line coverage" in qa["notes"]
