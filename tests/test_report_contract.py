"""The JSON v1 report read as a consumer written from the specification reads it (the verify
pipeline's Phase 8c): the shapes it calls exact compared by equality, on real runs of every
kind (light, deep with a fake model CLI, an error, nothing to verify). Written from the
specification's text, not from the models.

Also: every golden report and every format's source match the schema, and a change that breaks
its own declaration files gets a finding on the file's line, not a usage error.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import BRANCH, Repo, calc_base, make_repo, verify_json
from fakes import install

from verify_dag import report
from verify_dag.cli import main
from verify_dag.models.report import Report

GOLDEN = Path(__file__).parent / "golden"

# "Each item has exactly skill, status, and notes".
SKILL_RESULT_KEYS = {"skill", "status", "notes"}
STATUSES = {"COMPLETED", "PASSED", "FAILED", "BLOCKED", "SKIPPED", "NOT_RUN"}
# "findings mirrors each issue without its ID"; "Project the stable adversary
# findings[].location as exactly {"path": ..., "line": ...}"; "Omit findings[].location when
# none applies".
FINDING_KEYS = {"title", "severity", "description", "sources"}
# "Step 3 - Assemble exactly this shape": the top-level keys of the example document.
TOP_KEYS = {
    "schemaVersion",
    "status",
    "error",
    "findings",
    "overall",
    "scope",
    "knownFindings",
    "deferredToEpic",
    "triage",
    "skillResults",
    "issues",
    "exerciserVerification",
    "customGates",
}

REPLY = json.dumps(
    {
        "findings": [
            {
                "title": "mul is off by one",
                "severity": 8,
                "location": "src/calc.py:9-10",
                "category": "correctness",
                "description": "mul(3, 4) returns 13",
            },
            {
                "title": "The module has no docstring",
                "severity": 3,
                "location": "src/calc.py",
                "category": "style",
                "description": "say what it is for",
            },
        ]
    }
)


def check_shapes(doc: dict[str, Any]) -> None:
    """The exact shapes, as the specification's consumers test them."""
    assert set(doc) >= TOP_KEYS
    assert doc["schemaVersion"] == 1
    for item in doc["skillResults"]:
        assert set(item) == SKILL_RESULT_KEYS, item
        assert item["status"] in STATUSES and isinstance(item["notes"], str)
    assert len(doc["findings"]) == len(doc["issues"])
    for finding, issue in zip(doc["findings"], doc["issues"], strict=True):
        assert set(finding) in (FINDING_KEYS, FINDING_KEYS | {"location"}), finding
        # "findings mirrors each issue without its ID".
        for key in ("title", "severity", "description", "sources"):
            assert finding[key] == issue[key]
        where = issue["location"]
        if where is None:
            assert "location" not in finding
            continue
        # Structured, never half of one: a path and a line.
        assert {"path", "line"} <= set(where) <= {"path", "line", "endLine", "column"}
        assert isinstance(where["line"], int) and where["line"] >= 1
        assert finding["location"] == {"path": where["path"], "line": where["line"]}
    # What skillResults cannot hold is in skillDetails, one entry per item, in its order.
    assert [d["skill"] for d in doc["skillDetails"]] == [r["skill"] for r in doc["skillResults"]]
    report.validate(doc)


@pytest.fixture
def change(tmp_path: Path) -> Repo:
    """A branch that adds a function with a lint error (a column ruff names) and a failing test."""
    repo = calc_base(make_repo(tmp_path / "repo"))
    repo.write(
        "src/calc.py",
        "def add(a, b):\n    return a + b\n\n\n"
        "def mul(a, b):\n    unused = 1\n    return a * b + 1\n",
    )
    repo.write(
        "tests/test_calc.py",
        "from calc import add, mul\n\n\ndef test_add():\n    assert add(2, 2) == 4\n\n\n"
        "def test_mul():\n    assert mul(3, 4) == 12\n",
    )
    repo.commit("mul")
    return repo


def test_light_run_has_the_exact_shapes(change: Repo, tmp_path: Path) -> None:
    _, doc = verify_json(change, tmp_path, *BRANCH, "--allow-incomplete")
    check_shapes(doc)
    by_tool = {i.get("tool"): i for i in doc["issues"]}
    # ruff's column stays in issues[] (and in SARIF, GitHub, GitLab), never in findings[].
    assert by_tool["ruff"]["location"]["column"] == 5
    assert any(i["class"] == "test-failure" for i in doc["issues"])


