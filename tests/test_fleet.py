"""Nightly audits: ``verify-dag fleet run|beat FLEET.toml`` over real repositories in tmp_path.

Embedded runs go through ``main`` in this process (its one embedded worker); the Redis run uses
two real worker processes on different queue sets, and the fleet client as a subprocess.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import Repo, make_repo, make_scenario, run_cli
from fakes.fake_api import FakeAPI
from redis_workers import fresh_db, logs, workers

from verify_dag import fleet, store
from verify_dag.cli import main
from verify_dag.fleet import summary as fleet_summary

SCHEMA = Path(__file__).resolve().parent.parent / "schemas" / "fleet-summary.v1.schema.json"
UNREADABLE = "cannot read"


def make_project(path: Path, lint_error: bool = False) -> Repo:
    """A tiny project with one passing test; with ``lint_error`` an unused import (F401)."""
    repo = make_repo(path)
    repo.write(
        "pyproject.toml", '[tool.pytest.ini_options]\ntestpaths = ["tests"]\npythonpath = ["src"]\n'
    )
    head = "import os\n\n\n" if lint_error else ""
    repo.write("src/calc.py", f"{head}def add(a, b):\n    return a + b\n")
    repo.write(
        "tests/test_calc.py",
        "from calc import add\n\n\ndef test_add():\n    assert add(2, 2) == 4\n",
    )
    repo.commit("calc")
    return repo


def write_fleet(path: Path, *tables: dict[str, str | bool]) -> Path:
    text = "".join(
        "[[repo]]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in t.items()) + "\n"
        for t in tables
    )
    path.write_text(text, encoding="utf-8")
    return path


def summaries(where: Path) -> list[dict[str, Any]]:
    """Every stored fleet summary, oldest first, each checked against the schema."""
    found = []
    for directory in sorted(p for p in (where / "fleet").iterdir() if p.is_dir()):
        doc: dict[str, Any] = json.loads((directory / "summary.json").read_text())
        fleet_summary.validate(doc)
        assert (directory / "summary.md").is_file()
        found.append(doc)
    return found


def only(doc: dict[str, Any]) -> dict[str, Any]:
    (repo,) = doc["repos"]
    result: dict[str, Any] = repo
    return result


@pytest.fixture
def where(tmp_path: Path) -> Path:
    return Path(os.environ["VERIFY_DAG_STORE"])  # conftest points it into tmp_path


# --- fleet run, embedded ----------------------------------------------------------------------


def test_three_repositories_embedded(
    tmp_path: Path, where: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    clean = make_project(tmp_path / "clean")
    lint = make_project(tmp_path / "lint", lint_error=True)
    path = write_fleet(
        tmp_path / "fleet.toml",
        {"url": "clean"},  # relative to the file
        {"url": str(lint.path), "depth": "light"},
        {"url": "gone"},
    )
    assert main(["fleet", "run", str(path), "--fail-on=5"]) == 3
    out, err = capsys.readouterr()
    assert err == ""
    (doc,) = summaries(where)
    assert doc["exitCode"] == 3 and doc["failOn"] == 5
    assert doc["fleetFile"] == str(path) and doc["store"] == str(where)
    assert doc["totals"] == {"pass": 1, "issues-found": 1, "error": 1, "blocked": 0, "reused": 0}
    first, second, third = doc["repos"]

    assert (first["url"], first["scope"], first["depth"]) == (str(clean.path), "all", "deep")
    # Nothing found, but deep's reviewers could not run (no backend): 4, as verify exits.
    assert (first["result"], first["reportResult"], first["exitCode"]) == ("pass", "pass", 4)
    assert first["head"] == clean.head() and first["error"] is None
    assert first["issues"] == {"total": 0, "atOrAboveFailOn": 0, "bySeverity": {}}
    not_run = {n["skill"]: n for n in first["notRun"]}
    # Deep without a model backend: reviewers did not run, and the summary says why.
    assert not_run["reviewer"]["status"] == "NOT_RUN"
    assert "no model backend configured" in not_run["reviewer"]["reason"]
    # No VERIFICATION.md: its module is imported, as the project declares it (docs/gates.md).
    assert "exerciser" not in not_run
    assert not_run["codex-reviewer"]["status"] == "SKIPPED"
    report, _, meta = store.load(where, first["runId"])
    assert first["report"]["json"] == str(where / first["runId"] / "report.json")
    assert meta.head_sha == clean.head() and report["scope"]["depth"] == "deep"
    assert first["auditedAt"] == meta.finished

    assert (second["result"], second["depth"], second["exitCode"]) == ("issues-found", "light", 1)
    assert second["issues"] == {"total": 1, "atOrAboveFailOn": 1, "bySeverity": {"5": 1}}
    assert {n["skill"]: n["status"] for n in second["notRun"]}["qa"] == "SKIPPED"
    report, _, _ = store.load(where, second["runId"])
    assert "F401" in report["issues"][0]["title"]

    assert third["url"] == str(tmp_path / "gone")
    assert (third["result"], third["reportResult"], third["exitCode"]) == ("error", None, 3)
    assert third["runId"] is None and third["report"] is None and third["head"] is None
    assert UNREADABLE in third["error"] and str(tmp_path / "gone") in third["error"]

    # The printed Markdown is the stored one, with absolute instead of relative links.
    assert "**3 repositories: 1 pass, 1 issues-found, 1 error, 0 blocked, 0 reused" in out
    assert f"| 2 | {lint.path} | all | light | issues-found | 1 (sev 5: 1) |" in out
    assert f"| 3 | {tmp_path / 'gone'} | all | deep | error | - | - |" in out
    assert f"- Error: cannot read {tmp_path / 'gone'}" in out
    assert "  - reviewer: NOT_RUN: no model backend configured" in out
    assert f"]({where / first['runId'] / 'report.md'})" in out
    stored = (Path(doc["summaryDir"]) / "summary.md").read_text()
    assert f"](../../{first['runId']}/report.md)" in stored


def test_an_audits_review_token_budget_is_shared_by_its_runs(
    tmp_path: Path, where: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each call may use 50,000 tokens of reply and spends 55,000: of the two repositories' light
    # reviewers, one fits in the audit's 60,000, and the other finds the budget spent.
    for key in list(os.environ):
        if key.startswith(("VERIFY_DAG_BACKEND", "VERIFY_DAG_MODEL", "ANTHROPIC_")):
            monkeypatch.delenv(key)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("VERIFY_DAG_RESULT_CACHE", str(tmp_path / "results"))
    monkeypatch.setenv("VERIFY_DAG_MAX_OUTPUT_TOKENS", "50000")
    one, two = make_project(tmp_path / "one"), make_project(tmp_path / "two", lint_error=True)
    path = write_fleet(
        tmp_path / "fleet.toml",
        {"url": str(one.path), "depth": "light"},
        {"url": str(two.path), "depth": "light"},
    )
    path.write_text("max-review-tokens = 60000\n\n" + path.read_text())
    with FakeAPI("sk-ant-fleet-0123456789abcdef") as api:
        api.usage = (30000, 25000)
        monkeypatch.setenv("VERIFY_DAG_BACKEND", "anthropic")
        monkeypatch.setenv("VERIFY_DAG_BASE_URL", api.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-fleet-0123456789abcdef")
        main(["fleet", "run", str(path), "--format=json", f"--output={tmp_path / 's.json'}"])
    doc = json.loads((tmp_path / "s.json").read_text())
    fleet_summary.validate(doc)
    assert len(api.requests) == 1
    assert doc["reviewTokens"] == {"maxTokens": 60000, "input": 30000, "output": 25000}
    spent = sorted((r["reviewTokens"] for r in doc["repos"]), key=lambda t: t["input"])
    assert spent == [{"input": 0, "output": 0}, {"input": 30000, "output": 25000}]
    stopped = [n for r in doc["repos"] for n in r["notRun"] if n["skill"] == "reviewer"]
    assert len(stopped) == 1 and stopped[0]["status"] == "NOT_RUN"
    assert "budget: the fleet audit's review-token budget (60000) is spent" in stopped[0]["reason"]
    stored = (Path(doc["summaryDir"]) / "summary.md").read_text()
    assert "Review tokens this audit: 30,000 in, 25,000 out (budget 60,000)." in stored


def test_summary_schema_is_strict(tmp_path: Path, where: Path) -> None:
    clean = make_project(tmp_path / "clean")
    path = write_fleet(
        tmp_path / "fleet.toml",
        {"url": str(clean.path), "depth": "light", "allow-incomplete": True},
    )
    assert (
        main(["fleet", "run", str(path), "--format=json", f"--output={tmp_path / 'summary.json'}"])
        == 0
    )
    doc = json.loads((tmp_path / "summary.json").read_text())
    fleet_summary.validate(doc)
    assert json.loads(SCHEMA.read_text())["$id"].endswith("fleet-summary.v1.schema.json")
    bad = {**doc, "repos": [{**only(doc), "result": "fine"}]}
    with pytest.raises(ValueError, match="result"):
        fleet_summary.validate(bad)
    bad = {**doc, "repos": [{**only(doc), "extra": 1}]}
    with pytest.raises(ValueError, match="extra"):
        fleet_summary.validate(bad)
    # --output is never overwritten: a usage error, the audit's own exit code aside.
    assert main(["fleet", "run", str(path), f"--output={tmp_path / 'summary.json'}"]) == 2


def test_unchanged_heads_are_reused_until_something_moves(
    tmp_path: Path, where: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = make_project(tmp_path / "repo")
    path = write_fleet(
        tmp_path / "fleet.toml", {"url": str(repo.path), "depth": "light", "allow-incomplete": True}
    )

    assert main(["fleet", "run", str(path)]) == 0
    first = only(summaries(where)[-1])
    assert first["result"] == "pass"

    assert main(["fleet", "run", str(path)]) == 0  # nothing moved: reused
    again = only(summaries(where)[-1])
    assert (again["result"], again["reportResult"]) == ("reused", "pass")
    assert (again["runId"], again["head"], again["auditedAt"]) == (
        first["runId"],
        first["head"],
        first["auditedAt"],
    )
    assert again["report"] == first["report"] and again["notRun"] == first["notRun"]
    out = capsys.readouterr().out
    assert f"has not moved since the audit of {first['auditedAt']}" in out
    assert "| reused (pass) |" in out

    repo.write("src/more.py", "X = 1\n")
    moved = repo.commit("more")
    assert main(["fleet", "run", str(path)]) == 0  # a new commit: audited again
    third = only(summaries(where)[-1])
    assert third["result"] == "pass" and third["runId"] != first["runId"]
    assert third["head"] == moved

    write_fleet(path, {"url": str(repo.path), "depth": "deep"})
    # Other settings: audited again; deep's reviewers cannot run here (no backend), and this
    # entry does not allow that: 4, or 1 for qa's coverage finding below.
    code = main(["fleet", "run", str(path)])
    assert code in (1, 4)
    fourth = only(summaries(where)[-1])
    # Deep adds qa's coverage check, which may flag the untested module: either is an audit.
    assert fourth["result"] in ("pass", "issues-found") and fourth["runId"] != third["runId"]
    assert fourth["depth"] == "deep"

    shutil.rmtree(where / fourth["runId"])  # the report left the store: audited again
    assert main(["fleet", "run", str(path)]) == code
    fifth = only(summaries(where)[-1])
    assert fifth["result"] == fourth["result"] and fifth["runId"] != fourth["runId"]


def test_an_errored_audit_is_reported_and_never_reused(tmp_path: Path, where: Path) -> None:
    scenario = make_scenario(tmp_path / "scenario")
    path = write_fleet(
        tmp_path / "fleet.toml",
        {"url": str(scenario.path), "base": "no-such-base", "depth": "light"},
    )
    for _ in range(2):
        assert main(["fleet", "run", str(path)]) == 3
        entry = only(summaries(where)[-1])
        # An unknown base is the run's own error: a complete report, with its message.
        assert (entry["result"], entry["reportResult"], entry["scope"]) == (
            "error",
            "error",
            "branch",
        )
        assert "no-such-base" in entry["error"] and entry["report"] is not None
    first, second = summaries(where)
    assert only(first)["runId"] != only(second)["runId"]


# --- the fleet file ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ('[[repo]]\nurl = "a"\ndpeth = "deep"\n', "repo 1 (a): unknown key(s) dpeth"),
        ('[[repo]]\nurl = "a"\n\n[[repo]]\nurl = 3\n', "repo 2: url must be a string, got int"),
        ('[[repo]]\nurl = "a"\ndepth = ["deep"]\n', "repo 1 (a): depth must be a string"),
        ('[[repo]]\nbase = "main"\n', "repo 1: url is required"),
        ('[[repo]]\nurl = "  "\n', "repo 1: url is required"),
        ("repo = []\n", "no repositories"),
        ("", "no repositories"),
        ('[repo]\nurl = "a"\n', "no repositories"),
        (
            '[[repo]]\nurl = "a"\n\n[[repo]]\nurl = "./a"\n',
            "a): duplicates repo 1 (same url, scope, base and depth)",
        ),
        (
            '[[repo]]\nurl = "a"\nscope = "staged"\n',
            "repo 1 (a): scope must be one of all, branch, got 'staged'",
        ),
        (
            '[[repo]]\nurl = "a"\ndepth = "medium"\n',
            "repo 1 (a): depth must be one of light, deep, got 'medium'",
        ),
        (
            '[[repo]]\nurl = "a"\nbase = "main"\nscope = "all"\n',
            'repo 1 (a): base is only valid with scope = "branch"',
        ),
        ('[[repo]]\nurl = "a"\nbase = "-x"\n', "repo 1 (a): base is not a valid git ref"),
        ('fail_on = 3\n[[repo]]\nurl = "a"\n', "unknown top-level key(s) fail_on"),
        ('[[repo]]\nurl = "a"\nurl = "b"\n', "not valid TOML"),
        (
            '[[repo]]\nurl = "https://bob:hunter2@git.example.com/x.git"\ndepth = 1\n',
            "repo 1 (https://bob:***@git.example.com/x.git): depth must be a string",
        ),
    ],
)
def test_invalid_fleet_files_are_one_line_usage_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, needle: str
) -> None:
    path = tmp_path / "fleet.toml"
    path.write_text(text, encoding="utf-8")
    for command in ("run", "beat"):
        assert main(["fleet", command, str(path)]) == 2
        out, err = capsys.readouterr()
        assert out == "" and "hunter2" not in err
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"verify-dag: error: {path}: "), err
        assert needle in lines[0], err


def test_missing_fleet_file_and_bad_schedules_exit_2(tmp_path: Path) -> None:
    write_fleet(tmp_path / "fleet.toml", {"url": "a"})
    cases = [
        (["run", "nope.toml"], "fleet file not found: nope.toml"),
        (["beat", "fleet.toml", "--cron", "0 2 * *"], "--cron: expected five fields"),
        (["beat", "fleet.toml", "--cron", "61 2 * * *"], "--cron: '61 2 * * *'"),
        (["beat", "fleet.toml", "--every", "0"], "must be more than 0"),
        (["beat", "fleet.toml", "--every", "1", "--cron", "* * * * *"], "not allowed with"),
        (["beat", "fleet.toml", "--runs", "0"], "must be at least 1"),
    ]
    for args, needle in cases:
        proc = run_cli("fleet", *args, cwd=tmp_path)
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 2 and len(lines) == 1, (args, proc.stderr)
        assert lines[0].startswith("verify-dag: error: ") and needle in lines[0], proc.stderr
        assert proc.stdout == ""


def test_entries_resolve_relative_to_the_file_and_keep_urls(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    path = write_fleet(
        tmp_path / "sub" / "fleet.toml",
        {"url": "../a", "base": "main"},
        {"url": "file:///srv/x.git", "scope": "branch", "depth": "light"},
        {"url": "git@host:team/x.git"},
    )
    a, url, scp = fleet.load(path)
    assert (a.url, a.scope, a.base, a.depth) == (str(tmp_path / "a"), "branch", "main", "deep")
    assert (url.url, url.scope, url.base, url.depth) == (
        "file:///srv/x.git",
        "branch",
        None,
        "light",
    )
    assert (scp.url, scp.scope) == ("git@host:team/x.git", "all")
    assert len({a.key(), url.key(), scp.key()}) == 3


def test_help_documents_the_exit_codes() -> None:
    proc = run_cli("fleet", "run", "--help")
    assert proc.returncode == 0
    for line in (
        "0  every repository passed",
        "1  some repository has issues",
        "2  usage error",
        "3  some repository's audit errored or was blocked",
    ):
        assert line in proc.stdout


# --- fleet beat -------------------------------------------------------------------------------


def test_beat_every_second_twice_reuses_the_second_time(
    tmp_path: Path, where: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = make_project(tmp_path / "repo")
    path = write_fleet(
        tmp_path / "fleet.toml", {"url": str(repo.path), "depth": "light", "allow-incomplete": True}
    )
    assert main(["fleet", "beat", str(path), "--every", "1", "--runs", "2"]) == 0
    first, second = summaries(where)
    assert only(first)["result"] == "pass" and only(second)["result"] == "reused"
    assert only(second)["runId"] == only(first)["runId"]
    # At least the interval apart, counted from start to start.
    assert second["started"] >= first["started"]
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(" (exit")[0] for line in lines] == [
        f"fleet audit: {d['summaryDir']}/summary.md" for d in (first, second)
    ]


def test_cron_gives_the_next_time_in_utc() -> None:
    from datetime import UTC, datetime, timedelta

    from verify_dag.fleet.schedule import cron as _cron

    def frozen(at: datetime) -> Callable[[], datetime]:
        return lambda: at

    for now, expr, wait in [
        (
            datetime(2025, 1, 1, 2, 0, 30, tzinfo=UTC),
            "0 2 * * *",
            timedelta(hours=23, minutes=59, seconds=30),
        ),  # just ran: tomorrow
        (datetime(2025, 1, 1, 1, 59, tzinfo=UTC), "0 2 * * *", timedelta(minutes=1)),
        (
            datetime(2025, 1, 3, 12, 0, tzinfo=UTC),
            "30 1 * * mon",  # a Friday
            timedelta(days=2, hours=13, minutes=30),
        ),
    ]:
        assert _cron(expr, clock=frozen(now)).remaining_estimate(now) == wait


# --- URLs -------------------------------------------------------------------------------------


def test_a_file_url_entry_is_audited_from_the_url(tmp_path: Path, where: Path) -> None:
    lint = make_project(tmp_path / "lint", lint_error=True)
    url = f"file://{lint.path}"
    path = write_fleet(
        tmp_path / "fleet.toml", {"url": url, "depth": "light", "allow-incomplete": True}
    )
    assert main(["fleet", "run", str(path)]) == 0
    entry = only(summaries(where)[-1])
    assert (entry["url"], entry["result"], entry["head"]) == (url, "issues-found", lint.head())
    assert entry["issues"]["bySeverity"] == {"5": 1}
    report, _, _ = store.load(where, entry["runId"])
    assert report["scope"]["headSha"] == lint.head()


# --- real workers on Redis --------------------------------------------------------------------


@pytest.fixture
def split_workers(tmp_path: Path) -> Iterator[tuple[str, Path, Path]]:
    """Two workers on Redis database 9 sharing a store, on different queue sets."""
    broker = fresh_db(9)
    where = tmp_path / "shared-store"
    log_dir = tmp_path / "logs"
    env = {k: v for k, v in os.environ.items() if k != "VERIFY_DAG_BROKER_URL"}
    env["VERIFY_DAG_STORE"] = str(where)
    with workers(
        broker,
        ["w1", "w2"],
        log_dir,
        env,
        queues={"w1": "git,static,test", "w2": "review,exercise"},
    ):
        yield broker, where, log_dir
    fresh_db(9)


@pytest.mark.redis
def test_fleet_on_two_workers_with_different_queues(
    tmp_path: Path, split_workers: tuple[str, Path, Path]
) -> None:
    broker, where, log_dir = split_workers
    clean = make_project(tmp_path / "clean")
    lint = make_project(tmp_path / "lint", lint_error=True)
    scenario = make_scenario(tmp_path / "scenario")
    path = write_fleet(
        tmp_path / "fleet.toml",
        {"url": str(clean.path), "depth": "light"},
        {"url": str(lint.path)},
        {"url": str(scenario.path), "base": "base"},
    )
    env = {k: v for k, v in os.environ.items() if k != "VERIFY_DAG_STORE"}
    proc = run_cli(
        "fleet",
        "run",
        str(path),
        "--broker",
        broker,
        "--store",
        str(where),
        "--format=json",
        f"--output={tmp_path / 'summary.json'}",
        "--timeout=120",
        env=env,
        timeout=180,
    )
    assert proc.returncode == 1, proc.stderr + logs(log_dir)
    assert proc.stdout.strip() == str(tmp_path / "summary.json") and proc.stderr == ""
    doc = json.loads((tmp_path / "summary.json").read_text())
    (stored,) = summaries(where)
    assert stored == doc
    assert doc["totals"] == {"pass": 1, "issues-found": 2, "error": 0, "blocked": 0, "reused": 0}
    a, b, c = doc["repos"]
    assert (a["result"], a["depth"], a["head"]) == ("pass", "light", clean.head())
    assert (b["result"], b["depth"], b["issues"]["bySeverity"]) == (
        "issues-found",
        "deep",
        {"5": 1},
    )
    assert (c["result"], c["scope"], c["base"]) == ("issues-found", "branch", "base")
    assert c["exitCode"] == 1 and c["issues"]["atOrAboveFailOn"] >= 1  # the failing test
    for entry, repo in ((a, clean), (b, lint), (c, scenario)):
        report, _, meta = store.load(where, entry["runId"])
        assert meta.repo == str(repo.path) and report["scope"]["headSha"] == repo.head()
    assert "no model backend configured" in json.dumps(b["notRun"])


def test_celery_beat_sends_the_nightly_audit_to_a_fleet_worker(tmp_path: Path) -> None:
    # As ops/compose.yaml runs it: `celery -A verify_dag beat` with the fleet file in its
    # environment, a worker of the fleet queue (and one for the runs) on Redis.
    broker = fresh_db(7)
    repo = make_project(tmp_path / "repo")
    path = write_fleet(tmp_path / "fleet.toml", {"url": str(repo.path), "depth": "light"})
    store = tmp_path / "fleet-store"
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("VERIFY_DAG_", "CELERY_"))},
        "VERIFY_DAG_STORE": str(store),
    }
    queues = {"runs": "git,static,review,test,exercise", "audits": "fleet"}
    with workers(broker, ["runs", "audits"], tmp_path / "workers", env, queues=queues):
        beat_env = {
            **env,
            "VERIFY_DAG_BROKER_URL": broker,
            "VERIFY_DAG_FLEET_FILE": str(path),
            "VERIFY_DAG_FLEET_CRON": "* * * * *",  # the next minute: the finest cron there is
        }
        schedule = str(tmp_path / "beat-schedule")
        beat = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "verify_dag", "beat", "--schedule", schedule],
            env=beat_env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            deadline = time.monotonic() + 150
            while not (store / "fleet").is_dir() or not list(
                (store / "fleet").glob("*/summary.json")
            ):
                assert beat.poll() is None, beat.communicate()[0]
                assert time.monotonic() < deadline, "no audit within 150 s"
                time.sleep(0.5)
        finally:
            beat.terminate()
            out = beat.communicate(timeout=30)[0].decode("utf-8", "replace")
    (summary,) = summaries(store)
    assert only(summary)["result"] == "pass"
    assert "beat: Starting..." in out or "celery beat" in out, out
