"""Every git call of the product: small helpers over the git CLI that return plain types.

All calls go through :func:`verify_dag.util.run`. Path lists use ``-z``, pathspecs are literal
(``GIT_LITERAL_PATHSPECS``) and always follow ``--``; refs are validated before they reach argv.
Uncommitted states are captured as commits using a temporary index file, so the user's index and
work tree are never written. No call runs a program that a configuration names (hooks, fsmonitor,
filters, diff and merge drivers, pager, editor, signing): see :func:`_no_programs`.
"""

# Long module: every git call of the product lives here, so that the overrides which keep git from
# running configured programs (_no_programs) cover all of them and a reader finds git in one place;
# the pure parsing of git's output is in gitparse.py.

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

from verify_dag.errors import CalledProcessError, FatalError, UsageError
from verify_dag.gitparse import (
    Delta,
    config_files,
    parse_config_z,
    parse_grep_z,
    parse_hunk_pairs,
    parse_hunks,
    parse_name_status,
    parse_numstat_binary,
    program_overrides,
    split_z,
    valid_ref,
)
from verify_dag.util import Result, git_env, run

GIT_TIMEOUT = 120.0
FETCH_TIMEOUT = 60.0
# Listings and -U0 patches of big changes easily pass util's default 1 MB cap; a truncated
# listing would silently shrink the scope, so allow far more and fail loudly beyond it.
_CAP = 256 * 1024 * 1024
# Snapshot commits need an identity even where the user configured none.
_IDENTITY = {
    "GIT_AUTHOR_NAME": "verify-dag",
    "GIT_AUTHOR_EMAIL": "verify-dag@localhost",
    "GIT_COMMITTER_NAME": "verify-dag",
    "GIT_COMMITTER_EMAIL": "verify-dag@localhost",
}
_DIFF_OPTS = ("--no-color", "--no-ext-diff", "--no-textconv", "--no-relative")


# --- plumbing --------------------------------------------------------------------------------


def _env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    # Paths from users may contain glob or ":(magic)" characters: match them literally.
    # ":" is git's own "no editor"; nothing of ours edits, so nothing may open one.
    return git_env(
        {
            "GIT_LITERAL_PATHSPECS": "1",
            "GIT_OPTIONAL_LOCKS": "0",
            "GIT_EDITOR": ":",
            "GIT_SEQUENCE_EDITOR": ":",
            **(extra or {}),
        }
    )


# Settings that make git start a program, switched off for every call. They travel as
# command-line configuration (GIT_CONFIG_COUNT), which wins over every config file: the
# repository's own, and the user's too, since the repository picks what those run (a
# .gitattributes line selects a globally defined filter). Drivers are per repository, so their
# names are read from its config (_read_config) and neutralised by gitparse.program_overrides.
_STATIC: tuple[tuple[str, str], ...] = (
    ("core.fsmonitor", "false"),  # neither a hook program nor git's own daemon
    # Hooks are looked up as /dev/null/<name>, which cannot exist: no hook of any kind runs,
    # including those a fresh clone copied from a template directory.
    ("core.hooksPath", "/dev/null"),
    ("core.askPass", ""),  # empty means none; an operator's GIT_ASKPASS still wins
    ("core.pager", "cat"),  # besides GIT_PAGER=cat and --no-pager
    ("commit.gpgSign", "false"),
    ("tag.gpgSign", "false"),
    ("log.showSignature", "false"),  # verifying a signature runs gpg.program
    # ext:: URLs are commands; only a config file (protocol.allow) could have enabled them.
    ("protocol.ext.allow", "never"),
)
# core.sshCommand (and remote.*.uploadpack) are left alone: only fetches and clones read them,
# for a remote the user named or a URL that was given; mirrors have only the config git clone
# wrote, so what they use is the operator's own (deploy keys: ops/README.md, "Repository
# access"), and a user's per-repository key for their remote is set exactly there. Snapshots,
# diffs and checkouts never reach the network.

# _no_programs results per (directory, where config files live): reused while none of the files
# they came from changed, so a repository costs one `git config` read, not one per command.
_OVERRIDES: dict[
    tuple[str, ...], tuple[tuple[tuple[str, tuple[int, ...]], ...], list[tuple[str, str]]]
] = {}
_OVERRIDES_MAX = 256  # throwaway checkouts are new directories each time
_OVERRIDES_LOCK = threading.Lock()  # phases run git from several threads
_CONFIG_KEYS = r"^(filter|diff|merge)\.|^credential\..*helper$|^core\.repositoryformatversion$"


def _stat(path: str) -> tuple[int, ...]:
    try:
        st = os.stat(path)
    except OSError:
        return ()
    return (st.st_mtime_ns, st.st_size, st.st_ino)


def _user_config_files() -> list[str]:
    """The global and system files git would read, whether they exist yet or not."""
    home = os.environ.get("HOME", "")
    xdg = os.environ.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
    paths = [os.path.join(home, ".gitconfig"), os.path.join(xdg, "git", "config"), "/etc/gitconfig"]
    return paths + [
        os.environ[k] for k in ("GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM") if os.environ.get(k)
    ]


