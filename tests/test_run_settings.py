"""The run settings a repository makes in its [tool.verify-dag] (depth, fail-on, test and tool
time limits): read by the client, below the command line's flags, and an unknown key refused up
front with the file and the key."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import Repo, calc_base, run_cli, verify_json


def configured(repo: Repo, table: str) -> Repo:
    calc_base(repo)
    pyproject = (repo.path / "pyproject.toml").read_text(encoding="utf-8")
    repo.write("pyproject.toml", pyproject + "\n[tool.verify-dag]\n" + table)
    repo.commit("configure verify-dag")
    repo.git("tag", "-f", "base")
    repo.write("src/calc.py", "import os\n\n\ndef add(a, b):\n    return a + b\n")
    repo.commit("an unused import")
    return repo


def test_the_repository_sets_depth_and_fail_on_and_the_flags_win(
    repo: Repo, tmp_path: Path
) -> None:
    configured(repo, 'depth = "deep"\nfail-on = 3\ntool-timeout = 120\nallow-incomplete = true\n')
    rc, doc = verify_json(repo, tmp_path, "--scope=branch", "--base=base")
    # F401 is severity 5: below the default gate of 7, at or above the repository's 3.
    assert doc["scope"]["depth"] == "deep" and doc["run"]["gates"]["failOn"] == 3 and rc == 1
    rc, doc = verify_json(repo, tmp_path, "--scope=branch", "--base=base", "--fail-on=7")
    # The reviewers did not run (no backend), which the repository accepts (allow-incomplete).
    assert doc["run"]["gates"]["failOn"] == 7 and rc == 0
    assert doc["run"]["gates"]["allowIncomplete"] is True


@pytest.mark.parametrize(
    ("table", "said"),
    [
        ("fail_on = 3\n", "unknown key 'fail_on' (known: depth, fail-on, allow-incomplete,"),
        ('depth = "deeper"\n', "depth: expected light or deep, got 'deeper'"),
        ("test-timeout = 0\n", "test-timeout: expected a number of seconds above 0, got 0"),
    ],
)
def test_a_bad_table_is_one_line_and_exit_2(repo: Repo, table: str, said: str) -> None:
    configured(repo, table)
    proc = run_cli("verify", str(repo.path), "--scope=branch", "--base=base")
    assert proc.returncode == 2
    assert proc.stderr.startswith(
        f"verify-dag: error: {repo.path / 'pyproject.toml'} [tool.verify-dag]: {said}"
    ), proc.stderr
    assert proc.stderr.count("\n") == 1
