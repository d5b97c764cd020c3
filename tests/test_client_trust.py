"""What a waiting client believes: a report is this run's only if it says so (run id,
repository, head), and a run whose records the result store lost is said to be lost within
seconds instead of being waited for until ``--timeout``.

The Redis tests run real workers on the module's own database. The repository's test suite
sleeps for SLOW seconds: the suite runs in a sandbox that sees neither the test's files nor its
network, so it cannot be held and released; the test waits for the test task's STARTED record
instead, and has SLOW seconds to act before the real report can land.
"""

from __future__ import annotations

import base64
import itertools
import json
import os
import re
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from conftest import Repo, calc_base, make_repo, run_cli, verify_branch
from redis_workers import fresh_db, logs, stop, workers

from verify_dag import client, store
from verify_dag.errors import FatalError
from verify_dag.tasks.app import app, configure
from verify_dag.tasks.base import RunFailed
from verify_dag.tasks.workflow import Expected, PhaseRef, Plan

DB = 7
HEAD = "a" * 40
OTHER = "b" * 40
BOUND = 60.0  # seconds: submit to the test phase running, on a busy 2-core machine
SLOW = 25.0  # seconds the repository's test sleeps


# --- the matching function -------------------------------------------------------------------


def a_report(
    run_id: str = "run-1", repo: str = "/srv/repo", head: str | None = HEAD, status: str = "ok"
) -> dict[str, Any]:
    return {"status": status, "run": {"id": run_id, "repo": repo}, "scope": {"headSha": head}}


LOCAL = Expected(repo="/srv/repo", head=HEAD, store=None)
URL = Expected(repo="https://git.example/x.git", head=None, store=None)


@pytest.mark.parametrize(
    ("report", "expect", "wrong"),
    [
        (a_report(), LOCAL, None),
        (a_report(run_id="run-2"), LOCAL, "run id run-2, expected run-1"),
        (a_report(repo="/srv/other"), LOCAL, "repository /srv/other, expected /srv/repo"),
        (a_report(head=OTHER), LOCAL, f"head {OTHER}, expected {HEAD}"),
        (a_report(head=None), LOCAL, f"head None, expected {HEAD}"),
        # An error report may have no head (scope never resolved one); it fails the run anyway.
        (a_report(head=None, status="error"), LOCAL, None),
        # A URL's head is resolved by the scope phase on a worker: only its shape can be checked.
        (a_report(repo=URL.repo, head=OTHER), URL, None),
        (a_report(repo=URL.repo, head="main"), URL, "head 'main', expected a commit SHA"),
        ({"status": "ok"}, LOCAL, "run id None, expected run-1"),
        ("no issues", LOCAL, "no report, expected run id run-1"),
    ],
)
def test_mismatch(report: object, expect: Expected, wrong: str | None) -> None:
    assert client.mismatch(report, "run-1", expect) == wrong


def test_check_report_is_one_fatal_line() -> None:
    p = Plan(run_id="run-1", canvas=None, phases=(), final_id="f", expect=LOCAL)
    client.check_report(p, {"report": a_report()})
    with pytest.raises(FatalError) as caught:
        client.check_report(p, {"report": a_report(run_id="forged")})
    line = caught.value.line()
    assert "\n" not in line and line.startswith(
        "verify-dag: error: the report in the result store is not this run's (run id forged, "
        "expected run-1)"
    )
    # Completion and shadow plans carry no expectation: their results are not reports.
    client.check_report(Plan(run_id="run-1", canvas=None, phases=(), final_id="f"), "anything")


# --- a lost run on the in-process backend ----------------------------------------------------


@pytest.fixture
def in_process() -> Iterator[None]:
    configure(None)  # memory:// and cache+memory://, as verify without a broker
    yield


