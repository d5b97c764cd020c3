"""The debugger (phase 7b, docs/verify.md): failing tests re-run alone at the merge base, real
repos and pytest."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from conftest import Repo, by_failure

from verify_dag import git, workspace
from verify_dag.errors import FatalError
from verify_dag.models import (
    Command,
    Diagnosis,
    Finding,
    RunState,
    SkillOutcome,
    Toolchain,
    VerifyRequest,
)
from verify_dag.models.source import parse_source
from verify_dag.phases import debugger, scope, tester
from verify_dag.phases.debugger.signature import EVIDENCE_CAP
from verify_dag.phases.tester.env import host

PYTEST = Toolchain(
    commands=(
        Command(
            kind="test", argv=("pytest",), source="tests directory", exists=True, tool="pytest"
        ),
    )
)
CONFIG = '[tool.pytest.ini_options]\ntestpaths = ["tests"]\npythonpath = ["src"]\n'


def verify(repo: Repo, toolchain: Toolchain | None = None, **req: object) -> RunState:
    """Scope and tester exactly as the DAG runs them, then the state the debugger receives."""
    request = VerifyRequest.model_validate({"repo": str(repo.path), **req})
    sc = scope.run(request)
    with git.worktree(request.repo, sc.new_commit) as wt:
        tested = tester.run(sc, toolchain or PYTEST, wt, 60)
    return RunState(run_id="t", request=request, scope=sc, toolchain=toolchain, outcomes=(tested,))


@pytest.fixture
def branch(repo: Repo, tmp_path: Path) -> tuple[Repo, Path]:
    """Base: add passes, sub and mod fail, and test_marker leaves a file behind if it is ever run.
    Branch: add now raises inside src/calc.py (new), sub still fails the same way (pre-existing),
    mod fails differently, and tests/test_new.py adds a failing test the base does not have."""
    marker = tmp_path / "marker-was-run"
    repo.write("pyproject.toml", CONFIG)
    repo.write(
        "src/calc.py",
        "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n"
        "    return a + b\n\n\ndef mod(a, b):\n    return 0\n",
    )
    repo.write(
        "tests/test_calc.py",
        "from calc import add, mod, sub\n\n\n"
        "def test_add():\n    assert add(2, 2) == 4\n\n\n"
        "def test_sub():\n    assert sub(3, 1) == 2\n\n\n"
        "def test_mod():\n    assert mod(7, 4) == 3\n",
    )
    repo.write(
        "tests/test_marker.py",
        "from pathlib import Path\n\n\ndef test_marker():\n"
        f"    Path({str(marker)!r}).write_text('ran')\n",
    )
    repo.commit("base")
    repo.git("tag", "base")
    repo.write(
        "src/calc.py",
        "def add(a, b):\n    raise ValueError('add is broken')\n\n\n"
        "def sub(a, b):\n    return a + b\n\n\n"
        "def mod(a, b):\n    raise KeyError(a)\n",
    )
    repo.write("tests/test_marker.py", "def test_marker():\n    pass\n")
    repo.write(
        "tests/test_new.py",
        "from calc import sub\n\n\ndef test_neg():\n    assert sub(1, 2) == -1\n",
    )
    repo.commit("branch")
    return repo, marker


def test_pre_existing_new_and_added_failures(branch: tuple[Repo, Path]) -> None:
    repo, marker = branch
    state = verify(repo, scope="branch", base="base")
    out = debugger.run(state)
    assert out.skill == "debugger" and out.status == "COMPLETED" and out.ran
    assert out.notes == "4 failures: 1 pre-existing, 2 new, 1 undetermined"
    got = by_failure(out)
    assert list(got) == [
        "tests/test_calc.py::test_add",
        "tests/test_calc.py::test_sub",
        "tests/test_calc.py::test_mod",
        "tests/test_new.py::test_neg",
    ]

    new = got["tests/test_calc.py::test_add"]
    assert new.pre_existing == "no"
    assert new.evidence.startswith("passes at the merge base") and "1 passed" in new.evidence
    # The exception was raised in the scoped source file; the test file itself is not scoped.
    assert new.touched_by_diff == ("src/calc.py",)
    base = repo.git("rev-parse", "base")
    assert f"a scratch worktree of {base}" in new.command
    # On verify-dag's interpreter, as the tester ran it: without its dependencies' plugins.
    head = ["-m", "pytest", *host.not_ours(), "-q", "-p", "no:cacheprovider"]
    assert new.command.split()[1 : 1 + len(head)] == head
    assert new.command.split("  (cwd:")[0].endswith("--tb=long tests/test_calc.py::test_add")

    old = got["tests/test_calc.py::test_sub"]
    assert old.pre_existing == "yes"
    assert old.evidence.startswith(
        "fails at the merge base with the same signature: AssertionError"
    )
    assert "tests/test_calc.py:9: AssertionError" in old.evidence
    assert old.touched_by_diff == ()  # sub's caller is unchanged and sub is not in the stack

    changed = got["tests/test_calc.py::test_mod"]
    assert changed.pre_existing == "undetermined"
    assert "different signature: AssertionError there, KeyError here" in changed.evidence

    # A test the diff added cannot have failed at the merge base: it is new.
    added = got["tests/test_new.py::test_neg"]
    assert added.pre_existing == "no"
    assert added.evidence.startswith("pytest exited 4: the test does not exist at the merge base")
    assert "file or directory not found: tests/test_new.py" in added.evidence
    assert added.touched_by_diff == ("tests/test_new.py",)

    # Only the failing tests ran at the base: the suite's other test never did.
    assert not marker.exists()
    assert len(repo.git("worktree", "list").splitlines()) == 1


def diagnose_failure(repo: Repo, nodeid: str) -> Diagnosis:
    """The debugger's one diagnosis of the branch when the tester reported ``nodeid`` failing."""
    state = verify(repo, scope="branch", base="base")
    finding = Finding(
        title=f"Test failed: {nodeid}",
        severity=9,
        description="assert 1 == 2",
        source="tester",
        issue_class="test-failure",
        nodeid=nodeid,
    )
    tested = SkillOutcome(skill="tester", status="FAILED", findings=(finding,))
    (d,) = debugger.run(state.model_copy(update={"outcomes": (tested,)})).diagnoses
    return d


