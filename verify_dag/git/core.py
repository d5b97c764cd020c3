"""The one place the product runs git: every call goes through :func:`run_git` (or, outside any
repository, :func:`run_plain`), and those alone call :func:`verify_dag.processes.run`.

Path lists use ``-z``, pathspecs are literal (``GIT_LITERAL_PATHSPECS``) and always follow ``--``.
No call runs a program that a configuration names (hooks, fsmonitor, filters, diff and merge
drivers, pager, editor, signing): see :func:`_no_programs`. Keeping the calls here is what lets
those overrides cover all of them.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

from verify_dag.errors import FatalError
from verify_dag.git.parse import config_files, parse_config_z, program_overrides
from verify_dag.processes import Result, git_env, run

GIT_TIMEOUT = 120.0
FETCH_TIMEOUT = 60.0
# Listings and -U0 patches of big changes easily pass processes's default 1 MB cap; a truncated
# listing would silently shrink the scope, so allow far more and fail loudly beyond it.
_CAP = 256 * 1024 * 1024
# Snapshot commits need an identity even where the user configured none.
IDENTITY = {
    "GIT_AUTHOR_NAME": "verify-dag",
    "GIT_AUTHOR_EMAIL": "verify-dag@localhost",
    "GIT_COMMITTER_NAME": "verify-dag",
    "GIT_COMMITTER_EMAIL": "verify-dag@localhost",
}
DIFF_OPTS = ("--no-color", "--no-ext-diff", "--no-textconv", "--no-relative")


def command_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
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
# names are read from its config (_read_config) and neutralised by parse.program_overrides.
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
        env=command_env(),
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


def run_git(
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
        env=_no_programs(repo, env or command_env()),
        cap=_CAP,
        check=check,
        input_data=input_data,
    )
    if res.truncated:
        raise FatalError(f"git {args[0]} output exceeded {_CAP} bytes", hint="scope too large")
    return res


def first_fatal(res: Result, what: str) -> str:
    # git's first "fatal:" line says what went wrong; the lines after it are generic advice.
    for line in res.stderr.splitlines():
        if line.startswith(("fatal: ", "error: ")):
            return line.partition(": ")[2].strip()
    return f"git {what} exited {res.returncode}"


def pathspec(paths: Sequence[str]) -> list[str]:
    return ["--", *paths] if paths else []


def run_plain(cwd: str | Path, *args: str, input_data: bytes | None = None) -> Result:
    """``git ARGS`` in a scratch directory that is no repository (``git merge-file``, ``git apply``
    on loose files): there is no repository configuration to neutralise, and the output is small."""
    return run(
        ["git", *args], cwd=cwd, timeout=GIT_TIMEOUT, env=command_env(), input_data=input_data
    )
