"""verify-dag completion (docs/completion.md): the four steps as functions, the chain on the
embedded worker, iterations, quick mode, the CLI's exit codes, and --completion in the verify
DAG."""

from __future__ import annotations

import fcntl
import json
import os
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import BRANCH, Repo, calc_base, run_cli, verify_json

from verify_dag.cli import completion as cli_completion
from verify_dag.cli import main
from verify_dag.completion import artifacts, flow
from verify_dag.completion import report as vreport
from verify_dag.completion.models import CompletionJob, Dispatch
from verify_dag.errors import FatalError, UsageError
from verify_dag.models import RunState, VerifyRequest
from verify_dag.models.source import parse_source
from verify_dag.phases import exerciser
from verify_dag.phases.exerciser import criterion as steps
from verify_dag.phases.exerciser.criterion import Execution

ARTIFACTS = (
    "extracted_completion.json",
    "execution_result.json",
    "verify_result.json",
    "VERIFY_REPORT.md",
    "dispatches.jsonl",
)
EXECUTION_FIELDS = {
    "skipped",
    "skip_reasons",
    "skip_reason",
    "exit_code",
    "stdout",
    "stderr",
    "duration_ms",
    "timed_out",
    "truncated",
}
VERIFY_FIELDS = {
    "verdict",
    "reason",
    "exit_code",
    "duration_ms",
    "truncated",
    "timed_out",
    "skipped",
}


def make_run(tmp_path: Path, content: str | bytes | None, run_id: str = "r1") -> Path:
    d = tmp_path / "runs" / run_id
    d.mkdir(parents=True)
    if content is not None:
        write_scope(d, content)
    return d


def write_scope(d: Path, content: str | bytes) -> None:
    path = d / "parsed_scope.json"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")


def scope(completion: object) -> str:
    return json.dumps({"goal": "the change is done", "completion": completion})


def load(d: Path, name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((d / name).read_text(encoding="utf-8"))
    return data


def rows(d: Path) -> list[dict[str, Any]]:
    text = (d / "dispatches.jsonl").read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines()]


def verify(d: Path, **kwargs: Any) -> Any:
    return cli_completion.verify(d.name, runs_dir=str(d.parent), **kwargs)


def iteration_sections(text: str) -> dict[int, str]:
    parts = text.split("\n## Iteration ")[1:]
    return {int(p.split("\n", 1)[0]): p for p in parts}


# --- step 1: validation, without Celery ------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "code"),
    [
        (None, "missing_file"),
        (b"{not json", "malformed_json"),
        (b"\xff\xfe{}", "malformed_json"),
        (b"[1, 2]", "malformed_json"),
        (b'{"goal": "x"}', "missing_field"),
        (scope(5).encode(), "not_a_string"),
        (scope(None).encode(), "not_a_string"),
        (scope(["ls"]).encode(), "not_a_string"),
        (scope("").encode(), "empty"),
        (scope(" \t\n ").encode(), "empty"),
        (scope("x" * 501).encode(), "too_long"),
        (scope("echo a\necho b").encode(), "multi_line"),
        (scope("echo a\recho b").encode(), "multi_line"),
        (scope("echo \x00").encode(), "nul_byte"),
    ],
)
def test_each_validation_error(raw: bytes | None, code: str) -> None:
    extracted = steps.extract(raw)
    assert [e.code for e in extracted.errors] == [code]
    assert all(e.message for e in extracted.errors)


def test_valid_criterion_is_stripped_and_500_characters_are_allowed() -> None:
    command = "true " + "x" * 495
    extracted = steps.extract(scope(f"  {command}\n").encode(), source_sha256="abc", iteration=3)
    assert extracted.errors == ()
    assert extracted.completion == command and len(command) == steps.MAX_LENGTH
    assert extracted.source_sha256 == "abc" and extracted.iteration == 3


def test_every_error_is_reported_not_just_the_first() -> None:
    errors = steps.validate("echo a\n" + "x" * 600)
    assert [e.code for e in errors] == ["too_long", "multi_line"]