def test_a_report_task_that_ends_between_two_looks_is_the_answer(
    in_process: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run that errored ends its report task FAILED, carrying the report. When that happens
    after the client's look at the report task and before its look for a failed phase, the
    failed phase it then finds is the report task itself: the report is still the answer."""
    carried = {"report": a_report(status="error"), "markdown": "", "stored": ""}
    p = Plan(
        run_id="run-1",
        canvas=None,
        phases=(PhaseRef("scope", "run-1"), PhaseRef("report", "run-1-final")),
        final_id="run-1-final",
        expect=LOCAL,
    )
    real = client._meta
    ended: list[bool] = []

    def meta(task_id: str) -> dict[str, Any]:
        got = real(task_id)
        if task_id == p.final_id and not ended:
            ended.append(True)  # a worker ends the report task right after this look
            failed = RunFailed("run run-1 error: base ref 'nope' is not a commit", carried)
            app.backend.store_result(p.final_id, failed, "FAILURE")
        return got

    monkeypatch.setattr(client, "_meta", meta)
    assert client._poll(p, None, sweep=True) == carried


def test_the_wait_looks_less_often_as_a_run_goes_on(
    in_process: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each look at the run takes the interpreter's lock from the embedded worker's phases in
    the same process: a quick run is seen to end within the 5 ms interval, a longer one is
    looked at no more often than a fiftieth of its time so far (at most 50 ms apart)."""
    p = Plan(run_id="run-w", canvas=None, phases=(), final_id="run-w-final", expect=LOCAL)
    looks: list[float] = []
    start = time.monotonic()

    def poll(plan: Plan, progress: object, *, sweep: bool) -> dict[str, Any] | None:
        looks.append(time.monotonic() - start)
        return {"done": True} if looks[-1] >= 1.5 else None

    monkeypatch.setattr(client, "_poll", poll)
    assert client.wait(p, timeout=30, interval=0.005, lost_check=3600) == {"done": True}
    gaps = [(b - a, a) for a, b in itertools.pairwise(looks)]
    early = sorted(g for g, at in gaps if at < 0.2)
    late = sorted(g for g, at in gaps if at >= 1.0)
    assert early[len(early) // 2] < 0.02, early  # about the interval at the start
    assert late and min(late) >= 0.019, late  # 2% of a second and more, later on
    assert len(looks) < 150, len(looks)  # every 5 ms would be about 300 in 1.5 s


def lost_plan(run_id: str, where: Path) -> Plan:
    p = client.announce(
        Plan(
            run_id=run_id,
            canvas=None,
            phases=(),
            final_id=f"{run_id}-final",
            expect=Expected(repo="/srv/repo", head=HEAD, store=str(where)),
        )
    )
    assert not client.lost(p)
    app.backend.forget(p.sentinel)
    assert client.lost(p)
    return p


def test_a_lost_run_ends_the_wait(tmp_path: Path, in_process: None) -> None:
    p = lost_plan("run-lost-1", tmp_path / "store")
    start = time.monotonic()
    with pytest.raises(FatalError) as caught:
        client.wait(p, timeout=60, lost_check=0.05)
    assert time.monotonic() - start < 5
    assert caught.value.line().startswith(
        "verify-dag: error: the broker lost run run-lost-1 (its records vanished from the result "
        "store: a restart without persistence or a flush?)"
    )


def test_a_lost_run_whose_report_landed_is_read_from_the_store(
    tmp_path: Path, in_process: None
) -> None:
    where = tmp_path / "store"
    p = lost_plan("run-lost-2", where)
    doc = a_report(run_id="run-lost-2")
    meta = store.RunMeta(
        run_id="run-lost-2",
        repo="/srv/repo",
        mode="branch",
        depth="light",
        base="base",
        head_sha=HEAD,
        submitted=None,
        finished=store.now(),
        status="ok",
        result="pass",
        fail_on=7,
        exit_code=0,
    )
    store.save(where, "run-lost-2", doc, "# report\n", meta)
    result = client.wait(p, timeout=60, lost_check=0.05)
    assert (result["report"], result["markdown"]) == (doc, "# report\n")
    # The store's copy is held to the same test as the result store's.
    store.save(where, "run-lost-2", a_report(run_id="run-lost-2", head=OTHER), "#\n", meta)
    with pytest.raises(FatalError, match="not this run's"):
        client.wait(p, timeout=60, lost_check=0.05)


def test_a_run_whose_sentinel_stays_is_not_lost(tmp_path: Path, in_process: None) -> None:
    p = client.announce(
        Plan(run_id="run-kept", canvas=None, phases=(), final_id="never", expect=LOCAL)
    )
    with pytest.raises(
        FatalError, match=r"no report after 0.3 s \(run run-kept\): the run was stopped"
    ):
        client.wait(p, timeout=0.3, lost_check=0.05)


# --- real workers on Redis -------------------------------------------------------------------


def slow_project(path: Path) -> Repo:
    """A branch adding ``sub`` and a test that takes SLOW seconds."""
    repo = make_repo(path)
    calc_base(repo)
    repo.write(
        "src/calc.py", "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n"
    )
    repo.write(
        "tests/test_calc.py",
        f"""\
import time

from calc import add, sub


def test_add():
    time.sleep({SLOW})
    assert add(2, 2) == 4


def test_sub():
    assert sub(3, 1) == 2
""",
    )
    repo.commit("calc: sub")
    return repo


def wait_for(
    what: str, check: Callable[[], Any], bound: float, details: Callable[[], str] = lambda: ""
) -> Any:
    deadline = time.monotonic() + bound
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"{what}: not within {bound:.0f} s\n{details()}"
        time.sleep(0.05)


class Run:
    """A slow project, its store, and a worker on the module's database."""

    def __init__(self, root: Path) -> None:
        self.broker = fresh_db(DB)
        self.root = root
        self.store = root / "store"
        self.logs = root / "logs"
        self.repo = slow_project(root / "repo")
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("VERIFY_DAG_")}
        self.env.update(VERIFY_DAG_STORE=str(self.store), HOME=os.environ["HOME"])

    def client(self, *flags: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            verify_branch(
                self.repo,
                f"--broker={self.broker}",
                "--format=json",
                f"--output={self.root / 'report.json'}",
                "--quiet",
                *flags,
            ),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=self.env,
            start_new_session=True,
        )

    def testing(self) -> str:
        """The run id once its test task is running."""
        wait_for(
            "the test task to start",
            lambda: self.started("verify_dag.test"),
            BOUND,
            lambda: logs(self.logs),
        )
        ids = [p.name for p in self.store.iterdir() if p.is_dir()]  # the bundle's directory
        assert len(ids) == 1, ids
        return ids[0]

    def started(self, name: str) -> bool:
        db = redis.Redis.from_url(self.broker)
        for key in db.scan_iter("celery-task-meta-*"):
            raw = db.get(key)
            meta = json.loads(raw) if raw is not None else {}
            if meta.get("name") == name and meta.get("status") == "STARTED":
                return True
        return False


def report_task_id(broker: str) -> str | None:
    """The id of the run's ``verify_dag.report`` task, as a hostile test found it: in the
    messages the broker holds (the test task's, unacked while it runs, carries the rest of the
    chain)."""
    db = redis.Redis.from_url(broker)
    values: list[bytes | str] = []
    for key in db.scan_iter():
        kind = db.type(key)
        if kind == b"hash":
            values += db.hvals(key)
        elif kind == b"list":
            values += db.lrange(key, 0, -1)
    for raw in values:
        try:
            message = json.loads(raw)
        except ValueError:
            continue
        message = message[0] if isinstance(message, list) and message else message
        if not isinstance(message, dict) or "body" not in message:
            continue
        body = base64.b64decode(message["body"]).decode("utf-8", "replace")
        at = body.find('"verify_dag.report"')
        found = re.compile(r'"task_id": "([0-9a-f-]{36})"').search(body, at) if at >= 0 else None
        if found:
            return found.group(1)
    return None


def forge(broker: str, task_id: str, report: dict[str, Any]) -> None:
    """What the hostile test wrote: a SUCCESS meta with a clean report."""
    meta: dict[str, Any] = {
        "status": "SUCCESS",
        "result": {"report": report, "markdown": "No issues.\n"},
        "traceback": None,
        "children": [],
        "date_done": "2030-01-01T00:00:00",
        "task_id": task_id,
    }
    redis.Redis.from_url(broker).set(f"celery-task-meta-{task_id}", json.dumps(meta))


@pytest.mark.parametrize("forged", ["run id", "head"])
def test_a_forged_report_is_not_believed(forged: str, tmp_path: Path) -> None:
    run = Run(tmp_path)
    with workers(run.broker, ["trust"], run.logs, run.env):
        proc = run.client("--timeout=120")
        try:
            run_id = run.testing()
            task_id = wait_for(
                "the report task's id in the broker", lambda: report_task_id(run.broker), 10
            )
            clean = {
                "schemaVersion": 1,
                "status": "ok",
                "error": None,
                "issues": [],
                "findings": [],
                "overall": {"result": "pass", "mode": "branch"},
                "scope": {"headSha": "f" * 40, "nothingToVerify": False},
                "run": {
                    "id": "forged-run" if forged == "run id" else run_id,
                    "repo": str(run.repo.path),
                },
            }
            forge(run.broker, task_id, clean)
            _stdout, stderr = proc.communicate(timeout=30)
        finally:
            stop(proc)
    want = (
        f"(run id forged-run, expected {run_id})"
        if forged == "run id"
        else f"(head {'f' * 40}, expected {run.repo.head()})"
    )
    assert proc.returncode == 3, (stderr, logs(run.logs))
    lines = stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        f"verify-dag: error: the report in the result store is not this run's {want}"
    ), stderr
    assert not (tmp_path / "report.json").exists()