def test_test_added_to_an_existing_file_is_new(branch: tuple[Repo, Path]) -> None:
    repo, _ = branch
    # The branch adds test_later to a file the base already has.
    calc_tests = repo.path / "tests" / "test_calc.py"
    repo.write(
        "tests/test_calc.py", calc_tests.read_text() + "\n\ndef test_later():\n    assert 1 == 2\n"
    )
    repo.commit("tests: test_later")
    d = diagnose_failure(repo, "tests/test_calc.py::test_later")
    assert d.pre_existing == "no" and "pytest exited 4" in d.evidence
    assert "does not exist at the merge base" in d.evidence and "no match in any of" in d.evidence


def test_an_id_pytest_cannot_find_and_the_diff_does_not_define_is_undetermined(
    branch: tuple[Repo, Path],
) -> None:
    """An inherited test reported under an id that exists nowhere (seen on a real release:
    ``tests/__init__.py::test_clear`` for a mixin's method) is not found at the base either;
    that is no evidence that the failure is new."""
    repo, _ = branch
    d = diagnose_failure(repo, "tests/test_calc.py::test_clear")
    assert d.pre_existing == "undetermined"
    assert d.evidence.startswith("pytest exited 4: no test tests/test_calc.py::test_clear")
    assert "the diff adds no definition of test_clear in tests/test_calc.py" in d.evidence


YAML_COLLECTOR = """import pytest


def pytest_collect_file(parent, file_path):
    if file_path.suffix == ".yml" and file_path.name.startswith("test_"):
        return YamlFile.from_parent(parent, path=file_path)


class YamlFile(pytest.File):
    def collect(self):
        for line in self.path.read_text().splitlines():
            name, _, value = line.partition(":")
            yield YamlItem.from_parent(self, name=name.strip(), value=value.strip())


class YamlItem(pytest.Item):
    def __init__(self, *, value, **kw):
        super().__init__(**kw)
        self.value = value

    def runtest(self):
        assert self.value == "ok", self.value

    def reportinfo(self):
        return self.path, 0, self.name
"""


