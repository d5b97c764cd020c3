"""Phase 7c on real repositories: a real HTTP app started, probed and stopped; reported issues
re-run with the real tools."""

from __future__ import annotations

import signal
import socket
import sys
from pathlib import Path

import pytest
from conftest import Repo, running

from verify_dag import processes
from verify_dag.models import (
    Finding,
    Location,
    RunState,
    Scope,
    SkillOutcome,
    VerifyRequest,
)
from verify_dag.models.request import Depth
from verify_dag.models.source import parse_source
from verify_dag.phases import engineer, exerciser, static, tester, triage
from verify_dag.phases.exerciser import reproduce
from verify_dag.sandbox import Policy

PY = sys.executable
SKILL_DIR = ".claude/skills/shop-engineer"

APP = """\
import http.server
import sys


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = {"/health": b"ok", "/records/1": b'{"id": 1, "name": "first"}'}.get(self.path)
        if body is None:
            self.send_error(404)
            return
        self.send_response(200)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def get(port: int, path: str) -> str:
    # A probe in the repository's own terms: shell text run by bash, as HEALTH and CHECK are.
    return (
        f'{PY} -c "import urllib.request as u; '
        f"print(u.urlopen('http://127.0.0.1:{port}{path}', timeout=2).read().decode())\""
    )


def state_for(
    repo: Repo,
    sha: str,
    depth: Depth = "light",
    skip_visual: bool = False,
    static_findings: tuple[Finding, ...] = (),
    outcomes: tuple[SkillOutcome, ...] = (),
) -> RunState:
    request = VerifyRequest(
        source=parse_source(str(repo.path)),
        depth=depth,
        skip_visual=skip_visual,
    )
    static_outcome = SkillOutcome(
        skill="static-analysis", status="COMPLETED", findings=static_findings
    )
    return RunState(
        run_id="r",
        request=request,
        scope=Scope(mode="all", new_commit=sha, head_sha=sha),
        engineer=engineer.run(str(repo.path), sha),
        static=static_outcome,
        outcomes=outcomes,
    )


def app_repo(repo: Repo, verification: str) -> str:
    repo.write("app.py", APP)
    repo.write(f"{SKILL_DIR}/SKILL.md", "# shop engineer\nSee VERIFICATION.md.\n")
    repo.write(f"{SKILL_DIR}/VERIFICATION.md", verification)
    return repo.commit("app")


def test_app_started_exercised_and_gates_pass(repo: Repo) -> None:
    port = free_port()
    sha = app_repo(
        repo,
        f"""\
## App
START: {PY} app.py {port}
HEALTH: {get(port, "/health")}
EXERCISE: {get(port, "/records/1")}

## Exerciser Gates
- Saved records can be reloaded
  CHECK: {get(port, "/records/1")}
  EXPECT: exit 0; output contains "first"; output matches /"id": \\d+/
## Review Gates
- Tenant queries remain scoped
- Health answers plainly
  CHECK: {get(port, "/health")}
  EXPECT: output contains "ok"
""",
    )
    out = exerciser.run(state_for(repo, sha))
    assert out.status == "PASSED", out.notes
    assert "app started with" in out.notes and "healthy after" in out.notes
    assert "1/1 exercise command(s) succeeded" in out.notes
    assert [(g.kind, g.status, g.checker) for g in out.gates] == [
        ("exerciser", "PASS", "exerciser"),
        ("review", "NOT_CHECKED", "reviewer"),
        ("review", "PASS", "exerciser"),
    ]
    assert out.findings == ()
    assert out.notes.endswith("visual lens active: nothing rendered (exercised through CLI/API)")
    with socket.socket() as s:  # the app is stopped: nothing listens on its port any more
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port))


def test_failing_gate_and_exercise_make_it_failed(repo: Repo) -> None:
    port = free_port()
    sha = app_repo(
        repo,
        f"""\
START: {PY} app.py {port}
HEALTH: {get(port, "/health")}
EXERCISE: {get(port, "/records/2")}
## Exerciser Gates
- Record 1 has an email
  CHECK: {get(port, "/records/1")}
  EXPECT: output contains "email"
