"""The report store and the run subcommands: status, report, runs and verify --no-wait."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import BRANCH, Repo, run_cli
from redis_workers import fresh_db, workers

from verify_dag import store
from verify_dag.cli import main
from verify_dag.errors import UsageError

RUN_ID = "0b6c5f7e-1111-4a4a-8c8c-000000000001"


def meta(run_id: str = RUN_ID, finished: str = "2025-01-01T00:00:00.000+00:00") -> store.RunMeta:
    return store.RunMeta(
        run_id=run_id,
        repo="/srv/repo",
        mode="branch",
        depth="light",
        base="base",
        head_sha="a" * 40,
        submitted=None,
        finished=finished,
        status="ok",
        result="pass",
        fail_on=7,
        exit_code=0,
    )


def one_error_line(err: str, needle: str) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("verify-dag: error: ") and needle in lines[0], err


# --- the store itself -------------------------------------------------------------------------


def test_save_load_round_trip(tmp_path: Path) -> None:
    doc = {"schemaVersion": 1, "note": "é ünïcode", "issues": []}
    run_dir = store.save(tmp_path, RUN_ID, doc, "# Report\n", meta())
    assert sorted(p.name for p in run_dir.iterdir()) == ["meta.json", "report.json", "report.md"]
    loaded, markdown, m = store.load(tmp_path, RUN_ID)
    assert (loaded, markdown, m) == (doc, "# Report\n", meta())
    # Written whole and in place: no temporary file is left behind.
    assert not [p for p in run_dir.iterdir() if p.name.startswith(".")]


def test_runs_newest_first_and_incomplete_runs_hidden(tmp_path: Path) -> None:
    older = "0b6c5f7e-1111-4a4a-8c8c-00000000000a"
    store.save(tmp_path, older, {}, "", meta(older, "2025-01-01T00:00:00.000+00:00"))
    store.save(tmp_path, RUN_ID, {}, "", meta(RUN_ID, "2025-01-02T00:00:00.000+00:00"))
    # A run whose meta.json is not written yet (it is written last) is not a run yet.
    (tmp_path / "0b6c5f7e-1111-4a4a-8c8c-00000000000b").mkdir()
    assert [m.run_id for m in store.runs(tmp_path)] == [RUN_ID, older]
    assert store.runs(tmp_path / "missing") == []


def test_missing_and_malformed_run_ids(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=f"no run {RUN_ID} in {tmp_path}"):
        store.load(tmp_path, RUN_ID)
    for bad in ("../etc", "/etc/passwd", "a/b", "", ".hidden"):
        with pytest.raises(UsageError, match="not a run id"):
            store.load(tmp_path, bad)


def test_default_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VERIFY_DAG_STORE", raising=False)
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert store.default_dir() == tmp_path / "home/.local/share/verify-dag/runs"
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert store.default_dir() == tmp_path / "data/verify-dag/runs"
    monkeypatch.setenv("VERIFY_DAG_STORE", str(tmp_path / "explicit"))
    assert store.default_dir() == tmp_path / "explicit"


# --- the CLI on the embedded default ----------------------------------------------------------


def test_verify_lands_in_the_store_and_is_reprinted(
    scenario: Repo, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    where = tmp_path / "store"
    flags = [str(scenario.path), "--scope=branch", "--base=base", f"--store={where}"]
    assert main(["verify", *flags]) == 1
    printed = capsys.readouterr().out
    (run_dir,) = where.iterdir()
    run_id = run_dir.name
    assert sorted(p.name for p in run_dir.iterdir()) == [
        "evidence.json",
        "meta.json",
        "report.json",
        "report.md",
    ]
    m = json.loads((run_dir / "meta.json").read_text(encoding="utf-8"))
    assert m["run_id"] == run_id and m["repo"] == str(scenario.path)
    assert (m["mode"], m["depth"], m["base"]) == ("branch", "light", "base")
    assert m["head_sha"] == scenario.head()
    assert (m["status"], m["result"], m["exit_code"]) == ("ok", "issues-found", 1)
    assert m["submitted"] <= m["finished"]

    # report reprints what verify printed, byte for byte.
    assert main(["report", run_id, f"--store={where}"]) == 0
    assert capsys.readouterr().out == printed

    # The same for JSON, against what verify --format=json wrote.
    first = tmp_path / "verify.json"
    assert main(["verify", *flags, "--format=json", f"--output={first}"]) == 1
    capsys.readouterr()
    json_id = json.loads(first.read_text(encoding="utf-8"))["run"]["id"]
    again = tmp_path / "again.json"
    assert main(["report", json_id, "--format=json", f"--output={again}", f"--store={where}"]) == 0
    assert capsys.readouterr().out == f"JSON report written to {again}\n"
    assert again.read_bytes() == first.read_bytes()
    # ... and never over an existing file.
    assert main(["report", json_id, "--format=json", f"--output={again}", f"--store={where}"]) == 2
    one_error_line(capsys.readouterr().err, "already exists")
    assert again.read_bytes() == first.read_bytes()

    assert main(["runs", f"--store={where}"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == [
        "RUN",
        "ID",
        "FINISHED",
        "(UTC)",
        "REPO",
        "MODE",
        "DEPTH",
        "RESULT",
        "EXIT",
    ]
    assert [line.split()[0] for line in lines[1:]] == [json_id, run_id]  # newest first
    assert lines[2].split()[3:] == [str(scenario.path), "branch", "light", "issues-found", "1"]
    assert main(["runs", "--limit=1", f"--store={where}"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 2

    assert main(["status", run_id, f"--store={where}"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{run_id} SUCCESS result=issues-found exit=1 ") and out.count("\n") == 1


def test_no_wait_needs_a_broker(
    scenario: Repo, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["verify", str(scenario.path), "--no-wait", f"--store={tmp_path}"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    one_error_line(captured.err, "--no-wait needs a broker")


@pytest.mark.parametrize("command", ["status", "report"])
def test_unknown_run(command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([command, RUN_ID, f"--store={tmp_path}"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    one_error_line(captured.err, f"no run {RUN_ID} in {tmp_path}")


def test_empty_store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["runs", f"--store={tmp_path / 'none'}"]) == 0
    assert capsys.readouterr().out == f"no runs in {tmp_path / 'none'}\n"


# --- through Redis: --no-wait, the worker writes the store -------------------------------------


@pytest.fixture(scope="module")
def broker() -> str:
    return fresh_db(15)


@pytest.fixture(scope="module")
def worker_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The worker's default store: where runs submitted without --store land."""
    return tmp_path_factory.mktemp("worker-store")


