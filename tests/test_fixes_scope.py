"""Phase 9 on a staged or unstaged change (docs/fixes.md, "Staged and unstaged changes"): fixes
are proposed and checked against the snapshot that was verified, never HEAD, and land where the
change is: the work tree for an unstaged change, the index and the work tree for a staged one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import Repo, calc_base, verify_json
from fixdata import CHANGED, GUARD, ZERO, fix_reply, replies, reviewer_sees

from verify_dag import git
from verify_dag.cli import main


def _auto_fix(repo: Repo, tmp_path: Path, scope: str) -> tuple[str, list[dict[str, Any]]]:
    """The run's id and its fixes, each with its issue's title."""
    _, doc = verify_json(repo, tmp_path, f"--scope={scope}", "--mode=auto-fix")
    assert doc["scope"]["mode"] == scope
    by_id = {i["id"]: i for i in doc["issues"]}
    return doc["run"]["id"], [{**f, "title": by_id[f["issue"]]["title"]} for f in doc["fixes"]]


@pytest.fixture
def answers(tmp_path: Path, fake_claude: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    # The model fixes the division on line 10 of the changed file, which HEAD's two-line
    # file does not have; the reviewer reports it until the guard is there.
    replies(
        tmp_path,
        monkeypatch,
        {"prompt": "Issue VI-1 (severity 7", "reply": fix_reply(("Guard the empty list", GUARD))},
        {"prompt": "Propose fixes for one issue", "reply": '{"options": []}'},
        *reviewer_sees(ZERO, unless_guarded=()),
    )
    return fake_claude


@pytest.mark.usefixtures("answers")
def test_a_staged_change_is_fixed_in_the_index_and_the_work_tree(
    repo: Repo, tmp_path: Path
) -> None:
    """004 Phase 9, auto-fix: "Auto-accept all issues with severity >= --auto-fix-threshold",
    "Execute fixes", "Do NOT commit"; Skip is "will not fix in this change set". A staged
    change set is verified as the index's snapshot (compare_ref INDEX), so the fixer's prompt
    shows the staged lines, ruff's fix is read from them, the model's edit of line 10 applies,
    and the fixes go to the index and the work tree; HEAD is not moved."""
    calc_base(repo)
    head = repo.head()
    repo.write("src/calc.py", CHANGED)
    repo.git("add", "src/calc.py")
    run_id, fixes = _auto_fix(repo, tmp_path, "staged")
    applied = {f["title"]: (f["origin"], f["applied"], f["verified"]) for f in fixes}
    assert applied["Division by zero when the list is empty"] == ("model", True, "fixed")
    assert ("ruff", True, "fixed") in applied.values(), applied
    staged = git.index_text(repo.path, "src/calc.py")
    assert (repo.path / "src/calc.py").read_text(encoding="utf-8") == staged
    assert staged is not None and "import" not in staged and "if not values:" in staged
    assert repo.head() == head
    # restore puts the index back as well as the work tree.
    assert main(["restore", run_id, str(repo.path)]) == 0
    assert git.index_text(repo.path, "src/calc.py") == CHANGED
    assert (repo.path / "src/calc.py").read_text(encoding="utf-8") == CHANGED


@pytest.mark.usefixtures("answers")
def test_an_unstaged_change_is_fixed_in_the_work_tree_only(repo: Repo, tmp_path: Path) -> None:
    """004 Phase 9 on an unstaged change (compare_ref WORKTREE): proposed against the work
    tree's snapshot, applied to the work tree; the index keeps what it had."""
    calc_base(repo)
    repo.write("src/calc.py", CHANGED)
    _, fixes = _auto_fix(repo, tmp_path, "unstaged")
    origins = sorted(str(f["origin"]) for f in fixes if f["applied"])
    assert origins == ["model", "ruff", "ruff"], fixes
    text = (repo.path / "src/calc.py").read_text(encoding="utf-8")
    assert "import" not in text and "if not values:" in text
    assert git.index_text(repo.path, "src/calc.py") == "def add(a, b):\n    return a + b\n"
    assert repo.git("status", "--porcelain") == "M src/calc.py"
