"""verify_dag.git on real repositories: diff parsing, refs, snapshots, worktrees."""

from __future__ import annotations

import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from conftest import Repo, make_repo

from verify_dag import git
from verify_dag.errors import FatalError, UsageError
from verify_dag.git import parse as gitparse


def _index_bytes(repo: Repo) -> bytes:
    return (repo.path / ".git" / "index").read_bytes()


def _status(repo: Repo) -> str:
    return repo.git("status", "--porcelain=v1", "-z", "--untracked-files=all")


# --- refs ------------------------------------------------------------------------------------

GOOD_REFS = [
    "main",
    "origin/main",
    "HEAD",
    "HEAD~1",
    "HEAD^",
    "HEAD~2^2",
    "v1.0",
    "feature/x-y",
    "0123abcd",
    "a" * 40,
    "main^{commit}",
    "@",
    "release_2024.1",
]
BAD_REFS = [
    "",
    "-x",
    "--output=/tmp/x",
    "a b",
    "a\tb",
    "a\nb",
    "a..b",
    "main..",
    "x@{1}",
    "a:b",
    "a?",
    "a*",
    "a[",
    "a\\b",
    "/a",
    "a/",
    "a//b",
    "a.",
    ".a",
    "a/.b",
    "a.lock",
    "~1",
    "a~x",
]


@pytest.mark.parametrize("ref", GOOD_REFS)
def test_valid_ref_accepts_revisions(ref: str) -> None:
    assert gitparse.valid_ref(ref)


@pytest.mark.parametrize("ref", BAD_REFS)
def test_valid_ref_rejects_unsafe(ref: str) -> None:
    assert not gitparse.valid_ref(ref)
    with pytest.raises(UsageError):
        git.check_ref(ref)


def test_ref_names_agree_with_check_ref_format() -> None:
    names = [
        "main",
        "origin/main",
        "a..b",
        "a b",
        "x@{1}",
        "a.lock",
        "/a",
        "a//b",
        ".a",
        "a.",
        "a:b",
        "a^",
        "a~1",
        "feature/x",
        "@",
        "a?b",
        "ok-name_1.2",
    ]
    for name in names:
        real = (
            subprocess.run(
                ["git", "check-ref-format", "--allow-onelevel", name], capture_output=True
            ).returncode
            == 0
        )
        assert gitparse.valid_ref_name(name) is real, name


def test_toplevel_and_errors(repo: Repo, tmp_path: Path) -> None:
    (repo.path / "sub").mkdir()
    assert git.toplevel(repo.path / "sub") == repo.path.resolve()
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(UsageError, match="not a git repository"):
        git.toplevel(plain)
    with pytest.raises(UsageError, match="not a git repository"):
        git.toplevel(tmp_path / "missing")


def test_commits_and_refs(repo: Repo) -> None:
    assert not git.has_commits(repo.path)
    assert git.verify_commit(repo.path, "HEAD") is None
    repo.write("a.txt", "1\n")
    first = repo.commit("one")
    repo.write("a.txt", "2\n")
    second = repo.commit("two")
    assert git.has_commits(repo.path)
    assert git.head(repo.path) == second
    assert git.verify_commit(repo.path, "HEAD~1") == first
    assert git.verify_commit(repo.path, first[:8]) == first
    assert git.verify_commit(repo.path, "nope") is None
    assert git.verify_commit(repo.path, "-h") is None
    assert git.merge_base(repo.path, first, "HEAD") == first
    assert git.rev_parse(repo.path, "HEAD^{tree}") == repo.git("rev-parse", "HEAD^{tree}")
    assert git.read_file(repo.path, first, "a.txt") == "1\n"
    assert git.read_file(repo.path, first, "missing") is None
    assert git.list_files(repo.path, "HEAD") == ["a.txt"]
    assert not git.remote_exists(repo.path, "origin")
    assert git.symbolic_ref(repo.path, "refs/remotes/origin/HEAD") is None


def test_fetch_failure_is_reported_not_raised(repo: Repo, tmp_path: Path) -> None:
    repo.write("a", "x")
    repo.commit()
    repo.git("remote", "add", "origin", str(tmp_path / "gone.git"))
    ok, why = git.fetch(repo.path, "origin")
    assert not ok and why
    assert git.remote_show_head_branch(repo.path, "origin") is None


# --- diffs -----------------------------------------------------------------------------------


