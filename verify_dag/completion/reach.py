"""What of this host a completion criterion sees (docs/completion.md, "What the criterion sees").

The criterion is a person's command line, ``cd ~/src/shop && python3 -m pytest -q``, and it runs
in the sandbox every piece of repository code runs in (verify_dag/sandbox/), which hides the
homes, /tmp and /var/tmp. Run there as it is, it would find nothing where it points. So the
paths the line names (absolute, ``~``, ``~user``, ``$HOME``) are looked up on this host and
exposed:

- a path inside a git work tree exposes the whole work tree, read-write (pytest finds its
  rootdir and configuration, a build writes its outputs), but for the work tree's ``.git``,
  which stays read-only: a hook written there would run, unsandboxed, at the person's next git
  command;
- a directory outside any work tree, in a home or a scratch directory, is exposed read-write;
  a file there, read-only;
- everything else is already visible read-only and stays so: the sandbox never makes a system
  directory writable.

Never exposed, whatever the line names: a home itself, its hidden entries (``~/.ssh``,
``~/.netrc``, ``~/.config``: where credentials live), the user configuration, verify-dag's
cache of other runs, service state, and anything that would contain one of those. HOME inside is
the worker's own home path (:attr:`verify_dag.sandbox.Policy.home`), empty but for what is
exposed, so ``~`` means what it means outside.
"""

from __future__ import annotations

import os
import pwd
import shlex
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from verify_dag.paths import cache_root, private_roots
from verify_dag.phases.exerciser.criterion import Access, NamedPath
from verify_dag.sandbox import Policy, view

# Places no criterion may open, whatever it names, besides a home's hidden entries.
_SYSTEM = ("/etc", "/proc", "/sys", "/dev", "/boot")


@dataclass(frozen=True)
class Reach:
    """The criterion's sandbox policy, and what it says about each path the line named."""

    policy: Policy
    named: tuple[NamedPath, ...]


def reach(command: str) -> Reach:
    """The policy a criterion runs under (its working directory, the run directory, is
    writable as every step's is)."""
    home = _home()
    writable: list[Path] = []
    readonly: list[Path] = []
    readable: list[Path] = []
    named: dict[str, NamedPath] = {}

    def note(text: str, access: Access, why: str) -> None:
        named[text] = NamedPath(path=text, access=access, note=why)

    for text in paths_named(command, home):
        path = Path(text)
        if not path.exists() or text in named:
            continue
        # Judged as named and as the kernel would follow it: a link visible in the sandbox may
        # still point into a hidden place.
        resolved = path.resolve()
        tree = _work_tree(path)
        if tree is not None and _exposable_tree(tree.resolve(), home):
            writable.append(tree.resolve())
            readonly += _git_dirs(tree.resolve())
            readable += [g for g in _linked_git_dirs(tree) if _withheld(g, home) is None]
            note(text, "read-write", f"in the git work tree {tree} (its .git read-only)")
        elif not _hidden(path) and not _hidden(resolved):
            note(text, "read-only", "visible as the sandbox shows this host")
        elif (why := _withheld(path, home) or _withheld(resolved, home)) is not None:
            note(text, "withheld", why)
        elif resolved.is_dir() and not _worker_install(resolved):
            writable.append(resolved)
            note(text, "read-write", "a directory outside any git work tree")
        else:
            readable.append(resolved)
            note(text, "read-only", "a file outside any git work tree")
    policy = Policy(
        writable=tuple(dict.fromkeys(writable)),
        readonly=tuple(dict.fromkeys(readonly)),
        readable=tuple(dict.fromkeys(readable)),
        home=home if home is not None and home.is_dir() else None,
    )
    return Reach(policy=policy, named=tuple(named.values()))


def paths_named(command: str, home: Path | None) -> list[str]:
    """The absolute paths the line names, ``~`` and ``$HOME`` expanded, normalised, in order.

    Words are read as bash splits them (quotes, ``&&``, ``;``, ``|``, redirections); a word's
    value after ``=`` counts too (``--rootdir=/x``, ``PYTHONPATH=/x``). Other variables and
    paths relative to a ``cd`` are not followed.
    """
    out: list[str] = []
    for word in _words(command):
        for candidate in (word, word.partition("=")[2]):
            text = _expand(candidate, home)
            if text is not None and text not in out:
                out.append(text)
    return out


def _words(command: str) -> list[str]:
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        return list(lexer)
    except ValueError:  # an unbalanced quote: bash refuses it too; name what can be read
        return command.split()