@pytest.mark.parametrize(
    ("execution", "verdict", "reason"),
    [
        (Execution(skipped=False, exit_code=0), "pass", "completion command exited 0"),
        (Execution(skipped=False, exit_code=2), "fail", "exited 2"),
        (
            Execution(skipped=False, exit_code=None, timed_out=True),
            "fail",
            "timed out (30s budget)",
        ),
        (
            Execution(skipped=True, skip_reasons=("a", "b"), skip_reason="a; b"),
            "fail",
            "skipped: a; b",
        ),
        (
            Execution(skipped=False, exit_code=0, truncated=True),
            "pass",
            "completion command exited 0",
        ),
    ],
)
def test_verdict_rule(execution: Execution, verdict: str, reason: str) -> None:
    result = steps.classify(execution)
    assert (result.verdict, result.reason) == (verdict, reason)
    assert result.truncated == execution.truncated and result.skipped == execution.skipped


# --- the chain on the embedded worker ----------------------------------------------------------


def test_pass_writes_every_artifact_and_four_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_API_TOKEN", "s3cret-value-123")
    d = make_run(tmp_path, scope('pwd; echo "token=${MY_API_TOKEN:-unset}"'))
    out = verify(d)
    assert (out.verdict, out.reason, out.iteration, out.mode) == (
        "pass",
        "completion command exited 0",
        1,
        "full",
    )
    assert out.report == str(d / "VERIFY_REPORT.md")
    assert all((d / name).is_file() for name in ARTIFACTS)
    extracted = load(d, "extracted_completion.json")
    assert extracted["errors"] == [] and extracted["completion"].startswith("pwd;")
    execution = load(d, "execution_result.json")
    assert set(execution) >= EXECUTION_FIELDS
    # cwd is the run directory; the environment has none of our secrets.
    assert execution["stdout"] == f"{d}\ntoken=unset\n"
    assert execution["cwd"] == str(d) and execution["exit_code"] == 0
    assert not execution["skipped"] and not execution["timed_out"]
    result = load(d, "verify_result.json")
    assert set(result) == VERIFY_FIELDS
    assert result["verdict"] == "pass" and result["exit_code"] == 0
    got = rows(d)
    assert [r["step"] for r in got] == [
        "step1.iter1.extract",
        "step2.iter1.execute",
        "step3.iter1.classify",
        "step4.iter1.report",
    ]
    assert [r["task"] for r in got] == [
        f"verify_dag.completion.{s}" for s in ("extract", "execute", "classify", "report")
    ]
    assert {r["mode"] for r in got} == {"full"} and {r["iteration"] for r in got} == {1}
    assert [r["outcome"] for r in got] == ["ok", "exit 0", "pass", "pass"]
    assert all(r["task_id"] and "mode=full" in r["description"] for r in got)
    for r in got:
        Dispatch.model_validate(r)


def test_only_the_execute_task_starts_a_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from celery import current_task

    from verify_dag import processes

    calls: list[str] = []
    real = processes.run

    def spy(*args: Any, **kwargs: Any) -> processes.Result:
        calls.append(current_task.name if current_task else "no task")
        return real(*args, **kwargs)

    monkeypatch.setattr(processes, "run", spy)
    verify(make_run(tmp_path, scope("true")))
    assert calls == ["verify_dag.completion.execute"]


def test_report_has_the_seven_sections_and_the_verdict_in_the_summary(tmp_path: Path) -> None:
    d = make_run(tmp_path, scope("echo out; echo err >&2"))
    verify(d)
    text = (d / "VERIFY_REPORT.md").read_text(encoding="utf-8")
    headings = [line[4:] for line in text.splitlines() if line.startswith("### ")]
    assert (
        headings
        == list(vreport.SECTIONS)
        == [
            "Summary",
            "Completion command",
            "Execution result",
            "Stdout sample",
            "Stderr sample",
            "Verdict reasoning",
            "Recommendations",
        ]
    )
    summary = text.split("### Summary", 1)[1].split("### ", 1)[0]
    assert "**Verdict: pass** — completion command exited 0" in summary
    assert "```\necho out; echo err >&2\n```" in text
    assert "### Stdout sample\n\n```\nout\n```" in text
    assert "### Stderr sample\n\n```\nerr\n```" in text
    assert "$" not in text  # every placeholder was substituted


