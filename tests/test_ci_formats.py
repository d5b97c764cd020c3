"""What a CI user needs from a run: SARIF that code scanning accepts and whose fingerprints
follow a moved line, gates on new problems and on changed-line coverage, the report on stdout,
and a range verified without checking it out. Real repositories, real ruff, mypy and pytest;
the reviewer is the fake model CLI."""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from conftest import CLI, Repo, make_repo, verify_json

from verify_dag import report
from verify_dag.cli import main

SARIF_SCHEMA = Path(__file__).parent / "schemas" / "sarif-schema-2.1.0.json"
BRANCH = ("--scope=branch", "--base=base")
MYPY = "[tool.mypy]\nfiles = ['src']\n"
PYTEST = "[tool.pytest.ini_options]\npythonpath = ['src']\ntestpaths = ['tests']\n"
CALC = "def add(a: int, b: int) -> int:\n    return a + b\n"
TEST_ADD = "from calc import add\n\n\ndef test_add():\n    assert add(1, 2) == {}\n"
FLAGGED = (
    "def mean(values: list[int]) -> int:\n    unused = 0\n    return sum(values) / len(values)\n"
)


def sarif_of(repo: Repo, tmp_path: Path, name: str, *flags: str) -> tuple[int, dict[str, Any]]:
    out = tmp_path / name
    rc = main(["verify", str(repo.path), *BRANCH, "--format=sarif", f"--output={out}", *flags])
    doc: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    schema = json.loads(SARIF_SCHEMA.read_text(encoding="utf-8"))
    jsonschema.Draft4Validator(schema).validate(doc)
    return rc, doc


