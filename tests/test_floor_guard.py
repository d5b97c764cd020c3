"""Floor guard (docs/contract.md): every weakening kind on real repositories, waivers from a
contract's CLARIFICATIONS, the FLOOR GUARD line and rows, exit codes 0 / 2 / 3."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import TypedDict

import pytest
from conftest import Repo, run_cli

from verify_dag.cli import main

ROOT = Path(__file__).resolve().parent.parent

GH = ".github/workflows/ci.yml"
WORKFLOW = (
    "name: ci\non: [push]\njobs:\n  test:\n    runs-on: ubuntu-latest\n"
    "    timeout-minutes: 10\n    steps:\n      - uses: actions/checkout@v4\n"
    "      - name: lint\n        run: ruff check .\n      - name: test\n"
    "        run: pytest -q\n"
)
PY_TEST = (
    "import pytest\n\n\ndef test_sum():\n    assert sum([1, 2]) == 3\n\n\n"
    "def test_empty():\n    assert sum([]) == 0\n"
)
JS_TEST = (
    "describe('cart', () => {\n  it('adds', () => {\n    expect(add(1, 2)).toBe(3);\n  });\n});\n"
)
# PY_TEST once test_sum has lost its assertion (line 5), the call kept.
PY_SUM_UNCHECKED = PY_TEST.replace("    assert sum([1, 2]) == 3\n", "    sum([1, 2])\n")
# An assertion over lines: its exactness (== 3) is on a line no pattern recognises.
TOTAL_TEST = "def test_t():\n    assert (\n        total([1, 2])\n        == 3\n    )\n"
GO_TEST = (
    "package calc\n\nfunc TestAdd(t *testing.T) {\n\tif Add(1, 2) != 3 {\n"
    '\t\tt.Fatalf("add")\n\t}\n}\n'
)


@pytest.fixture(autouse=True)
def _no_contract(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VERIFY_DAG_CONTRACT", raising=False)


def history(repo: Repo, before: Mapping[str, str], after: Mapping[str, str | None]) -> Repo:
    """Commit ``before`` (tagged base), then ``after`` (None deletes a file)."""
    for path, text in before.items():
        repo.write(path, text)
    repo.commit("base")
    repo.git("tag", "base")
    for path, content in after.items():
        if content is None:
            repo.git("rm", "-q", path)
        else:
            repo.write(path, content)
    repo.commit("change")
    return repo


class Fixtures(TypedDict):
    """The fixtures ``guard`` reads output and changes directory with."""

    capsys: pytest.CaptureFixture[str]
    monkeypatch: pytest.MonkeyPatch


def guard(
    repo: Repo,
    *args: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    cwd: Path | None = None,
) -> tuple[int, list[str]]:
    monkeypatch.chdir(cwd or repo.path)
    code = main(["floor-guard", *args])
    out, err = capsys.readouterr()
    assert err == "" or code == 3, err
    return code, out.splitlines()


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return run_cli("floor-guard", *args, cwd=cwd, env={**os.environ, "PYTHONPATH": str(ROOT)})


# --- every kind ------------------------------------------------------------------------------

# name -> (files before, files after: None deletes one, the row floor-guard prints)
CASES: dict[str, tuple[dict[str, str], dict[str, str | None], str]] = {
    "test file deleted": (
        {"tests/test_calc.py": PY_TEST},
        {"tests/test_calc.py": None},
        "FLOOR TEST_DELETED tests/test_calc.py:1 test file deleted (2 test(s): test_sum, "
        "test_empty)",
    ),
    "test function removed": (
        {"tests/test_calc.py": PY_TEST},
        {"tests/test_calc.py": PY_TEST.split("\n\n\ndef test_empty")[0] + "\n"},
        "FLOOR TEST_DELETED tests/test_calc.py:8 def test_empty():",
    ),
    "js test removed": (
        {"web/cart.test.js": JS_TEST},
        {"web/cart.test.js": "describe('cart', () => {\n});\n"},
        "FLOOR TEST_DELETED web/cart.test.js:2 it('adds', () => {",
    ),
    "pytest.skip": (
        {"tests/test_calc.py": PY_TEST},
        {
            "tests/test_calc.py": PY_TEST.replace(
                "def test_sum():\n", "def test_sum():\n    pytest.skip('later')\n"
            )
        },
        "FLOOR SKIP tests/test_calc.py:5 pytest.skip('later')",
    ),
    "pytest.mark.skip": (
        {"tests/test_calc.py": PY_TEST},
        {"tests/test_calc.py": PY_TEST.replace("def test_sum", "@pytest.mark.skip\ndef test_sum")},
        "FLOOR SKIP tests/test_calc.py:4 @pytest.mark.skip",
    ),
    "skipif": (
        {"tests/test_calc.py": PY_TEST},
        {
            "tests/test_calc.py": PY_TEST.replace(
                "def test_sum", "@pytest.mark.skipif(True, reason='x')\ndef test_sum"
            )
        },
        "FLOOR SKIP tests/test_calc.py:4 @pytest.mark.skipif(True, reason='x')",
    ),
    "unittest.skip": (
        {
            "tests/test_u.py": "import unittest\n\n\nclass T(unittest.TestCase):\n"
            "    def test_a(self):\n        self.assertEqual(1, 1)\n"
        },
        {
            "tests/test_u.py": "import unittest\n\n\nclass T(unittest.TestCase):\n"
            "    @unittest.skip('x')\n    def test_a(self):\n"
            "        self.assertEqual(1, 1)\n"
        },
        "FLOOR SKIP tests/test_u.py:5 @unittest.skip('x')",
    ),
    "it.skip": (
        {"web/cart.test.js": JS_TEST},
        {"web/cart.test.js": JS_TEST.replace("it(", "it.skip(")},
        "FLOOR SKIP web/cart.test.js:2 it.skip('adds', () => {",
    ),
    "xit": (
        {"web/cart.test.js": JS_TEST},
        {"web/cart.test.js": JS_TEST.replace("it(", "xit(")},
        "FLOOR SKIP web/cart.test.js:2 xit('adds', () => {",
    ),
    "describe.skip": (
        {"web/cart.test.js": JS_TEST},
        {"web/cart.test.js": JS_TEST.replace("describe(", "describe.skip(")},
        "FLOOR SKIP web/cart.test.js:1 describe.skip('cart', () => {",
    ),
    "xfail": (
        {"tests/test_calc.py": PY_TEST},
        {"tests/test_calc.py": PY_TEST.replace("def test_sum", "@pytest.mark.xfail\ndef test_sum")},
        "FLOOR XFAIL tests/test_calc.py:4 @pytest.mark.xfail",
    ),
    "assertion removed": (
        {"tests/test_calc.py": PY_TEST},
        {"tests/test_calc.py": PY_TEST.replace("    assert sum([1, 2]) == 3\n", "    pass\n")},
        "FLOOR ASSERT_REMOVED tests/test_calc.py:5 assert sum([1, 2]) == 3",
    ),
    "assertion loosened": (
        {"tests/test_calc.py": PY_TEST},
        {
            "tests/test_calc.py": PY_TEST.replace(
                "assert sum([1, 2]) == 3", "assert sum([1, 2]) is not None"
            )
        },
        "FLOOR ASSERT_LOOSENED tests/test_calc.py:5 assert sum([1, 2]) is not None "
        "(was: assert sum([1, 2]) == 3)",
    ),
    "assertEqual to assertTrue": (
        {"tests/test_u.py": "class T:\n    def test_a(self):\n        self.assertEqual(f(), 3)\n"},
        {"tests/test_u.py": "class T:\n    def test_a(self):\n        self.assertTrue(f())\n"},
        "FLOOR ASSERT_LOOSENED tests/test_u.py:3 self.assertTrue(f()) "
        "(was: self.assertEqual(f(), 3))",
    ),
    "raises broadened": (
        {"tests/test_r.py": "def test_r():\n    with pytest.raises(ValueError):\n        f()\n"},
        {"tests/test_r.py": "def test_r():\n    with pytest.raises(Exception):\n        f()\n"},
        "FLOOR ASSERT_LOOSENED tests/test_r.py:2 with pytest.raises(Exception): "
        "(was: with pytest.raises(ValueError):)",
    ),
    # Weakening is judged per test: an assertion written in another test pays for nothing.
    "assertion removed, a test added": (
        {"tests/test_calc.py": PY_TEST},
        {
            "tests/test_calc.py": PY_SUM_UNCHECKED
            + "\n\ndef test_three():\n    assert sum([3]) == 3\n"
        },
        "FLOOR ASSERT_REMOVED tests/test_calc.py:5 assert sum([1, 2]) == 3",
    ),
    "assertion moved to another test": (
        {"tests/test_calc.py": PY_TEST},
        {"tests/test_calc.py": PY_SUM_UNCHECKED + "    assert sum([1, 2]) == 3\n"},
        "FLOOR ASSERT_REMOVED tests/test_calc.py:5 assert sum([1, 2]) == 3",
    ),
    "assertion moved to a helper no test calls": (
        {"tests/test_calc.py": PY_TEST},
        {
            "tests/test_calc.py": PY_SUM_UNCHECKED
            + "\n\ndef check_sum():\n    assert sum([1, 2]) == 3\n"
        },
        "FLOOR ASSERT_REMOVED tests/test_calc.py:5 assert sum([1, 2]) == 3",
    ),
    "assertion removed, a test added, in a new file": (
        {"tests/test_calc.py": PY_TEST},
        {
            "tests/test_calc.py": PY_SUM_UNCHECKED,
            "tests/test_more.py": "def test_more():\n    assert sum([4]) == 4\n",
        },
        "FLOOR ASSERT_REMOVED tests/test_calc.py:5 assert sum([1, 2]) == 3",
    ),
    "unittest assertion removed, a test added": (
        {"tests/test_u.py": "class T:\n    def test_a(self):\n        self.assertEqual(f(), 3)\n"},
        {
            "tests/test_u.py": "class T:\n    def test_a(self):\n        f()\n\n"
            "    def test_b(self):\n        self.assertEqual(g(), 4)\n"
        },
        "FLOOR ASSERT_REMOVED tests/test_u.py:3 self.assertEqual(f(), 3)",
    ),
    "assertion removed, a test added, file not parsing": (
        {"tests/test_calc.py": PY_TEST},
        {
            "tests/test_calc.py": PY_SUM_UNCHECKED
            + "\n\ndef test_three(:\n    assert sum([3]) == 3\n"
        },
        "FLOOR ASSERT_REMOVED tests/test_calc.py:5 assert sum([1, 2]) == 3",
    ),
    "multi-line assertion loosened": (
        {"tests/test_t.py": TOTAL_TEST},
        {"tests/test_t.py": TOTAL_TEST.replace("        == 3\n", "")},
        "FLOOR ASSERT_LOOSENED tests/test_t.py:2 assert ( total([1, 2]) ) "
        "(was: assert ( total([1, 2]) == 3 ))",
    ),
    "js assertion removed, a test added": (
        {"web/cart.test.js": JS_TEST},
        {
            "web/cart.test.js": JS_TEST.replace("    expect(add(1, 2)).toBe(3);\n", "").replace(
                "});\n});", "});\n  it('subs', () => {\n    expect(sub(3, 1)).toBe(2);\n  });\n});"
            )
        },
        "FLOOR ASSERT_REMOVED web/cart.test.js:3 expect(add(1, 2)).toBe(3);",
    ),
    "go assertion removed, a test added": (
        {"calc/add_test.go": GO_TEST},
        {
            "calc/add_test.go": GO_TEST.replace('\t\tt.Fatalf("add")\n', "")
            + '\nfunc TestSub(t *testing.T) {\n\tif Sub(3, 1) != 2 {\n\t\tt.Fatalf("sub")\n\t}\n}\n'
        },
        'FLOOR ASSERT_REMOVED calc/add_test.go:5 t.Fatalf("add")',
    ),
    "a test deleted, another added": (
        {"tests/test_calc.py": PY_TEST},
        {
            "tests/test_calc.py": PY_TEST.replace(
                "def test_empty():\n    assert sum([]) == 0\n",
                "def test_three():\n    assert sum([3]) == 3\n",
            )
        },
        "FLOOR TEST_DELETED tests/test_calc.py:8 def test_empty():",
    ),
    "test file split, a test left behind": (
        {"tests/test_calc.py": PY_TEST, "tests/test_other.py": "def test_o():\n    assert 1\n"},
        {
            "tests/test_calc.py": None,
            "tests/test_other.py": "def test_o():\n    assert 1\n\n\n"
            "def test_sum():\n    assert sum([1, 2]) == 3\n",
        },
        "FLOOR TEST_DELETED tests/test_calc.py:1 test file deleted (1 test(s): test_empty)",
    ),
    "noqa": (
        {"src/app.py": "import os\n"},
        {"src/app.py": "import os  # noqa: F401\n"},
        "FLOOR SUPPRESSION src/app.py:1 import os # noqa: F401",
    ),
    "type: ignore": (
        {"src/app.py": "x: int = 1\n"},
        {"src/app.py": "x: int = 'a'  # type: ignore\n"},
        "FLOOR SUPPRESSION src/app.py:1 x: int = 'a' # type: ignore",
    ),
    "pragma: no cover": (
        {"src/app.py": "def f():\n    return 1\n"},
        {"src/app.py": "def f():  # pragma: no cover\n    return 1\n"},
        "FLOOR SUPPRESSION src/app.py:1 def f(): # pragma: no cover",
    ),
    "eslint-disable": (
        {"web/app.js": "let x = 1;\n"},
        {"web/app.js": "// eslint-disable-next-line no-unused-vars\nlet x = 1;\n"},
        "FLOOR SUPPRESSION web/app.js:1 // eslint-disable-next-line no-unused-vars",
    ),
    "fail_under lowered": (
        {"pyproject.toml": "[tool.coverage.report]\nfail_under = 90\n"},
        {"pyproject.toml": "[tool.coverage.report]\nfail_under = 75\n"},
        "FLOOR THRESHOLD_LOWERED pyproject.toml:2 fail_under = 75 (was: fail_under = 90)",
    ),
    "--cov-fail-under lowered": (
        {"setup.cfg": "[tool:pytest]\naddopts = --cov=src --cov-fail-under=85\n"},
        {"setup.cfg": "[tool:pytest]\naddopts = --cov=src --cov-fail-under 60\n"},
        "FLOOR THRESHOLD_LOWERED setup.cfg:2 addopts = --cov=src --cov-fail-under 60 "
        "(was: addopts = --cov=src --cov-fail-under=85)",
    ),
    "jest threshold lowered": (
        {
            "jest.config.js": "module.exports = { coverageThreshold: { global: {\n"
            "  lines: 90,\n  branches: 80,\n} } };\n"
        },
        {
            "jest.config.js": "module.exports = { coverageThreshold: { global: {\n"
            "  lines: 50,\n  branches: 80,\n} } };\n"
        },
        "FLOOR THRESHOLD_LOWERED jest.config.js:2 lines: 50, (was: lines: 90,)",
    ),
    "threshold removed": (
        {"pyproject.toml": "[tool.coverage.report]\nfail_under = 90\nshow_missing = true\n"},
        {"pyproject.toml": "[tool.coverage.report]\nshow_missing = true\n"},
        "FLOOR THRESHOLD_LOWERED pyproject.toml:2 (removed) fail_under = 90",
    ),
    "pytest timeout raised": (
        {"pyproject.toml": "[tool.pytest.ini_options]\ntimeout = 30\n"},
        {"pyproject.toml": "[tool.pytest.ini_options]\ntimeout = 600\n"},
        "FLOOR TIMEOUT_RAISED pyproject.toml:2 timeout = 600 (was: timeout = 30)",
    ),
    "CI timeout raised": (
        {GH: WORKFLOW},
        {GH: WORKFLOW.replace("timeout-minutes: 10", "timeout-minutes: 90")},
        f"FLOOR TIMEOUT_RAISED {GH}:6 timeout-minutes: 90 (was: timeout-minutes: 10)",
    ),
    "marker timeout raised": (
        {"tests/test_slow.py": "@pytest.mark.timeout(5)\ndef test_slow():\n    run()\n"},
        {"tests/test_slow.py": "@pytest.mark.timeout(300)\ndef test_slow():\n    run()\n"},
        "FLOOR TIMEOUT_RAISED tests/test_slow.py:1 @pytest.mark.timeout(300) "
        "(was: @pytest.mark.timeout(5))",
    ),
    "|| true": (
        {GH: WORKFLOW},
        {GH: WORKFLOW.replace("run: pytest -q", "run: pytest -q || true")},
        f"FLOOR OR_TRUE {GH}:12 run: pytest -q || true",
    ),
    "Makefile || true": (
        {"Makefile": "test:\n\tpytest -q\n"},
        {"Makefile": "test:\n\tpytest -q || true\n"},
        "FLOOR OR_TRUE Makefile:2 pytest -q || true",
    ),
    "continue-on-error": (
        {GH: WORKFLOW},
        {GH: WORKFLOW.replace("run: pytest -q", "run: pytest -q\n        continue-on-error: true")},
        f"FLOOR ALLOW_FAILURE {GH}:13 continue-on-error: true",
    ),
    "CI step removed": (
        {GH: WORKFLOW},
        {GH: WORKFLOW.replace("      - name: lint\n        run: ruff check .\n", "")},
        f"FLOOR CI_STEP_REMOVED {GH}:9 - name: lint",
    ),
    "CI file deleted": (
        {GH: WORKFLOW, "README.md": "x\n"},
        {GH: None},
        f"FLOOR CI_STEP_REMOVED {GH}:1 CI file deleted",
    ),
    "pre-commit hook removed": (
        {
            ".pre-commit-config.yaml": "repos:\n  - repo: local\n    hooks:\n      - id: ruff\n"
            "      - id: mypy\n"
        },
        {".pre-commit-config.yaml": "repos:\n  - repo: local\n    hooks:\n      - id: ruff\n"},
        "FLOOR CI_STEP_REMOVED .pre-commit-config.yaml:5 - id: mypy",
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_each_weakening_kind(
    repo: Repo, case: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    before, after, row = CASES[case]
    history(repo, before, after)
    code, lines = guard(repo, "base", "--", ".", capsys=capsys, monkeypatch=monkeypatch)
    assert code == 2
    assert lines[0] == "FLOOR GUARD: 1 finding(s), 0 waived", lines
    assert len(lines) == 2 and lines[1].startswith(row), lines


NOT_WEAKENINGS: dict[str, tuple[dict[str, str], dict[str, str | None]]] = {
    "a new test": (
        {"tests/test_calc.py": PY_TEST},
        {"tests/test_calc.py": PY_TEST + "\n\ndef test_more():\n    assert 1 == 1\n"},
    ),
    "assertion strengthened": (
        {"tests/test_calc.py": PY_TEST.replace("== 3", "is not None")},
        {"tests/test_calc.py": PY_TEST},
    ),
    "assertion moved": (
        {"tests/test_calc.py": PY_TEST},
        {
            "tests/test_calc.py": PY_TEST.replace(
                "    assert sum([1, 2]) == 3\n", "    x = 1\n    assert sum([1, 2]) == 3\n"
            )
        },
    ),
    "a new test in a new file": (
        {"tests/test_calc.py": PY_TEST},
        {"tests/test_more.py": "def test_more():\n    assert sum([4]) == 4\n"},
    ),
    "a test renamed": (
        {"tests/test_calc.py": PY_TEST},
        {"tests/test_calc.py": PY_TEST.replace("def test_sum():", "def test_sum_of_two():")},
    ),
    "a test renamed, assertion reflowed": (
        {"tests/test_calc.py": PY_TEST},
        {
            "tests/test_calc.py": PY_TEST.replace(
                "def test_sum():\n    assert sum([1, 2]) == 3\n",
                "def test_two():\n    assert sum(\n        [1, 2]\n    ) == 3\n",
            )
        },
    ),
    "a test moved to another file": (
        {"tests/test_calc.py": PY_TEST, "tests/test_more.py": "def test_more():\n    assert 1\n"},
        {
            "tests/test_calc.py": PY_TEST.split("\n\n\ndef test_empty")[0] + "\n",
            "tests/test_more.py": "def test_more():\n    assert 1\n\n\n"
            "def test_empty():\n    assert sum([]) == 0\n",
        },
    ),
    "a test moved into a class": (
        {"tests/test_calc.py": PY_TEST},
        {
            "tests/test_calc.py": "import pytest\n\n\nclass TestSum:\n    def test_sum(self):\n"
            "        assert sum([1, 2]) == 3\n\n\ndef test_empty():\n    assert sum([]) == 0\n"
        },
    ),
    "test file split in two": (
        {"tests/test_calc.py": PY_TEST},
        {
            "tests/test_calc.py": None,
            "tests/test_a.py": "def test_empty():\n    assert sum([]) == 0\n",
            "tests/test_b.py": "import math\n\n\ndef test_sum():\n    assert sum([1, 2]) == 3\n",
        },
    ),
    "assertion moved to a helper the test calls": (
        {"tests/test_calc.py": PY_TEST},
        {
            "tests/test_calc.py": PY_TEST.replace(
                "def test_sum():\n    assert sum([1, 2]) == 3\n",
                "def check(xs):\n    assert sum(xs) == 3\n\n\ndef test_sum():\n    check([1, 2])\n",
            ).replace("def test_empty():\n", "def test_empty():\n    check([3])\n")
        },
    ),
    "assertion reflowed over lines": (
        {"tests/test_calc.py": PY_TEST},
        {
            "tests/test_calc.py": PY_TEST.replace(
                "    assert sum([1, 2]) == 3\n",
                "    assert (\n        sum([1, 2])\n        == 3\n    )\n",
            )
        },
    ),
    "assert in a docstring removed": (
        {
            "tests/test_calc.py": PY_TEST.replace(
                "def test_sum():\n",
                'def test_sum():\n    """Sums.\n\n    assert it adds up.\n    """\n',
            )
        },
        {"tests/test_calc.py": PY_TEST},
    ),
    "js test renamed": (
        {"web/cart.test.js": JS_TEST},
        {"web/cart.test.js": JS_TEST.replace("it('adds'", "it('adds two numbers'")},
    ),
    "noqa line edited": (
        {"src/app.py": "import os  # noqa: F401\n"},
        {"src/app.py": "import sys  # noqa: F401\n"},
    ),
    "threshold raised": (
        {"pyproject.toml": "[tool.coverage.report]\nfail_under = 80\n"},
        {"pyproject.toml": "[tool.coverage.report]\nfail_under = 95\n"},
    ),
    "timeout lowered": (
        {"pyproject.toml": "[tool.pytest.ini_options]\ntimeout = 300\n"},
        {"pyproject.toml": "[tool.pytest.ini_options]\ntimeout = 60\n"},
    ),
    "CI step edited": ({GH: WORKFLOW}, {GH: WORKFLOW.replace("pytest -q", "pytest -q -x")}),
    "skip in prose": (
        {"docs/testing.md": "# Tests\n"},
        {"docs/testing.md": "# Tests\nNever call pytest.skip(), add # noqa or || true.\n"},
    ),
    "skip in a comment": (
        {"tests/test_calc.py": PY_TEST},
        {
            "tests/test_calc.py": PY_TEST.replace(
                "def test_sum():\n", "def test_sum():\n    # pytest.skip('no')\n"
            )
        },
    ),
    "test file renamed": (
        {"tests/test_calc.py": PY_TEST},
        {"tests/test_calc.py": None, "tests/test_sum.py": PY_TEST},
    ),
    "production timeout raised": (
        {"src/client.py": "TIMEOUT = 5\n"},
        {"src/client.py": "TIMEOUT = 50\n"},
    ),
    "python code that looks like jasmine": (
        {"src/model.py": "x = 1\n"},
        {"src/model.py": "x = fit(data)\n"},
    ),
}


@pytest.mark.parametrize("case", list(NOT_WEAKENINGS))
def test_changes_that_are_not_weakenings(
    repo: Repo, case: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    before, after = NOT_WEAKENINGS[case]
    history(repo, before, after)
    assert guard(repo, "base", "--", ".", capsys=capsys, monkeypatch=monkeypatch) == (
        0,
        ["FLOOR GUARD: clean"],
    )


# --- pathspecs and the diff ------------------------------------------------------------------


def test_pathspecs_limit_the_diff(
    repo: Repo, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    history(
        repo,
        {"src/app.py": "import os\n", "tests/test_a.py": "def test_a():\n    pass\n"},
        {
            "src/app.py": "import os  # noqa\n",
            "tests/test_a.py": "def test_a():\n    pytest.skip('x')\n",
        },
    )
    kw: Fixtures = {"capsys": capsys, "monkeypatch": monkeypatch}
    assert guard(repo, "base", "--", "src", **kw)[1][1].startswith("FLOOR SUPPRESSION src/app.py")
    assert guard(repo, "base", "--", "tests/*.py", **kw)[1][1].startswith("FLOOR SKIP tests/")
    assert guard(repo, "base", "--", ":(exclude)tests", **kw)[1][0] == (
        "FLOOR GUARD: 1 finding(s), 0 waived"
    )
    assert guard(repo, "base", **kw)[1][0] == "FLOOR GUARD: 2 finding(s), 0 waived"
    # From a subdirectory pathspecs are relative to it; rows name paths from the top.
    code, lines = guard(repo, "base", "--", ".", cwd=repo.path / "tests", **kw)
    assert (code, lines[1]) == (2, "FLOOR SKIP tests/test_a.py:2 pytest.skip('x')")


def test_the_diff_starts_at_the_merge_base(
    repo: Repo, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    repo.write("tests/test_a.py", PY_TEST)
    repo.commit("base")
    repo.git("checkout", "-q", "-b", "feature")
    repo.write("src/app.py", "x = 1\n")
    repo.commit("feature work")
    repo.git("checkout", "-q", "main")  # main moves on: a new test the feature does not have
    repo.write("tests/test_b.py", PY_TEST)
    repo.commit("main work")
    repo.git("checkout", "-q", "feature")
    assert guard(repo, "main", "--", ".", capsys=capsys, monkeypatch=monkeypatch) == (
        0,
        ["FLOOR GUARD: clean"],
    )


def test_uncommitted_changes_are_not_in_the_diff(
    repo: Repo, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    history(repo, {"tests/test_a.py": PY_TEST}, {"README.md": "x\n"})
    repo.write(
        "tests/test_a.py", PY_TEST.replace("def test_sum", "@pytest.mark.skip\ndef test_sum")
    )
    assert guard(repo, "base", capsys=capsys, monkeypatch=monkeypatch) == (
        0,
        ["FLOOR GUARD: clean"],
    )


def test_file_names_with_spaces_and_unicode(
    repo: Repo, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    history(
        repo,
        {"tests/test ünï côde.py": PY_TEST},
        {
            "tests/test ünï côde.py": PY_TEST.replace(
                "def test_sum", "@pytest.mark.xfail\ndef test_sum"
            )
        },
    )
    code, lines = guard(repo, "base", "--", ".", capsys=capsys, monkeypatch=monkeypatch)
    assert (code, lines[1]) == (2, "FLOOR XFAIL tests/test ünï côde.py:4 @pytest.mark.xfail")


# --- waivers ---------------------------------------------------------------------------------


def contract_with(tmp_path: Path, clarifications: str) -> Path:
    path = tmp_path / "CONTRACT.md"
    path.write_text(
        f"## REQUEST\nx\n\n## ACCEPTANCE CRITERIA\n1. a\n\n## CLARIFICATIONS\n{clarifications}\n"
    )
    return path


SKIPPED = (
    {"tests/test_calc.py": PY_TEST, "tests/test_other.py": PY_TEST},
    {
        "tests/test_calc.py": PY_TEST.replace(
            "def test_sum():\n", "def test_sum():\n    pytest.skip('slow')\n"
        ),
        "tests/test_other.py": PY_TEST.replace("import pytest\n", "import pytest  # noqa: F401\n"),
    },
)


@pytest.mark.parametrize(
    ("clarifications", "waived"),
    [
        ("- The skip in tests/test_calc.py is allowed until the fixture lands.", True),
        ("Skipping test_sum in test_calc.py is accepted for this release.", True),
        ("- Tests may be skipped in tests/test_calc.py. Nothing else changes.", True),
        ("- Do not skip anything in tests/test_calc.py; it is not allowed.", False),
        ("- The skip in tests/test_other.py is allowed.", False),  # another file
        ("- Tests in tests/test_calc.py may change.", False),  # names no kind
        (
            "- The skip in tests/test_calc.py is something we discussed.",
            False,
        ),  # authorises nothing
    ],
)
def test_waivers(
    repo: Repo,
    tmp_path: Path,
    clarifications: str,
    waived: bool,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    history(repo, *SKIPPED)
    path = contract_with(tmp_path, clarifications)
    code, lines = guard(
        repo, "--contract", str(path), "base", "--", ".", capsys=capsys, monkeypatch=monkeypatch
    )
    assert code == 2  # the noqa in test_other.py is never waived here
    noqa = "FLOOR SUPPRESSION tests/test_other.py:1 import pytest # noqa: F401"
    skip = "SKIP tests/test_calc.py:5 pytest.skip('slow')"
    if waived:
        sentence = next(s for s in clarifications.lstrip("- ").split(". ") if "skip" in s.lower())
        assert lines[0] == "FLOOR GUARD: 2 finding(s), 1 waived"
        assert lines[1] == noqa
        assert lines[2].startswith(f'WAIVED {skip} \u2014 "{sentence.rstrip(".")}')
    else:
        assert lines == ["FLOOR GUARD: 2 finding(s), 0 waived", f"FLOOR {skip}", noqa]


def test_every_finding_waived_exits_0(
    repo: Repo, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    history(repo, {"src/app.py": "import os\n"}, {"src/app.py": "import os  # type: ignore\n"})
    path = contract_with(
        tmp_path, "The `# type: ignore` in src/app.py is authorised: the stub is wrong."
    )
    monkeypatch.setenv("VERIFY_DAG_CONTRACT", str(path))  # found without --contract
    code, lines = guard(repo, "base", "--", ".", capsys=capsys, monkeypatch=monkeypatch)
    assert (code, lines[0]) == (0, "FLOOR GUARD: 1 finding(s), 1 waived")
    assert lines[1].startswith("WAIVED SUPPRESSION src/app.py:1 import os # type: ignore \u2014 ")


def test_pragma_no_cover_is_not_a_negation(
    repo: Repo, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    history(
        repo,
        {"src/app.py": "def f():\n    pass\n"},
        {"src/app.py": "def f():  # pragma: no cover\n    pass\n"},
    )
    path = contract_with(tmp_path, "`pragma: no cover` may be added to f in src/app.py.")
    assert (
        guard(repo, "--contract", str(path), "base", capsys=capsys, monkeypatch=monkeypatch)[0] == 0
    )


# --- exit codes, as the CLI ------------------------------------------------------------------


def test_rc_0_clean(repo: Repo) -> None:
    history(repo, {"src/app.py": "x = 1\n"}, {"src/app.py": "x = 2\n"})
    proc = cli("base", "--", ".", cwd=repo.path)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "FLOOR GUARD: clean\n", "")


def test_rc_2_findings(repo: Repo) -> None:
    history(repo, *SKIPPED)
    proc = cli("base", "--", ".", cwd=repo.path)
    assert proc.returncode == 2 and proc.stderr == ""
    assert proc.stdout.splitlines() == [
        "FLOOR GUARD: 2 finding(s), 0 waived",
        "FLOOR SKIP tests/test_calc.py:5 pytest.skip('slow')",
        "FLOOR SUPPRESSION tests/test_other.py:1 import pytest # noqa: F401",
    ]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["nope", "--", "."], "unknown BASE 'nope'"),
        (["base", "-x"], "unrecognized arguments: -x"),
        (["--", "."], "the following arguments are required: BASE"),
        (["base..HEAD", "--", "."], "invalid BASE 'base..HEAD'"),
        (["base", "--", "no/such/dir"], "pathspec 'no/such/dir' matches no file at BASE or HEAD"),
        (["base", "--", "../outside"], "pathspec '../outside'"),
        (["base", "--"], "no PATHSPEC after --"),
        (["--contract", "missing.md", "base", "--", "."], "contract not found: missing.md"),
    ],
)
def test_rc_3_usage(repo: Repo, args: list[str], needle: str) -> None:
    history(repo, {"src/app.py": "x = 1\n"}, {"src/app.py": "x = 2\n"})
    proc = cli(*args, cwd=repo.path)
    assert proc.returncode == 3 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("verify-dag: error: ")
    assert needle in proc.stderr and "Traceback" not in proc.stderr


def test_rc_3_outside_a_repository_and_in_an_empty_one(tmp_path: Path, repo: Repo) -> None:
    proc = cli("main", "--", ".", cwd=tmp_path)
    assert proc.returncode == 3 and "not a git repository" in proc.stderr
    proc = cli("main", "--", ".", cwd=repo.path)  # no commit yet: main names nothing
    assert proc.returncode == 3 and "unknown BASE 'main'" in proc.stderr


def test_help_lists_the_exit_codes() -> None:
    proc = run_cli("floor-guard", "--help")
    assert proc.returncode == 0 and "2  at least one finding not waived" in proc.stdout
    proc = run_cli("--help")
    assert "floor-guard" in proc.stdout and "contract" in proc.stdout and "gates" in proc.stdout