""",
    )
    out = exerciser.run(state_for(repo, sha))
    assert out.status == "FAILED"
    gate = out.gates[0]
    assert gate.status == "FAIL" and 'output lacks "email"' in gate.evidence
    assert '"name": "first"' in gate.evidence
    titles = sorted(f.title for f in out.findings)
    assert titles[0].startswith("Exercise command failed:") and "404" in out.findings[0].description
    assert titles[1] == "Exerciser gate failed: Record 1 has an email"
    assert all(f.severity >= 7 and f.source == "exerciser" for f in out.findings)


def test_unhealthy_app_is_service_unavailable_and_its_group_is_gone(
    repo: Repo, tmp_path: Path
) -> None:
    sha = app_repo(
        repo,
        """\
START: echo starting up; sleep 60.4242 & sleep 60.4242
HEALTH: echo not yet >&2; exit 7
START_TIMEOUT: 1
## Exerciser Gates
- Records reload
  CHECK: true
## Review Gates
- Scoped
""",
    )
    out = exerciser.run(state_for(repo, sha))
    assert out.status == "BLOCKED" and out.notes.startswith("SERVICE_UNAVAILABLE: ")
    assert "not ok within 1s" in out.notes and "exit 7: not yet" in out.notes
    assert "starting up" in out.notes  # the app's own output is evidence
    assert [(g.kind, g.status) for g in out.gates] == [
        ("exerciser", "BLOCKED"),
        ("review", "NOT_CHECKED"),
    ]
    assert running("sleep 60.4242") == []


def test_app_that_exits_is_service_unavailable(repo: Repo) -> None:
    sha = app_repo(repo, f"START: {PY} -c \"raise SystemExit('no database')\"\nHEALTH: false\n")
    out = exerciser.run(state_for(repo, sha))
    assert out.status == "BLOCKED" and "exited 1 before it was healthy" in out.notes
    assert "no database" in out.notes


def test_the_app_runs_under_the_limits_of_every_repository_command(
    repo: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The app under test is repository code like any other: processes's resource limits, a scrubbed
    environment and the sandbox's mark on its processes."""
    monkeypatch.setenv(processes.MEMORY_ENV, "777")
    monkeypatch.setenv(processes.FILE_SIZE_ENV, "5")
    monkeypatch.setenv("SHOP_API_TOKEN", "not-for-the-app")
    said = (
        "core=$(ulimit -c) data=$(ulimit -d) file=$(ulimit -f) "
        "token=${SHOP_API_TOKEN:-none} marked=${VERIFY_DAG_SANDBOX_OWNER:+yes}"
    )
    sha = app_repo(repo, f'START: echo "{said}"; exit 3\nHEALTH: false\n')
    out = exerciser.run(state_for(repo, sha))
    assert out.status == "BLOCKED" and "exited 3 before it was healthy" in out.notes
    assert f"core=0 data={777 * 1024} file={5 * 1024} token=none marked=yes" in out.notes


def test_a_background_command_is_killed_at_its_time_limit_and_keeps_its_tail(
    tmp_path: Path,
) -> None:
    app = processes.start_background(
        ["bash", "-c", "echo hello; exec sleep 60.4343"],
        cwd=tmp_path,
        timeout=0.5,
        cap=3,
        sandbox=Policy(),
    )
    try:
        assert app.proc.wait(timeout=10) == -signal.SIGKILL
    finally:
        app.stop()
    assert app.output() == "lo\n"
    assert running("sleep 60.4343") == []


def test_nothing_declared_is_no_exercise_strategy(repo: Repo) -> None:
    repo.write("a.py", "x = 1\n")
    sha = repo.commit()
    judgement = SkillOutcome(
        skill="reviewer",
        status="COMPLETED",
        findings=(
            Finding(
                title="Race in cache",
                severity=6,
                description="d",
                source="reviewer",
                issue_class="correctness",
                location=Location(path="a.py", line=1),
            ),
        ),
    )
    out = exerciser.run(state_for(repo, sha, outcomes=(judgement,)))
    # The scope names no changed code: nothing is derived, and nothing is to be exercised.
    assert out.status == "BLOCKED" and not out.findings
    assert out.notes.startswith(
        "NO_EXERCISE_STRATEGY: the change touches no code (documentation, tests or "
        "configuration only): nothing to exercise"
    )
    assert "verified 1 of 1 reported issue(s) (1 BLOCKED)" in out.notes
    assert out.gates == ()
    assert out.verifications[0].evidence.startswith("needs judgement")