def _resolve(where: Path, name: str) -> str | None:
    # git names the repository's file relative to the top level or git directory it found
    # above ``where``: the nearest ancestor holding it is that one.
    if os.path.isabs(name):
        return name
    for base in (where, *where.parents):
        if (base / name).is_file():
            return str(base / name)
    return None


def _read_config(where: str) -> tuple[list[str] | None, list[tuple[str, str]]]:
    """Files the overrides depend on (None: do not cache) and the overrides for ``where``.
    ``git config`` only reads files: it is the one call here that needs no overrides."""
    res = run(
        ["git", "config", "-z", "--show-scope", "--show-origin", "--get-regexp", _CONFIG_KEYS],
        cwd=where,
        env=_env(),
        timeout=GIT_TIMEOUT,
        cap=_CAP,
    )
    if res.returncode not in (0, 1):  # 1: no key matched; else the real command will say why
        return None, []
    entries = parse_config_z(res.stdout)
    files = [_resolve(Path(where), name) for name in config_files(entries)]
    if None in files:
        return None, program_overrides(entries)
    return [f for f in files if f] + _user_config_files(), program_overrides(entries)


def _no_programs(repo: str | Path, env: Mapping[str, str]) -> dict[str, str]:
    """``env`` with the overrides appended to any command-line config it already carries.

    Only a ``git -c`` the user typed (GIT_CONFIG_PARAMETERS, inherited) is applied after these.
    """
    where = os.path.abspath(repo)
    key = (
        where,
        *_user_config_files(),
        env.get("GIT_CONFIG_PARAMETERS", ""),
        env.get("GIT_CONFIG_COUNT", ""),
    )
    cached = _OVERRIDES.get(key)
    if cached is not None and all(_stat(f) == sig for f, sig in cached[0]):
        overrides = cached[1]
    else:
        # Files known before the read are stat'ed before it too: one written while git read it
        # must not be cached as read.
        before = {f: _stat(f) for f, _ in cached[0]} if cached else {}
        before.update((f, _stat(f)) for f in _user_config_files())
        files, overrides = _read_config(where)
        sigs = tuple((f, _stat(f)) for f in files or ())
        if files is not None and all(before.get(f, sig) == sig for f, sig in sigs):
            with _OVERRIDES_LOCK:
                if len(_OVERRIDES) >= _OVERRIDES_MAX:
                    _OVERRIDES.pop(next(iter(_OVERRIDES)))
                _OVERRIDES[key] = (sigs, overrides)
    out = dict(env)
    count = env.get("GIT_CONFIG_COUNT", "0")
    n = int(count) if count.isdigit() else 0
    for i, (k, v) in enumerate((*_STATIC, *overrides), start=n):
        out[f"GIT_CONFIG_KEY_{i}"], out[f"GIT_CONFIG_VALUE_{i}"] = k, v
    out["GIT_CONFIG_COUNT"] = str(n + len(_STATIC) + len(overrides))
    return out


def _git(
    repo: str | Path,
    *args: str,
    check: bool = True,
    timeout: float = GIT_TIMEOUT,
    env: Mapping[str, str] | None = None,
    input_data: bytes | None = None,
) -> Result:
    argv = ["git", "--no-pager", "-c", "core.quotepath=false", *args]
    res = run(
        argv,
        cwd=repo,
        timeout=timeout,
        env=_no_programs(repo, env or _env()),
        cap=_CAP,
        check=check,
        input_data=input_data,
    )
    if res.truncated:
        raise FatalError(f"git {args[0]} output exceeded {_CAP} bytes", hint="scope too large")
    return res


# --- refs ------------------------------------------------------------------------------------


def check_ref(ref: str, what: str = "ref") -> str:
    if not valid_ref(ref):
        raise UsageError(f"invalid {what}: {ref!r}")
    return ref


# --- repository and refs ---------------------------------------------------------------------


def toplevel(path: str | Path) -> Path:
    p = Path(path)
    res = _git(p, "rev-parse", "--show-toplevel", check=False) if p.is_dir() else None
    if res is None or res.returncode != 0 or not res.stdout.strip():
        raise UsageError(f"not a git repository: {path}")
    return Path(res.stdout.strip()).resolve()


def rev_parse(repo: str | Path, rev: str) -> str | None:
    """Full SHA of any object ``rev`` names, or None."""
    if not valid_ref(rev):
        return None
    res = _git(repo, "rev-parse", "--verify", "--quiet", rev, check=False)
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
    res = _git(repo, "merge-base", a, b, check=False)
    return res.stdout.strip() or None if res.returncode == 0 else None


def is_shallow(repo: str | Path) -> bool:
    return _git(repo, "rev-parse", "--is-shallow-repository").stdout.strip() == "true"


