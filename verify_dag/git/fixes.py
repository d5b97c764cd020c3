"""What applying fixes needs (docs/fixes.md): the user's work tree, never HEAD, the index or the
stash, unless a fix of a staged change is staged too."""

from __future__ import annotations

import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from verify_dag.errors import FatalError
from verify_dag.git.core import IDENTITY, command_env, pathspec, run_git, run_plain
from verify_dag.git.parse import split_z
from verify_dag.git.refs import check_ref, head
from verify_dag.git.snapshot import commit_tree, snapshot_index, temp_index
from verify_dag.git.tree import ls_tree


def patch_applies(repo: str | Path, patch_text: str) -> tuple[bool, str]:
    """Whether ``git apply --check`` accepts ``patch_text`` on ``repo``'s work tree, and git's own
    words when not. Nothing is written."""
    res = run_git(
        repo,
        *("apply", "--check", "--whitespace=nowarn", "-"),
        check=False,
        input_data=patch_text.encode("utf-8"),
    )
    return res.returncode == 0, " ".join(res.stderr.split())


def patched_files(repo: str | Path, base: str, patch_text: str) -> dict[str, str | None]:
    """What the files ``patch_text`` touches hold once it is applied to ``base`` alone (None: the
    patch deletes the file), made in a throwaway index (``git apply --cached``). Raises
    FatalError when it does not apply to ``base``."""
    with tempfile.TemporaryDirectory(prefix="verify-dag-index-") as tmp:
        env = command_env({"GIT_INDEX_FILE": str(Path(tmp) / "index"), **IDENTITY})
        run_git(repo, "read-tree", base, env=env)
        res = run_git(
            repo,
            *("apply", "--cached", "--whitespace=nowarn", "--numstat", "--apply", "-z", "-"),
            check=False,
            env=env,
            input_data=patch_text.encode("utf-8"),
        )
        if res.returncode != 0:
            raise FatalError(f"a fix does not apply to {base[:12]}: {res.stderr.strip()}")
        paths = [e.split("\t", 2)[2] for e in split_z(res.stdout) if e.count("\t") >= 2]
        out: dict[str, str | None] = {}
        for p in paths:
            shown = run_git(repo, "show", f":{p}", check=False, env=env)
            out[p] = shown.stdout if shown.returncode == 0 else None
    return out


def merge_file(ours: str, base: str, theirs: str) -> str | None:
    """``git merge-file``'s three-way merge of one file's texts: the merge, or None on a
    conflict (both sides changed the same lines)."""
    with tempfile.TemporaryDirectory(prefix="verify-dag-merge-") as tmp:
        names = []
        for name, text in (("ours", ours), ("base", base), ("theirs", theirs)):
            (Path(tmp) / name).write_text(text, encoding="utf-8")
            names.append(name)
        res = run_plain(tmp, "merge-file", "-p", "--quiet", *names)
    return res.stdout if res.returncode == 0 else None


def apply_to_texts(
    texts: Mapping[str, str | None], patch_text: str, context: int
) -> dict[str, str | None] | None:
    """``patch_text`` applied by ``git apply -C<context>`` to ``texts`` (path -> content, None:
    absent) in a scratch directory: the new contents, or None when it does not apply. Fewer
    context lines than the patch has let a hunk apply beside a line another fix changed; the
    lines it removes must still match."""
    with tempfile.TemporaryDirectory(prefix="verify-dag-apply-") as tmp:
        root = Path(tmp)
        for path, text in texts.items():
            if text is not None:
                (root / path).parent.mkdir(parents=True, exist_ok=True)
                (root / path).write_text(text, encoding="utf-8")
        res = run_plain(
            root,
            *("apply", f"-C{context}", "--whitespace=nowarn", "-"),
            input_data=patch_text.encode("utf-8"),
        )
        if res.returncode != 0:
            return None
        out: dict[str, str | None] = {}
        for path in texts:
            target = root / path
            out[path] = target.read_text(encoding="utf-8") if target.is_file() else None
    return out


def commit_files(repo: str | Path, base: str, files: Mapping[str, str | None], message: str) -> str:
    """A commit of ``base`` with ``files`` replaced (None: removed), built in a throwaway
    index: the verified state plus the fixes, whatever else the work tree holds."""
    with tempfile.TemporaryDirectory(prefix="verify-dag-index-") as tmp:
        env = command_env({"GIT_INDEX_FILE": str(Path(tmp) / "index"), **IDENTITY})
        run_git(repo, "read-tree", base, env=env)
        for path, text in files.items():
            if text is None:
                run_git(repo, "update-index", "--force-remove", "--", path, env=env)
                continue
            blob = run_git(
                repo, "hash-object", "-w", "--stdin", input_data=text.encode("utf-8")
            ).stdout.strip()
            mode = "100644"
            listed = run_git(repo, "ls-tree", base, "--", path).stdout.split()
            if listed:
                mode = listed[0]
            run_git(repo, "update-index", "--add", "--cacheinfo", f"{mode},{blob},{path}", env=env)
        tree = run_git(repo, "write-tree", env=env).stdout.strip()
    return commit_tree(repo, tree, base, message)


