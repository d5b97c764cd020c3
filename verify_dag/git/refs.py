"""Commits and refs of a repository: resolve, check and compare them."""

from __future__ import annotations

from pathlib import Path

from verify_dag.errors import FatalError, UsageError
from verify_dag.git.core import run_git
from verify_dag.git.parse import valid_ref, valid_ref_name


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


def fetched_base(repo: str | Path, base: str) -> tuple[str, str] | None:
    """(remote, refspec) a branch scope fetches before it compares with ``base``: the branch of
    a remote the repository has (``origin/main``), brought up to date first; None for a base
    that is only read (a local branch, a tag, a commit)."""
    remote, _, branch = base.partition("/")
    if branch and valid_ref_name(branch) and remote_exists(repo, remote):
        return remote, f"+refs/heads/{branch}:refs/remotes/{remote}/{branch}"
    return None


def state(repo: str | Path) -> str | None:
    """Every ref with the object it names, the branch HEAD is on (or its commit when detached),
    and the repository's configuration: what a ref or a setting given to a run can resolve to
    (None where git cannot say, e.g. a repository without commits)."""
    refs = run_git(repo, "show-ref", "--head", check=False)
    if refs.returncode != 0:
        return None
    on = run_git(repo, "symbolic-ref", "--quiet", "HEAD", check=False).stdout
    config = run_git(repo, "config", "--list", "--show-origin", "-z", check=False).stdout
    return "\0".join((refs.stdout, on, config))