def test_deep_run_with_a_model_has_the_exact_shapes(
    change: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir = tmp_path / "fakebin"
    install(bin_dir, ["claude"])
    monkeypatch.setenv("PATH", f"{bin_dir}:{__import__('os').environ['PATH']}")
    monkeypatch.setenv("VERIFY_DAG_BACKEND", "claude")
    monkeypatch.setenv("FAKE_MODEL_REPLY", REPLY)
    monkeypatch.setenv("FAKE_MODEL_LOG", str(tmp_path / "calls.jsonl"))
    _, doc = verify_json(change, tmp_path, *BRANCH, "--depth=deep", "--allow-incomplete")
    check_shapes(doc)
    ranged = next(i for i in doc["issues"] if i["title"] == "mul is off by one")
    assert ranged["location"] == {"path": "src/calc.py", "line": 9, "endLine": 10}
    # A location that names a file and no line is put at line 1, and the description says so.
    whole = next(i for i in doc["issues"] if i["title"] == "The module has no docstring")
    assert whole["location"] == {"path": "src/calc.py", "line": 1}
    assert "No line was given in src/calc.py" in whole["description"]


def test_error_run_has_the_exact_shapes(change: Repo, tmp_path: Path) -> None:
    rc, doc = verify_json(change, tmp_path, "--scope=branch", "--base=no-such-ref")
    assert rc == 3 and doc["status"] == "error"
    check_shapes(doc)


def test_nothing_to_verify_has_the_exact_shapes(tmp_path: Path) -> None:
    repo = calc_base(make_repo(tmp_path / "repo"))
    rc, doc = verify_json(repo, tmp_path, "--scope=staged")
    assert rc == 0 and doc["scope"]["nothingToVerify"] is True
    check_shapes(doc)


def test_every_golden_report_matches_the_schema() -> None:
    goldens = sorted(GOLDEN.glob("*.json"))
    assert goldens
    for path in goldens:
        doc = json.loads(path.read_text(encoding="utf-8"))
        check_shapes(doc)


def test_a_report_stored_before_skill_details_reads_back() -> None:
    """A report the store kept from an earlier version (isolation and cached in skillResults,
    rule and tool in findings, an issue location without its line) reads back in today's
    shape: the store keeps runs for days."""
    doc = json.loads((GOLDEN / "light_branch.json").read_text(encoding="utf-8"))
    del doc["skillDetails"]
    doc["skillResults"][0]["isolation"] = "bubblewrap"
    doc["findings"][0]["rule"] = None
    doc["findings"][0]["location"]["column"] = 3
    doc["issues"][1]["location"] = {"path": doc["issues"][1]["location"]["path"]}
    del doc["findings"][1]["location"]
    back = Report.model_validate(doc).model_dump(mode="json")
    check_shapes(back)
    assert back["skillDetails"][0]["isolation"] == "bubblewrap"
    assert back["issues"][1]["location"]["line"] == 1


# --- a change that breaks its own declaration files -------------------------------------------

TOX = "[tox]\nenv_list = py\n\n[testenv]\ndeps = pytest\ncommands = pytest {posargs}\n"
NOX = (
    "import nox\n\n\n@nox.session\ndef tests(session):\n"
    '    session.install("pytest")\n    session.run("pytest")\n'
)
PRE_COMMIT = (
    "repos:\n- repo: https://github.com/astral-sh/ruff-pre-commit\n  rev: v0.6.9\n"
    "  hooks:\n  - id: ruff\n"
)
# file -> (what the base has, what the change makes of it, the line the parser stops at);
# None: calc_base's own pyproject.toml, its table header left unclosed.
BROKEN: dict[str, tuple[str, str, int] | None] = {
    "pyproject.toml": None,
    "tox.ini": (TOX, TOX.replace("[testenv]", "[testenv"), 4),
    "setup.cfg": ("[metadata]\nname = calc\n", "[metadata]\nname = calc\nname = calc2\n", 3),
    "noxfile.py": (NOX, NOX.replace("def tests(session):", "def tests(session:"), 5),
    ".pre-commit-config.yaml": (PRE_COMMIT, PRE_COMMIT.replace("rev: v0.6.9", "rev: [v0.6.9"), 4),
}


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_a_broken_declaration_is_a_finding_on_its_line(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = calc_base(make_repo(tmp_path / "repo"))
    declared = BROKEN[name]
    if declared is None:
        text = (repo.path / name).read_text(encoding="utf-8")
        after, line = text.replace("[tool.pytest.ini_options]", "[tool.pytest.ini_options"), 1
    else:
        before, after, line = declared
        repo.write(name, before)
        repo.commit("declare")
        repo.git("tag", "-f", "base")
    repo.write(name, after)
    repo.write(
        "src/calc.py", "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n"
    )
    repo.commit("break it")
    out = tmp_path / "report.json"
    rc = main(["verify", str(repo.path), *BRANCH, "--format=json", f"--output={out}"])
    assert rc == 1, capsys.readouterr().err
    doc = json.loads(out.read_text(encoding="utf-8"))
    check_shapes(doc)
    assert doc["status"] == "ok" and doc["overall"]["result"] == "issues-found"
    (issue,) = [i for i in doc["issues"] if i["location"] and i["location"]["path"] == name]
    assert issue["severity"] == 9 and issue["title"] == f"{name} does not parse"
    assert issue["location"]["line"] == line and issue["baseline"] == "introduced"
    # The run's report in every format, as the store kept it.
    formats = {}
    for fmt in ("markdown", "sarif", "github", "gitlab", "junit"):
        path = tmp_path / f"report.{fmt}"
        assert main(["report", doc["run"]["id"], f"--format={fmt}", f"--output={path}"]) == 0
        formats[fmt] = path.read_text(encoding="utf-8")
    assert f"{name} does not parse" in formats["markdown"]
    assert f"file={name},line={line}" in formats["github"]
    sarif = json.loads(formats["sarif"])
    regions = [
        r["locations"][0]["physicalLocation"]
        for run in sarif["runs"]
        for r in run["results"]
        if r["locations"]
    ]
    assert name in [p["artifactLocation"]["uri"] for p in regions]
    # One root cause, one finding: a tool that stopped on the file points at it instead.
    assert not [i for i in doc["issues"] if "could not" in i["title"]], doc["issues"]
    tester = {r["skill"]: r for r in doc["skillResults"]}["tester"]
    if name in ("tox.ini", "noxfile.py", ".pre-commit-config.yaml"):
        # Without the file the suite still runs, in the env the rest of the project declares.
        assert tester["status"] == "PASSED", tester
    if name in ("tox.ini", "noxfile.py") or tester["status"] == "BLOCKED":
        assert f"{name} does not parse" in tester["notes"], tester


# --- test items without a line of their own ------------------------------------------------------

# A pytest plugin in the style of pytest-mypy-plugins: items collected from .case files, each with
# no line of its own (reportinfo gives None, as YamlTestItem's does). One's failure names a line
# of its own file in its traceback (the case's code is compiled under the file's name); the
# other fails in the plugin's code, naming no line of the case file.
CASES_PLUGIN = """
import pytest


class CaseFile(pytest.File):
    def collect(self):
        yield CaseItem.from_parent(self, name=self.path.stem)


class CaseItem(pytest.Item):
    def runtest(self):
        source = self.path.read_text()
        if source.startswith("# plugin fails"):
            raise AssertionError("the plugin found the case wrong")
        exec(compile(source, str(self.path), "exec"), {})

    def reportinfo(self):
        return self.path, None, self.name


def pytest_collect_file(parent, file_path):
    if file_path.suffix == ".case":
        return CaseFile.from_parent(parent, path=file_path)
"""


def test_a_test_item_without_a_line_is_located_by_its_failure_or_at_line_1(
    tmp_path: Path,
) -> None:
    repo = calc_base(make_repo(tmp_path / "repo"))
    repo.write("tests/conftest.py", CASES_PLUGIN)
    repo.write("tests/good.case", "x = 1\n\nassert x == 1\n")
    repo.write("tests/plugin.case", "# plugin fails\n")
    repo.commit("cases")
    repo.git("tag", "-f", "base")
    repo.write("tests/good.case", "x = 2\n\nassert x == 1\n")
    repo.write("tests/plugin.case", "# plugin fails: still\n")
    repo.commit("break the cases")
    _, doc = verify_json(repo, tmp_path, *BRANCH, "--allow-incomplete")
    check_shapes(doc)
    failed = {i["title"]: i for i in doc["issues"] if i["class"] == "test-failure"}
    good = failed["Test failed: tests/good.case::good"]
    assert good["location"] == {"path": "tests/good.case", "line": 3}
    assert "No line was given" not in good["description"]
    plugin = failed["Test failed: tests/plugin.case::plugin"]
    assert plugin["location"] == {"path": "tests/plugin.case", "line": 1}
    assert (
        "No line was given in tests/plugin.case: the location is line 1" in (plugin["description"])
    )


def test_a_tools_column_0_is_no_column() -> None:
    """The report's columns are 1-based (its schema's minimum): a tool's column 0 (seen on
    pygments 2.19.2, where it failed the whole report) says only which line."""
    from verify_dag.models.findings import Location

    assert Location(path="a.py", line=3, column=0).column is None
    assert Location(path="a.py", line=3, column=1).column == 1