@pytest.fixture(scope="module")
def worker(
    broker: str, worker_store: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[subprocess.Popen[bytes]]:
    env = {k: v for k, v in os.environ.items() if k != "VERIFY_DAG_BROKER_URL"}
    env["VERIFY_DAG_STORE"] = str(worker_store)
    with workers(broker, ["store-worker"], tmp_path_factory.mktemp("store-worker"), env) as procs:
        yield procs[0]


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, env={k: v for k, v in os.environ.items() if k != "VERIFY_DAG_STORE"})


def wait_for(path: Path, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.is_file():
        assert time.monotonic() < deadline, f"{path} did not appear within {timeout:.0f} s"
        time.sleep(0.2)


def no_wait(repo: Repo, broker: str, *flags: str) -> str:
    start = time.monotonic()
    proc = cli(
        "verify",
        str(repo.path),
        *BRANCH,
        "--no-wait",
        f"--broker={broker}",
        *flags,
    )
    elapsed = time.monotonic() - start
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    run_id = proc.stdout.strip()
    assert proc.stdout == f"{run_id}\n"
    store.check_run_id(run_id)
    assert elapsed < 15, f"--no-wait took {elapsed:.1f} s"  # a process start, not a run
    return run_id


def test_no_wait_on_redis(
    scenario: Repo, tmp_path: Path, broker: str, worker: subprocess.Popen[bytes]
) -> None:
    where = tmp_path / "store"
    run_id = no_wait(scenario, broker, f"--store={where}")
    # Known at once: queued, running, or (on a fast machine) already finished.
    first = cli("status", run_id, f"--store={where}", f"--broker={broker}")
    assert first.returncode == 0, first.stderr
    state = first.stdout.split()[1]
    assert first.stdout.startswith(f"{run_id} ") and state in ("PENDING", "STARTED", "SUCCESS")

    wait_for(where / run_id / "meta.json")
    meta_doc: dict[str, Any] = json.loads((where / run_id / "meta.json").read_text("utf-8"))
    assert (meta_doc["status"], meta_doc["exit_code"]) == ("ok", 1)
    done = cli("status", run_id, f"--store={where}")  # from the store: no broker needed
    assert done.returncode == 0 and done.stdout.startswith(f"{run_id} SUCCESS "), done.stderr
    out = tmp_path / "r.json"
    got = cli("report", run_id, "--format=json", f"--output={out}", f"--store={where}")
    assert got.returncode == 0, got.stderr
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert doc["run"]["id"] == run_id and any("F841" in i["title"] for i in doc["issues"])
    assert out.read_bytes() == (where / run_id / "report.json").read_bytes()


def test_no_wait_without_store_uses_the_workers_default(
    scenario: Repo, broker: str, worker_store: Path, worker: subprocess.Popen[bytes]
) -> None:
    run_id = no_wait(scenario, broker)
    wait_for(worker_store / run_id / "meta.json")
    assert (worker_store / run_id / "report.md").read_text("utf-8").startswith("# Verification")


def test_status_of_an_unknown_run_on_redis(tmp_path: Path, broker: str) -> None:
    proc = cli("status", RUN_ID, f"--store={tmp_path}", f"--broker={broker}")
    assert proc.returncode == 2 and proc.stdout == ""
    one_error_line(proc.stderr, "none known to the result backend")


def test_no_wait_refuses_output(scenario: Repo, tmp_path: Path, broker: str) -> None:
    proc = cli(
        "verify",
        str(scenario.path),
        "--no-wait",
        f"--broker={broker}",
        f"--output={tmp_path / 'r.md'}",
    )
    assert proc.returncode == 2
    one_error_line(proc.stderr, "--no-wait")