def remote_exists(repo: str | Path, name: str) -> bool:
    return name in _git(repo, "remote").stdout.split()


def fetch(
    repo: str | Path, remote: str, refspec: str | None = None, timeout: float = FETCH_TIMEOUT
) -> tuple[bool, str]:
    """Fetch without prompting or hanging; returns (ok, reason)."""
    args = ["fetch", "--quiet", "--no-recurse-submodules", remote, *([refspec] if refspec else [])]
    res = _git(repo, *args, check=False, timeout=timeout)
    if res.timed_out:
        return False, f"git fetch {remote} timed out after {timeout:g}s"
    if res.returncode != 0:
        return False, _first_fatal(res, f"fetch {remote}")
    return True, ""


def symbolic_ref(repo: str | Path, name: str) -> str | None:
    """Short name a symbolic ref points to (``origin/main`` for refs/remotes/origin/HEAD)."""
    res = _git(repo, "symbolic-ref", "--quiet", "--short", name, check=False)
    return res.stdout.strip() or None if res.returncode == 0 else None


def remote_show_head_branch(
    repo: str | Path, remote: str, timeout: float = FETCH_TIMEOUT
) -> str | None:
    """The provider's default branch as ``git remote show REMOTE`` reports it."""
    res = _git(repo, "remote", "show", remote, check=False, timeout=timeout)
    if res.returncode != 0:
        return None
    for line in res.stdout.splitlines():
        key, _, value = line.strip().partition(": ")
        if key == "HEAD branch" and value and value != "(unknown)" and valid_ref(value):
            return value
    return None


# --- sources: repositories named by URL or path (fleet) ----------------------------------------


def is_url(source: str) -> bool:
    """Whether a run names its repository by URL (scp-like ``host:path`` included)."""
    if "://" in source:
        return True
    # git's own rule: "host:path" is scp-like unless a slash comes before the colon.
    head, colon, _ = source.partition(":")
    return bool(colon) and "/" not in head and not Path(source).exists()


def _first_fatal(res: Result, what: str) -> str:
    # git's first "fatal:" line says what went wrong; the lines after it are generic advice.
    for line in res.stderr.splitlines():
        if line.startswith(("fatal: ", "error: ")):
            return line.partition(": ")[2].strip()
    return f"git {what} exited {res.returncode}"


def remote_head(source: str, timeout: float = FETCH_TIMEOUT) -> str:
    """The commit HEAD points to in the repository at ``source`` (URL or path), read without a
    clone (``git ls-remote``). Raises FatalError with git's reason when it cannot be read."""
    res = _git(
        tempfile.gettempdir(), "ls-remote", "--", source, "HEAD", check=False, timeout=timeout
    )
    if res.timed_out:
        raise FatalError(f"git ls-remote {source} timed out after {timeout:g}s")
    if res.returncode != 0:
        raise FatalError(f"cannot read {source}: {_first_fatal(res, 'ls-remote')}")
    for line in res.stdout.splitlines():
        sha, _, ref = line.partition("\t")
        if ref == "HEAD" and valid_ref(sha):
            return sha
    raise FatalError(f"cannot read {source}: it has no HEAD commit (empty repository?)")


CLONE_TIMEOUT = 1800.0  # a first mirror of a big repository


def display_source(source: str) -> str:
    """``source`` safe to show (Flower, reports, logs): a password in a URL is hidden."""
    scheme, sep, rest = source.partition("://")
    if not sep:
        return source
    userinfo, at, host = rest.rpartition("@")
    if not at or "/" in userinfo:
        return source
    user = userinfo.split(":", 1)[0]
    return f"{scheme}://{user}:***@{host}" if ":" in userinfo else source


def is_bare(repo: str | Path) -> bool:
    return _git(repo, "rev-parse", "--is-bare-repository").stdout.strip() == "true"


def clone_mirror(source: str, dest: Path, timeout: float = CLONE_TIMEOUT) -> None:
    """A bare mirror of ``source`` (every ref), never garbage-collected on its own: throwaway
    checkouts borrow its objects through alternates, so gc must not prune them underneath."""
    res = _git(
        dest.parent,
        "clone",
        "--mirror",
        "--quiet",
        "--no-hardlinks",
        "-c",
        "gc.auto=0",
        "--",
        source,
        str(dest),
        check=False,
        timeout=timeout,
    )
    if res.timed_out:
        raise FatalError(f"git clone {display_source(source)} timed out after {timeout:g}s")
    if res.returncode != 0:
        raise FatalError(f"cannot mirror {display_source(source)}: {_first_fatal(res, 'clone')}")


def fetch_mirror(mirror: Path, timeout: float = CLONE_TIMEOUT) -> tuple[bool, str]:
    """Bring a mirror up to date (new commits, moved and deleted refs); returns (ok, reason)."""
    res = _git(mirror, "fetch", "--prune", "--quiet", "origin", check=False, timeout=timeout)
    if res.timed_out:
        return False, f"git fetch timed out after {timeout:g}s"
    return res.returncode == 0, "" if res.returncode == 0 else _first_fatal(res, "fetch")


