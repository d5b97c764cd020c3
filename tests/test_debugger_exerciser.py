"""The debugger on exerciser failures (phase 7b, docs/verify.md): a failed gate, EXERCISE command
or completion criterion is checked again in a scratch worktree of the merge base, on real
repositories."""

from __future__ import annotations

import sys

from conftest import Repo, by_failure
from test_exerciser import APP, SKILL_DIR, free_port, get

from verify_dag import git
from verify_dag.models import (
    Command,
    RunState,
    SkillOutcome,
    Toolchain,
    VerifyRequest,
)
from verify_dag.models.source import parse_source
from verify_dag.phases import debugger, engineer, exerciser, scope, tester

PY = sys.executable


def script(code: int | str) -> str:
    """A script that exits with ``code``, or prints ``code`` when it is text."""
    if isinstance(code, int):
        return f"import sys\n\nsys.exit({code})\n"
    return f"print({code!r})\n"


def exercised(repo: Repo, completion: str | None = None) -> tuple[RunState, SkillOutcome]:
    """Scope, engineer and exerciser as the DAG runs them: the state the debugger receives."""
    request = VerifyRequest(
        source=parse_source(str(repo.path)), scope="branch", base="base", completion=completion
    )
    sc = scope.run(request)
    state = RunState(
        run_id="t", request=request, scope=sc, engineer=engineer.run(str(repo.path), sc.new_commit)
    )
    ex = exerciser.run(state)
    return state.model_copy(update={"outcomes": (ex,)}), ex


VERIFICATION = f"""\
EXERCISE: {PY} drive.py

## Exerciser Gates
- Totals add up
  CHECK: {PY} totals.py
  EXPECT: output contains "total=4"
- Legacy export works
  CHECK: {PY} export.py
- Import is quick
  CHECK: {PY} importer.py
- Report renders
  CHECK: {PY} render.py
"""


def test_gate_exercise_and_completion_failures_are_checked_at_the_base(repo: Repo) -> None:
    repo.write(f"{SKILL_DIR}/SKILL.md", "# shop engineer\nSee VERIFICATION.md.\n")
    repo.write(f"{SKILL_DIR}/VERIFICATION.md", VERIFICATION)
    base = {
        "drive.py": script(0),
        "totals.py": script("total=4"),
        "export.py": script(3),
        "importer.py": script(2),
        "render.py": script(0),
        "crit.py": script(1),
    }
    for name, text in base.items():
        repo.write(name, text)
    base_sha = repo.commit("base")
    repo.git("tag", "base")
    # The branch breaks drive.py, totals.py and importer.py (differently from its old failure);
    # export.py and the completion criterion fail exactly as they already did at the base.
    repo.write("drive.py", "raise RuntimeError('drive broke')\n")
    repo.write("totals.py", script("total=5"))
    repo.write("importer.py", script(1))
    repo.write("unrelated.py", "X = 1\n")
    repo.commit("branch")
    state, ex = exercised(repo, completion=f"{PY} crit.py")
    assert ex.status == "FAILED"

    out = debugger.run(state)
    assert out.status == "COMPLETED", out.notes
    assert out.notes == "5 failures: 2 pre-existing, 2 new, 1 undetermined"
    got = by_failure(out)
    assert list(got) == [
        f"Exercise command failed: {PY} drive.py",
        "Exerciser gate failed: Totals add up",
        "Exerciser gate failed: Legacy export works",
        "Exerciser gate failed: Import is quick",
        f"Completion criterion failed: {PY} crit.py",
    ]

    drive = got[f"Exercise command failed: {PY} drive.py"]
    assert drive.pre_existing == "no"
    assert drive.evidence.startswith("passes at the merge base")
    assert drive.command.startswith(f"{PY} drive.py  (cwd: ")
    assert f"a scratch worktree of {base_sha}" in drive.command

    totals = got["Exerciser gate failed: Totals add up"]
    assert totals.pre_existing == "no"
    assert 'output contains "total=4"' in totals.evidence
    assert totals.command.startswith(f"{PY} totals.py  (cwd: ")

    export = got["Exerciser gate failed: Legacy export works"]
    assert export.pre_existing == "yes"
    assert export.evidence.startswith("fails at the merge base the same way: exit 3 (expected 0)")

    changed = got["Exerciser gate failed: Import is quick"]
    assert changed.pre_existing == "undetermined"
    assert "exit 2 (expected 0) there, exit 1 (expected 0) here" in changed.evidence

    crit = got[f"Completion criterion failed: {PY} crit.py"]
    assert crit.pre_existing == "yes" and "exited 1" in crit.evidence
    assert crit.command.startswith(f"{PY} crit.py  (cwd: ")
    assert len(repo.git("worktree", "list").splitlines()) == 1