def test_name_status_renames_binary_and_odd_names(repo: Repo) -> None:
    body = "".join(f"line {i}\n" for i in range(1, 21))
    repo.write("old.py", body)
    repo.write("gone.txt", "bye\n")
    repo.write("mod.txt", "a\nb\nc\n")
    base = repo.commit("base")
    repo.git("mv", "old.py", "new.py")
    repo.write("new.py", body.replace("line 3\n", "LINE 3\n"))
    (repo.path / "gone.txt").unlink()
    repo.write("mod.txt", "a\nB\nc\nd\n")
    repo.write("img.bin", b"\x00\x01\x02\xff" * 10)
    odd = ["with space.py", "ünï.py", "-dash.py", "new\nline.py", "tab\there.py", 'q"uote.py']
    for name in odd:
        repo.write(name, "x\ny\n")
    head = repo.commit("change")

    deltas = {d.path: d for d in git.name_status(repo.path, base, head)}
    assert deltas["new.py"].status == "R" and deltas["new.py"].old_path == "old.py"
    assert deltas["gone.txt"].status == "D"
    assert deltas["mod.txt"].status == "M"
    assert deltas["img.bin"].status == "A"
    for name in odd:
        assert deltas[name].status == "A", name

    assert git.binary_paths(repo.path, base, head) == {"img.bin"}
    ranges = git.line_ranges(repo.path, base, head)
    assert ranges["new.py"] == [(3, 3)]
    assert ranges["mod.txt"] == [(2, 2), (4, 4)]
    for name in odd:
        assert ranges[name] == [(1, 2)], name
    assert "gone.txt" not in ranges and "img.bin" not in ranges
    assert "mod.txt" in git.diff_stat(repo.path, base, head)
    no_renames = {d.path: d.status for d in git.name_status(repo.path, base, head, renames=False)}
    assert no_renames["old.py"] == "D" and no_renames["new.py"] == "A"


# A -U0 patch: pure deletions, a header-like line inside a body, a quoted path, a deleted file.
_PATCH = "\n".join(
    [
        "diff --git a/x b/x",
        "index 1..2 100644",
        "--- a/x",
        "+++ b/x",
        "@@ -1,2 +0,0 @@",
        "-gone",
        "-gone",
        "@@ -10 +8 @@",
        "-old",
        "+++ b/fake header inside a body",
        "@@ -20,0 +19,3 @@ def f():",
        "+a",
        "+b",
        "+c",
        "\\ No newline at end of file",
        'diff --git "a/n\\303\\274 x" "b/n\\303\\274 x"',
        '--- "a/n\\303\\274 x"',
        '+++ "b/n\\303\\274 x"',
        "@@ -1 +1 @@",
        "-a",
        "+b",
        "diff --git a/d b/d",
        "deleted file mode 100644",
        "--- a/d",
        "+++ /dev/null",
        "@@ -1 +0,0 @@",
        "-x",
        "",
    ]
)


def test_parse_hunks_counts_bodies_and_pure_deletions() -> None:
    assert gitparse.parse_hunks(_PATCH) == {"x": [(8, 8), (19, 21)], "nü x": [(1, 1)]}


def test_parse_file_hunks_keeps_both_sides_of_every_hunk_per_path() -> None:
    assert gitparse.parse_file_hunks(_PATCH) == {
        "x": [(1, 2, 0, 0), (10, 1, 8, 1), (20, 0, 19, 3)],
        "nü x": [(1, 1, 1, 1)],
        "d": [(1, 1, 0, 0)],
    }


def test_parse_z_records() -> None:
    out = "M\0a b\0R087\0old\0new\nname\0C100\0src\0copy\0D\0-gone\0T\0link\0"
    assert gitparse.parse_name_status(out) == [
        gitparse.Delta("M", "a b"),
        gitparse.Delta("R", "new\nname", "old"),
        gitparse.Delta("C", "copy", "src"),
        gitparse.Delta("D", "-gone"),
        gitparse.Delta("T", "link"),
    ]
    numstat = "1\t2\ttext\twith tab\0-\t-\tpic.png\0-\t-\t\0old.bin\0new.bin\0"
    assert gitparse.parse_numstat_binary(numstat) == {"pic.png", "new.bin"}


def test_type_change_and_binary_rename(repo: Repo) -> None:
    repo.write("link", "was a file\n")
    repo.write("blob.bin", bytes(range(256)) * 4)
    base = repo.commit()
    (repo.path / "link").unlink()
    (repo.path / "link").symlink_to("target")
    repo.git("mv", "blob.bin", "moved.bin")
    head = repo.commit()
    deltas = {d.path: d for d in git.name_status(repo.path, base, head)}
    assert deltas["link"].status == "T"
    assert deltas["moved.bin"] == gitparse.Delta("R", "moved.bin", "blob.bin")
    assert git.binary_paths(repo.path, base, head) == {"moved.bin"}
    assert git.line_ranges(repo.path, base, head) == {"link": [(1, 1)]}


