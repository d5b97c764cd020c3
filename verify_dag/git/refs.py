"""Commits and refs of a repository: resolve, check and compare them."""

from __future__ import annotations

from pathlib import Path

from verify_dag.errors import FatalError, UsageError
from verify_dag.git.core import run_git
from verify_dag.git.parse import valid_ref


def check_ref(ref: str, what: str = "ref") -> str:
    if not valid_ref(ref):
        raise UsageError(f"invalid {what}: {ref!r}")
    return ref


def toplevel(path: str | Path) -> Path:
    p = Path(path)
    res = run_git(p, "rev-parse", "--show-toplevel", check=False) if p.is_dir() else None
    if res is None or res.returncode != 0 or not res.stdout.strip():
        raise UsageError(f"not a git repository: {path}")
    return Path(res.stdout.strip()).resolve()


def rev_parse(repo: str | Path, rev: str) -> str | None:
    """Full SHA of any object ``rev`` names, or None."""
    if not valid_ref(rev):
        return None
    res = run_git(repo, "rev-parse", "--verify", "--quiet", rev, check=False)
    return res.stdout.strip() or None if res.returncode == 0 else None


def verify_commit(repo: str | Path, rev: str) -> str | None:
    """Full SHA of the commit ``rev`` names (``git rev-parse --verify REV^{commit}``), or None."""
    return rev_parse(repo, f"{rev}^{{commit}}") if valid_ref(rev) else None


def has_commits(repo: str | Path) -> bool:
    return verify_commit(repo, "HEAD") is not None


def head(repo: str | Path) -> str:
    sha = verify_commit(repo, "HEAD")
    if sha is None:
        raise FatalError("HEAD does not name a commit")
    return sha


def merge_base(repo: str | Path, a: str, b: str) -> str | None:
    if not (valid_ref(a) and valid_ref(b)):
        return None
    res = run_git(repo, "merge-base", a, b, check=False)
    return res.stdout.strip() or None if res.returncode == 0 else None


def is_shallow(repo: str | Path) -> bool:
    return run_git(repo, "rev-parse", "--is-shallow-repository").stdout.strip() == "true"


def remote_exists(repo: str | Path, name: str) -> bool:
    return name in run_git(repo, "remote").stdout.split()


def symbolic_ref(repo: str | Path, name: str) -> str | None:
    """Short name a symbolic ref points to (``origin/main`` for refs/remotes/origin/HEAD)."""
    res = run_git(repo, "symbolic-ref", "--quiet", "--short", name, check=False)
    return res.stdout.strip() or None if res.returncode == 0 else None


def is_bare(repo: str | Path) -> bool:
    return run_git(repo, "rev-parse", "--is-bare-repository").stdout.strip() == "true"