def test_a_flushed_run_is_lost_within_the_bound(tmp_path: Path) -> None:
    run = Run(tmp_path)
    with workers(run.broker, ["lost"], run.logs, run.env):
        proc = run.client("--timeout=600")
        try:
            run_id = run.testing()
            redis.Redis.from_url(run.broker).flushdb()  # the module's own database only
            flushed = time.monotonic()
            try:
                _stdout, stderr = proc.communicate(timeout=client.LOST_CHECK + 30)
            except subprocess.TimeoutExpired:
                pytest.fail(f"the client waited on a lost run\n{logs(run.logs)}")
            took = time.monotonic() - flushed
            status = run_cli(
                "status",
                run_id,
                f"--broker={run.broker}",
                f"--store={run.store}",
                env=run.env,
                timeout=60,
            )
        finally:
            stop(proc)
    print(f"\n[flush] client exit {proc.returncode} after {took:.1f} s")
    assert proc.returncode == 3, (stderr, logs(run.logs))
    lines = stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        f"verify-dag: error: the broker lost run {run_id} (its records vanished from the result "
        "store: a restart without persistence or a flush?)"
    ), stderr
    # The sentinel is looked at every LOST_CHECK seconds; a few more for a busy machine.
    assert took < client.LOST_CHECK + 5, took
    assert status.returncode == 0, status.stderr
    assert status.stdout.startswith(f"{run_id} LOST"), status.stdout