def backup_commit(repo: str | Path, message: str) -> str:
    """A commit of the work tree (untracked, non-ignored files included) whose parents are
    HEAD and the staged state, as ``git stash create`` makes one, but named by no stash entry."""
    index = snapshot_index(repo)
    with temp_index(repo) as env:
        run_git(repo, "add", "-A", env=env)
        tree = run_git(repo, "write-tree", env=env).stdout.strip()
    parents = ["-p", head(repo)] + (["-p", index] if index != head(repo) else [])
    return run_git(
        repo, "commit-tree", tree, *parents, "-m", message, env=command_env(IDENTITY)
    ).stdout.strip()


def recommit(repo: str | Path, commit: str, message: str) -> str:
    """``commit`` again (same tree, same parents) with another message."""
    parents = run_git(repo, "rev-list", "--parents", "-n", "1", commit).stdout.split()[1:]
    args = [a for p in parents for a in ("-p", p)]
    tree = f"{commit}^{{tree}}"
    return run_git(
        repo, "commit-tree", tree, *args, "-m", message, env=command_env(IDENTITY)
    ).stdout.strip()


def update_ref(repo: str | Path, ref: str, sha: str) -> None:
    run_git(repo, "update-ref", check_ref(ref), sha)


def commit_message(repo: str | Path, commit: str) -> str:
    return run_git(repo, "log", "-1", "--format=%B", commit).stdout


def restore_worktree(repo: str | Path, source: str, paths: Sequence[str]) -> None:
    """Put ``paths`` of the work tree back as ``source`` has them; one that ``source`` lacks is
    removed. The index is not touched (``git restore --worktree`` without ``--staged``)."""
    present = set(ls_tree(repo, source, paths)) if paths else set()
    keep = [p for p in paths if p in present]
    if keep:
        run_git(repo, "restore", f"--source={source}", "--worktree", *pathspec(keep))
    top = Path(repo)
    for p in paths:
        if p not in present and (top / p).is_file():
            (top / p).unlink()


def worktree_differs(repo: str | Path, commit: str, path: str) -> bool:
    """Whether the work tree's ``path`` is not what ``commit`` holds (a file it lacks differs
    when it exists)."""
    full = Path(repo) / path
    res = run_git(repo, "rev-parse", "--verify", "--quiet", f"{commit}:{path}", check=False)
    blob = res.stdout.strip() if res.returncode == 0 else None
    if not full.is_file():
        return blob is not None
    if blob is None:
        return True
    return run_git(repo, "hash-object", "--", path).stdout.strip() != blob


def index_text(repo: str | Path, path: str) -> str | None:
    """What the index holds for ``path`` (stage 0), or None when it holds no such file."""
    res = run_git(repo, "cat-file", "blob", f":0:{path}", check=False)
    return res.stdout if res.returncode == 0 else None


def stage_texts(repo: str | Path, texts: Mapping[str, str | None]) -> None:
    """Put ``texts`` into the user's index, as ``git add`` of those contents would (None:
    the file leaves the index); a file keeps the mode its entry has. Staged fixes of a staged
    change go there, beside the work tree's."""
    for path, text in texts.items():
        if text is None:
            run_git(repo, "update-index", "--force-remove", "--", path)
            continue
        blob = run_git(
            repo, "hash-object", "-w", "--stdin", input_data=text.encode("utf-8")
        ).stdout.strip()
        listed = run_git(repo, "ls-files", "-s", "--", path).stdout.split()
        mode = listed[0] if listed else "100644"
        run_git(repo, "update-index", "--add", "--cacheinfo", f"{mode},{blob},{path}")


def restore_index(repo: str | Path, source: str, paths: Sequence[str]) -> None:
    """Put ``paths`` of the index back as ``source`` has them (one it lacks leaves the index);
    the work tree is not touched."""
    if paths:
        run_git(repo, "restore", f"--source={source}", "--staged", *pathspec(paths))


def index_differs(repo: str | Path, commit: str, path: str) -> bool:
    """Whether the index's ``path`` is not what ``commit`` holds."""
    res = run_git(repo, "rev-parse", "--verify", "--quiet", f"{commit}:{path}", check=False)
    blob = res.stdout.strip() if res.returncode == 0 else None
    staged = run_git(repo, "rev-parse", "--verify", "--quiet", f":0:{path}", check=False)
    return (staged.stdout.strip() if staged.returncode == 0 else None) != blob
