"""Read a commit without checking it out: its files, their contents and object ids."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from verify_dag.git.core import pathspec, run_git
from verify_dag.git.parse import split_z, valid_ref


def ls_files(repo: str | Path, paths: Sequence[str] = ()) -> list[str]:
    """Tracked paths in the index."""
    return split_z(run_git(repo, "ls-files", "-z", *pathspec(paths)).stdout)


def untracked(repo: str | Path) -> list[str]:
    """Untracked paths that are not ignored."""
    return split_z(run_git(repo, "ls-files", "-z", "--others", "--exclude-standard").stdout)


def ls_tree(repo: str | Path, commit: str, paths: Sequence[str] = ()) -> list[str]:
    """Every file path in ``commit`` (optionally under ``paths``)."""
    return split_z(
        run_git(
            repo, "ls-tree", "-r", "-z", "--name-only", "--full-tree", commit, *pathspec(paths)
        ).stdout
    )


def list_files(repo: str | Path, commit: str) -> list[str]:
    """Every file path in ``commit``: read a commit without checking it out."""
    return ls_tree(repo, commit)


def read_file(repo: str | Path, commit: str, path: str) -> str | None:
    """Content of ``path`` at ``commit``, or None when it is not a file there."""
    if not valid_ref(commit):
        return None
    res = run_git(repo, "cat-file", "blob", f"{commit}:{path}", check=False)
    return res.stdout if res.returncode == 0 else None


def read_files(repo: str | Path, commit: str, paths: Sequence[str]) -> dict[str, str | None]:
    """Contents of ``paths`` at ``commit`` in one ``cat-file --batch`` (None: not a file there).
    Text is decoded as UTF-8 with replacement, as :func:`read_file` does."""
    out: dict[str, str | None] = {p: None for p in paths}
    wanted = [p for p in dict.fromkeys(paths) if "\n" not in p]
    if not wanted or not valid_ref(commit):
        return out
    request = "".join(f"{commit}:{p}\n" for p in wanted).encode("utf-8", "surrogateescape")
    raw = run_git(repo, "cat-file", "--batch", input_data=request).stdout_bytes
    pos = 0
    for path in wanted:
        end = raw.find(b"\n", pos)
        if end < 0:
            break
        header = raw[pos:end].split()
        pos = end + 1
        if len(header) == 3 and header[1] == b"blob":
            size = int(header[2])
            out[path] = raw[pos : pos + size].decode("utf-8", "replace")
            pos += size + 1  # the content, then a newline
        elif len(header) == 3:
            pos += int(header[2]) + 1  # a tree or a link: not a file
    for path in paths:
        if "\n" in path:
            out[path] = read_file(repo, commit, path)
    return out


def reader(repo: str | Path, commit: str, likely: Sequence[str]) -> Callable[[str], str | None]:
    """``path -> its content at commit`` (None: not a file there), each file read once. The first
    miss brings ``likely`` along in the same ``cat-file --batch``: the files a caller is about to
    ask for (a change's files) cost one git process, not one each."""
    texts: dict[str, str | None] = {}

    def read(path: str) -> str | None:
        if path not in texts:
            texts.update(read_files(repo, commit, [path, *(p for p in likely if p not in texts)]))
        return texts[path]

    return read


def blobs(repo: str | Path, commit: str) -> dict[str, str]:
    """Every file of ``commit`` (symlinks and submodules too) -> its object id: what the
    result cache keys tool runs on, read without a checkout."""
    res = run_git(repo, "ls-tree", "-r", "-z", "--full-tree", commit)
    out: dict[str, str] = {}
    for entry in split_z(res.stdout):
        meta, _, path = entry.partition("\t")
        parts = meta.split()
        if len(parts) == 3:
            out[path] = parts[2]
    return out


def empty_tree(repo: str | Path) -> str:
    """The empty tree's id in this repository's hash format (sha1 or sha256)."""
    return run_git(repo, "hash-object", "-t", "tree", "--stdin").stdout.strip()
