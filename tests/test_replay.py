"""An unchanged re-verify answered before a run is built (verify_dag/cli/replay.py): a run whose
every part came from the result cache is kept with its key; the next identical request prints
its report and exits with its code without importing Celery, kombu or pydantic; anything the
answer depended on changing (a commit, a ref, the work tree's settings, the environment) builds
the run again, and a run that computed anything is never kept."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import BRANCH, Repo

from verify_dag import paths

# verify-dag's main, and afterwards the heavy packages this process imported (on stderr).
_PROBE = (
    "import sys\n"
    "from verify_dag.cli import main\n"
    "rc = main(sys.argv[1:])\n"
    "heavy = sorted({m.split('.')[0] for m in sys.modules} & {'celery', 'kombu', 'pydantic'})\n"
    "print('IMPORTED', ','.join(heavy) or '-', file=sys.stderr)\n"
    "sys.exit(rc)\n"
)
_REPLAYED = "verify-dag: nothing changed since run "


def verify(
    repo: Repo, *flags: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _PROBE, "verify", str(repo.path), *BRANCH, *flags],
        capture_output=True, text=True, timeout=300, env=env, check=False,
    )  # fmt: skip


def kept() -> list[Path]:
    return sorted((paths.results_root() / "replay").glob("*/*.json"))


def store_runs(tmp_path: Path) -> set[str]:
    return {p.name for p in (tmp_path / "store").iterdir() if p.is_dir()}


def test_an_unchanged_reverify_is_answered_before_a_run_is_built(
    calc: Repo, tmp_path: Path
) -> None:
    first = verify(calc)
    # Incomplete: no issue fails it, and no model backend is configured for the reviewer.
    assert first.returncode == 4, first.stderr
    assert kept() == []  # it ran the tools and the suite: nothing to keep
    second = verify(calc)
    assert second.returncode == 4 and _REPLAYED not in second.stderr
    assert "IMPORTED celery,kombu,pydantic" in second.stderr  # a run was built
    (entry,) = kept()
    run_id = json.loads(entry.read_text(encoding="utf-8"))["run"]
    runs = store_runs(tmp_path)
    assert len(runs) == 2 and run_id in runs  # the second run's

    third = verify(calc)
    assert (third.returncode, third.stdout) == (4, second.stdout)
    assert third.stderr.splitlines()[-2] == second.stderr.splitlines()[-2]  # incomplete: why
    assert f"{_REPLAYED}{run_id} (" in third.stderr
    assert "IMPORTED -" in third.stderr  # answered before Celery, kombu or pydantic
    assert store_runs(tmp_path) == runs  # no run was made: the answer names the one that was
    assert "[1/" not in third.stderr  # and no phase reported progress


def test_a_failing_change_is_answered_once_its_reruns_are_kept(scenario: Repo) -> None:
    # The exerciser re-runs the failing test alone and the debugger at the merge base; from the
    # second run on both come from the result cache, so the third is answered.
    first, second, third = verify(scenario), verify(scenario), verify(scenario)
    assert first.returncode == second.returncode == third.returncode == 1
    assert _REPLAYED not in second.stderr and _REPLAYED in third.stderr
    assert third.stdout == second.stdout and "test_mul" in third.stdout


def test_a_kept_answer_that_cannot_be_read_builds_the_run_and_is_replaced(calc: Repo) -> None:
    verify(calc)
    second = verify(calc)
    (entry,) = kept()
    entry.write_text('{"format": 1, "key": "not its name"', encoding="utf-8")
    rebuilt = verify(calc)
    assert _REPLAYED not in rebuilt.stderr and "IMPORTED celery" in rebuilt.stderr
    assert (rebuilt.returncode, rebuilt.stdout) == (second.returncode, second.stdout)
    assert _REPLAYED in verify(calc).stderr  # kept again by the run that was built


def test_a_report_file_is_written_again_to_a_new_path_never_over_one(
    calc: Repo, tmp_path: Path
) -> None:
    for n in (1, 2):
        assert verify(calc, "--format=json", f"--output={tmp_path / f'r{n}.json'}").returncode
    third = verify(calc, "--format=json", f"--output={tmp_path / 'r3.json'}")
    assert _REPLAYED in third.stderr and third.returncode == 4
    assert (tmp_path / "r3.json").read_bytes() == (tmp_path / "r2.json").read_bytes()
    assert f"written to {tmp_path / 'r3.json'}" in third.stdout
    again = verify(calc, "--format=json", f"--output={tmp_path / 'r3.json'}")
    assert again.returncode == 2 and "already exists" in again.stderr
    assert (tmp_path / "r3.json").read_bytes() == (tmp_path / "r2.json").read_bytes()


def test_what_the_answer_depended_on_changing_builds_the_run_again(
    calc: Repo, tmp_path: Path
) -> None:
    verify(calc)
    verify(calc)
    assert _REPLAYED in verify(calc).stderr

    # The work tree's [tool.verify-dag] (read from there, not from the commit): it changes the
    # exit code, so a kept answer would have been wrong.
    pyproject = calc.path / "pyproject.toml"
    before = pyproject.read_text(encoding="utf-8")
    pyproject.write_text(before + "\n[tool.verify-dag]\nallow-incomplete = true\n", "utf-8")
    allowed = verify(calc)
    assert _REPLAYED not in allowed.stderr and allowed.returncode == 0
    pyproject.write_text(before, encoding="utf-8")
    assert _REPLAYED in verify(calc).stderr  # back as it was: the same answer again

    # The environment a run reads its settings (and its tools' settings) from.
    env = {**os.environ, "VERIFY_DAG_EFFORT": "high"}
    assert _REPLAYED not in verify(calc, env=env).stderr

    # A ref the request names, moved to another commit.
    calc.git("tag", "-f", "base", "HEAD")
    moved = verify(calc)
    assert _REPLAYED not in moved.stderr
    assert "Nothing to verify" in moved.stdout and moved.returncode == 0

    # --no-cache computes everything, and keeps nothing.
    calc.git("tag", "-f", "base", "HEAD~1")
    before_runs = kept()
    fresh = verify(calc, "--no-cache")
    assert _REPLAYED not in fresh.stderr and fresh.returncode == 4
    assert kept() == before_runs


def test_a_base_the_run_fetches_first_is_never_answered(calc: Repo, tmp_path: Path) -> None:
    # origin/main is fetched before the run compares with it: a kept answer could not know
    # where it points now.
    origin = tmp_path / "origin.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(calc.path), str(origin)], check=True)
    subprocess.run(
        ["git", "-C", str(origin), "update-ref", "refs/heads/main", calc.git("rev-parse", "base")],
        check=True,
    )
    calc.git("remote", "add", "origin", str(origin))
    for _ in range(3):
        out = verify(calc, "--base=origin/main")
        assert out.returncode == 4 and _REPLAYED not in out.stderr, out.stderr
    assert kept() == []


def test_a_request_narrowed_to_files_is_never_answered(calc: Repo) -> None:
    # The files are read from the work tree as it is now (a snapshot of it is verified).
    for _ in range(3):
        out = subprocess.run(
            [sys.executable, "-c", _PROBE, "verify", str(calc.path), "--files=src/calc.py"],
            capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        assert out.returncode == 4 and _REPLAYED not in out.stderr, out.stderr
    assert kept() == []


def test_a_mode_that_changes_the_work_tree_is_never_answered(calc: Repo) -> None:
    for _ in range(3):
        out = verify(calc, "--mode=auto-fix")
        assert _REPLAYED not in out.stderr
    assert kept() == []