def _expand(word: str, home: Path | None) -> str | None:
    if word.startswith("~"):
        user, _, rest = word[1:].partition("/")
        base = str(home) if not user and home is not None else _user_home(user) if user else None
        if base is None:
            return None
        word = base + ("/" + rest if rest else "")
    for var in ("${HOME}", "$HOME"):
        if home is not None and (word == var or word.startswith(var + "/")):
            word = str(home) + word[len(var) :]
    if not word.startswith("/"):
        return None
    return os.path.normpath(word)


def _user_home(user: str) -> str | None:
    try:
        return pwd.getpwnam(user).pw_dir
    except KeyError:
        return None


def _home() -> Path | None:
    text = os.environ.get("HOME", "")
    return Path(text).resolve() if text else None


def _homes(home: Path | None) -> list[Path]:
    """Every home: the worker's, root's, and each one under /home."""
    found = [Path(h).resolve() for h in view.homes() if h != "/home"]
    base = Path("/home")
    if base.is_dir():
        found += [p.resolve() for p in base.iterdir() if p.is_dir()]
    if home is not None:
        found.append(home)
    return list(dict.fromkeys(found))


def _forbidden() -> list[Path]:
    """Where the worker's secrets and other runs' files are."""
    places = [
        *view.private_config(),
        *view.SERVICE_STATE,
        *_SYSTEM,
        *view.secret_files(),
        *(str(p) for p in private_roots()),
    ]
    return [Path(p).resolve() for p in places]


def _withheld(path: Path, home: Path | None) -> str | None:
    """Why ``path`` may not be exposed, or None."""
    for h in _homes(home):
        if h.is_relative_to(path):
            return "it is or contains a home directory"
        if path.is_relative_to(h):
            below = path.relative_to(h).parts
            if any(part.startswith(".") for part in below):
                return "a hidden entry of a home, where credentials and configuration live"
    for place in _forbidden():
        if path.is_relative_to(place):
            return f"inside {place}, which the sandbox always hides"
        if place.is_relative_to(path):
            return f"it contains {place}, which the sandbox always hides"
    for hidden in view.hidden_dirs():
        if hidden.is_relative_to(path):
            return f"it contains {hidden}, which the sandbox always hides"
    if cache_root().resolve().is_relative_to(path):
        return "it contains verify-dag's cache of other runs"
    return None


def _exposable_tree(tree: Path, home: Path | None) -> bool:
    return _withheld(tree, home) is None and not _worker_install(tree)


def _hidden(path: Path) -> bool:
    """Whether the sandbox hides ``path`` from every step unless its policy exposes it (what
    every step reads, such as the interpreter verify-dag runs on, is not hidden)."""
    if str(path) in view.secret_files():
        return True
    if any(path.is_relative_to(p.resolve()) for p in private_roots()):
        return True
    shown = view.readable_by_all(os.environ.get("PATH", ""))
    return any(path.is_relative_to(h) for h in view.hidden_dirs()) and not any(
        path.is_relative_to(s) for s in shown
    )


def _work_tree(path: Path) -> Path | None:
    """The nearest directory at or above ``path`` with a ``.git`` (a work tree's top)."""
    start = path if path.is_dir() else path.parent
    for candidate in (start, *start.parents):
        if (candidate / ".git").exists():
            return candidate
    return None


def _git_dirs(tree: Path) -> list[Path]:
    git = tree / ".git"
    return [git] if git.exists() else []


def _linked_git_dirs(tree: Path) -> list[Path]:
    """A linked work tree's or submodule's git directory (``.git`` is a file naming it) and
    the common directory it shares: git in the work tree needs both, read-only."""
    git = tree / ".git"
    if not git.is_file():
        return []
    try:
        line = git.read_text(encoding="utf-8").strip()
    except OSError:
        return []
    if not line.startswith("gitdir:"):
        return []
    gitdir = (tree / line.removeprefix("gitdir:").strip()).resolve()
    found = [gitdir]
    try:
        common = (gitdir / "commondir").read_text(encoding="utf-8").strip()
    except OSError:
        return found
    return [*found, (gitdir / common).resolve()]


def _worker_install(path: Path) -> bool:
    """Whether writing under ``path`` could change verify-dag itself or the Python it runs."""
    own = [Path(sys.prefix), Path(sys.base_prefix), Path(__file__).resolve().parents[2]]
    return _any_within(path, own)


def _any_within(path: Path, others: Iterable[Path]) -> bool:
    return any(o.resolve().is_relative_to(path) or path.is_relative_to(o.resolve()) for o in others)