@pytest.mark.parametrize(
    ("depth", "skip", "note"),
    [
        ("light", False, "visual lens active: nothing rendered (exercised through CLI/API)"),
        ("light", True, "visual lens suppressed"),
        ("deep", False, "visual lens inactive"),
    ],
)
def test_visual_lens(depth: Depth, skip: bool, note: str) -> None:
    request = VerifyRequest(
        source=parse_source("/nonexistent"),
        depth=depth,
        skip_visual=skip,
    )
    assert exerciser.lens(request) == note


def test_never_raises(tmp_path: Path) -> None:
    no_scope = exerciser.run(
        RunState(run_id="r", request=VerifyRequest(source=parse_source(str(tmp_path))))
    )
    assert no_scope.status == "BLOCKED" and no_scope.notes.startswith("NO_COMMIT")
    broken = RunState(
        run_id="r",
        request=VerifyRequest(source=parse_source(str(tmp_path / "missing"))),
        scope=Scope(mode="all", new_commit="a" * 40),
    )
    out = exerciser.run(broken)
    assert out.status == "BLOCKED" and out.notes.startswith("EXERCISER_ERROR: ")


def _finding(title: str, path: str | None, line: int | None, source: str, **extra: str) -> Finding:
    return Finding(
        title=title,
        severity=7,
        description="d",
        source=source,
        issue_class="correctness",
        location=Location(path=path, line=line) if path else None,
        **extra,
    )


def test_issue_verification(repo: Repo) -> None:
    repo.write("pyproject.toml", '[tool.pytest.ini_options]\ntestpaths = ["tests"]\n')
    repo.write("src/calc.py", "def mul(a, b):\n    unused = 1\n    return a * b\n")
    repo.write(
        "tests/test_calc.py",
        "def test_ok():\n    assert 1 + 1 == 2\n\n\ndef test_bad():\n    assert 2 + 2 == 5\n",
    )
    repo.write("old.py", "x = 1\n")
    repo.commit("one")
    repo.git("rm", "-q", "old.py")
    sha = repo.commit("drop old.py")
    static_findings = (
        _finding(
            "ruff F841: unused", "src/calc.py", 2, "static-analysis", tool="ruff", rule="F841"
        ),
        _finding(
            "ruff F841: elsewhere", "src/calc.py", 3, "static-analysis", tool="ruff", rule="F841"
        ),
        _finding(
            "ruff E501: in a deleted file", "old.py", 1, "static-analysis", tool="ruff", rule="E501"
        ),
    )
    tests = SkillOutcome(
        skill="tester",
        status="FAILED",
        findings=(
            _finding(
                "Test failed: tests/test_calc.py::test_bad",
                "tests/test_calc.py",
                5,
                "tester",
                nodeid="tests/test_calc.py::test_bad",
            ),
            _finding(
                "Test failed: tests/test_calc.py::test_ok",
                "tests/test_calc.py",
                1,
                "tester",
                nodeid="tests/test_calc.py::test_ok",
            ),
            _finding(
                "Test failed: tests/test_calc.py::test_gone",
                None,
                None,
                "tester",
                nodeid="tests/test_calc.py::test_gone",
            ),
        ),
    )
    review = SkillOutcome(
        skill="reviewer",
        status="COMPLETED",
        findings=(
            _finding("Overflow in mul", "src/calc.py", 3, "reviewer"),
            _finding("Off the end", "src/calc.py", 40, "reviewer"),
            _finding("Escapes", "../outside.py", 1, "reviewer"),
        ),
    )
    out = exerciser.run(
        state_for(repo, sha, static_findings=static_findings, outcomes=(tests, review))
    )
    got = {v.title: (v.status, v.evidence) for v in out.verifications}
    # Static analysis's own findings are never "confirmed" by running the same tool again.
    same_tool = (
        "a static-analysis finding: re-running ruff on the same code is no independent "
        "evidence, and there is no runtime behaviour to reproduce"
    )
    for title in ("ruff F841: unused", "ruff F841: elsewhere", "ruff E501: in a deleted file"):
        assert got[title] == ("NOT_APPLICABLE", same_tool), title
    assert got["Test failed: tests/test_calc.py::test_bad"][0] == "CONFIRMED"
    assert "1 failed" in got["Test failed: tests/test_calc.py::test_bad"][1]
    assert got["Test failed: tests/test_calc.py::test_ok"][0] == "NOT_REPRODUCED"
    assert got["Test failed: tests/test_calc.py::test_gone"][0] == "NOT_APPLICABLE"
    assert got["Overflow in mul"] == (
        "BLOCKED",
        "needs judgement; no deterministic reproduction (reviewer finding)",
    )
    assert got["Off the end"][0] == "NOT_APPLICABLE" and "(3 lines)" in got["Off the end"][1]
    assert got["Escapes"][0] == "NOT_APPLICABLE"
    assert all(v.evidence for v in out.verifications)
    assert "verified 9 of 9 reported issue(s)" in out.notes


