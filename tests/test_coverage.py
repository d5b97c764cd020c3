"""qa's changed-line coverage: the real diff-cover on the same coverage data, and the findings."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import Repo, make_repo

from verify_dag.models.request import VerifyRequest
from verify_dag.models.scope import FileChange, LineRange, Scope
from verify_dag.models.source import parse_source
from verify_dag.models.toolchain import Command, Toolchain
from verify_dag.phases import scope, tester
from verify_dag.phases.tester import coverage
from verify_dag.phases.tester.coverage import AddedFunction, CoverageData, FileCoverage

PYTEST = Toolchain(
    commands=(
        Command(
            kind="test", argv=("pytest",), source="tests directory", exists=True, tool="pytest"
        ),
    )
)

SHAPES_BASE = "def area(w, h):\n    return w * h\n"
SHAPES_HEAD = """def area(w, h):
    if w < 0 or h < 0:
        raise ValueError("negative")
    return w * h


def perimeter(w, h):
    total = 2 * (w + h)
    return total


def describe(w, h):
    kind = "square" if w == h else "rectangle"

    text = f"{kind} {w}x{h}"
    return text


def debug_dump(w, h):  # pragma: no cover
    print(w, h)
"""


def branch_repo(path: Path) -> Repo:
    """base: area() and its test. The branch guards area() (the raise is never reached), adds
    perimeter() with a test, describe() without one, and touches a module no test imports."""
    repo = make_repo(path)
    repo.write(
        "pyproject.toml", '[tool.pytest.ini_options]\ntestpaths = ["tests"]\npythonpath = ["src"]\n'
    )
    repo.write("src/shapes.py", SHAPES_BASE)
    repo.write("src/unused.py", "X = 1\n")
    repo.write(
        "tests/test_shapes.py",
        "from shapes import area\n\n\ndef test_area():\n    assert area(2, 3) == 6\n",
    )
    repo.commit("shapes")
    repo.git("tag", "base")
    repo.write("src/shapes.py", SHAPES_HEAD)
    repo.write("src/unused.py", "X = 1\nY = 2\n")
    repo.write(
        "tests/test_shapes.py",
        "from shapes import area, perimeter\n\n\ndef test_area():\n"
        "    assert area(2, 3) == 6\n\n\ndef test_perimeter():\n"
        "    assert perimeter(2, 3) == 10\n",
    )
    repo.commit("shapes: perimeter, describe")
    return repo


def diff_cover(xml: Path, cwd: Path, out: Path, *extra: str) -> dict[str, object]:
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "diff_cover.diff_cover_tool",
            str(xml),
            "--compare-branch=base",
            f"--json-report={out}",
            *extra,
        ],
        cwd=cwd,
        capture_output=True,
        text=True,
    )
    assert res.returncode == 0, res.stderr
    report: dict[str, object] = json.loads(out.read_text(encoding="utf-8"))
    return report


def test_the_figure_agrees_with_diff_cover_on_the_same_data(tmp_path: Path) -> None:
    pytest.importorskip("diff_cover")
    repo = branch_repo(tmp_path / "repo")
    sc = scope.run(VerifyRequest(source=parse_source(str(repo.path)), scope="branch", base="base"))
    data_file = tmp_path / "data" / ".coverage"
    outcome, data = tester.run_with_coverage(sc, PYTEST, repo.path, 120, data_file=data_file)
    assert outcome.status == "PASSED", outcome.findings
    assert data is not None
    result = coverage.diff_coverage(sc, data)

    xml = tmp_path / "coverage.xml"
    subprocess.run(
        [sys.executable, "-m", "coverage", "xml", f"--data-file={data_file}", "-o", str(xml)],
        cwd=repo.path,
        check=True,
        capture_output=True,
    )
    plain = diff_cover(xml, repo.path, tmp_path / "plain.json")
    precise = diff_cover(xml, repo.path, tmp_path / "float.json", "--total-percent-float")

    assert (result.total, result.total - result.covered) == (
        plain["total_num_lines"],
        plain["total_num_violations"],
    )
    assert result.diff_cover_percent() == plain["total_percent_covered"]
    assert result.diff_cover_percent(total_percent_float=True) == precise["total_percent_covered"]
    # The same lines, file by file, not just the same totals.
    stats = plain["src_stats"]
    assert isinstance(stats, dict)
    # The test file is in scope too, and measured: both count, in both tools.
    assert (
        [f.path for f in data.files] == sorted(stats) == ["src/shapes.py", "tests/test_shapes.py"]
    )
    for measured in data.files:
        missed = sorted(set(measured.statements) - set(measured.executed))
        assert missed == stats[measured.path]["violation_lines"]
        assert list(measured.executed) == stats[measured.path]["covered_lines"]
    assert stats["src/shapes.py"]["violation_lines"] == [3, 13, 15, 16]
    # 8 of 12 changed statements ran: diff-cover says 66 (int) and 66.67; qa says 66.7%.
    assert (result.covered, result.total) == (8, 12)
    assert coverage.qa_outcome(result).notes == "diff coverage 66.7% (8/12 changed lines)"

    by_title = {f.title: f for f in result.findings}
    assert set(by_title) == {
        "line 3 not executed by any test",
        "lines 13-16 not executed by any test",
        "No test changed for unused.py",
    }
    guard, whole, untested = (
        by_title[t]
        for t in (
            "line 3 not executed by any test",
            "lines 13-16 not executed by any test",
            "No test changed for unused.py",
        )
    )
    assert (guard.severity, whole.severity, untested.severity) == (4, 6, 3)
    assert all(f.issue_class == "coverage" and f.source == "qa" for f in result.findings)
    assert whole.location is not None and (whole.location.line, whole.location.end_line) == (13, 16)
    assert "describe()" in whole.description
    assert untested.location is not None and untested.location.path == "src/unused.py"


def fc(
    path: str, statements: list[int], executed: list[int], functions: tuple[AddedFunction, ...] = ()
) -> FileCoverage:
    return FileCoverage(
        path=path, statements=tuple(statements), executed=tuple(executed), functions=functions
    )


def scope_of(*changes: FileChange) -> Scope:
    return Scope(mode="branch", new_commit="0" * 40, included=changes)


def test_ranges_split_on_executed_statements_only() -> None:
    change = FileChange(path="pkg/mod.py", status="modified", lines=(LineRange(start=10, end=30),))
    test = FileChange(
        path="tests/test_mod.py", status="modified", lines=(LineRange(start=1, end=2),)
    )
    # 11 and 14 are missed with only non-statement lines between: one range. 20 ran: it splits.
    # 40 is outside the changed lines: neither counted nor reported.
    data = CoverageData(files=(fc("pkg/mod.py", [11, 14, 20, 22, 40], [20, 40]),))
    result = coverage.diff_coverage(scope_of(change, test), data)
    assert [(f.title, f.severity) for f in result.findings] == [
        ("lines 11-14 not executed by any test", 4),
        ("line 22 not executed by any test", 4),
    ]
    assert (result.covered, result.total) == (1, 4)
    assert result.percent == 25.0 and result.diff_cover_percent() == 25


def test_a_whole_added_function_never_called_is_severity_6() -> None:
    change = FileChange(path="mod.py", status="added")
    called = AddedFunction(name="called", start=1, end=3)
    never = AddedFunction(name="never", start=5, end=7)
    # Def lines run at import; only never()'s body is missed, and one line of called()'s.
    data = CoverageData(files=(fc("mod.py", [1, 2, 3, 5, 6, 7], [1, 2, 5], (called, never)),))
    findings = coverage.diff_coverage(scope_of(change), data).findings
    assert [(f.title, f.severity) for f in findings] == [
        ("line 3 not executed by any test", 4),
        ("lines 6-7 not executed by any test", 6),
        ("No test changed for mod.py", 3),
    ]


@pytest.mark.parametrize(
    ("tests", "flagged"),
    [
        ((), True),
        (("tests/test_calc.py",), False),
        (("calc_test.py",), False),
        (("tests/calc/test_ops.py",), False),
        (("tests/test_calc_extra.py",), False),
        (("tests/test_calculator.py",), True),
        (("tests/test_other.py",), True),
    ],
)
def test_a_source_file_whose_tests_were_not_touched(tests: tuple[str, ...], flagged: bool) -> None:
    changes = [
        FileChange(path="src/calc.py", status="modified"),
        FileChange(path="README.md", status="modified"),
        *(FileChange(path=t, status="modified") for t in tests),
    ]
    findings = coverage.diff_coverage(scope_of(*changes), CoverageData()).findings
    assert [f.title for f in findings] == (["No test changed for calc.py"] if flagged else [])


def test_package_init_uses_the_package_name_and_deleted_files_are_ignored() -> None:
    changes = (
        FileChange(path="src/geo/__init__.py", status="modified"),
        FileChange(path="src/gone.py", status="deleted"),
        FileChange(path="tests/geo/test_init.py", status="added"),
    )
    assert coverage.diff_coverage(scope_of(*changes), CoverageData()).findings == ()


def test_qa_outcome_notes() -> None:
    result = coverage.QaResult(covered=10, total=12)
    out = coverage.qa_outcome(result)
    assert (out.skill, out.status) == ("qa", "COMPLETED")
    assert out.notes == "diff coverage 83.3% (10/12 changed lines)"
    empty = coverage.qa_outcome(coverage.QaResult(covered=0, total=0))
    assert empty.notes == "no changed executable lines"
    assert coverage.QaResult(covered=0, total=0).diff_cover_percent() == 100
    # diff-cover truncates: 2/3 is 66, and 66.67 with --total-percent-float.
    third = coverage.QaResult(covered=2, total=3)
    assert (third.diff_cover_percent(), third.diff_cover_percent(total_percent_float=True)) == (
        66,
        66.67,
    )


def test_a_deep_run_keeps_its_coverage_data_for_diff_cover(tmp_path: Path) -> None:
    # The user's own re-check: diff-cover on the coverage.xml stored with the run gives the
    # figure qa reported, through the whole DAG.
    pytest.importorskip("diff_cover")
    from verify_dag.cli import main

    repo = branch_repo(tmp_path / "repo")
    store_dir, out = tmp_path / "store", tmp_path / "r.json"
    main(
        [
            "verify",
            str(repo.path),
            "--scope=branch",
            "--base=base",
            "--depth=deep",
            "--skip-ux",
            "--store",
            str(store_dir),
            "--format=json",
            f"--output={out}",
        ]
    )
    doc = json.loads(out.read_text(encoding="utf-8"))
    qa = next(r for r in doc["skillResults"] if r["skill"] == "qa")
    assert "diff coverage 66.7% (8/12 changed lines)" in qa["notes"]
    kept = store_dir / doc["run"]["id"] / "coverage.xml"
    plain = diff_cover(kept, repo.path, tmp_path / "dc.json", "--total-percent-float")
    assert (plain["total_num_lines"], plain["total_num_violations"]) == (12, 4)
    assert plain["total_percent_covered"] == 66.67


def test_gaps_are_only_about_the_code_the_project_measures() -> None:
    """Lines of a test helper no test ran, docs/conf.py, and (when the project declares its
    coverage source) a changed file outside that source are not qa's business."""
    changes = (
        FileChange(path="tests/helpers.py", status="added"),
        FileChange(path="docs/conf.py", status="modified"),
        FileChange(path="src/pkg/core.py", status="modified"),
        FileChange(path="tools/release.py", status="modified"),
    )
    helper = fc("tests/helpers.py", [1, 2, 3], [1])
    data = CoverageData(files=(helper,))
    findings = coverage.diff_coverage(scope_of(*changes), data).findings
    # Nothing declared: the source files outside docs are still flagged, the helper is not.
    assert [f.title for f in findings] == [
        "No test changed for core.py",
        "No test changed for release.py",
    ]
    declared = CoverageData(files=(helper, fc("src/pkg/core.py", [4], [])), source_declared=True)
    result = coverage.diff_coverage(scope_of(*changes), declared)
    assert [f.title for f in result.findings] == [
        "line 4 not executed by any test",
        "No test changed for core.py",
    ]
    assert (result.covered, result.total) == (1, 4)  # the helper still counts, as in diff-cover