def results(doc: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    return {run["tool"]["driver"]["name"]: run["results"] for run in doc["runs"]}


def tagged_base(repo: Repo, expected: int, pyproject: str = PYTEST) -> None:
    """The base commit, tagged `base`: calc.add and a test of it expecting `expected`."""
    repo.write("pyproject.toml", pyproject)
    repo.write("src/calc.py", CALC)
    repo.write("tests/test_calc.py", TEST_ADD.format(expected))
    repo.commit("base")
    repo.git("tag", "base")


def test_sarif_of_a_run_with_ruff_mypy_a_failing_test_and_a_reviewer_finding(
    repo: Repo, tmp_path: Path, fake_claude: Path
) -> None:
    tagged_base(repo, 3, PYTEST + MYPY)
    flagged = FLAGGED
    repo.write("src/calc.py", CALC + "\n\n" + flagged)
    repo.write(
        "tests/test_calc.py",
        "from calc import add, mean\n\n\ndef test_add():\n    assert add(1, 2) == 3\n\n\n"
        "def test_mean():\n    assert mean([1, 2]) == 2\n",
    )
    repo.commit("mean")
    rc, doc = sarif_of(repo, tmp_path, "first.sarif")
    assert rc == 1
    by_tool = results(doc)
    assert {"ruff", "mypy", "verify-dag/tester", "verify-dag/reviewer", "verify-dag"} <= set(
        by_tool
    )
    (ruff,) = [r for r in by_tool["ruff"] if r["ruleId"] == "F841"]
    assert ruff["level"] == "note" or ruff["level"] == "warning"
    region = ruff["locations"][0]["physicalLocation"]["region"]
    assert region["startLine"] == 6 and region["startColumn"] == 5
    assert ruff["baselineState"] == "new"
    rules = {r["id"]: r for run in doc["runs"] for r in run["tool"]["driver"].get("rules", [])}
    assert rules["F841"]["helpUri"].startswith("https://docs.astral.sh/ruff/rules/")
    assert rules["F841"]["name"] == "unused-variable"
    assert any(r["ruleId"] == "return-value" for r in by_tool["mypy"])
    (failing,) = by_tool["verify-dag/tester"]
    assert failing["level"] == "error" and "test_mean" in failing["message"]["text"]
    assert by_tool["verify-dag/reviewer"][0]["ruleId"] == "correctness"
    own = next(run for run in doc["runs"] if run["tool"]["driver"]["name"] == "verify-dag")
    notes = own["invocations"][0]["toolExecutionNotifications"]
    # The exerciser imported the changed module (docs/gates.md): it is no check that did not run.
    assert not any(n["descriptor"]["id"] == "exerciser" for n in notes)

    # The flagged line five lines further down, in another commit: the same fingerprint.
    repo.write("src/calc.py", CALC + "\n\n" + "# a\n# b\n# c\n# d\n# e\n" + flagged)
    repo.commit("comments above")
    _, again = sarif_of(repo, tmp_path, "moved.sarif")
    (moved,) = [r for r in results(again)["ruff"] if r["ruleId"] == "F841"]
    assert moved["locations"][0]["physicalLocation"]["region"]["startLine"] == 11
    assert moved["partialFingerprints"] == ruff["partialFingerprints"]


def test_a_tool_that_ran_clean_still_has_its_run_so_code_scanning_closes_its_alerts(
    repo: Repo, tmp_path: Path
) -> None:
    """Code scanning closes an alert only when a later upload of the same tool and category no
    longer reports it: a run with ruff and mypy findings, then the fix. The second SARIF still
    has a ruff and a mypy run, empty, under the same categories and with their versions; every
    run's category is its own."""
    tagged_base(repo, 3, PYTEST + MYPY)
    repo.write("src/calc.py", CALC + "\n\n" + FLAGGED)
    repo.commit("mean")
    _, flagged = sarif_of(repo, tmp_path, "flagged.sarif", "--allow-incomplete")
    repo.write(
        "src/calc.py",
        CALC + "\n\ndef mean(values: list[int]) -> float:\n    return sum(values) / len(values)\n",
    )
    repo.commit("fixed")
    _, clean = sarif_of(repo, tmp_path, "clean.sarif", "--allow-incomplete")

    def runs(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
        return {run["tool"]["driver"]["name"]: run for run in doc["runs"]}

    before, after = runs(flagged), runs(clean)
    assert before["ruff"]["results"] and before["mypy"]["results"]
    assert after["ruff"]["results"] == [] and after["mypy"]["results"] == []
    for tool in ("ruff", "mypy", "verify-dag/tester", "verify-dag"):
        assert after[tool]["automationDetails"] == before[tool]["automationDetails"], tool
    categories = [run["automationDetails"]["id"] for run in clean["runs"]]
    assert len(categories) == len(set(categories))
    assert after["ruff"]["tool"]["driver"]["version"] == importlib.metadata.version("ruff")
    assert after["mypy"]["tool"]["driver"]["version"] == importlib.metadata.version("mypy")
    assert after["verify-dag"]["tool"]["driver"]["version"] == importlib.metadata.version(
        "verify-dag"
    )


def test_new_only_passes_a_clean_change_on_a_base_with_a_failing_test(
    repo: Repo, tmp_path: Path
) -> None:
    tagged_base(repo, 4)  # a test that already fails at the base
    repo.write("src/calc.py", CALC + "\n\ndef sub(a: int, b: int) -> int:\n    return a - b\n")
    repo.commit("a clean function")
    # No reviewer runs here (no backend): accepted, the point is which issues count.
    rc_all, doc = verify_json(repo, tmp_path, *BRANCH, "--allow-incomplete")
    rc_new, new_only = verify_json(repo, tmp_path, *BRANCH, "--new-only", "--allow-incomplete")
    assert (rc_all, rc_new) == (1, 0)
    (failing,) = [i for i in new_only["issues"] if i["class"] == "test-failure"]
    assert failing["baseline"] == "pre-existing"  # the debugger saw it fail at the base too
    assert new_only["run"]["gates"] == {
        "failOn": 7,
        "newOnly": True,
        "failUnder": None,
        "allowIncomplete": True,
    }
    assert new_only["run"]["exitCode"] == 0 and doc["run"]["exitCode"] == 1
    assert [i["title"] for i in new_only["issues"]] == [i["title"] for i in doc["issues"]]


def test_fail_under_gates_on_changed_line_coverage_measured_at_light(
    repo: Repo, tmp_path: Path
) -> None:
    tagged_base(repo, 3)
    # Two new functions, one tested: of the 7 changed statements (test files count, as in
    # diff-cover's figure), mul's body alone never runs.
    repo.write(
        "src/calc.py",
        CALC + "\n\ndef sub(a: int, b: int) -> int:\n    return a - b\n\n\n"
        "def mul(a: int, b: int) -> int:\n    return a * b\n",
    )
    repo.write(
        "tests/test_calc.py",
        "from calc import add, sub\n\n\ndef test_add():\n    assert add(1, 2) == 3\n\n\n"
        "def test_sub():\n    assert sub(3, 2) == 1\n",
    )
    repo.commit("sub and mul")
    rc, doc = verify_json(repo, tmp_path, *BRANCH, "--fail-under=90")
    assert rc == 1
    cov = doc["coverage"]
    assert cov == {"changedLines": 7, "covered": 6, "percent": 85.71}
    # The data the gate read is kept with the run: diff-cover re-checks the figure on it.
    kept = Path(os.environ["VERIFY_DAG_STORE"]) / doc["run"]["id"] / "coverage.xml"
    checked = subprocess.run(
        [
            sys.executable,
            "-m",
            "diff_cover.diff_cover_tool",
            str(kept),
            "--compare-branch=base",
            "--total-percent-float",
            "--fail-under=90",
            f"--json-report={tmp_path / 'diff-cover.json'}",
        ],
        cwd=repo.path,
        capture_output=True,
        text=True,
    )
    assert checked.returncode == 1, checked.stdout + checked.stderr  # below 90 there too
    rechecked = json.loads((tmp_path / "diff-cover.json").read_text(encoding="utf-8"))
    assert round(rechecked["total_percent_covered"], 2) == cov["percent"]
    rc_low, low = verify_json(
        repo, tmp_path, *BRANCH, "--fail-under=80", "--no-cache", "--allow-incomplete"
    )
    assert rc_low == 0 and low["coverage"] == cov
    rc_plain, plain = verify_json(repo, tmp_path, *BRANCH, "--allow-incomplete")
    assert rc_plain == 0 and plain["coverage"] is None  # nothing read it: not measured


def test_output_dash_writes_the_report_alone_on_stdout(scenario: Repo, tmp_path: Path) -> None:
    for fmt in ("json", "sarif", "junit", "github"):
        proc = subprocess.run(
            [*CLI, "verify", str(scenario.path), *BRANCH, f"--format={fmt}", "--output=-"],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 1, proc.stderr
        if fmt == "json":
            report.validate(json.loads(proc.stdout))
        elif fmt == "sarif":
            assert json.loads(proc.stdout)["version"] == "2.1.0"
        elif fmt == "junit":
            assert proc.stdout.startswith('<?xml version="1.0" encoding="utf-8"?>\n<testsuites')
        else:
            assert all(line.startswith("::") for line in proc.stdout.splitlines())
        assert not (scenario.path / "-").exists() and not Path("-").exists()


def test_a_document_format_needs_an_output(scenario: Repo) -> None:
    proc = subprocess.run(
        [*CLI, "verify", str(scenario.path), *BRANCH, "--format=sarif"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        "verify-dag: error: --format=sarif requires --output=PATH (or --output=- for stdout)"
    )


def test_head_verifies_a_range_without_checking_it_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = make_repo(tmp_path / "repo")
    repo.write("pyproject.toml", PYTEST)
    repo.write("src/calc.py", CALC)
    repo.commit("base")
    repo.git("tag", "base")
    repo.write("src/calc.py", CALC + "\n\ndef sub(a, b):\n    unused = 1\n    return a - b\n")
    middle = repo.commit("sub, with an unused variable")
    repo.write("src/calc.py", CALC + "\n\ndef sub(a, b):\n    return a - b\n")
    head = repo.commit("fixed")
    _, at_head = verify_json(repo, tmp_path, *BRANCH)
    _, ranged = verify_json(repo, tmp_path, *BRANCH, f"--head={middle}")
    assert at_head["scope"]["headSha"] == head and ranged["scope"]["headSha"] == middle
    assert not any("F841" in i["title"] for i in at_head["issues"])
    assert any("F841" in i["title"] for i in ranged["issues"])
    assert repo.head() == head and repo.git("status", "--porcelain") == ""
    proc = subprocess.run(
        [*CLI, "verify", str(repo.path), "--head=HEAD~1"], capture_output=True, text=True
    )
    assert proc.returncode == 2
    assert "--head is only valid with --scope=branch" in proc.stderr
    # A name that is no commit is the user's to fix: one line, exit 2, nothing submitted.
    unknown = subprocess.run(
        [*CLI, "verify", str(repo.path), *BRANCH, "--head=no-such-ref"],
        capture_output=True,
        text=True,
    )
    assert (unknown.returncode, unknown.stderr.splitlines()) == (
        2,
        [f"verify-dag: error: --head: 'no-such-ref' is not a commit in {repo.path}"],
    )


@pytest.mark.parametrize("how", [["-a"], ["tests/test_calc.py"], []])
def test_a_git_hook_verifies_what_the_commit_commits(repo: Repo, how: list[str]) -> None:
    """``git commit -a`` and ``git commit PATHS`` give their hooks a temporary index of what is
    being committed (GIT_INDEX_FILE): the staged scope is that, not the repository's index, so a
    failing test cannot slip in through them."""
    import shlex
    import sys

    repo.write("pyproject.toml", PYTEST)
    repo.write("src/calc.py", CALC)
    repo.write("tests/test_calc.py", TEST_ADD.format(3))
    repo.commit("base")
    hook = repo.path / ".git" / "hooks" / "pre-commit"
    cli = shlex.join([sys.executable, "-m", "verify_dag.cli"])
    hook.write_text(f"#!/bin/sh\nexec {cli} verify --scope=staged --mode=report-only\n")
    hook.chmod(0o755)
    repo.write("tests/test_calc.py", TEST_ADD.format(4))  # now failing
    if not how:
        repo.git("add", "tests/test_calc.py")
    proc = subprocess.run(
        ["git", "commit", "-q", "-m", "break the test", *how],
        cwd=repo.path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode != 0, proc.stdout + proc.stderr
    said = proc.stdout + proc.stderr  # git shows a hook's output on its stderr
    assert "test_add" in said and "Nothing to verify" not in said
    assert repo.git("log", "--format=%s", "-1") == "base"
