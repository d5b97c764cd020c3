"""Phase 1 on real repositories: every scope mode, auto-detect, base resolution, validation."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from conftest import Repo, make_repo

from verify_dag.errors import UsageError
from verify_dag.models import ALL_OTHER_FILES, LineRange, VerifyRequest
from verify_dag.models.scope import Scope
from verify_dag.models.source import parse_source
from verify_dag.phases import scope as phase
from verify_dag.phases.scope.text import scope_context, scope_metadata

BODY = "".join(f"line {i}\n" for i in range(1, 11))


def _req(repo: Repo | Path, **kw: Any) -> VerifyRequest:
    path = repo.path if isinstance(repo, Repo) else repo
    return VerifyRequest(source=parse_source(str(path)), **kw)


def _run(repo: Repo, **kw: Any) -> Scope:
    return phase.run(phase.validate_request(_req(repo, **kw)))


def _index(repo: Repo) -> bytes:
    return (repo.path / ".git" / "index").read_bytes()


def _status(repo: Repo) -> str:
    return repo.git("status", "--porcelain=v1", "-z", "--untracked-files=all")


def _clone(src: Path | str, dst: Path, *args: str) -> Repo:
    subprocess.run(["git", "clone", "-q", *args, str(src), str(dst)], check=True)
    repo = Repo(dst)
    repo.git("config", "user.name", "Test User")
    repo.git("config", "user.email", "test@example.com")
    return repo


def _dirty(repo: Repo) -> str:
    """base commit; then a staged change, a further unstaged one and an untracked file."""
    repo.write(".gitignore", "*.log\n")
    repo.write("staged.py", BODY)
    repo.write("unstaged.py", BODY)
    head = repo.commit("base")
    repo.write("staged.py", BODY.replace("line 4\n", "LINE 4\n"))
    repo.git("add", "staged.py")
    repo.write("unstaged.py", BODY.replace("line 7\n", "LINE 7\nextra\n"))
    repo.write("untracked.py", "new\n")
    repo.write("debug.log", "ignored\n")
    return head


# --- validate_request ------------------------------------------------------------------------


def test_validate_rejects_non_git_and_empty_repos(tmp_path: Path, repo: Repo) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(UsageError, match="not a git repository"):
        phase.validate_request(_req(plain))
    with pytest.raises(UsageError, match="empty repository: nothing to verify"):
        phase.validate_request(_req(repo))
    with pytest.raises(UsageError, match="empty repository"):
        phase.run(_req(repo))


@pytest.mark.parametrize(
    "kw, message",
    [
        ({"scope": "staged", "base": "main"}, "--base is only valid with --scope=branch"),
        ({"base": "main"}, "--base is only valid with --scope=branch"),
        ({"scope": "all", "base": "main"}, "--base is only valid"),
        ({"scope": "branch", "base": "-x"}, "invalid --base ref"),
        ({"scope": "branch", "base": "a..b"}, "invalid --base ref"),
        ({"since": "HEAD"}, "--since requires --ledger"),
        ({"scope": "staged", "files": ("a.py",)}, "choose one of"),
        ({"files": ("a.py",), "module": "src"}, "choose one of"),
        ({"scope": "module"}, "--scope=module needs --module"),
        ({"files": ("../x",)}, "outside the repository"),
        ({"files": ("src/../../x",)}, "outside the repository"),
        ({"files": ("/etc/passwd",)}, "outside the repository"),
        ({"files": (".git/config",)}, "outside the repository"),
        ({"files": ("link-out",)}, "outside the repository"),
        ({"module": "link-out"}, "outside the repository"),
        ({"files": ("missing.py",)}, "does not exist"),
        ({"module": "missing"}, "does not exist"),
        ({"files": ("src",)}, "not a file"),
    ],
)
def test_validate_usage_errors(
    repo: Repo, tmp_path: Path, kw: dict[str, Any], message: str
) -> None:
    repo.write("a.py", "x\n")
    repo.write("src/b.py", "y\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (repo.path / "link-out").symlink_to(outside)
    repo.commit()
    with pytest.raises(UsageError, match=message):
        phase.validate_request(_req(repo, **kw))


def test_validate_normalises_paths(repo: Repo) -> None:
    repo.write("a.py", "x\n")
    repo.write("src/b.py", "y\n")
    repo.commit()
    req = phase.validate_request(
        _req(repo.path / "src", files=("./src/../a.py", str(repo.path / "src/b.py")))
    )
    assert req.repo == str(repo.path.resolve())
    assert req.files == ("a.py", "src/b.py") and req.scope == "files"
    req = phase.validate_request(_req(repo, module="src/"))
    assert req.module == "src" and req.scope == "module"
    req = phase.validate_request(
        _req(repo, scope="branch", base="HEAD~0", since="HEAD", ledger="ledger.json")
    )
    assert req.base == "HEAD~0"


# --- staged / unstaged / auto ----------------------------------------------------------------


def test_staged_scope(repo: Repo) -> None:
    head = _dirty(repo)
    _status(repo)
    status, index = _status(repo), _index(repo)
    sc = _run(repo, scope="staged")
    assert _index(repo) == index and _status(repo) == status
    assert (sc.mode, sc.requested_mode, sc.compare_ref, sc.base_ref) == (
        "staged",
        "staged",
        "INDEX",
        None,
    )
    assert sc.head_sha == head == sc.old_commit and sc.new_commit != head
    assert [(f.path, f.status, f.lines) for f in sc.included] == [
        ("staged.py", "modified", (LineRange(start=4, end=4),))
    ]
    assert sc.path_filter == ("staged.py",)
    assert sc.diff_command == "git diff --cached -- staged.py"
    assert sc.excluded == (ALL_OTHER_FILES,)
    assert "staged.py" in sc.diff_stat and sc.error is None


def test_unstaged_scope(repo: Repo) -> None:
    head = _dirty(repo)
    _status(repo)
    status, index = _status(repo), _index(repo)
    sc = _run(repo, scope="unstaged")
    assert _index(repo) == index and _status(repo) == status
    assert (sc.mode, sc.compare_ref, sc.base_ref, sc.head_sha) == (
        "unstaged",
        "WORKTREE",
        None,
        head,
    )
    assert [(f.path, f.status, f.lines) for f in sc.included] == [
        ("unstaged.py", "modified", (LineRange(start=7, end=8),))
    ]
    assert [(e.path, e.reason) for e in sc.excluded] == [
        ("untracked.py", "untracked (not part of the unstaged diff)"),
        (ALL_OTHER_FILES.path, ALL_OTHER_FILES.reason),
    ]
    assert sc.old_commit is not None and sc.old_commit != head
    assert Repo(repo.path).git("rev-parse", f"{sc.new_commit}^") == sc.old_commit
    assert sc.diff_command == "git diff -- unstaged.py"
    assert "untracked.py" not in sc.diff_stat


def test_unstaged_deleted_file(repo: Repo) -> None:
    repo.write("a.py", BODY)
    repo.commit()
    (repo.path / "a.py").unlink()
    sc = _run(repo, scope="unstaged")
    assert [(f.path, f.status, f.lines) for f in sc.included] == [("a.py", "deleted", ())]


def test_auto_detect_priority(repo: Repo) -> None:
    _dirty(repo)
    sc = _run(repo)
    assert sc.mode == "staged" and sc.requested_mode is None
    repo.git("commit", "-qm", "staged part")
    sc = _run(repo)
    assert sc.mode == "unstaged" and sc.requested_mode is None
    repo.git("checkout", "-q", "-b", "feature")
    repo.commit("the rest")
    repo.write("only-untracked.py", "new\n")  # untracked files alone are not unstaged changes
    sc = _run(repo)
    assert (sc.mode, sc.base_ref, sc.requested_mode) == ("branch", "main", None)
    assert [f.path for f in sc.included] == ["unstaged.py", "untracked.py"]
    repo.git("checkout", "-q", "main")
    repo.git("merge", "-q", "--ff-only", "feature")
    sc = _run(repo)
    assert sc.nothing_to_verify and "no changes ahead of main" in sc.notes[0]


def test_auto_detect_without_any_base_is_an_error(tmp_path: Path) -> None:
    """Only a `trunk` branch and no remote: there is no base to find the branch's commits
    against, which is a verification error (as with --scope=branch), not "nothing to verify"."""
    repo = make_repo(tmp_path / "r", branch="trunk")
    repo.write("a.py", "x\n")
    repo.commit()
    repo.write("b.py", "y\n")
    head = repo.commit()  # one commit ahead of the first
    sc = _run(repo)
    assert not sc.nothing_to_verify and sc.error is not None and sc.head_sha == head
    assert sc.error.code == "NO_BASE" and "main, or master base exists" in sc.error.message
    assert (sc.mode, sc.requested_mode, sc.merge_base) == ("branch", None, None)
    repo.write("b.py", "z\n")  # an unstaged change needs no base
    assert _run(repo).mode == "unstaged"


def test_explicit_modes_with_nothing_to_verify(repo: Repo) -> None:
    repo.write("a.py", "x\n")
    repo.commit()
    assert _run(repo, scope="staged").notes == ("no staged changes",)
    assert _run(repo, scope="unstaged").nothing_to_verify
    sc = _run(repo, scope="branch")
    assert sc.nothing_to_verify and sc.base_ref == "main" and sc.error is None


# --- whole-file scopes -----------------------------------------------------------------------


def test_all_scope(repo: Repo) -> None:
    repo.write(".gitignore", "*.log\n")
    repo.write("a.py", "x\n")
    repo.write("img.png", b"\x89PNG\x00\x01")
    head = repo.commit()
    sc = _run(repo, scope="all")
    assert (sc.mode, sc.new_commit, sc.old_commit, sc.excluded, sc.path_filter) == (
        "all",
        head,
        None,
        (),
        (),
    )
    assert [(f.path, f.status, f.lines, f.binary) for f in sc.included] == [
        (".gitignore", "included", None, False),
        ("a.py", "included", None, False),
        ("img.png", "included", None, True),
    ]
    repo.write("a.py", "changed\n")
    repo.write("untracked.py", "u\n")
    index = _index(repo)
    sc = _run(repo, scope="all")
    assert sc.new_commit != head and sc.head_sha == head and _index(repo) == index
    assert [f.path for f in sc.included] == [".gitignore", "a.py", "img.png"]
    assert [e.path for e in sc.excluded] == ["untracked.py"]
    assert repo.git("show", f"{sc.new_commit}:a.py") == "changed"


def test_files_and_module_scopes(repo: Repo) -> None:
    repo.write(".gitignore", "*.log\n")
    repo.write("a.py", "x\n")
    repo.write("src/pkg/b.py", "y\n")
    repo.write("src/c.py", "z\n")
    repo.commit()
    repo.write("src/untracked.py", "u\n")
    repo.write("src/debug.log", "ignored\n")
    sc = _run(repo, files=("src/c.py", "a.py", "src/debug.log"))
    assert sc.mode == "files" and sc.requested_mode == "files"
    assert [(f.path, f.lines) for f in sc.included] == [("src/c.py", None), ("a.py", None)]
    assert sc.excluded[0].path == "src/debug.log" and sc.excluded[-1] == ALL_OTHER_FILES
    assert sc.path_filter == ("src/c.py", "a.py", "src/debug.log")
    sc = _run(repo, module="src")
    assert [f.path for f in sc.included] == ["src/c.py", "src/pkg/b.py"]
    # The untracked file under the module is named as left out, not silently dropped.
    assert [(e.path, e.reason) for e in sc.excluded] == [
        ("src/untracked.py", "untracked (git add it to verify it)"),
        (ALL_OTHER_FILES.path, ALL_OTHER_FILES.reason),
    ]
    assert sc.path_filter == ("src",)
    sc = _run(repo, module="src/untracked.py")
    assert [f.path for f in sc.included] == ["src/untracked.py"]
    # Only an ignored file asked for: nothing to verify, and the report says which and why.
    sc = _run(repo, files=("src/debug.log",))
    assert sc.nothing_to_verify and sc.excluded[0].path == "src/debug.log"
    assert "src/debug.log: ignored by git" in " ".join(sc.notes)


def test_relative_paths_are_relative_to_where_the_user_stands(
    repo: Repo, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    repo.write("sub dir/mödule.py", "x\n")
    repo.write("sub dir/inner/b.py", "y\n")
    repo.write("top.py", "z\n")
    repo.commit()
    monkeypatch.chdir(repo.path / "sub dir")  # inside the repository: as git's pathspecs
    sc = _run(repo, files=("mödule.py",))
    assert [f.path for f in sc.included] == ["sub dir/mödule.py"]
    sc = _run(repo, module=".")
    assert [f.path for f in sc.included] == ["sub dir/inner/b.py", "sub dir/mödule.py"]
    assert _run(repo, files=("../top.py",)).included[0].path == "top.py"
    with pytest.raises(UsageError, match=r"does not exist: top\.py"):
        _run(repo, files=("top.py",))
    monkeypatch.chdir(tmp_path)  # outside it: relative to the repository's top
    assert [f.path for f in _run(repo, files=("top.py",)).included] == ["top.py"]


# --- branch scope and base resolution --------------------------------------------------------


def _origin(tmp_path: Path, branch: str = "main") -> tuple[Path, Repo]:
    """A bare origin with one commit on ``branch`` and a local clone of it."""
    seed = make_repo(tmp_path / "seed", branch=branch)
    seed.write("base.py", BODY)
    seed.commit("base")
    bare = tmp_path / "origin.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(seed.path), str(bare)], check=True)
    return bare, _clone(bare, tmp_path / "work")


def _push_from_elsewhere(bare: Path, tmp_path: Path, branch: str, name: str) -> str:
    other = _clone(bare, tmp_path / f"other-{name}")
    other.git("checkout", "-q", branch)
    other.write(f"{name}.py", "upstream\n")
    sha = other.commit(f"upstream {name}")
    other.git("push", "-q", "origin", branch)
    return sha


def test_branch_uses_origin_head(tmp_path: Path) -> None:
    _, work = _origin(tmp_path, branch="trunk")
    work.git("checkout", "-q", "-b", "feature")
    work.write("feat.py", "f\n")
    head = work.commit("feature")
    sc = _run(work, scope="branch")
    assert (sc.base_ref, sc.head_sha, sc.new_commit) == ("origin/trunk", head, head)
    assert sc.merge_base == work.git("rev-parse", "origin/trunk") == sc.old_commit
    assert sc.diff_command == f"git diff {sc.merge_base} {head}"
    assert [(f.path, f.status, f.lines) for f in sc.included] == [("feat.py", "added", None)]


def test_branch_uses_provider_default_without_origin_head(tmp_path: Path) -> None:
    _, work = _origin(tmp_path, branch="trunk")
    work.git("remote", "set-head", "origin", "-d")
    work.git("checkout", "-q", "-b", "feature")
    work.commit("feature")
    assert _run(work, scope="branch").base_ref == "origin/trunk"


def test_branch_prefers_fetched_origin_over_stale_local_main(tmp_path: Path) -> None:
    bare, work = _origin(tmp_path)
    old = work.head()
    upstream = _push_from_elsewhere(bare, tmp_path, "main", "up")
    work.git("fetch", "-q", "origin")
    work.git("checkout", "-q", "-b", "feature", "origin/main")
    work.write("feat.py", "f\n")
    work.commit("feature")
    # Local main and the remote-tracking ref are both stale; the scope's fetch must fix the latter.
    work.git("update-ref", "refs/remotes/origin/main", old)
    work.git("remote", "set-head", "origin", "-d")
    assert work.git("rev-parse", "main") == old
    sc = _run(work, scope="branch")
    assert (sc.base_ref, sc.merge_base) == ("origin/main", upstream)
    assert [f.path for f in sc.included] == ["feat.py"]


def test_explicit_remote_base_is_fetched_and_preserved(tmp_path: Path) -> None:
    bare, work = _origin(tmp_path)
    _push_from_elsewhere(bare, tmp_path, "main", "rel")
    other = Repo(tmp_path / "other-rel")
    other.git("push", "-q", "origin", "HEAD:refs/heads/release")
    work.git("checkout", "-q", "-b", "feature")
    work.write("feat.py", "f\n")
    work.commit("feature")
    sc = _run(work, scope="branch", base="origin/release")
    assert sc.error is None and sc.base_ref == "origin/release"
    assert sc.merge_base == work.git("rev-parse", "main")
    assert work.git("rev-parse", "origin/release") == other.head()


def test_fetch_failure_is_a_note(tmp_path: Path) -> None:
    _, work = _origin(tmp_path)
    work.git("checkout", "-q", "-b", "feature")
    work.commit("feature")
    work.git("remote", "set-url", "origin", str(tmp_path / "moved.git"))
    sc = _run(work, scope="branch")
    assert sc.error is None and sc.base_ref == "origin/main"
    assert any("git fetch origin failed" in n for n in sc.notes)
    sc = _run(work, scope="branch", base="origin/main")
    assert sc.error is None and any("fetching origin/main failed" in n for n in sc.notes)


@pytest.mark.parametrize("branch", ["main", "master"])
def test_branch_falls_back_to_local_main_or_master(tmp_path: Path, branch: str) -> None:
    repo = make_repo(tmp_path / "r", branch=branch)
    repo.write("a.py", "x\n")
    repo.commit()
    repo.git("checkout", "-q", "-b", "feature")
    repo.write("b.py", "y\n")
    repo.commit()
    assert _run(repo, scope="branch").base_ref == branch


def test_branch_without_base_is_no_base_error(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r", branch="trunk")
    repo.write("a.py", "x\n")
    head = repo.commit()
    sc = _run(repo, scope="branch")
    assert sc.error is not None and sc.error.code == "NO_BASE"
    assert (sc.base_ref, sc.merge_base, sc.head_sha, sc.included, sc.excluded) == (
        None,
        None,
        head,
        (),
        (),
    )


def test_unknown_base_is_invalid_base(repo: Repo) -> None:
    repo.write("a.py", "x\n")
    head = repo.commit()
    sc = _run(repo, scope="branch", base="origin/does-not-exist")
    assert sc.error is not None and sc.error.code == "INVALID_BASE"
    assert (sc.mode, sc.base_ref, sc.merge_base, sc.head_sha, sc.included, sc.excluded) == (
        "branch",
        "origin/does-not-exist",
        None,
        head,
        (),
        (),
    )


def test_unrelated_histories_fail_merge_base(repo: Repo) -> None:
    repo.write("a.py", "x\n")
    repo.commit()
    repo.git("checkout", "-q", "--orphan", "other")
    repo.write("b.py", "y\n")
    head = repo.commit("unrelated")
    sc = _run(repo, scope="branch", base="main")
    assert sc.error is not None and sc.error.code == "MERGE_BASE_FAILED"
    assert (sc.base_ref, sc.merge_base, sc.head_sha) == ("main", None, head)
    sc = _run(repo)  # auto-detection compares with the same base: the same error
    assert sc.error is not None and sc.error.code == "MERGE_BASE_FAILED"
    assert (sc.base_ref, sc.merge_base, sc.requested_mode) == ("main", None, None)


def test_shallow_clone_merge_base_failure_says_so(tmp_path: Path) -> None:
    bare, _ = _origin(tmp_path)
    _push_from_elsewhere(bare, tmp_path, "main", "second")
    shallow = _clone(f"file://{bare}", tmp_path / "shallow", "--depth=1")
    shallow.git("checkout", "-q", "--orphan", "lonely")
    shallow.commit("unrelated")
    sc = _run(shallow, scope="branch", base="origin/main")
    assert sc.error is not None and sc.error.code == "MERGE_BASE_FAILED"
    assert "shallow clone" in sc.error.message and sc.new_commit == sc.head_sha


def test_branch_file_details(repo: Repo) -> None:
    repo.write("old.py", BODY)
    repo.write("gone.py", "bye\n")
    repo.write("mod.py", BODY)
    repo.write("img.bin", b"\x00\x01" * 8)
    repo.commit("base")
    repo.git("checkout", "-q", "-b", "feature")
    repo.git("mv", "old.py", "new.py")
    repo.write("new.py", BODY.replace("line 3\n", "THREE\n").replace("line 4\n", "FOUR\n"))
    (repo.path / "gone.py").unlink()
    repo.write("mod.py", BODY.replace("line 2\n", "").replace("line 9\n", "nine\nten\n"))
    repo.write("img.bin", b"\x00\x02" * 8)
    names = ["with space.py", "ünïcode.py", "-dash.py", "new\nline.py"]
    for name in names:
        repo.write(name, "a\nb\nc\n")
    repo.commit("feature")
    sc = _run(repo, scope="branch", base="main")
    files = {f.path: f for f in sc.included}
    assert files["new.py"].status == "renamed" and files["new.py"].old_path == "old.py"
    assert files["new.py"].lines == (LineRange(start=3, end=4),)
    assert files["gone.py"].status == "deleted" and files["gone.py"].lines == ()
    assert files["mod.py"].lines == (LineRange(start=8, end=9),)  # the deletion adds no range
    assert files["img.bin"].binary and files["img.bin"].status == "modified"
    for name in names:
        assert files[name].status == "added" and files[name].lines is None
    text = scope_context(sc)
    assert "- new.py (renamed from old.py, lines 3-4)" in text
    assert "- gone.py (deleted)" in text
    assert "- img.bin (binary, modified, no added lines)" in text
    assert "- with space.py (added, entire file)" in text
    assert "- 'new\nline.py' (added, entire file)" in text
    assert "CRITICAL SCOPE CONSTRAINTS" in text


# --- --since delta and rendering -------------------------------------------------------------


def test_since_delta(repo: Repo) -> None:
    repo.write("a.py", BODY)
    repo.commit("base")
    repo.git("checkout", "-q", "-b", "feature")
    repo.write("a.py", BODY.replace("line 2\n", "two\n"))
    approved = repo.commit("first round")
    repo.write("a.py", BODY.replace("line 2\n", "two\n").replace("line 8\n", "eight\n"))
    repo.write("b.py", "new\n")
    repo.commit("second round")
    sc = _run(repo, scope="branch", since="HEAD~1", ledger="ledger.json")
    assert sc.delta_base_sha == approved
    assert [(f.path, f.status, f.lines) for f in sc.delta_files] == [
        ("a.py", "modified", (LineRange(start=8, end=8),)),
        ("b.py", "added", None),
    ]
    assert [f.path for f in sc.included] == ["a.py", "b.py"]
    assert sc.file("a.py") is not None and sc.file("a.py").lines == (  # type: ignore[union-attr]
        LineRange(start=2, end=2),
        LineRange(start=8, end=8),
    )
    meta = scope_metadata(sc)
    assert f"- delta_base_sha: {approved}" in meta
    assert "- delta_files: a.py (modified), b.py (added)" in meta
    assert "- delta_hunks: a.py (modified, line 8), b.py (added, entire file)" in meta
    sc = _run(repo, scope="branch", since="0" * 40, ledger="ledger.json")
    assert sc.error is not None and sc.error.code == "INVALID_SINCE"
    assert _run(repo, scope="branch").delta_base_sha is None


def test_since_on_snapshot_scope_compares_with_new_commit(repo: Repo) -> None:
    repo.write("a.py", BODY)
    approved = repo.commit()
    repo.write("a.py", BODY.replace("line 5\n", "five\n"))
    sc = _run(repo, scope="unstaged", since=approved, ledger="l.json")
    assert sc.delta_base_sha == approved
    assert [(f.path, f.lines) for f in sc.delta_files] == [("a.py", (LineRange(start=5, end=5),))]


def test_scope_metadata_block(repo: Repo) -> None:
    head = _dirty(repo)
    meta = scope_metadata(_run(repo, scope="unstaged"))
    assert meta.splitlines() == [
        "SCOPE_METADATA:",
        "- scope_mode: unstaged",
        "- base_ref: INDEX",
        "- compare_ref: WORKTREE",
        "- path_filter: unstaged.py",
        "- diff_command: git diff -- unstaged.py",
        "- merge_base:",
        f"- head_sha: {head}",
        "- included_files: unstaged.py (modified, lines 7-8)",
        "- excluded_files: untracked.py (untracked (not part of the unstaged diff)), "
        "ALL_OTHER_FILES (outside selected scope)",
    ]
    all_meta = scope_metadata(_run(repo, scope="all"))
    assert "- path_filter: ALL_SCOPED_FILES" in all_meta
    assert (
        "- excluded_files: untracked.py (untracked (git add it to verify it))"
        in all_meta.splitlines()
    )
    assert "ENTIRE content" in scope_context(_run(repo, scope="all"))


def test_scope_context_for_errors_and_nothing(repo: Repo) -> None:
    repo.write("a.py", "x\n")
    repo.commit()
    assert "Nothing to verify: no staged changes" in scope_context(_run(repo, scope="staged"))
    text = scope_context(_run(repo, scope="branch", base="nope"))
    assert "INVALID_BASE" in text


def test_run_from_subdirectory_uses_toplevel(repo: Repo) -> None:
    repo.write("sub/a.py", "x\n")
    repo.commit()
    repo.write("sub/a.py", "y\n")
    sc = phase.run(VerifyRequest(source=parse_source(os.fspath(repo.path / "sub"))))
    assert sc.mode == "unstaged" and [f.path for f in sc.included] == ["sub/a.py"]