def create_bundle(repo: str | Path, dest: Path, pins: Mapping[str, str]) -> None:
    """A bundle of every ref of ``repo`` plus ``pins`` (name -> commit) as
    ``refs/verify-dag/<name>``: what a worker on another host needs to verify a local state.

    The pins are unreferenced snapshot commits; a bundle only carries named refs, and the
    user's repository must not get refs of ours, so the refs are made in a shared mirror clone
    that borrows the repository's objects and is thrown away.
    """
    scratch = Path(tempfile.mkdtemp(prefix="verify-dag-bundle-"))
    try:
        tmp = scratch / "repo.git"
        _git(
            scratch,
            "clone",
            "--mirror",
            "--shared",
            "--quiet",
            "--",
            str(Path(repo).resolve()),
            str(tmp),
        )
        for name, sha in pins.items():
            _git(tmp, "update-ref", f"refs/verify-dag/{name}", sha)
        _git(tmp, "bundle", "create", "--quiet", str(dest), "--all", timeout=CLONE_TIMEOUT)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def init_from_bundle(bundle: Path, dest: Path) -> None:
    """A bare repository holding every ref of ``bundle``."""
    _git(dest.parent, "init", "--bare", "--quiet", str(dest))
    _git(dest, "config", "gc.auto", "0")
    res = _git(
        dest, "fetch", "--quiet", str(bundle), "+refs/*:refs/*", check=False, timeout=CLONE_TIMEOUT
    )
    if res.returncode != 0:
        raise FatalError(f"cannot read the run's bundle {bundle}: {_first_fatal(res, 'fetch')}")
    # A fetch does not carry HEAD over; the user's HEAD is what "the repository" means.
    for line in _git(dest, "bundle", "list-heads", str(bundle), "HEAD").stdout.splitlines():
        sha, _, ref = line.partition(" ")
        if ref == "HEAD" and valid_ref(sha):
            _git(dest, "update-ref", "--no-deref", "HEAD", sha)


# --- diffs -----------------------------------------------------------------------------------


def _pathspec(paths: Sequence[str]) -> list[str]:
    return ["--", *paths] if paths else []


def _renames(renames: bool) -> str:
    return "-M" if renames else "--no-renames"


def name_status(
    repo: str | Path, old: str, new: str, paths: Sequence[str] = (), renames: bool = True
) -> list[Delta]:
    out = _git(
        repo,
        "diff",
        "--name-status",
        "-z",
        _renames(renames),
        *_DIFF_OPTS,
        old,
        new,
        *_pathspec(paths),
    ).stdout
    return parse_name_status(out)


def binary_paths(
    repo: str | Path, old: str, new: str, paths: Sequence[str] = (), renames: bool = True
) -> set[str]:
    """New-side paths that ``git diff --numstat`` reports as binary (``-\\t-``)."""
    out = _git(
        repo, "diff", "--numstat", "-z", _renames(renames), *_DIFF_OPTS, old, new, *_pathspec(paths)
    ).stdout
    return parse_numstat_binary(out)


def line_ranges(
    repo: str | Path, old: str, new: str, paths: Sequence[str] = (), renames: bool = True
) -> dict[str, list[tuple[int, int]]]:
    out = _git(
        repo,
        "diff",
        "-U0",
        _renames(renames),
        *_DIFF_OPTS,
        "--src-prefix=a/",
        "--dst-prefix=b/",
        old,
        new,
        *_pathspec(paths),
    ).stdout
    return parse_hunks(out)


def diff_stat(
    repo: str | Path, old: str, new: str, paths: Sequence[str] = (), renames: bool = True
) -> str:
    return _git(
        repo, "diff", "--stat=200", _renames(renames), *_DIFF_OPTS, old, new, *_pathspec(paths)
    ).stdout


def ls_files(repo: str | Path, paths: Sequence[str] = ()) -> list[str]:
    """Tracked paths in the index."""
    return split_z(_git(repo, "ls-files", "-z", *_pathspec(paths)).stdout)


def untracked(repo: str | Path) -> list[str]:
    """Untracked paths that are not ignored."""
    return split_z(_git(repo, "ls-files", "-z", "--others", "--exclude-standard").stdout)


def ls_tree(repo: str | Path, commit: str, paths: Sequence[str] = ()) -> list[str]:
    """Every file path in ``commit`` (optionally under ``paths``)."""
    return split_z(
        _git(
            repo, "ls-tree", "-r", "-z", "--name-only", "--full-tree", commit, *_pathspec(paths)
        ).stdout
    )


def list_files(repo: str | Path, commit: str) -> list[str]:
    """Every file path in ``commit``: read a commit without checking it out."""
    return ls_tree(repo, commit)