def test_fail_on_a_non_zero_exit(tmp_path: Path) -> None:
    d = make_run(tmp_path, scope("echo boom >&2; exit 3"))
    out = verify(d)
    assert (out.verdict, out.reason) == ("fail", "exited 3")
    execution = load(d, "execution_result.json")
    assert execution["exit_code"] == 3 and execution["stderr"] == "boom\n"
    assert load(d, "verify_result.json")["verdict"] == "fail"
    text = (d / "VERIFY_REPORT.md").read_text(encoding="utf-8")
    assert "**Verdict: fail** — exited 3" in text
    assert "The command exited 3: read the stderr sample" in text


def test_timeout(tmp_path: Path) -> None:
    d = make_run(tmp_path, scope("echo started; sleep 20"))
    began = time.monotonic()
    out = verify(d, timeout=0.5)
    assert time.monotonic() - began < 10
    assert (out.verdict, out.reason) == ("fail", "timed out (0.5s budget)")
    execution = load(d, "execution_result.json")
    assert execution["timed_out"] and execution["exit_code"] is None
    assert execution["timeout_s"] == 0.5 and execution["stdout"] == "started\n"
    result = load(d, "verify_result.json")
    assert result["timed_out"] and result["verdict"] == "fail"
    assert "was killed with its whole process group" in (d / "VERIFY_REPORT.md").read_text()


def test_truncation_is_reported_but_does_not_fail(tmp_path: Path) -> None:
    d = make_run(
        tmp_path,
        scope("head -c 150000 /dev/zero | tr '\\0' x; head -c 120000 /dev/zero | tr '\\0' y >&2"),
    )
    out = verify(d)
    assert out.verdict == "pass"
    execution = load(d, "execution_result.json")
    assert execution["truncated"] is True
    assert execution["stdout"] == "x" * 100_000 and execution["stderr"] == "y" * 100_000
    assert load(d, "verify_result.json")["truncated"] is True
    text = (d / "VERIFY_REPORT.md").read_text(encoding="utf-8")
    assert (
        "| truncated | yes (cap 100000 bytes per stream; the samples show what was kept) |" in text
    )
    assert "characters not shown: see execution_result.json" in text
    assert len(text) < 30_000


@pytest.mark.parametrize(
    ("content", "code"),
    [
        ("{not json", "malformed_json"),
        ('"just a string"', "malformed_json"),
        ('{"goal": "x"}', "missing_field"),
        (scope(42), "not_a_string"),
        (scope("   "), "empty"),
        (scope("x" * 501), "too_long"),
        (scope("echo a\necho b"), "multi_line"),
    ],
)
def test_validation_errors_skip_execution(tmp_path: Path, content: str, code: str) -> None:
    d = make_run(tmp_path, content)
    out = verify(d)
    extracted = load(d, "extracted_completion.json")
    assert [e["code"] for e in extracted["errors"]] == [code]
    execution = load(d, "execution_result.json")
    assert execution["skipped"] is True and execution["exit_code"] is None
    assert execution["skip_reasons"] == [extracted["errors"][0]["message"]]
    assert execution["skip_reason"] == execution["skip_reasons"][0]
    assert execution["stdout"] == "" and execution["cwd"] is None
    assert out.verdict == "fail" and out.reason == f"skipped: {execution['skip_reason']}"
    assert [r["outcome"] for r in rows(d)] == [f"errors: {code}", "skipped", "fail", "fail"]
    text = (d / "VERIFY_REPORT.md").read_text(encoding="utf-8")
    assert f"- `{code}`: " in text and "_Not run (skipped)._" in text
    assert "Fix `parsed_scope.json`" in text


def test_missing_file_at_step_one(tmp_path: Path) -> None:
    # The CLI refuses a run without parsed_scope.json (step 0); step 1 still records the
    # error if the file went away in between.
    d = make_run(tmp_path, None)
    job = CompletionJob(run_id="r1", run_dir=str(d), iteration=1)
    assert flow.extract(job) == "errors: missing_file"
    assert flow.execute(job) == "skipped"
    assert flow.classify(job) == "fail"
    assert flow.render(job).reason == ("skipped: parsed_scope.json not found in the run directory")
    with pytest.raises(UsageError, match=r"parsed_scope\.json not found"):
        verify(d)


