"""What repository code sees of this host's file system: one plan, applied by either launcher.

:func:`plan` lists mount operations in bubblewrap's own vocabulary (``--ro-bind``, ``--tmpfs``,
``--remount-ro`` ...): bubblewrap takes them as its arguments (:func:`bwrap_args`), and without
bubblewrap :mod:`verify_dag.sandbox.inside` applies the same list inside an unshared mount and
user namespace. Both views are therefore the same by construction: the whole file system
read-only, the worker's homes, /run, service state and scratch directories replaced by empty
ones, the host's secret files replaced by an empty file, and only the step's own checkout and
what its policy names writable.
"""

from __future__ import annotations

import os
import pwd
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from verify_dag.paths import cache_root, private_roots

# One mount operation: ("ro-bind"|"bind", src, dst), ("tmpfs", dst, size in bytes or ""),
# ("dev", "/dev"), ("proc", "/proc"), ("dir", path), ("remount-ro", path), ("chdir", path).
Op = tuple[str, ...]

PRIVATE_HOME = "/tmp/home"
TMP_LIMIT_ENV = "VERIFY_DAG_TMP_LIMIT_MB"
DEFAULT_TMP_LIMIT_MB = 1024
# Files of the host's root that hold secrets, replaced by an empty file: inside the user
# namespace the files of the worker's own user keep their owner's permissions (its uid is the
# one mapped to nobody), so what only that user may read is hidden, not merely unreadable.
SECRET_FILES = ("/etc/shadow", "/etc/gshadow", "/etc/shadow-", "/etc/gshadow-", "/etc/sudoers")
# Version managers that live in a home and put shims on PATH: a shim is nothing without the
# manager and the interpreters it installed, all under one root that holds no credentials, so a
# PATH entry under one of these exposes that whole root, read-only (``python3`` then means the
# same interpreter inside as outside).
VERSION_MANAGERS = (
    ".pyenv",
    ".rbenv",
    ".nodenv",
    ".goenv",
    ".nvm",
    ".asdf",
    ".volta",
    ".local/share/mise",
)
# The scratch directories: writable, private, size-limited (VERIFY_DAG_TMP_LIMIT_MB).
_SCRATCH = frozenset(Path(p).resolve() for p in ("/tmp", "/var/tmp", "/dev/shm"))
_TMP = Path("/tmp").resolve()


@dataclass(frozen=True)
class Policy:
    """What one step of repository code may touch besides its working directory."""

    network: bool = False  # provisioning needs the package index; nothing else does
    writable: tuple[Path, ...] = ()
    # Inside what is writable, what stays read-only all the same (a tox env's packages, while
    # tox writes its logs beside them).
    readonly: tuple[Path, ...] = ()
    # The working directory is writable unless the step is known only to read it (the static
    # tools reading a checkout the run's other phases share).
    cwd_writable: bool = True
    # Read-only besides what every step reads: paths a person's command names (a completion
    # criterion's files outside any work tree).
    readable: tuple[Path, ...] = ()
    # HOME inside: by default the private /tmp/home; a person's command line (a completion
    # criterion) gets the worker's own home path instead, so that ``~/src/shop`` names what it
    # names outside. That home is as empty as any hidden one, writable scratch like /tmp, with
    # only what the policy exposes bound into it.
    home: Path | None = None


def tmp_limit_mb() -> int:
    text = os.environ.get(TMP_LIMIT_ENV, "").strip()
    return int(text) if text.isdigit() and int(text) > 0 else DEFAULT_TMP_LIMIT_MB