def test_a_gate_that_needs_the_app_is_checked_with_the_base_app_running(repo: Repo) -> None:
    """The base's gate is checked as the exerciser checked it: after START and HEALTH. Run on
    its own, the CHECK would fail at the base too (nothing listens) and pass for pre-existing."""
    port = free_port()
    repo.write("app.py", APP)
    repo.write(f"{SKILL_DIR}/SKILL.md", "# shop engineer\nSee VERIFICATION.md.\n")
    repo.write(
        f"{SKILL_DIR}/VERIFICATION.md",
        f"""\
START: {PY} app.py {port}
HEALTH: {get(port, "/health")}

## Exerciser Gates
- Saved records can be reloaded
  CHECK: {get(port, "/records/1")}
  EXPECT: output contains "first"
""",
    )
    repo.commit("base")
    repo.git("tag", "base")
    repo.write("app.py", APP.replace("/records/1", "/records/one"))
    repo.commit("branch: the record route moved")
    state, ex = exercised(repo)
    assert ex.status == "FAILED", ex.notes

    (d,) = debugger.run(state).diagnoses
    assert d.failure == "Exerciser gate failed: Saved records can be reloaded"
    assert d.pre_existing == "no", d.evidence
    assert "passes at the merge base" in d.evidence and "first" in d.evidence
    assert f"the app started with `{PY} app.py {port}`" in d.command


def test_base_app_that_never_comes_up_is_undetermined(repo: Repo) -> None:
    repo.write(f"{SKILL_DIR}/SKILL.md", "# shop engineer\nSee VERIFICATION.md.\n")
    repo.write(
        f"{SKILL_DIR}/VERIFICATION.md",
        f"""\
START: {PY} app.py
EXERCISE: {PY} drive.py

## Exerciser Gates
- Totals add up
  CHECK: {PY} totals.py
""",
    )
    repo.write("app.py", script(1))  # exits at once: never healthy at the base
    repo.write("drive.py", script(0))
    repo.write("totals.py", script(0))
    repo.commit("base")
    repo.git("tag", "base")
    repo.write("app.py", "import time\n\ntime.sleep(60)\n")
    repo.write("drive.py", script(4))
    repo.write("totals.py", script(5))
    repo.commit("branch")
    state, ex = exercised(repo)
    assert ex.status == "FAILED", ex.notes
    got = by_failure(debugger.run(state))
    assert [d.pre_existing for d in got.values()] == ["undetermined", "undetermined"]
    for d in got.values():
        assert "SERVICE_UNAVAILABLE" in d.evidence or "did not become healthy" in d.evidence


def test_tester_and_exerciser_failures_together(repo: Repo) -> None:
    """One debugger run answers for both: the test re-run alone, the gate by the exercise."""
    repo.write("pyproject.toml", '[tool.pytest.ini_options]\ntestpaths = ["tests"]\n')
    repo.write("tests/test_a.py", "def test_a():\n    assert 1 == 2\n")
    repo.write(f"{SKILL_DIR}/SKILL.md", "# shop engineer\nSee VERIFICATION.md.\n")
    repo.write(
        f"{SKILL_DIR}/VERIFICATION.md",
        f"## Exerciser Gates\n- Export works\n  CHECK: {PY} export.py\n",
    )
    repo.write("export.py", script(0))
    repo.commit("base")
    repo.git("tag", "base")
    repo.write("export.py", script(3))
    repo.commit("branch")
    state, _ = exercised(repo)
    toolchain = Toolchain(
        commands=(
            Command(kind="test", argv=("pytest",), source="tests", exists=True, tool="pytest"),
        )
    )
    assert state.scope is not None
    with git.worktree(str(repo.path), state.scope.new_commit) as wt:
        tested = tester.run(state.scope, toolchain, wt, 60)
    both = state.model_copy(update={"outcomes": (tested, *state.outcomes)})
    got = by_failure(debugger.run(both))
    assert {k: d.pre_existing for k, d in got.items()} == {
        "tests/test_a.py::test_a": "yes",
        "Exerciser gate failed: Export works": "no",
    }