def test_items_the_base_does_not_collect_are_new(
    repo: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """attrs 23.2.0's shape: YAML test files are collected by a plugin the head installs and
    the base does not, so at the base no collector takes the file, which is there all along;
    and a YAML file the diff adds. Neither holds a test of the base's suite: both are new. A
    test whose module the base collects but whose id it lacks stays undetermined (above). A
    verdict on a whole file holds for each of its tests: one re-run per file (attrs 23.2.0's 35
    items of one file ran into the cap of 20 re-runs)."""
    monkeypatch.setattr(debugger, "MAX_RERUNS", 2)
    repo.write("pyproject.toml", CONFIG)
    repo.write("tests/test_items.yml", "case_a: broken\ncase_c: broken\ncase_d: broken\n")
    repo.write("tests/test_a.py", "def test_a():\n    pass\n")
    repo.commit("base")
    repo.git("tag", "base")
    repo.write("tests/conftest.py", YAML_COLLECTOR)
    repo.write("tests/test_more.yml", "case_b: broken\n")
    repo.commit("collect the YAML items")
    diagnoses = {
        d.failure: d for d in debugger.run(verify(repo, scope="branch", base="base")).diagnoses
    }
    assert sorted(diagnoses) == [
        "tests/test_items.yml::case_a",
        "tests/test_items.yml::case_c",
        "tests/test_items.yml::case_d",
        "tests/test_more.yml::case_b",
    ]
    for other in ("case_c", "case_d"):
        same = diagnoses[f"tests/test_items.yml::{other}"]
        assert same.pre_existing == "no", same.evidence
        assert same.evidence.endswith(
            "(found re-running tests/test_items.yml::case_a, a test of the same file)"
        )
    kept = diagnoses["tests/test_items.yml::case_a"]
    assert kept.pre_existing == "no", kept.evidence
    assert kept.evidence.startswith(
        "pytest exited 4: the merge base's own configuration collects no test from "
        "tests/test_items.yml"
    )
    assert "no match in any of [<Dir tests>]" in kept.evidence
    added = diagnoses["tests/test_more.yml::case_b"]
    assert added.pre_existing == "no", added.evidence
    assert added.evidence.startswith(
        "pytest exited 4: tests/test_more.yml does not exist at the merge base"
    )


def test_usage_error_at_the_base_stays_undetermined(repo: Repo) -> None:
    """pytest's exit 4 is also a usage error: a base whose options pytest rejects says nothing
    about whether the test exists there."""
    repo.write("pyproject.toml", CONFIG.replace("]\n", ']\naddopts = "--no-such-option"\n', 1))
    repo.write("tests/test_a.py", "def test_a():\n    assert 1 == 2\n")
    repo.commit("base")
    repo.git("tag", "base")
    repo.write("pyproject.toml", CONFIG)
    repo.commit("fix the options")
    (d,) = debugger.run(verify(repo, scope="branch", base="base")).diagnoses
    assert d.failure == "tests/test_a.py::test_a"
    assert d.pre_existing == "undetermined"
    assert d.evidence.startswith("pytest exited 4: usage error at the merge base")
    assert "unrecognized arguments: --no-such-option" in d.evidence


def test_renamed_test_file_is_re_run_under_its_old_path(repo: Repo) -> None:
    """A test file the diff renamed existed at the base under its old path: it is re-run there,
    not called new."""
    repo.write("pyproject.toml", CONFIG)
    repo.write("src/calc.py", "def add(a, b):\n    return a - b\n")
    body = "from calc import add\n\n\ndef test_add():\n    assert add(2, 2) == 4\n"
    repo.write("tests/test_old.py", body)
    repo.commit("base")
    repo.git("tag", "base")
    repo.git("mv", "tests/test_old.py", "tests/test_renamed.py")
    repo.commit("rename the test file")
    (d,) = debugger.run(verify(repo, scope="branch", base="base")).diagnoses
    assert d.failure == "tests/test_renamed.py::test_add"
    assert d.pre_existing == "yes", d.evidence
    assert d.command.split("  (cwd:")[0].endswith("--tb=long tests/test_old.py::test_add")
    assert "renamed from tests/test_old.py" in d.evidence


def test_the_declared_pytest_configuration_applies_at_the_base(repo: Repo) -> None:
    """A suite whose tests are only collected under the repository's declared options (here
    `-o python_functions=check_*`) is re-run at the base with them: without them the test would
    not be found there and would read as new."""
    repo.write("pyproject.toml", CONFIG)
    repo.write("src/calc.py", "def add(a, b):\n    return a - b\n")
    repo.write(
        "tests/test_calc.py",
        "from calc import add\n\n\ndef check_add():\n    assert add(2, 2) == 4\n",
    )
    repo.commit("base")
    repo.git("tag", "base")
    repo.write("src/other.py", "X = 1\n")
    repo.commit("unrelated")
    declared = Toolchain(
        commands=(
            Command(
                kind="test",
                argv=("pytest", "-o", "python_functions=check_*", "tests"),
                source="Makefile",
                exists=True,
                tool="pytest",
            ),
        )
    )
    (d,) = debugger.run(verify(repo, declared, scope="branch", base="base")).diagnoses
    assert d.failure == "tests/test_calc.py::check_add"
    assert d.pre_existing == "yes", d.evidence
    assert "-o 'python_functions=check_*'" in d.command and " tests " not in d.command


def test_staged_snapshot_is_compared_with_head(repo: Repo) -> None:
    repo.write("pyproject.toml", CONFIG)
    repo.write("src/calc.py", "def add(a, b):\n    return a + b\n")
    repo.write(
        "tests/test_calc.py",
        "from calc import add\n\n\ndef test_add():\n    assert add(2, 2) == 4\n",
    )
    head = repo.commit("calc")
    repo.write("src/calc.py", "def add(a, b):\n    return a * b + 1\n")
    repo.git("add", "src/calc.py")
    state = verify(repo, scope="staged")
    assert state.scope is not None and state.scope.old_commit == head
    (d,) = debugger.run(state).diagnoses
    assert (d.failure, d.pre_existing) == ("tests/test_calc.py::test_add", "no")
    assert f"a scratch worktree of {head}" in d.command


def state_with(repo: Repo, *findings: Finding, **req: object) -> RunState:
    request = VerifyRequest.model_validate({"repo": str(repo.path), **req})
    return RunState(
        run_id="t",
        request=request,
        scope=scope.run(request),
        outcomes=(SkillOutcome(skill="tester", status="FAILED", findings=findings),),
    )


def failure(
    nodeid: str | None,
    title: str = "",
    description: str = "assert 1 == 2",
    source: str = "tester",
    severity: int = 9,
) -> Finding:
    return Finding(
        title=title or f"Test failed: {nodeid}",
        severity=severity,
        source=source,
        description=description,
        issue_class="test-failure",
        nodeid=nodeid,
    )


@pytest.fixture
def two_commits(repo: Repo) -> Repo:
    repo.write("pyproject.toml", CONFIG)
    repo.write(
        "tests/test_a.py",
        "import time\n\n\ndef test_slow():\n    time.sleep(30)\n\n\n"
        "def test_secret():\n    assert 'hunter2-hunter2' == ''\n",
    )
    repo.commit("base")
    repo.git("tag", "base")
    repo.write("src/x.py", "X = 1\n")
    repo.commit("branch")
    return repo


def test_no_failures_is_skipped(two_commits: Repo) -> None:
    state = state_with(two_commits, failure("t.py::x", severity=6), scope="branch", base="base")
    out = debugger.run(state)
    assert (out.status, out.ran, out.notes) == ("SKIPPED", False, "N/A: no failures of severity 7+")
    assert out.diagnoses == ()


def test_ux_reviewer_fires_only_at_deep(two_commits: Repo) -> None:
    ux = Finding(
        title="Confusing error", severity=8, description="d", source="ux-reviewer", issue_class="ux"
    )
    request = VerifyRequest(source=parse_source(str(two_commits.path)), scope="branch", base="base")
    state = RunState(
        run_id="t",
        request=request,
        scope=scope.run(request),
        outcomes=(SkillOutcome(skill="ux-reviewer", status="COMPLETED", findings=(ux,)),),
    )
    assert debugger.run(state).status == "SKIPPED"
    deep = state.model_copy(update={"request": request.model_copy(update={"depth": "deep"})})
    (d,) = debugger.run(deep).diagnoses
    assert (d.failure, d.pre_existing, d.command) == ("Confusing error", "undetermined", "not run")
    assert "no single test to re-run" in d.evidence


def test_whole_file_scope_has_no_base(two_commits: Repo) -> None:
    state = state_with(two_commits, failure("tests/test_a.py::test_slow"), scope="all")
    out = debugger.run(state)
    (d,) = out.diagnoses
    assert d.pre_existing == "undetermined" and "whole-file scope (all)" in d.evidence
    assert out.notes == "1 failure: 0 pre-existing, 0 new, 1 undetermined"


def test_non_pytest_runner_and_duplicates(two_commits: Repo) -> None:
    cmd = failure(None, title="Test command failed: make test", description="exited 2")
    twice = failure("tests/test_a.py::test_secret")
    state = state_with(two_commits, cmd, twice, twice, scope="branch", base="base")
    got = by_failure(debugger.run(state))
    assert list(got) == ["make test", "tests/test_a.py::test_secret"]  # one per signature
    assert got["make test"].pre_existing == "undetermined"
    assert "not pytest" in got["make test"].evidence


def test_evidence_is_redacted_and_capped(
    two_commits: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_API_TOKEN", "hunter2-hunter2")
    state = state_with(
        two_commits, failure("tests/test_a.py::test_secret"), scope="branch", base="base"
    )
    (d,) = debugger.run(state).diagnoses
    assert d.pre_existing == "yes"
    assert "hunter2" not in d.evidence and "[REDACTED]" in d.evidence
    assert len(d.evidence) <= EVIDENCE_CAP


def test_time_limit_cap_and_refused_ids(two_commits: Repo, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(debugger, "RERUN_TIMEOUT", 2.0)
    monkeypatch.setattr(debugger, "MAX_RERUNS", 1)
    state = state_with(
        two_commits,
        failure("tests/test_a.py::test_slow"),
        failure("tests/test_a.py::test_secret"),
        failure("-p evil"),
        failure("../outside.py::test"),
        scope="branch",
        base="base",
    )
    got = by_failure(debugger.run(state))
    assert got["tests/test_a.py::test_slow"].pre_existing == "undetermined"
    assert "timed out after 2s" in got["tests/test_a.py::test_slow"].evidence
    assert got["tests/test_a.py::test_secret"].evidence == "not re-run: cap of 1 re-runs reached"
    assert "refused" in got["-p evil"].evidence and "refused" in got["../outside.py::test"].evidence


def test_never_raises(two_commits: Repo, monkeypatch: pytest.MonkeyPatch) -> None:
    state = state_with(
        two_commits, failure("tests/test_a.py::test_secret"), scope="branch", base="base"
    )

    @contextmanager
    def no_checkout(run_id: str, repo: object, sha: str) -> Iterator[Path]:
        raise FatalError("disk full")
        yield Path()

    monkeypatch.setattr(workspace, "checkout", no_checkout)
    (d,) = debugger.run(state).diagnoses
    assert d.pre_existing == "undetermined" and "could not check out" in d.evidence

    def crash(*_: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(debugger, "_diagnose", crash)
    out = debugger.run(state)
    assert out.status == "NOT_RUN" and "RuntimeError: boom" in out.notes


def test_a_run_that_stops_after_the_exerciser_stopped_at_the_debugger(two_commits: Repo) -> None:
    """The debugger runs after the exerciser: a run with the exerciser's result whose debugger
    task failed says it stopped at the debugger (the task records its phase on the state)."""
    from verify_dag.models import EngineerContext
    from verify_dag.report import results

    state = state_with(
        two_commits, failure("tests/test_a.py::test_secret"), scope="branch", base="base"
    )
    ran = (
        *state.outcomes,
        SkillOutcome(skill="reviewer", status="COMPLETED"),
        SkillOutcome(skill="exerciser", status="FAILED"),
    )
    state = state.model_copy(
        update={
            "engineer": EngineerContext(),
            "toolchain": PYTEST,
            "outcomes": ran,
            "static": SkillOutcome(skill="static-analysis", status="COMPLETED"),
            "failed_phase": "debugger",
            "error_code": "INTERNAL_ERROR",
            "error_message": "worker lost",
        }
    )
    assert results.error_of(state) == ("INTERNAL_ERROR", "debugger: worker lost")
    by_skill = {o.skill: o for o in results.outcomes(state)}
    assert by_skill["exerciser"].status == "FAILED"
    assert by_skill["debugger"].status == "NOT_RUN"
    assert by_skill["debugger"].notes == "not run: verification stopped at debugger: worker lost"


def test_pytests_summary_is_read_past_the_lines_tox_prints_after_it() -> None:
    from verify_dag.phases.debugger.signature import counts as _counts

    out = "F\n1 failed, 2 passed in 0.12s\npy311: exit 1 (0.5 seconds)\n  py311: FAIL code 1\n"
    assert _counts(out + "  evaluation failed :( (0.6 seconds)\n") == {"failed": 1, "passed": 2}
