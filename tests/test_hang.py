"""A test that hangs costs the per-test limit once: the tester stops it, the exerciser does not
re-run it, and the debugger re-runs it at the merge base under a short limit of its own and says
so. Real repositories, real pytest and pytest-timeout."""

from __future__ import annotations

import time

import pytest
from conftest import Repo

from verify_dag import git
from verify_dag.models import RunState, SkillOutcome, VerifyRequest
from verify_dag.models.source import parse_source
from verify_dag.phases import debugger, engineer, exerciser, scope, tester, triage

LIMIT = 8.0  # the tester's per-test limit here (300 s by default)
HANGS = "def test_hangs():\n    while True:\n        pass\n"
QUICK = "def test_hangs():\n    pass\n"


def _verify(repo: Repo, at_base: str) -> tuple[RunState, SkillOutcome]:
    repo.write("pyproject.toml", '[tool.pytest.ini_options]\ntestpaths = ["tests"]\n')
    repo.write("tests/test_a.py", at_base + "\n\ndef test_fine():\n    pass\n")
    repo.commit("base")
    repo.git("tag", "base")
    repo.write("tests/test_a.py", HANGS + "\n\ndef test_fine():\n    assert True\n")
    sha = repo.commit("head: test_hangs hangs")
    request = VerifyRequest(source=parse_source(str(repo.path)), scope="branch", base="base")
    sc = scope.run(request)
    with git.worktree(request.repo, sc.new_commit) as wt:
        toolchain = triage.discover(wt)
        tested, _ = tester.run_with_coverage(sc, toolchain, wt, 120, per_test_timeout=LIMIT)
    state = RunState(
        run_id="t",
        request=request,
        scope=sc,
        toolchain=toolchain,
        engineer=engineer.run(str(repo.path), sha),
        static=SkillOutcome(skill="static-analysis", status="COMPLETED"),
        outcomes=(tested,),
    )
    return state, tested


@pytest.fixture
def short(monkeypatch: pytest.MonkeyPatch) -> float:
    monkeypatch.setattr(debugger, "HANG_LIMIT", 2.0)
    return 2.0


def test_a_hanging_test_is_not_re_run_at_its_limit(repo: Repo, short: float) -> None:
    state, tested = _verify(repo, QUICK)
    (hung,) = tested.findings
    assert hung.nodeid == "tests/test_a.py::test_hangs" and hung.timed_out == LIMIT, hung

    started = time.monotonic()
    exercised = exerciser.run(state)
    assert time.monotonic() - started < LIMIT  # nothing waited for the limit again
    (verified,) = exercised.verifications
    assert verified.status == "BLOCKED"
    assert verified.evidence.startswith("not re-run: the test hit the tester's per-test time")

    started = time.monotonic()
    (d,) = debugger.run(state.model_copy(update={"outcomes": (tested, exercised)})).diagnoses
    assert time.monotonic() - started < LIMIT
    assert d.pre_existing == "no", d.evidence
    assert d.evidence.startswith("passes at the merge base")
    assert "re-run under the debugger's short limit of 2s" in d.evidence
    assert "-o timeout=2" in d.command


def test_a_test_that_hangs_at_the_base_too_is_undetermined(repo: Repo, short: float) -> None:
    state, _ = _verify(repo, HANGS)
    started = time.monotonic()
    (d,) = debugger.run(state).diagnoses
    assert time.monotonic() - started < LIMIT
    assert d.pre_existing == "undetermined", d.evidence
    assert d.evidence.startswith("timed out at the merge base too, after 2s")