def read_file(repo: str | Path, commit: str, path: str) -> str | None:
    """Content of ``path`` at ``commit``, or None when it is not a file there."""
    if not valid_ref(commit):
        return None
    res = _git(repo, "cat-file", "blob", f"{commit}:{path}", check=False)
    return res.stdout if res.returncode == 0 else None


def read_files(repo: str | Path, commit: str, paths: Sequence[str]) -> dict[str, str | None]:
    """Contents of ``paths`` at ``commit`` in one ``cat-file --batch`` (None: not a file there).
    Text is decoded as UTF-8 with replacement, as :func:`read_file` does."""
    out: dict[str, str | None] = {p: None for p in paths}
    wanted = [p for p in dict.fromkeys(paths) if "\n" not in p]
    if not wanted or not valid_ref(commit):
        return out
    request = "".join(f"{commit}:{p}\n" for p in wanted).encode("utf-8", "surrogateescape")
    raw = _git(repo, "cat-file", "--batch", input_data=request).stdout_bytes
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


def blobs(repo: str | Path, commit: str) -> dict[str, str]:
    """Every file of ``commit`` (symlinks and submodules too) -> its object id: what the
    result cache keys tool runs on, read without a checkout."""
    res = _git(repo, "ls-tree", "-r", "-z", "--full-tree", commit)
    out: dict[str, str] = {}
    for entry in split_z(res.stdout):
        meta, _, path = entry.partition("\t")
        parts = meta.split()
        if len(parts) == 3:
            out[path] = parts[2]
    return out


def empty_tree(repo: str | Path) -> str:
    """The empty tree's id in this repository's hash format (sha1 or sha256)."""
    return _git(repo, "hash-object", "-t", "tree", "--stdin").stdout.strip()


# --- snapshots -------------------------------------------------------------------------------


@contextmanager
def _temp_index(repo: str | Path) -> Iterator[dict[str, str]]:
    """An environment whose GIT_INDEX_FILE is a throwaway copy of the user's index: the one git
    itself is using when verify-dag runs inside a git hook (``git commit -a`` and ``git commit
    PATHS`` hand their hooks a temporary index of what is being committed, in GIT_INDEX_FILE),
    else the repository's own."""
    src = Path(_git(repo, "rev-parse", "--git-path", "index").stdout.strip())
    src = src if src.is_absolute() else Path(repo) / src
    hooked = _hook_index(repo)
    src = hooked if hooked is not None else src
    with tempfile.TemporaryDirectory(prefix="verify-dag-index-") as tmp:
        copy = Path(tmp) / "index"
        if src.exists():
            # copy2 keeps the index's mtime: git treats an entry as "racily clean" (and compares
            # content, not just stat data) by comparing file mtimes with the index's own. A fresh
            # mtime would hide a same-size edit made in the second of the last index write.
            shutil.copy2(src, copy)
        yield _env({"GIT_INDEX_FILE": str(copy), **_IDENTITY})


def _hook_index(repo: str | Path) -> Path | None:
    """The index GIT_INDEX_FILE names, when it is one of ``repo``'s (inside its git directory,
    where git puts the ones it hands its hooks); a path is read from the current directory, as
    git reads it."""
    named = os.environ.get("GIT_INDEX_FILE", "").strip()
    if not named:
        return None
    path = Path(named).resolve()
    git_dir = Path(_git(repo, "rev-parse", "--absolute-git-dir").stdout.strip()).resolve()
    return path if path.is_file() and path.is_relative_to(git_dir) else None


def _commit_tree(repo: str | Path, tree: str, parent: str, message: str) -> str:
    # An unchanged state is the parent itself: callers can then compare SHAs to find "no change".
    if rev_parse(repo, f"{parent}^{{tree}}") == tree:
        return parent
    env = _env(_IDENTITY)
    return _git(repo, "commit-tree", tree, "-p", parent, "-m", message, env=env).stdout.strip()


def snapshot_index(repo: str | Path) -> str:
    """Commit of the staged state (parent HEAD), or HEAD when nothing is staged."""
    with _temp_index(repo) as env:
        try:
            tree = _git(repo, "write-tree", env=env).stdout.strip()
        except CalledProcessError as exc:
            raise FatalError(
                "cannot snapshot the index: " + exc.message, hint="resolve merge conflicts first"
            ) from exc
    return _commit_tree(repo, tree, head(repo), "verify-dag: index snapshot")


def snapshot_worktree(repo: str | Path, parent: str) -> str:
    """Commit of the work tree including untracked, non-ignored files, or ``parent`` if equal."""
    with _temp_index(repo) as env:
        _git(repo, "add", "-A", env=env)
        tree = _git(repo, "write-tree", env=env).stdout.strip()
    return _commit_tree(repo, tree, parent, "verify-dag: work tree snapshot")


@contextmanager
def worktree(repo: str | Path, sha: str) -> Iterator[Path]:
    """A throwaway detached checkout of ``sha``, removed on exit (see :func:`checkout_into`).
    The pipeline's phases share one per commit instead (verify_dag/workspace.py)."""
    parent = Path(tempfile.mkdtemp(prefix="verify-dag-wt-"))
    try:
        yield checkout_into(repo, sha, parent / "tree")
    finally:
        shutil.rmtree(parent, ignore_errors=True)