def test_ls_files_untracked_and_tree(repo: Repo) -> None:
    repo.write(".gitignore", "*.log\n")
    repo.write("src/a.py", "a\n")
    repo.write("-lead.py", "b\n")
    repo.commit()
    repo.write("new.py", "c\n")
    repo.write("debug.log", "ignored\n")
    assert git.ls_files(repo.path) == ["-lead.py", ".gitignore", "src/a.py"]
    assert git.ls_files(repo.path, ["src"]) == ["src/a.py"]
    assert git.ls_files(repo.path, ["-lead.py"]) == ["-lead.py"]
    assert git.untracked(repo.path) == ["new.py"]
    assert git.ls_tree(repo.path, "HEAD", ["src"]) == ["src/a.py"]
    assert len(git.empty_tree(repo.path)) == 40


# --- snapshots -------------------------------------------------------------------------------


def _dirty_repo(repo: Repo) -> Repo:
    repo.write(".gitignore", "*.log\n")
    repo.write("a.py", "one\n")
    repo.write("b.py", "two\n")
    repo.commit("base")
    repo.write("a.py", "one\nstaged\n")
    repo.git("add", "a.py")
    repo.write("a.py", "one\nstaged\nunstaged\n")
    repo.write("b.py", "two changed\n")
    repo.write("untracked.py", "new\n")
    repo.write("debug.log", "ignored\n")
    return repo


def test_snapshots_leave_index_and_worktree_alone(repo: Repo) -> None:
    _dirty_repo(repo)
    _status(repo)  # let git refresh stat data first; from here on nothing may write the index
    status_before = _status(repo)
    index_before = _index_bytes(repo)
    head = repo.head()

    idx = git.snapshot_index(repo.path)
    wt = git.snapshot_worktree(repo.path, idx)
    assert _index_bytes(repo) == index_before

    assert idx != head and repo.git("rev-parse", f"{idx}^") == head
    assert repo.git("show", f"{idx}:a.py") == "one\nstaged"
    assert repo.git("show", f"{idx}:b.py") == "two"
    assert repo.git("rev-parse", f"{wt}^") == idx
    assert repo.git("show", f"{wt}:a.py") == "one\nstaged\nunstaged"
    assert repo.git("show", f"{wt}:untracked.py") == "new"
    assert "debug.log" not in git.ls_tree(repo.path, wt)
    assert _status(repo) == status_before
    assert (repo.path / "a.py").read_text() == "one\nstaged\nunstaged\n"


def test_snapshots_of_clean_state_are_the_parent(repo: Repo) -> None:
    repo.write("a.py", "x\n")
    head = repo.commit()
    assert git.snapshot_index(repo.path) == head
    assert git.snapshot_worktree(repo.path, head) == head


def test_snapshot_without_identity(repo: Repo) -> None:
    repo.write("a.py", "x\n")
    repo.commit()
    repo.git("config", "--unset", "user.name")
    repo.git("config", "--unset", "user.email")
    repo.write("a.py", "y\n")
    assert git.snapshot_worktree(repo.path, repo.head()) != repo.head()


def test_snapshot_index_with_conflicts_is_fatal(repo: Repo) -> None:
    repo.write("a.py", "base\n")
    repo.commit("base")
    repo.git("checkout", "-q", "-b", "other")
    repo.write("a.py", "other\n")
    repo.commit("other")
    repo.git("checkout", "-q", "main")
    repo.write("a.py", "main\n")
    repo.commit("main")
    subprocess.run(["git", "merge", "-q", "other"], cwd=repo.path, capture_output=True)
    with pytest.raises(FatalError, match="cannot snapshot the index"):
        git.snapshot_index(repo.path)


def test_worktree_checks_out_and_cleans_up(repo: Repo) -> None:
    _dirty_repo(repo)
    wt = git.snapshot_worktree(repo.path, git.snapshot_index(repo.path))
    with git.worktree(repo.path, wt) as path:
        assert (path / "untracked.py").read_text() == "new\n"
        assert (path / "a.py").read_text() == "one\nstaged\nunstaged\n"
        assert git.toplevel(path) == path.resolve()
        kept = path
    assert not kept.exists() and not kept.parent.exists()
    assert repo.git("worktree", "list", "--porcelain").count("worktree ") == 1


def test_worktree_rejects_non_commit(repo: Repo) -> None:
    repo.write("a.py", "x\n")
    repo.commit()
    with pytest.raises(FatalError), git.worktree(repo.path, ""):
        pass


def test_worktree_cleans_up_after_error(repo: Repo) -> None:
    repo.write("a.py", "x\n")
    head = repo.commit()
    with pytest.raises(RuntimeError), git.worktree(repo.path, head) as path:
        raise RuntimeError("boom")
    assert not path.exists()
    assert repo.git("worktree", "list", "--porcelain").count("worktree ") == 1