def plan(
    policy: Policy,
    workdir: Path | None,
    path_var: str,
    proxy: Path | None = None,
    *,
    tmp: Path | None = None,
) -> list[Op]:
    """The mount operations, in order, that make a step's view of the host. ``tmp``: a
    directory the launcher has mounted a size-limited tmpfs on, bound as /tmp instead of a
    tmpfs of the sandbox's own (:mod:`verify_dag.sandbox.roottmp`)."""
    ops: list[Op] = [("ro-bind", "/", "/"), ("dev", "/dev"), ("proc", "/proc")]
    hidden = hidden_dirs()
    home = policy.home.resolve() if policy.home is not None else None
    # The hidden directory HOME lies in is scratch for such a step: tools write their caches
    # under HOME, and what they write goes with the sandbox.
    scratch = _SCRATCH | {h for h in hidden if home is not None and home.is_relative_to(h)}
    scratch_size = str(tmp_limit_mb() * 2**20)
    for path in hidden:
        if tmp is not None and path == _TMP:
            ops.append(("bind", str(tmp), str(path)))
        else:
            ops.append(("tmpfs", str(path), scratch_size if path in scratch else ""))
    for secret in secret_files():
        ops.append(("ro-bind", "/dev/null", secret))
    ops.append(("dir", PRIVATE_HOME))
    if home is not None:
        ops.append(("dir", str(home)))
    # A hidden home or /run stays empty: nothing written there could look like it landed.
    late = [p for p in hidden if p not in scratch]
    own = workdir if policy.cwd_writable else None
    writable = [p for p in (own, *policy.writable) if p is not None]
    readable = [workdir] if workdir is not None and own is None else []
    wanted = _wanted(policy, writable, path_var, readable)
    for path in _outermost(_inside(wanted, hidden, writable)):
        ops.append(("ro-bind", str(path), str(path)))
    # Inside what was exposed, what belongs to other runs and projects goes again (their
    # checkouts, tool caches, cached results), but for what this step itself was given.
    private = [p.resolve() for p in private_roots() if p.exists()]
    for path in private:
        ops.append(("tmpfs", str(path), ""))
    for path in _outermost(_inside(wanted, private, writable)):
        ops.append(("ro-bind", str(path), str(path)))
    # Outermost first, and one inside another is covered by it: bound afterwards, the outer one
    # would shadow the inner mount, which the unshare launcher then cannot remount.
    for path in _outermost([Path(p).resolve() for p in writable if Path(p).exists()]):
        ops.append(("bind", str(path), str(path)))
    for path in dict.fromkeys(Path(p).resolve() for p in policy.readonly):
        if path.exists():
            ops.append(("ro-bind", str(path), str(path)))
    if proxy is not None:
        ops.append(("ro-bind", str(proxy.parent), str(proxy.parent)))
    for path in [*late, *private]:
        ops.append(("remount-ro", str(path)))
    if workdir is not None:
        ops.append(("chdir", str(workdir)))
    return ops


def bwrap_args(ops: Sequence[Op]) -> list[str]:
    """The plan as bubblewrap's arguments."""
    argv: list[str] = []
    for op in ops:
        kind, *args = op
        if kind == "tmpfs":
            dst, size = args
            argv += [*(["--size", size] if size else []), "--tmpfs", dst]
        else:
            argv += [f"--{kind}", *args]
    return argv


# Services' state: a broker's cookie (/var/lib/rabbitmq/.erlang.cookie), databases, logs.
SERVICE_STATE = ("/run", "/var/lib", "/var/log", "/var/spool", "/var/mail", "/var/backups")


def homes() -> list[str]:
    """The homes on this host whose contents repository code never sees."""
    return [h for h in (os.environ.get("HOME", ""), _passwd_home(), "/root", "/home") if h]