def test_iterations(tmp_path: Path) -> None:
    d = make_run(tmp_path, scope("echo one"))
    assert verify(d).iteration == 1
    first = (d / "VERIFY_REPORT.md").read_text(encoding="utf-8")
    extracted = (d / "extracted_completion.json").read_bytes()

    out = verify(d)  # parsed_scope.json unchanged: step 1 is not re-run
    assert (out.iteration, out.verdict) == (2, "pass")
    assert (d / "extracted_completion.json").read_bytes() == extracted
    assert [r["step"] for r in rows(d)][4:] == [
        "step2.iter2.execute",
        "step3.iter2.classify",
        "step4.iter2.report",
    ]
    text = (d / "VERIFY_REPORT.md").read_text(encoding="utf-8")
    assert text.startswith(first)  # the earlier iteration is never rewritten
    assert sorted(iteration_sections(text)) == [1, 2]
    assert "extracted in iteration 1: the file is unchanged" in iteration_sections(text)[2]

    write_scope(d, scope("echo two; exit 1"))  # changed: step 1 runs again
    out = verify(d)
    assert (out.iteration, out.verdict, out.reason) == (3, "fail", "exited 1")
    assert [r["step"] for r in rows(d)][7:] == [
        "step1.iter3.extract",
        "step2.iter3.execute",
        "step3.iter3.classify",
        "step4.iter3.report",
    ]
    assert load(d, "extracted_completion.json")["iteration"] == 3
    sections = iteration_sections((d / "VERIFY_REPORT.md").read_text(encoding="utf-8"))
    assert sorted(sections) == [1, 2, 3]
    assert "**Verdict: fail** — exited 1" in sections[3]
    assert "**Verdict: pass**" in sections[2]
    assert all(s.count("### ") == 7 for s in sections.values())


def test_quick_mode(tmp_path: Path) -> None:
    d = make_run(tmp_path, scope("echo quick"))
    verify(d)
    out = verify(d, mode="quick")
    assert (out.iteration, out.mode, out.verdict) == (2, "quick", "pass")
    quick = rows(d)[4:]
    assert len(quick) == 1
    assert quick[0]["step"] == "verifier.quick" and quick[0]["mode"] == "quick"
    assert quick[0]["task"] == "verify_dag.completion.quick"
    assert "mode=quick" in quick[0]["description"] and quick[0]["iteration"] == 2
    assert all((d / name).is_file() for name in ARTIFACTS)
    assert set(load(d, "execution_result.json")) >= EXECUTION_FIELDS
    assert set(load(d, "verify_result.json")) == VERIFY_FIELDS
    section = iteration_sections((d / "VERIFY_REPORT.md").read_text(encoding="utf-8"))[2]
    # The same schema as full mode, and the report counts the quick iteration.
    assert [ln[4:] for ln in section.splitlines() if ln.startswith("### ")] == list(
        vreport.SECTIONS
    )
    assert "| mode | quick |" in section and "| mode usage | full 1, quick 1 |" in section
    assert "verify in full mode next time" in section
    verify(d)
    third = iteration_sections((d / "VERIFY_REPORT.md").read_text(encoding="utf-8"))[3]
    assert "| mode usage | full 2, quick 1 |" in third


def test_dispatch_rows_are_not_duplicated_and_other_stages_are_passed_over(tmp_path: Path) -> None:
    d = make_run(tmp_path, scope("true"))
    (d / "dispatches.jsonl").write_text(
        json.dumps({"step": "reviewer.step1", "iteration": 9}) + "\nnot json\n", encoding="utf-8"
    )
    job = CompletionJob(run_id="r1", run_dir=str(d), iteration=1)
    flow.record(job, "extract", "verify_dag.completion.extract", "task-1", "ok")
    flow.record(job, "extract", "verify_dag.completion.extract", "task-1", "ok")  # redelivered
    assert [r["step"] for r in artifacts.dispatches(d)] == ["step1.iter1.extract"]
    assert flow.plan_iteration(d) == (2, True)  # no extraction on disk yet: step 1 runs


def test_a_redelivered_report_step_replaces_its_own_section(tmp_path: Path) -> None:
    d = make_run(tmp_path, scope("echo hi"))
    verify(d)
    verify(d)
    job = CompletionJob(run_id="r1", run_dir=str(d), iteration=2)
    before = (d / "VERIFY_REPORT.md").read_text(encoding="utf-8")
    flow.render(job)
    after = (d / "VERIFY_REPORT.md").read_text(encoding="utf-8")
    assert sorted(iteration_sections(after)) == [1, 2]
    assert after.split("## Iteration 2")[0] == before.split("## Iteration 2")[0]


