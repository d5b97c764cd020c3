"""An output format is one renderer of the Report model and its line in report.formats.FORMATS."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import Repo, calc_base

from verify_dag.cli import main
from verify_dag.models.report import Report
from verify_dag.report import formats


def issue_count(report: Report) -> str:
    """A stand-in format: what a new module in verify_dag/report/ would render."""
    return f"{len(report.issues)} issue(s), status {report.status}\n"


def test_a_format_registered_in_one_line_is_offered_and_rendered_from_the_report(
    repo: Repo,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    calc_base(repo)
    repo.write(
        "src/calc.py", "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n"
    )
    repo.commit("calc: sub")
    fmt = formats.OutputFormat("count", "Count report", f"{__name__}:issue_count")
    monkeypatch.setitem(formats.FORMATS, "count", fmt)
    plain = tmp_path / "report.json"
    plain_rc = main(["verify", str(repo.path), "--scope=branch", "--base=base", "--depth=light",
                     "--format=json", f"--output={plain}"])  # fmt: skip
    doc = json.loads(plain.read_text(encoding="utf-8"))
    capsys.readouterr()

    out = tmp_path / "report.count"
    rc = main(["verify", str(repo.path), "--scope=branch", "--base=base", "--depth=light",
               "--format=count", f"--output={out}"])  # fmt: skip
    assert rc == plain_rc
    assert capsys.readouterr().out == f"Count report written to {out}\n"
    assert out.read_text(encoding="utf-8") == (
        f"{len(doc['issues'])} issue(s), status {doc['status']}\n"
    )
    assert doc["status"] == "ok"
