"""verify --contract: the contract verifier as a skill of the review chord."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from conftest import Repo, calc_base, make_repo, run_cli, verify_branch

from verify_dag import report

CONTRACT = """\
# Contract: add sub()

## REQUEST
Add `sub()` to the calculator.

## ACCEPTANCE CRITERIA
1. `sub()` subtracts
   CHECK: echo ok
   EXPECT: output contains "ok"
   EVIDENCE: MET ok
2. The existing tests still pass
   CHECK: python -m pytest -q tests/test_calc.py
   EXPECT: exit 0
   EVIDENCE: MET exit 0

## FILE SCOPE
- src/**
- tests/**
"""


def project(path: Path) -> Repo:
    repo = calc_base(make_repo(path))
    repo.write(
        "src/calc.py", "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n"
    )
    # A weakening (the old test is skipped) and a file outside FILE SCOPE.
    repo.write(
        "tests/test_calc.py",
        "import pytest\n\nfrom calc import add\n\n\n"
        "def test_add():\n    pytest.skip('later')\n"
        "    assert add(2, 2) == 4\n",
    )
    repo.write("docs/notes.md", "sub is new\n")
    repo.commit("calc: sub")
    return repo


def verify(repo: Repo, out: Path, *flags: str) -> tuple[int, dict[str, Any]]:
    res = subprocess.run(
        # No reviewer runs (no backend): accepted, the contract's criteria are the point.
        verify_branch(
            repo, "--format=json", f"--output={out}", "--quiet", "--allow-incomplete", *flags
        ),
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert res.stderr == "", res.stderr
    doc = json.loads(out.read_text(encoding="utf-8"))
    report.validate(doc)
    return res.returncode, doc


def test_contract_gaps_become_findings_of_the_report(tmp_path: Path) -> None:
    repo = project(tmp_path / "repo")
    contract = tmp_path / "CONTRACT.md"
    contract.write_text(CONTRACT, encoding="utf-8")
    rc, doc = verify(repo, tmp_path / "r.json", f"--contract={contract}")
    row = next(s for s in doc["skillResults"] if s["skill"] == "contract")
    assert row["status"] == "COMPLETED" and "ECARTS(" in row["notes"], row
    titles = [i["title"] for i in doc["issues"]]
    # echo ok cannot fail: its MET evidence proves nothing.
    assert any(t.startswith("Contract criterion 1 not met") for t in titles), titles
    assert not any(t.startswith("Contract criterion 2") for t in titles), titles
    assert "File outside the contract's FILE SCOPE: docs/notes.md" in titles, titles
    floor = [i for i in doc["issues"] if i["title"].startswith("Floor weakened")]
    assert floor and floor[0]["location"]["path"] == "tests/test_calc.py", titles
    assert rc == 1  # a criterion not met is severity 8


def test_no_contract_no_contract_skill(tmp_path: Path) -> None:
    repo = project(tmp_path / "repo")
    _rc, doc = verify(repo, tmp_path / "r.json")
    assert "contract" not in [s["skill"] for s in doc["skillResults"]]


def test_missing_contract_file_is_a_usage_error(tmp_path: Path) -> None:
    repo = project(tmp_path / "repo")
    res = run_cli("verify", str(repo.path), f"--contract={tmp_path / 'nope.md'}")
    assert res.returncode == 2 and res.stderr.count("\n") == 1, res.stderr
    assert "--contract: no such file" in res.stderr
