"""The tester skill: real pytest runs on tiny suites in tmp_path."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from verify_dag.models.findings import SkillOutcome
from verify_dag.models.scope import FileChange, LineRange, Scope
from verify_dag.models.toolchain import Command, Toolchain
from verify_dag.phases import tester

PYTEST = Toolchain(commands=(
    Command(kind="test", argv=("pytest",), source="tests directory", exists=True, tool="pytest"),
))


def write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def scope_of(*paths: str) -> Scope:
    return Scope(mode="branch", new_commit="0" * 40,
                 included=tuple(FileChange(path=p, status="modified") for p in paths))


def run(root: Path, tc: Toolchain = PYTEST, *paths: str, timeout: float = 60) -> SkillOutcome:
    return tester.run(scope_of(*paths), tc, root, timeout)


def blocked_finding(out: SkillOutcome) -> str:
    assert out.status == "BLOCKED" and out.skill == "tester"
    (finding,) = out.findings
    assert (finding.title, finding.severity, finding.issue_class) == (
        "Tests could not run", 10, "environment")
    return finding.description


def test_passing_suite_exact_counts(tmp_path: Path) -> None:
    write(tmp_path, {
        "calc.py": "def add(a, b):\n    return a + b\n",
        "tests/test_calc.py": "import pytest\nimport calc\n\n"
                              "def test_add():\n    assert calc.add(1, 2) == 3\n\n"
                              "@pytest.mark.parametrize('n', [1, 2, 3])\n"
                              "def test_many(n):\n    assert calc.add(n, 0) == n\n\n"
                              "@pytest.mark.skip(reason='later')\ndef test_later():\n    pass\n",
    })
    out = run(tmp_path)
    assert out.status == "PASSED" and out.findings == ()
    assert out.notes == "4 passed, 0 failed, 0 errors, 1 skipped (pytest junit)"
    # The junit report went to a temporary directory, not into the checkout.
    assert not list(tmp_path.rglob("*.xml")) and not list(tmp_path.rglob("__pycache__"))


def test_failing_test_is_a_finding_with_location(tmp_path: Path) -> None:
    write(tmp_path, {
        "calc.py": "def add(a, b):\n    return a - b\n",
        "tests/test_calc.py": "import calc\n\n"
                              "def test_ok():\n    assert calc.add(0, 0) == 0\n\n"
                              "class TestAdd:\n"
                              "    def test_add(self):\n        assert calc.add(1, 2) == 3\n",
    })
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
    write(tmp_path, {
        "calc.py": "def div(a, b):\n    return a / b\n",
        "tests/test_calc.py": "import calc\n\ndef test_div():\n    assert calc.div(1, 0)\n",
    })
    out = run(tmp_path, PYTEST, "calc.py")
    (finding,) = out.findings
    assert finding.in_scope is True and "ZeroDivisionError" in finding.description


def test_fixture_error_counts_as_error(tmp_path: Path) -> None:
    write(tmp_path, {"tests/test_fx.py": "import pytest\n\n@pytest.fixture\n"
                                          "def broken():\n    raise RuntimeError('nope')\n\n"
                                          "def test_x(broken):\n    pass\n"})
    out = run(tmp_path, PYTEST, "tests/test_fx.py")
    assert out.status == "FAILED"
    assert out.notes == "0 passed, 0 failed, 1 errors, 0 skipped (pytest junit)"
    (finding,) = out.findings
    assert finding.title == "Test failed: tests/test_fx.py::test_x" and finding.in_scope is True
    assert "fixture setup or teardown" in finding.description


def test_collection_error_is_blocked(tmp_path: Path) -> None:
    write(tmp_path, {"tests/test_broken.py": "import no_such_module_xyz\n\n"
                                              "def test_x():\n    pass\n"})
    text = blocked_finding(run(tmp_path))
    assert "pytest exited 2" in text and "no_such_module_xyz" in text


def test_no_tests_is_blocked(tmp_path: Path) -> None:
    write(tmp_path, {"tests/helper.py": "X = 1\n"})
    text = blocked_finding(run(tmp_path))
    assert "pytest exited 5: no tests were collected" in text


def test_timeout_is_blocked(tmp_path: Path) -> None:
    write(tmp_path, {"tests/test_slow.py": "import time\n\n"
                                            "def test_slow():\n    time.sleep(30)\n"})
    out = run(tmp_path, timeout=2)
    assert "timed out after 2s" in blocked_finding(out)
    assert out.notes.startswith("tests could not run")


def test_no_test_command_is_blocked_not_passed(tmp_path: Path) -> None:
    out = run(tmp_path, Toolchain())
    assert "no test command was discovered" in blocked_finding(out)
    assert not out.ran


def test_secret_environment_is_not_visible_to_the_suite(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_API_TOKEN", "supersecret123")
    write(tmp_path, {"tests/test_env.py":
                     "import os\n\ndef test_env():\n"
                     "    assert os.environ.get('MY_API_TOKEN') is None, "
                     "os.environ.get('MY_API_TOKEN')\n"})
    out = run(tmp_path)
    assert out.status == "PASSED", out.findings


def test_secret_printed_by_a_failing_suite_is_redacted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_API_TOKEN", "supersecret123")
    # The suite cannot see the variable, but it may know the value some other way.
    write(tmp_path, {"tests/test_leak.py":
                     "def test_leak():\n    assert 'supersecret123' == 'x'\n"})
    out = run(tmp_path)
    assert out.status == "FAILED"
    assert "supersecret123" not in out.findings[0].description
    assert "[REDACTED]" in out.findings[0].description


def test_other_runner_exit_codes(tmp_path: Path) -> None:
    def cmd(code: str) -> Toolchain:
        return Toolchain(commands=(Command(kind="test", argv=(sys.executable, "-c", code),
                                           source="Makefile target test", exists=True),))

    ok = run(tmp_path, cmd("print('all good')"))
    assert ok.status == "PASSED" and "exited 0" in ok.notes
    bad = run(tmp_path, cmd("print('1 test FAILED: test_thing'); raise SystemExit(2)"))
    assert bad.status == "FAILED"
    (finding,) = bad.findings
    assert (finding.severity, finding.issue_class) == (9, "test-failure")
    assert "1 test FAILED: test_thing" in finding.description
    missing = Toolchain(commands=(Command(kind="test", argv=("verify-dag-no-such-runner",),
                                          source="ci", exists=False),))
    assert "verify-dag-no-such-runner was not found" in blocked_finding(run(tmp_path, missing))
    shell_missing = run(tmp_path, cmd("raise SystemExit(127)"))
    assert "missing or not executable" in blocked_finding(shell_missing)


def test_coverage_is_collected_in_the_same_run(tmp_path: Path) -> None:
    write(tmp_path, {
        "calc.py": "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n",
        # Counts how often the suite ran: once, even though coverage was collected.
        "tests/test_calc.py": "import os\nimport calc\n\n"
                              "def test_add():\n"
                              "    with open(os.environ['RUNS_LOG'], 'a') as fh:\n"
                              "        fh.write('run\\n')\n"
                              "    assert calc.add(1, 2) == 3\n",
    })
    log = tmp_path.parent / f"{tmp_path.name}-runs.log"
    scope = Scope(mode="branch", new_commit="0" * 40, included=(
        FileChange(path="calc.py", status="modified", lines=(LineRange(start=4, end=6),)),
        FileChange(path="README.md", status="modified")))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RUNS_LOG", str(log))
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