def checkout_into(repo: str | Path, sha: str, path: Path) -> Path:
    """A detached checkout of ``sha`` at ``path`` (which must not exist yet); returns ``path``.

    It is a ``clone --shared`` (objects borrowed through alternates, so snapshot commits that no
    ref names are there too), not a ``git worktree``: linked worktrees keep their admin files in
    the repository, and concurrent ``worktree add``/``remove`` on one repository race in git
    itself (one reads another's half-written ``.git/worktrees/*`` and fails). Parallel phases
    and runs check out the same repository all the time; a shared clone only reads it.
    """
    if not valid_ref(sha):  # a caller's bug (an empty new_commit), not the user's input
        raise FatalError(f"cannot check out {sha!r}: not a commit")
    _git(
        path.parent,
        "clone",
        "--shared",
        "--no-checkout",
        "--quiet",
        "--",
        str(Path(repo).resolve()),
        str(path),
    )
    # No post-checkout hook or smudge filter runs here either (_no_programs).
    _git(path, "-c", "advice.detachedHead=false", "checkout", "--detach", "--quiet", sha)
    return path


# --- diff-only workspace (codex-reviewer) ----------------------------------------------------


def patch(repo: str | Path, old: str | None, new: str, paths: Sequence[str]) -> str:
    """The exact patch of ``paths`` between two commits (``old`` None: from the empty tree)."""
    base = old if old is not None else empty_tree(repo)
    return _git(
        repo, "diff", "--binary", "--full-index", "-M", *_DIFF_OPTS, base, new, *_pathspec(paths)
    ).stdout


def _load_index(ws: Path, repo: str | Path, commit: str | None, paths: Sequence[str]) -> None:
    """Make ``ws``'s index hold exactly ``paths`` as they are in ``commit`` of ``repo``."""
    _git(ws, "read-tree", "--empty")
    if commit is None or not paths:
        return
    listing = _git(repo, "ls-tree", "-r", "-z", "--full-tree", commit, *_pathspec(paths)).stdout
    if listing:
        # update-index --index-info takes ls-tree's own output format.
        res = _git(
            ws,
            "update-index",
            "-z",
            "--index-info",
            check=False,
            input_data=listing.encode("utf-8", "surrogateescape"),
        )
        if res.returncode != 0:
            raise FatalError(f"git update-index failed: {res.stderr.strip()[:200]}")


@contextmanager
def diff_workspace(
    repo: str | Path, old: str | None, new: str, old_paths: Sequence[str], new_paths: Sequence[str]
) -> Iterator[tuple[Path, str]]:
    """A throwaway repository where ``git diff HEAD`` is exactly the scoped diff.

    HEAD holds the old side of ``old_paths``; the index and work tree hold the new side of
    ``new_paths``. Objects come from ``repo`` through an alternates file, so nothing is copied
    and ``repo`` is only read. Yields the workspace and its ``git diff --cached`` patch, for the
    caller to compare with :func:`patch` before trusting it.
    """
    parent = Path(tempfile.mkdtemp(prefix="verify-dag-diff-"))
    ws = parent / "workspace"
    try:
        _git(parent, "init", "-q", str(ws))
        common = _git(repo, "rev-parse", "--path-format=absolute", "--git-common-dir").stdout
        alternates = ws / ".git" / "objects" / "info" / "alternates"
        alternates.write_text(str(Path(common.strip()) / "objects") + "\n", encoding="utf-8")
        _load_index(ws, repo, old, old_paths)
        base_tree = _git(ws, "write-tree").stdout.strip()
        base = _git(
            ws, "commit-tree", base_tree, "-m", "verify-dag: scoped base", env=_env(_IDENTITY)
        ).stdout.strip()
        _git(ws, "update-ref", "HEAD", base)
        _load_index(ws, repo, new, new_paths)
        _git(ws, "checkout-index", "--all", "--force")
        got = _git(
            ws, "diff", "--cached", "--binary", "--full-index", "-M", *_DIFF_OPTS, "HEAD"
        ).stdout
        yield ws, got
    finally:
        shutil.rmtree(parent, ignore_errors=True)


# --- contract verifier and floor guard (reviewers/contract/) ---------------------------------
# `floor-guard BASE -- PATHSPEC...` takes git pathspecs as git itself does (globs, `:(exclude)`,
# relative to the directory it runs in), unlike the literal file lists above; they still only
# ever follow "--". Failures are raised with git's own reason, for one clean line on stderr.


def _spec_env(magic: bool) -> dict[str, str]:
    return _env({"GIT_LITERAL_PATHSPECS": "0"}) if magic else _env()


