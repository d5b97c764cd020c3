"""verify_dag.files: atomic replacement and inter-process locks."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from verify_dag.files import file_lock, write_atomic


def test_write_atomic_replaces_and_keeps_a_given_mode(tmp_path: Path) -> None:
    where = tmp_path / "d"
    where.mkdir()
    target = where / "f.txt"
    target.write_text("old\r\n", encoding="utf-8")
    write_atomic(target, b"new\r\n", mode=0o640)
    assert target.read_bytes() == b"new\r\n"
    assert target.stat().st_mode & 0o777 == 0o640
    assert [p.name for p in where.iterdir()] == ["f.txt"]  # no temporary file left


def test_write_atomic_leaves_nothing_behind_on_failure(tmp_path: Path) -> None:
    where = tmp_path / "d"
    where.mkdir()
    (where / "f.txt").mkdir()  # os.replace cannot put a file over a directory
    with pytest.raises(IsADirectoryError):
        write_atomic(where / "f.txt", b"x")
    assert [p.name for p in where.iterdir()] == ["f.txt"]


def test_file_lock_excludes_another_process(tmp_path: Path) -> None:
    lock = tmp_path / "x.lock"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from pathlib import Path; from verify_dag.files import file_lock\n"
            "with file_lock(Path(sys.argv[1])):\n    print('held', flush=True); time.sleep(30)",
            str(lock),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        start = time.monotonic()
        with file_lock(lock, deadline=start + 0.5) as got:
            assert got is False
        assert time.monotonic() - start >= 0.4
    finally:
        holder.kill()
        holder.wait()
    with file_lock(lock, deadline=time.monotonic()) as got:
        assert got is True