def test_a_step_that_fails_ends_the_run_with_exit_3(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    d = make_run(tmp_path, scope("true"))
    (d / "extracted_completion.json").mkdir()  # step 1 cannot write its artifact
    # --mode: run with `pytest -s` at a terminal, the mode gate would otherwise ask.
    rc = main(["completion", "r1", f"--runs-dir={d.parent}", "--mode=full"])
    assert rc == 3
    err = capsys.readouterr().err
    assert err.startswith("verify-dag: error: completion extract failed: IsADirectoryError")
    assert [(r["step"], r["outcome"][:6]) for r in rows(d)] == [("step1.iter1.extract", "error:")]


def test_one_run_at_a_time_per_run_directory(tmp_path: Path) -> None:
    d = make_run(tmp_path, scope("true"))
    with artifacts.locked(d), pytest.raises(FatalError, match="another verify-dag completion"):
        verify(d)


@pytest.mark.parametrize("run_id", ["../r1", ".hidden", "a/b", "", "-x"])
def test_run_ids_cannot_leave_the_runs_directory(tmp_path: Path, run_id: str) -> None:
    with pytest.raises(UsageError, match="not a run id"):
        artifacts.run_dir(str(tmp_path), run_id)


def test_default_runs_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(artifacts.RUNS_ENV, raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert artifacts.run_dir(None, "r1") == tmp_path / "data/verify-dag/completion-runs/r1"
    monkeypatch.delenv("XDG_DATA_HOME")
    assert artifacts.default_dir() == Path.home() / ".local/share/verify-dag/completion-runs"
    monkeypatch.setenv(artifacts.RUNS_ENV, str(tmp_path / "mine"))
    assert artifacts.run_dir(None, "r1") == tmp_path / "mine/r1"


# --- the CLI as a subprocess ----------------------------------------------------------------------


def test_cli_exit_codes(tmp_path: Path) -> None:
    ok = make_run(tmp_path, scope("echo fine"), "ok")
    make_run(tmp_path, scope("exit 4"), "failing")
    make_run(tmp_path, scope(""), "invalid")
    make_run(tmp_path, None, "no-scope")
    runs = f"--runs-dir={tmp_path / 'runs'}"

    passed = run_cli("completion", "ok", runs, "--mode=full")
    assert passed.returncode == 0, passed.stderr
    assert passed.stdout.splitlines() == [
        "pass: completion command exited 0 (run ok, iteration 1, mode full)",
        f"report: {ok / 'VERIFY_REPORT.md'}",
    ]
    failed = run_cli("completion", "failing", runs, "--mode=quick")
    assert failed.returncode == 1
    assert failed.stdout.startswith("fail: exited 4 (run failing, iteration 1, mode quick)")
    skipped = run_cli("completion", "invalid", runs, "--mode=full")
    assert skipped.returncode == 1
    assert skipped.stdout.startswith("fail: skipped: the completion field is empty")

    for args, needle in [
        (("no-scope", runs, "--mode=full"), "parsed_scope.json not found in "),
        (("missing", runs, "--mode=full"), "no run directory "),
        (("../ok", runs, "--mode=full"), "not a run id: '../ok'"),
        (("ok", runs, "--mode=fast"), "argument --mode: invalid choice"),
    ]:
        proc = run_cli("completion", *args)
        assert proc.returncode == 2, (args, proc.stderr)
        assert proc.stderr.startswith("verify-dag: error: ") and needle in proc.stderr
        assert len(proc.stderr.splitlines()) == 1

    # Another run holding the run directory: the verification cannot proceed (exit 3).
    with open(ok / artifacts.LOCK, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        busy = run_cli("completion", "ok", runs, "--mode=full")
    assert busy.returncode == 3
    assert "another verify-dag completion is running" in busy.stderr

    env = {k: v for k, v in os.environ.items() if k != artifacts.RUNS_ENV}
    env["XDG_DATA_HOME"] = str(tmp_path / "data")
    dflt = tmp_path / "data" / "verify-dag" / "completion-runs" / "dflt"
    dflt.mkdir(parents=True)
    write_scope(dflt, scope("true"))
    assert run_cli("completion", "dflt", "--mode=full", env=env).returncode == 0

    helptext = run_cli("completion", "--help").stdout
    assert "0  pass" in helptext and "3  the verification itself errored" in helptext


# --- --completion in the verify DAG -----------------------------------------------------------


def clean_branch(repo: Repo) -> Repo:
    """A branch whose lint and tests pass: only the completion criterion can fail the run."""
    calc_base(repo)
    repo.write(
        "src/calc.py", "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a * b\n"
    )
    repo.commit("calc: mul")
    return repo


def exerciser_result(doc: dict[str, Any]) -> dict[str, Any]:
    return next(s for s in doc["skillResults"] if s["skill"] == "exerciser")


def test_verify_dag_runs_a_passing_completion_criterion(repo: Repo, tmp_path: Path) -> None:
    # cwd is the worktree of the verified commit: the branch's mul() is there.
    criterion = "grep -q 'def mul' src/calc.py && echo found mul"
    rc, doc = verify_json(clean_branch(repo), tmp_path, *BRANCH, f"--completion={criterion}")
    assert doc["customGates"]["exerciser"] == [
        {
            "rule": f"Completion criterion: {criterion}",
            "status": "PASS",
            "checker": "completion",
            "evidence": f"`{criterion}`: pass: completion command exited 0; output: found mul",
        }
    ]
    ex = exerciser_result(doc)
    assert ex["status"] == "PASSED"  # the criterion is a declared way to exercise the change
    assert "completion criterion: pass (completion command exited 0)" in ex["notes"]
    # No issue, but the reviewer did not run (no model backend here): exit 4, not a pass.
    assert doc["issues"] == [] and rc == 4


def test_verify_dag_reports_a_failing_completion_criterion(repo: Repo, tmp_path: Path) -> None:
    rc, doc = verify_json(
        clean_branch(repo), tmp_path, *BRANCH, "--completion=echo not yet >&2; test -f CHANGELOG.md"
    )
    gate = doc["customGates"]["exerciser"][0]
    assert (gate["status"], gate["checker"]) == ("FAIL", "completion")
    assert gate["evidence"] == (
        "`echo not yet >&2; test -f CHANGELOG.md`: fail: exited 1; output: not yet"
    )
    ex = exerciser_result(doc)
    assert ex["status"] == "FAILED"
    assert ex["notes"].startswith("FAILED: the completion criterion failed")
    [issue] = doc["issues"]
    assert issue["title"] == "Completion criterion failed: echo not yet >&2; test -f CHANGELOG.md"
    assert (issue["severity"], issue["class"]) == (8, "correctness")
    assert rc == 1  # severity 8 >= the default --fail-on 7


def test_verify_dag_completion_on_the_scenario(scenario: Repo, tmp_path: Path) -> None:
    # The acceptance scenario's failing test, as a completion criterion.
    _, doc = verify_json(
        scenario, tmp_path, *BRANCH, "--completion=python3 -m pytest -q -p no:cacheprovider tests"
    )
    gate = doc["customGates"]["exerciser"][0]
    assert gate["status"] == "FAIL" and "fail: exited 1" in gate["evidence"]
    assert "1 failed, 1 passed" in gate["evidence"]
    assert any(
        i["title"].startswith("Completion criterion failed: python3 -m pytest")
        for i in doc["issues"]
    )


@pytest.mark.parametrize(
    ("value", "needle"),
    [
        ("", "the completion field is empty (empty)"),
        ("echo a\necho b", "(multi_line)"),
        ("x" * 501, "(too_long)"),
    ],
)
def test_verify_refuses_an_invalid_completion(
    repo: Repo, value: str, needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["verify", str(repo.path), f"--completion={value}"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("verify-dag: error: --completion: ") and needle in err


def test_a_blocked_exerciser_shows_the_criterion_as_not_run(repo: Repo) -> None:
    request = VerifyRequest(source=parse_source(str(repo.path)), completion="true")
    out = exerciser.run(RunState(run_id="r", request=request))
    assert out.status == "BLOCKED"
    assert [(g.status, g.checker, g.evidence) for g in out.gates] == [
        ("BLOCKED", "completion", "not run: the exerciser was blocked")
    ]