def private_config() -> list[str]:
    """Where the worker's user configuration lives: the XDG directories and verify-dag's
    config file's directory."""
    xdg = [os.environ.get(n, "") for n in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME")]
    config = os.environ.get("VERIFY_DAG_CONFIG", "")
    return [p for p in (*xdg, str(Path(config).parent) if config else "") if p]


def hidden_dirs() -> list[Path]:
    """Replaced by empty ones: where the worker's secrets and other runs' files live."""
    out = _hidden_candidates()
    # A directory inside another hidden one is already gone; keep the outermost of each.
    return sorted({p for p in out if not any(q != p and p.is_relative_to(q) for q in out)})


def _hidden_candidates() -> list[Path]:
    candidates = [
        *homes(),
        *private_config(),
        *sorted(str(p) for p in _SCRATCH),
        *SERVICE_STATE,
    ]
    return [Path(c).resolve() for c in candidates if c and Path(c).is_dir()]


def secret_files() -> list[str]:
    """Host files only root should read: the shadow files, and SSH host keys."""
    found = [p for p in SECRET_FILES if os.path.isfile(p)]
    ssh = Path("/etc/ssh")
    if ssh.is_dir():
        found += sorted(str(p) for p in ssh.glob("ssh_host_*_key"))
    return found


def _passwd_home() -> str:
    try:
        return pwd.getpwuid(os.getuid()).pw_dir
    except KeyError:
        return ""


def _wanted(
    policy: Policy, writable: list[Path], path_var: str, readable: Sequence[Path] = ()
) -> list[Path]:
    """What the step needs to read, resolved: the interpreter and verify-dag's installation,
    the venvs on PATH, verify-dag's cache of environments, the objects a shared checkout
    borrows, and a working directory it may only read."""
    # verify-dag itself too: an editable install's finder points at a source tree that may
    # well live under a hidden directory (a checkout in /tmp or in a home).
    package = Path(__file__).resolve().parents[2]  # the package and its schemas link
    wanted: list[Path] = [
        Path(sys.prefix),
        Path(sys.base_prefix),
        Path(sys.exec_prefix),
        Path(os.path.realpath(sys.executable)).parent.parent,
        package,
        cache_root(),
    ]
    # Neither a hidden directory nor one that holds one: ``python -m`` puts the working
    # directory first on sys.path, and a verify-dag started so from a home or from /tmp would
    # expose all of it (a home's secrets, the host's /tmp over the sandbox's own).
    hidden = _hidden_candidates()
    for entry in sys.path:
        path = Path(entry).resolve() if entry else None
        if path is not None and path.is_dir() and not any(h.is_relative_to(path) for h in hidden):
            wanted.append(path)
    for entry in path_var.split(os.pathsep):
        if entry:
            # A venv's bin/ is nothing without its site-packages: the whole venv.
            venv = Path(entry).parent
            wanted.append(venv if (venv / "pyvenv.cfg").is_file() else Path(entry))
            wanted += _manager_root(Path(entry))
    wanted += [*readable, *policy.readable]
    for path in [*writable, *readable]:
        wanted += _alternates(path)
    resolv = Path(os.path.realpath("/etc/resolv.conf"))
    if policy.network:
        wanted.append(resolv)
    return list(dict.fromkeys(p.resolve() for p in wanted if p.exists()))


def readable_by_all(path_var: str) -> list[Path]:
    """What every step reads of what is otherwise hidden: the interpreter, verify-dag's
    installation, the venvs on PATH (the cache too, but for its private roots)."""
    return _wanted(Policy(), [], path_var)


def _manager_root(entry: Path) -> list[Path]:
    """The version manager's root (:data:`VERSION_MANAGERS`) a PATH entry lies in, if any."""
    if not entry.is_absolute():
        return []
    for home in {*homes(), *(str(p) for p in Path("/home").glob("*"))}:
        for name in VERSION_MANAGERS:
            root = Path(home) / name
            if entry.is_relative_to(root):
                return [root]
    return []


def _inside(wanted: list[Path], covered: Sequence[Path], writable: list[Path]) -> list[Path]:
    """The wanted paths that a directory of ``covered`` hides, but for those the step writes
    (bound writable on their own)."""
    return [
        path
        for path in wanted
        if any(path.is_relative_to(c) for c in covered)
        and not any(path.is_relative_to(w.resolve()) for w in writable)
    ]


def _outermost(paths: list[Path]) -> list[Path]:
    # Outermost first, so that a nested exposure is mounted inside its parent's.
    return sorted({p for p in paths if not any(q != p and p.is_relative_to(q) for q in paths)})


def _alternates(checkout: Path) -> list[Path]:
    """Object directories a ``clone --shared`` checkout borrows: git in it needs them."""
    found: list[Path] = []
    pending = [checkout / ".git" / "objects"]
    while pending:
        objects = pending.pop()
        try:
            lines = (objects / "info" / "alternates").read_text(encoding="utf-8").splitlines()
        except OSError:
            continue
        for line in lines:
            line = line.strip()
            if line and not line.startswith("#"):
                target = (objects / line).resolve() if not os.path.isabs(line) else Path(line)
                if target not in found:
                    found.append(target)
                    pending.append(target)
    return found