def _diff_or_raise(
    repo: str | Path, args: Sequence[str], pathspecs: Sequence[str], magic: bool
) -> str:
    res = _git(
        repo, "diff", *args, *_DIFF_OPTS, *_pathspec(pathspecs), check=False, env=_spec_env(magic)
    )
    if res.returncode != 0:
        raise UsageError(f"git diff failed: {_first_fatal(res, 'diff')}")
    return res.stdout


def unified_diff(
    repo: str | Path,
    old: str,
    new: str,
    pathspecs: Sequence[str] = (),
    *,
    magic: bool = False,
    context: int = 0,
) -> str:
    """The text patch ``old..new`` (renames followed, binary files named only)."""
    return _diff_or_raise(
        repo,
        [f"-U{context}", "-M", "--src-prefix=a/", "--dst-prefix=b/", old, new],
        pathspecs,
        magic,
    )


def changed_paths(
    repo: str | Path, old: str, new: str, pathspecs: Sequence[str] = (), *, magic: bool = False
) -> list[Delta]:
    """``git diff --name-status -M old new -- pathspecs``."""
    return parse_name_status(
        _diff_or_raise(repo, ["--name-status", "-z", "-M", old, new], pathspecs, magic)
    )


def pathspec_matches(repo: str | Path, commit: str, pathspec: str) -> bool:
    """Whether any file of ``commit`` matches ``pathspec`` (a git pathspec, magic allowed)."""
    res = _git(
        repo,
        "diff",
        "--quiet",
        "--no-renames",
        *_DIFF_OPTS,
        empty_tree(repo),
        commit,
        "--",
        pathspec,
        check=False,
        env=_spec_env(True),
    )
    if res.returncode in (0, 1):
        return res.returncode == 1
    raise UsageError(f"pathspec {pathspec!r}: {_first_fatal(res, 'diff')}")


# --- shadow verification (verify_dag/shadow): history, hunks and searches at a commit ---------


def last_change(
    repo: str | Path, commit: str, path: str, timeout: float = GIT_TIMEOUT
) -> str | None:
    """The newest commit reachable from ``commit`` that touched ``path`` (added, changed or
    deleted it), or None when no commit ever did: the path never existed in that history."""
    if not valid_ref(commit):
        return None
    res = _git(repo, "log", "-1", "--format=%H", commit, "--", path, check=False, timeout=timeout)
    return res.stdout.strip() or None if res.returncode == 0 else None


def hunk_pairs(
    repo: str | Path, old: str, new: str, path: str, timeout: float = GIT_TIMEOUT
) -> list[tuple[int, int, int, int]]:
    """``(old_start, old_count, new_start, new_count)`` of every ``-U0`` hunk of ``path``
    between two commits (renames are not followed: a moved file is a deletion here)."""
    out = _git(
        repo, "diff", "-U0", "--no-renames", *_DIFF_OPTS, old, new, "--", path, timeout=timeout
    ).stdout
    return parse_hunk_pairs(out)


def grep_word(
    repo: str | Path,
    commit: str,
    word: str,
    paths: Sequence[str] = (),
    timeout: float = GIT_TIMEOUT,
) -> list[tuple[str, int, str]]:
    """``(path, line, text)`` of every whole-word, fixed-string match of ``word`` in the text
    files of ``commit`` (``git grep -w -F -I``), optionally only under ``paths``."""
    if not valid_ref(commit) or not word:
        return []
    res = _git(
        repo,
        "grep",
        "-n",
        "-z",
        "-w",
        "-F",
        "-I",
        "--no-color",
        "-e",
        word,
        commit,
        *_pathspec(paths) or ["--"],
        check=False,
        timeout=timeout,
    )
    if res.returncode == 1:  # git grep: 1 means "no match"
        return []
    if res.returncode != 0:
        raise CalledProcessError(["git", "grep", word], res.returncode, res.stderr)
    return parse_grep_z(res.stdout, commit)


# --- fixes (Phase 9, docs/fixes.md): the user's work tree, never HEAD, the index or the stash ---