def test_the_projects_coverage_source_is_read_by_coverage_itself(tmp_path: Path) -> None:
    repo = branch_repo(tmp_path / "repo")
    pyproject = repo.path.joinpath("pyproject.toml").read_text(encoding="utf-8")
    repo.write("pyproject.toml", '[tool.coverage.run]\nsource = ["src"]\n\n' + pyproject)
    repo.commit("declare the coverage source")
    sc = scope.run(VerifyRequest(source=parse_source(str(repo.path)), scope="branch", base="base"))
    _, data = tester.run_with_coverage(sc, PYTEST, repo.path, 120)
    assert data is not None and data.source_declared
    # The tests are not the project's measured code; src/unused.py is, though no test imports it.
    assert [f.path for f in data.files] == ["src/shapes.py", "src/unused.py"]
    titles = [f.title for f in coverage.diff_coverage(sc, data).findings]
    assert "No test changed for unused.py" in titles


def test_qa_says_when_the_package_ran_from_an_installed_copy() -> None:
    data = CoverageData(installed_copy="tox env py311")
    out = coverage.qa_outcome(coverage.diff_coverage(scope_of(), data))
    assert out.notes == (
        "no changed executable lines; the project ran from the copy tox env py311 installed, not "
        "from the checkout: its changed lines are not measured, only the checkout's own files "
        "(tests) are"
    )