def test_worktree_does_not_run_repository_hooks(repo: Repo, tmp_path: Path) -> None:
    repo.write("a.py", "x\n")
    head = repo.commit()
    marker = tmp_path / "hook-ran"
    hook = repo.path / ".git" / "hooks" / "post-checkout"
    hook.write_text(f"#!/bin/sh\ntouch {marker}\n")
    hook.chmod(0o755)
    with git.worktree(repo.path, head):
        pass
    assert not marker.exists()


def test_parallel_checkouts_of_one_repository(repo: Repo) -> None:
    # Phases of one run and runs of one repository check it out at the same time; with linked
    # worktrees, git's own add/remove raced (about 1 in 15 failed at this load).
    repo.write("a.py", "x\n")
    head = repo.commit()
    repo.write("a.py", "y\n")
    snap = git.snapshot_worktree(repo.path, head)

    def check_out(n: int) -> str:
        sha, want = (head, "x\n") if n % 2 else (snap, "y\n")
        with git.worktree(repo.path, sha) as path:
            assert (path / "a.py").read_text() == want
            return git.head(path)

    with ThreadPoolExecutor(max_workers=8) as pool:
        got = list(pool.map(check_out, range(80)))
    assert got == [head if n % 2 else snap for n in range(80)]
    assert repo.git("worktree", "list", "--porcelain").count("worktree ") == 1


def test_sha256_repository(tmp_path: Path) -> None:
    path = tmp_path / "r256"
    subprocess.run(
        ["git", "init", "-q", "--object-format=sha256", "-b", "main", str(path)], check=True
    )
    repo = make_repo(path)
    repo.write("a.py", "x\n")
    head = repo.commit()
    assert len(git.head(repo.path)) == 64 == len(head)
    assert len(git.empty_tree(repo.path)) == 64


def test_worktree_snapshot_sees_a_racily_clean_edit(repo: Repo) -> None:
    # A same-size edit in the second of the last index write has the stat data git recorded;
    # only the index's own mtime tells git to compare content. The temporary index copy must keep
    # it, or the edit is silently missed (seen as a flaky unstaged scope).
    import os
    import time

    repo.git("config", "core.trustctime", "false")
    target = repo.write("a.py", "x\n")
    head = repo.commit()
    recorded = os.stat(target)
    time.sleep(1.1)  # a fresh copy of the index is now a whole second newer than the entry
    target.write_text("y\n", encoding="utf-8")
    os.utime(target, ns=(recorded.st_atime_ns, recorded.st_mtime_ns))
    index = repo.path / ".git" / "index"
    os.utime(index, ns=(recorded.st_atime_ns, recorded.st_mtime_ns))
    snap = git.snapshot_worktree(repo.path, head)
    assert snap != head
    assert repo.git("show", f"{snap}:a.py") == "y"


def test_diff_workspace_reproduces_the_scoped_diff(repo: Repo) -> None:
    repo.write("x.py", "a\nb\n")
    repo.write("gone.txt", "old\n")
    repo.write("mv1.py", "keep\nme\nplease\n")
    base = repo.commit("one")
    repo.write("x.py", "a\nB\n")
    (repo.path / "gone.txt").unlink()
    repo.git("mv", "mv1.py", "mv2.py")
    repo.write("new file é.py", "new\n")
    repo.write("bin.dat", b"\x00\x01\x02")
    repo.write("untouched.py", "not in scope\n")
    head = repo.commit("two")
    old_paths = ["x.py", "gone.txt", "mv1.py"]
    new_paths = ["x.py", "mv2.py", "new file é.py", "bin.dat"]
    want = git.patch(repo.path, base, head, sorted({*old_paths, *new_paths}))
    with git.diff_workspace(repo.path, base, head, old_paths, new_paths) as (ws, got):
        assert got == want
        assert (ws / "x.py").read_text() == "a\nB\n"
        assert not (ws / "untouched.py").exists() and not (ws / "gone.txt").exists()
        status = subprocess.run(
            ["git", "status", "--porcelain"], cwd=ws, capture_output=True, text=True, check=True
        ).stdout
        assert "R  mv1.py -> mv2.py" in status
    assert not ws.exists()
    # Whole-file scopes have no old side: everything is added.
    with git.diff_workspace(repo.path, None, head, [], ["x.py"]) as (_, got):
        assert got == git.patch(repo.path, None, head, ["x.py"])


def test_remote_head_of_path_and_url(repo: Repo, tmp_path: Path) -> None:
    repo.write("a.py", "x\n")
    head = repo.commit()
    assert git.remote_head(str(repo.path)) == head
    assert git.remote_head(repo.path.as_uri()) == head
    with pytest.raises(FatalError, match="does not appear to be a git repository"):
        git.remote_head(str(tmp_path / "nothing"))