def test_attempts_are_capped(repo: Repo, monkeypatch: pytest.MonkeyPatch) -> None:
    repo.write("a.py", "x = 1\n")
    sha = repo.commit()
    many = tuple(_finding(f"judgement {n}", "a.py", 1, "reviewer") for n in range(5))
    monkeypatch.setattr(reproduce, "MAX_ATTEMPTS", 3)
    out = exerciser.run(
        state_for(
            repo, sha, outcomes=(SkillOutcome(skill="reviewer", status="COMPLETED", findings=many),)
        )
    )
    assert len(out.verifications) == 3
    assert "verified 3 of 5 reported issue(s)" in out.notes and "2 not attempted" in out.notes


def test_findings_as_the_real_phases_report_them(scenario: Repo) -> None:
    """static and tester run for real on the acceptance scenario; the exerciser reproduces both."""
    sha = scenario.head()
    base = scenario.git("rev-parse", "base")
    from verify_dag import git
    from verify_dag.phases import scope as scope_phase

    sc = scope_phase.run(
        VerifyRequest(source=parse_source(str(scenario.path)), scope="branch", base="base")
    )
    assert sc.merge_base == base
    with git.worktree(str(scenario.path), sha) as wt:
        chain = triage.discover(wt)
        lint = static.run(sc, chain, wt, 120)
        tests = tester.run(sc, chain, wt, 120)
    state = RunState(
        run_id="r",
        request=VerifyRequest(source=parse_source(str(scenario.path))),
        scope=sc,
        engineer=engineer.run(str(scenario.path), sha),
        static=lint,
        outcomes=(tests,),
    )
    out = exerciser.run(state)
    statuses = {v.title.split(":")[0]: v.status for v in out.verifications}
    assert statuses["ruff F841"] == "NOT_APPLICABLE"  # ruff again on the same code proves nothing
    assert statuses["Test failed"] == "CONFIRMED"
    # No VERIFICATION.md: the changed module is imported (docs/gates.md).
    assert out.status == "PASSED" and "import calc: ok" in out.notes


def test_a_failing_test_re_runs_through_tox_as_the_tester_ran_it(
    repo: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The failure depends on tox's set_env: re-run outside tox it would pass, and the exerciser
    would call a real failure NOT_REPRODUCED."""
    monkeypatch.setenv("VERIFY_DAG_CACHE", str(tmp_path / "cache"))
    repo.write(
        "tox.ini",
        "[tox]\nenvlist = py\nskipsdist = true\n\n[testenv]\nskip_install = true\n"
        "deps = pytest\nset_env =\n    FROM_TOX = yes\ncommands = pytest {posargs}\n",
    )
    repo.write(
        "tests/test_env.py",
        "import os\n\n\ndef test_only_under_tox():\n"
        "    assert os.environ.get('FROM_TOX') != 'yes'\n",
    )
    sha = repo.commit("a test that fails in the tox env")
    nodeid = "tests/test_env.py::test_only_under_tox"
    tests = SkillOutcome(
        skill="tester",
        status="FAILED",
        findings=(
            _finding(f"Test failed: {nodeid}", "tests/test_env.py", 4, "tester", nodeid=nodeid),
        ),
    )
    out = exerciser.run(state_for(repo, sha, outcomes=(tests,)))
    (verified,) = out.verifications
    assert verified.status == "CONFIRMED", verified.evidence
    assert "1 failed" in verified.evidence
