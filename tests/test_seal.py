"""The seal on a built env, on a small tree of its own: what it records and what breaks it."""

from __future__ import annotations

import os
from pathlib import Path

from verify_dag.phases.tester.env import seal


def _tree(root: Path) -> None:
    (root / "lib/pkg/sub").mkdir(parents=True)
    (root / "lib/pkg/__init__.py").write_text("X = 1\n", encoding="utf-8")
    (root / "lib/pkg/sub/mod.py").write_text("Y = 2\n", encoding="utf-8")
    (root / "bin").mkdir()
    os.symlink("../lib/pkg/__init__.py", root / "bin/python")
    (root / "bin/activate").write_text("# shell\n", encoding="utf-8")
    (root / "logs").mkdir()
    (root / "logs/run.log").write_text("first\n", encoding="utf-8")


def test_an_untouched_tree_keeps_its_seal_and_skipped_names_are_not_looked_at(
    tmp_path: Path,
) -> None:
    _tree(tmp_path)
    seal.seal(tmp_path, skip=frozenset({"logs"}))
    assert seal.broken(tmp_path) is None
    (tmp_path / "logs/run.log").write_text("second run\n", encoding="utf-8")
    (tmp_path / "logs/new.log").write_text("\n", encoding="utf-8")
    assert seal.broken(tmp_path) is None


def test_added_changed_and_removed_files_break_the_seal_in_order(tmp_path: Path) -> None:
    _tree(tmp_path)
    seal.seal(tmp_path)
    (tmp_path / "lib/pkg/sub/mod.py").write_text("Y = 3\n", encoding="utf-8")
    (tmp_path / "lib/pkg/b.pth").write_text("import os\n", encoding="utf-8")
    (tmp_path / "lib/pkg/a.pth").write_text("import os\n", encoding="utf-8")
    (tmp_path / "bin/activate").unlink()
    (tmp_path / "bin/python").unlink()
    os.symlink("/usr/bin/false", tmp_path / "bin/python")
    assert seal.broken(tmp_path) == (
        "added lib/pkg/a.pth, lib/pkg/b.pth; changed bin/python, lib/pkg/sub/mod.py; "
        "removed bin/activate"
    )


def test_a_file_rewritten_with_the_same_bytes_is_not_a_change(tmp_path: Path) -> None:
    _tree(tmp_path)
    seal.seal(tmp_path)
    target = tmp_path / "lib/pkg/__init__.py"
    target.write_text("X = 1\n", encoding="utf-8")  # its ctime moved: hashed again, the same
    assert seal.broken(tmp_path) is None


def test_no_seal_or_a_damaged_one_is_broken(tmp_path: Path) -> None:
    _tree(tmp_path)
    assert seal.broken(tmp_path) == "it has no seal"
    seal.seal(tmp_path)
    (tmp_path / seal.RECORD).write_text("{", encoding="utf-8")
    assert seal.broken(tmp_path) == "it has no seal"