def patch_applies(repo: str | Path, patch_text: str) -> tuple[bool, str]:
    """Whether ``git apply --check`` accepts ``patch_text`` on ``repo``'s work tree, and git's own
    words when not. Nothing is written."""
    res = _git(
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
        env = _env({"GIT_INDEX_FILE": str(Path(tmp) / "index"), **_IDENTITY})
        _git(repo, "read-tree", base, env=env)
        res = _git(
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
            shown = _git(repo, "show", f":{p}", check=False, env=env)
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
        res = run(
            ["git", "merge-file", "-p", "--quiet", *names], cwd=tmp, timeout=GIT_TIMEOUT, env=_env()
        )
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
        res = run(
            ["git", "apply", f"-C{context}", "--whitespace=nowarn", "-"],
            cwd=root,
            timeout=GIT_TIMEOUT,
            env=_env(),
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
        env = _env({"GIT_INDEX_FILE": str(Path(tmp) / "index"), **_IDENTITY})
        _git(repo, "read-tree", base, env=env)
        for path, text in files.items():
            if text is None:
                _git(repo, "update-index", "--force-remove", "--", path, env=env)
                continue
            blob = _git(
                repo, "hash-object", "-w", "--stdin", input_data=text.encode("utf-8")
            ).stdout.strip()
            mode = "100644"
            listed = _git(repo, "ls-tree", base, "--", path).stdout.split()
            if listed:
                mode = listed[0]
            _git(repo, "update-index", "--add", "--cacheinfo", f"{mode},{blob},{path}", env=env)
        tree = _git(repo, "write-tree", env=env).stdout.strip()
    return _commit_tree(repo, tree, base, message)


def backup_commit(repo: str | Path, message: str) -> str:
    """A commit of the work tree (untracked, non-ignored files included) whose parents are
    HEAD and the staged state, as ``git stash create`` makes one, but named by no stash entry."""
    index = snapshot_index(repo)
    with _temp_index(repo) as env:
        _git(repo, "add", "-A", env=env)
        tree = _git(repo, "write-tree", env=env).stdout.strip()
    parents = ["-p", head(repo)] + (["-p", index] if index != head(repo) else [])
    return _git(
        repo, "commit-tree", tree, *parents, "-m", message, env=_env(_IDENTITY)
    ).stdout.strip()


def recommit(repo: str | Path, commit: str, message: str) -> str:
    """``commit`` again (same tree, same parents) with another message."""
    parents = _git(repo, "rev-list", "--parents", "-n", "1", commit).stdout.split()[1:]
    args = [a for p in parents for a in ("-p", p)]
    tree = f"{commit}^{{tree}}"
    return _git(repo, "commit-tree", tree, *args, "-m", message, env=_env(_IDENTITY)).stdout.strip()


def update_ref(repo: str | Path, ref: str, sha: str) -> None:
    _git(repo, "update-ref", check_ref(ref), sha)


def commit_message(repo: str | Path, commit: str) -> str:
    return _git(repo, "log", "-1", "--format=%B", commit).stdout


def restore_worktree(repo: str | Path, source: str, paths: Sequence[str]) -> None:
    """Put ``paths`` of the work tree back as ``source`` has them; one that ``source`` lacks is
    removed. The index is not touched (``git restore --worktree`` without ``--staged``)."""
    present = set(ls_tree(repo, source, paths)) if paths else set()
    keep = [p for p in paths if p in present]
    if keep:
        _git(repo, "restore", f"--source={source}", "--worktree", *_pathspec(keep))
    top = Path(repo)
    for p in paths:
        if p not in present and (top / p).is_file():
            (top / p).unlink()


def worktree_differs(repo: str | Path, commit: str, path: str) -> bool:
    """Whether the work tree's ``path`` is not what ``commit`` holds (a file it lacks differs
    when it exists)."""
    full = Path(repo) / path
    res = _git(repo, "rev-parse", "--verify", "--quiet", f"{commit}:{path}", check=False)
    blob = res.stdout.strip() if res.returncode == 0 else None
    if not full.is_file():
        return blob is not None
    if blob is None:
        return True
    return _git(repo, "hash-object", "--", path).stdout.strip() != blob


def index_text(repo: str | Path, path: str) -> str | None:
    """What the index holds for ``path`` (stage 0), or None when it holds no such file."""
    res = _git(repo, "cat-file", "blob", f":0:{path}", check=False)
    return res.stdout if res.returncode == 0 else None


def stage_texts(repo: str | Path, texts: Mapping[str, str | None]) -> None:
    """Put ``texts`` into the user's index, as ``git add`` of those contents would (None:
    the file leaves the index); a file keeps the mode its entry has. Staged fixes of a staged
    change go there, beside the work tree's."""
    for path, text in texts.items():
        if text is None:
            _git(repo, "update-index", "--force-remove", "--", path)
            continue
        blob = _git(
            repo, "hash-object", "-w", "--stdin", input_data=text.encode("utf-8")
        ).stdout.strip()
        listed = _git(repo, "ls-files", "-s", "--", path).stdout.split()
        mode = listed[0] if listed else "100644"
        _git(repo, "update-index", "--add", "--cacheinfo", f"{mode},{blob},{path}")


def restore_index(repo: str | Path, source: str, paths: Sequence[str]) -> None:
    """Put ``paths`` of the index back as ``source`` has them (one it lacks leaves the index);
    the work tree is not touched."""
    if paths:
        _git(repo, "restore", f"--source={source}", "--staged", *_pathspec(paths))


def index_differs(repo: str | Path, commit: str, path: str) -> bool:
    """Whether the index's ``path`` is not what ``commit`` holds."""
    res = _git(repo, "rev-parse", "--verify", "--quiet", f"{commit}:{path}", check=False)
    blob = res.stdout.strip() if res.returncode == 0 else None
    staged = _git(repo, "rev-parse", "--verify", "--quiet", f":0:{path}", check=False)
    return (staged.stdout.strip() if staged.returncode == 0 else None) != blob
