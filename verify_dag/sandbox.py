"""The sandbox every piece of repository code runs in (docs/security.md).

Repository code (build backends, test suites, linters' plugins, exercisers, completion commands,
contract oracles) is hostile until proven otherwise. :func:`wrap` turns a command into one that
runs inside Linux namespaces, built from what Linux offers without root:

- **bubblewrap** (``bwrap``, Debian's ``bubblewrap``), when it is installed and works: its own PID
  namespace and /proc (no other process's environment or command line is readable), its own
  network namespace with loopback only (a step that needs the package index reaches it, and
  nothing else, through :mod:`verify_dag.netproxy`), a private HOME
  and /tmp, the whole file system read-only, the worker's home, /run and the user's config hidden,
  and only the step's own checkout and scratch writable. Every process it starts dies with it.
- **unshare** (util-linux) otherwise: the PID and network namespaces and a private /proc, but no
  read-only file system. The report says so, and ``--require-sandbox`` refuses it.
- **none** when neither works: the process group is still killed on every exit path.

Which one applied is recorded per step (:func:`tracking`) and reported in the skill's notes.
"""

# Long module: the two launchers (bubblewrap, unshare), what each hides and exposes, and the
# per-task record of which one ran belong together: a change to one must be read beside the others.

from __future__ import annotations

import contextlib
import functools
import logging
import os
import pwd
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from verify_dag import netproxy
from verify_dag.errors import FatalError
from verify_dag.paths import cache_root, private_roots

log = logging.getLogger(__name__)

Mode = Literal["bubblewrap", "unshare", "none"]
MODE_ENV = "VERIFY_DAG_SANDBOX"  # force a mode (bubblewrap | unshare | none); default: the best
REQUIRE_ENV = "VERIFY_DAG_REQUIRE_SANDBOX"  # a worker setting: refuse to run without bubblewrap
# Set in every sandboxed process: which worker process owns it, so that a worker starting after a
# killed one can find what its predecessor left running (:func:`reap_orphans`).
OWNER_ENV = "VERIFY_DAG_SANDBOX_OWNER"
WORKER_ENV = "VERIFY_DAG_WORKER_PID"
PRIVATE_HOME = "/tmp/home"
# The uid and gid repository code runs as inside bubblewrap's user namespace: nobody, never 0.
SANDBOX_UID = 65534
TMP_LIMIT_ENV = "VERIFY_DAG_TMP_LIMIT_MB"
DEFAULT_TMP_LIMIT_MB = 1024
# Files of the host's root that hold secrets, replaced by an empty file: inside the user
# namespace the files of the worker's own user keep their owner's permissions (its uid is the
# one mapped to nobody), so what only that user may read is hidden, not merely unreadable.
SECRET_FILES = ("/etc/shadow", "/etc/gshadow", "/etc/shadow-", "/etc/gshadow-", "/etc/sudoers")

DESCRIPTIONS: dict[Mode, str] = {
    "bubblewrap": "bubblewrap (own PID namespace and /proc, loopback-only network, read-only file "
    "system, private HOME and size-limited /tmp, an unprivileged uid)",
    "unshare": "unshare (own PID namespace and /proc, loopback-only network; the file system is "
    "NOT read-only and HOME is only private by its variable: install bubblewrap)",
    "none": "no sandbox (turned off by --no-sandbox or VERIFY_DAG_SANDBOX=none): repository "
    "code can read this host's processes and files and reach the network",
}


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


# Which isolation the repository code of the current step ran under; see :func:`tracking`.
_used: ContextVar[set[str] | None] = ContextVar("verify_dag_sandbox_used", default=None)
_required: ContextVar[bool] = ContextVar("verify_dag_sandbox_required", default=False)
# Outside a verification (the tools' own commands) a host without a sandbox runs unsandboxed, as
# their reports say; a verification refuses unless --no-sandbox.
_unsandboxed: ContextVar[bool] = ContextVar("verify_dag_unsandboxed", default=True)


@contextlib.contextmanager
def tracking(*, required: bool = False, unsandboxed: bool = False) -> Iterator[set[str]]:
    """Collect the isolation every sandboxed command of the block ran under; with ``required``,
    a command that cannot get bubblewrap raises instead of running; without ``unsandboxed``
    (``--no-sandbox``), one on a host that offers no sandbox at all does."""
    used: set[str] = set()
    token, req = _used.set(used), _required.set(required or require_setting())
    loose = _unsandboxed.set(unsandboxed)
    try:
        yield used
    finally:
        _used.reset(token)
        _required.reset(req)
        _unsandboxed.reset(loose)


def require_setting() -> bool:
    return os.environ.get(REQUIRE_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def describe(used: set[str] | Sequence[str]) -> str:
    """What the named modes isolate, in words, for the report."""
    return " and ".join(text for name, text in DESCRIPTIONS.items() if name in used)


def joined(used: set[str]) -> str:
    """The modes a step's commands ran under, weakest last: ``bubblewrap``, ``bubblewrap+none``."""
    return "+".join(m for m in DESCRIPTIONS if m in used)


def mode() -> Mode:
    """The best isolation this host gives, or the one $VERIFY_DAG_SANDBOX forces."""
    forced = os.environ.get(MODE_ENV, "").strip().lower()
    return _mode(forced)


@functools.cache
def _mode(forced: str) -> Mode:
    if forced == "none":
        return "none"
    if forced in ("", "bubblewrap") and _works(
        [
            "bwrap",
            "--ro-bind",
            "/",
            "/",
            "--dev",
            "/dev",
            "--proc",
            "/proc",
            "--unshare-pid",
            "--unshare-net",
            "--die-with-parent",
            "true",
        ]
    ):
        return "bubblewrap"
    if forced in ("", "unshare", "bubblewrap") and _works(
        [*_unshare_prefix(network=False), "true"]
    ):
        return "unshare"
    return "none"


def _works(argv: list[str]) -> bool:
    # A probe of our own launcher, once per process, not repository code; util.run (which
    # imports this module) is not available here.
    if shutil.which(argv[0]) is None:
        return False
    try:
        res = subprocess.run(
            argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=10, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return res.returncode == 0


class SandboxRequired(FatalError):
    pass


def check_required(required: bool, unsandboxed: bool = True) -> None:
    """Raise SandboxRequired when bubblewrap is required (by the run or this host's setting)
    and this host cannot give it; or, unless ``unsandboxed`` (``--no-sandbox``), when this host
    offers no sandbox at all and nobody chose that (``VERIFY_DAG_SANDBOX=none``)."""
    chosen = mode()
    if chosen != "bubblewrap" and (required or require_setting()):
        raise SandboxRequired(
            f"repository code must run in a bubblewrap sandbox (--require-sandbox or "
            f"{REQUIRE_ENV}) and this host offers {chosen}",
            hint="install bubblewrap (Debian: apt-get install bubblewrap) on the worker hosts",
        )
    if chosen == "none" and not unsandboxed and not turned_off():
        raise SandboxRequired(
            "this host offers no sandbox for repository code (neither bubblewrap nor unshare "
            "works here)",
            hint="install bubblewrap (Debian: apt-get install bubblewrap), or pass --no-sandbox "
            "to run it unsandboxed",
        )


def turned_off() -> bool:
    """Whether the sandbox was turned off by choice ($VERIFY_DAG_SANDBOX=none)."""
    return os.environ.get(MODE_ENV, "").strip().lower() == "none"


def wrap(
    argv: Sequence[str],
    policy: Policy,
    *,
    cwd: str | Path | None,
    env: Mapping[str, str],
    step: str,
    proxy: Path | None = None,
) -> tuple[list[str], dict[str, str]]:
    """``argv`` and ``env`` as they run inside this host's sandbox; ``step`` names this one
    command's processes for :func:`kill_step`. ``proxy``: for a step with the network, the
    socket of the index proxy (:mod:`verify_dag.netproxy`) that is then its only way out."""
    check_required(_required.get(), _unsandboxed.get())
    chosen = mode()
    used = _used.get()
    if used is not None:
        used.add(chosen)
    inner = dict(env)
    inner[OWNER_ENV] = f"{os.getpid()}:{step}"
    inner[WORKER_ENV] = os.environ.get(WORKER_ENV, str(os.getpid()))
    if chosen == "none":
        return list(argv), inner
    _private_home(inner)
    if policy.network and proxy is not None:
        # A network namespace of its own, the index proxy its one way out.
        argv = netproxy.command(proxy, list(argv))
    if chosen == "unshare":
        return [*_unshare_prefix(network=policy.network and proxy is None), *argv], inner
    workdir = Path(cwd).resolve() if cwd is not None else None
    return [*_bwrap_prefix(policy, workdir, env.get("PATH", ""), proxy), *argv], inner


def _private_home(env: dict[str, str]) -> None:
    env["HOME"] = PRIVATE_HOME
    env["TMPDIR"] = "/tmp"
    for name in (
        "XDG_CONFIG_HOME",
        "XDG_DATA_HOME",
        "XDG_CACHE_HOME",
        "XDG_STATE_HOME",
        "XDG_RUNTIME_DIR",
    ):
        env.pop(name, None)


def _unshare_prefix(*, network: bool) -> list[str]:
    argv = ["unshare", "--pid", "--fork", "--kill-child", "--mount-proc", "--ipc", "--uts"]
    if os.geteuid() != 0:
        argv[1:1] = ["--user", "--map-root-user"]
    if network:
        return [*argv, "--"]
    # A new network namespace starts with loopback down; `ip` brings it up when it is there.
    return [
        *argv,
        "--net",
        "--",
        "sh",
        "-c",
        'ip link set lo up 2>/dev/null; mkdir -p "$HOME" 2>/dev/null; exec "$@"',
        "sh",
    ]


def _bwrap_prefix(
    policy: Policy, workdir: Path | None, path_var: str, proxy: Path | None = None
) -> list[str]:
    argv = [
        "bwrap",
        "--die-with-parent",
        "--new-session",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
    ]
    if _user_namespaces():
        argv += ["--unshare-user", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID)]
    if not policy.network or proxy is not None:
        argv.append("--unshare-net")
    argv += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    hidden = _hidden_dirs()
    scratch_size = str(tmp_limit_mb() * 2**20)
    for path in hidden:
        if path in _SCRATCH:
            argv += ["--size", scratch_size]
        argv += ["--tmpfs", str(path)]
    for secret in _secret_files():
        argv += ["--ro-bind", "/dev/null", secret]
    argv += ["--dir", PRIVATE_HOME]
    # A hidden home or /run stays empty: nothing written there could look like it landed.
    late = [p for p in hidden if p not in _SCRATCH]
    own = workdir if policy.cwd_writable else None
    writable = [p for p in (own, *policy.writable) if p is not None]
    readable = [workdir] if workdir is not None and own is None else []
    wanted = _wanted(policy, writable, path_var, readable)
    for path in _outermost(_inside(wanted, hidden, writable)):
        argv += ["--ro-bind", str(path), str(path)]
    # Inside what was exposed, what belongs to other runs and projects goes again (their
    # checkouts, tool caches, cached results), but for what this step itself was given.
    private = [p.resolve() for p in private_roots() if p.exists()]
    for path in private:
        argv += ["--tmpfs", str(path)]
    for path in _outermost(_inside(wanted, private, writable)):
        argv += ["--ro-bind", str(path), str(path)]
    for path in dict.fromkeys(Path(p).resolve() for p in writable):
        if path.exists():
            argv += ["--bind", str(path), str(path)]
    for path in dict.fromkeys(Path(p).resolve() for p in policy.readonly):
        if path.exists():
            argv += ["--ro-bind", str(path), str(path)]
    if proxy is not None:
        argv += ["--ro-bind", str(proxy.parent), str(proxy.parent)]
    for path in [*late, *private]:
        argv += ["--remount-ro", str(path)]
    if workdir is not None:
        argv += ["--chdir", str(workdir)]
    return [*argv, "--"]


def _hidden_dirs() -> list[Path]:
    """Replaced by empty ones: where the worker's secrets and other runs' files live."""
    homes = {os.environ.get("HOME", ""), _passwd_home(), "/root", "/home"}
    xdg = {os.environ.get(n, "") for n in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME")}
    config = os.environ.get("VERIFY_DAG_CONFIG", "")
    candidates = [
        *homes,
        *xdg,
        str(Path(config).parent) if config else "",
        "/tmp",
        "/var/tmp",
        "/run",
        "/dev/shm",
        # Services' state: a broker's cookie (/var/lib/rabbitmq/.erlang.cookie), databases.
        "/var/lib",
        "/var/log",
        "/var/spool",
        "/var/mail",
        "/var/backups",
    ]
    out = [Path(c).resolve() for c in candidates if c and Path(c).is_dir()]
    # A directory inside another hidden one is already gone; keep the outermost of each.
    return sorted({p for p in out if not any(q != p and p.is_relative_to(q) for q in out)})


# The scratch directories: writable, private, size-limited (VERIFY_DAG_TMP_LIMIT_MB).
_SCRATCH = frozenset(Path(p).resolve() for p in ("/tmp", "/var/tmp", "/dev/shm"))


def tmp_limit_mb() -> int:
    text = os.environ.get(TMP_LIMIT_ENV, "").strip()
    return int(text) if text.isdigit() and int(text) > 0 else DEFAULT_TMP_LIMIT_MB


def _secret_files() -> list[str]:
    """Host files only root should read: the shadow files, and SSH host keys."""
    found = [p for p in SECRET_FILES if os.path.isfile(p)]
    ssh = Path("/etc/ssh")
    if ssh.is_dir():
        found += sorted(str(p) for p in ssh.glob("ssh_host_*_key"))
    return found


@functools.cache
def _user_namespaces() -> bool:
    """Whether bubblewrap can make a user namespace here (a container's seccomp profile may
    refuse it): then repository code runs as nobody, not as the worker's uid."""
    return _works(
        [
            "bwrap",
            "--unshare-user",
            "--uid",
            str(SANDBOX_UID),
            "--ro-bind",
            "/",
            "/",
            "--dev",
            "/dev",
            "true",
        ]
    )


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
    package = Path(__file__).resolve().parent.parent  # the package and its schemas link
    wanted: list[Path] = [
        Path(sys.prefix),
        Path(sys.base_prefix),
        Path(sys.exec_prefix),
        Path(os.path.realpath(sys.executable)).parent.parent,
        package,
        cache_root(),
    ]
    wanted += [Path(p) for p in sys.path if p and Path(p).is_dir()]
    for entry in path_var.split(os.pathsep):
        if entry:
            # A venv's bin/ is nothing without its site-packages: the whole venv.
            venv = Path(entry).parent
            wanted.append(venv if (venv / "pyvenv.cfg").is_file() else Path(entry))
    wanted += readable
    for path in [*writable, *readable]:
        wanted += _alternates(path)
    resolv = Path(os.path.realpath("/etc/resolv.conf"))
    if policy.network:
        wanted.append(resolv)
    return list(dict.fromkeys(p.resolve() for p in wanted if p.exists()))


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


# --- what a killed worker left behind ---------------------------------------------------------


def _marked() -> Iterator[tuple[int, str, str]]:
    """(pid, owner marker, worker pid) of every process on this host carrying the markers."""
    me = os.getpid()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            raw = (entry / "environ").read_bytes()
        except OSError:
            continue
        env = dict(item.split(b"=", 1) for item in raw.split(b"\0") if b"=" in item)
        owner, worker = env.get(OWNER_ENV.encode()), env.get(WORKER_ENV.encode())
        if owner is not None and worker is not None:
            yield int(entry.name), owner.decode(errors="replace"), worker.decode(errors="replace")


def kill_step(step: str) -> int:
    """Kill what one command left running outside any namespace (no sandbox on this host: a
    daemon that left the process group still carries its step's marker, unless it scrubbed its
    own environment). How many were killed."""
    mine = f"{os.getpid()}:{step}"
    killed = 0
    for pid, owner, _ in _marked():
        if owner == mine:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
                killed += 1
    return killed


def worker_started() -> None:
    """A worker process starts: mark what its pool will run as this worker's, and kill what a
    killed worker before it left running."""
    os.environ[WORKER_ENV] = str(os.getpid())
    killed = reap_orphans()
    if killed:
        log.warning("killed %d sandboxed process(es) a killed worker left running", killed)


def reap_orphans() -> int:
    """Kill sandboxes whose owning worker is gone; how many were killed.

    A worker killed with SIGKILL cannot stop the sandboxes it started (bubblewrap dies with its
    parent, but the parent may be a pool process that outlived the worker). The next worker on
    the host finds them by the owner marker in their environment."""
    killed = 0
    for pid, owner, worker in _marked():
        owner_pid = owner.partition(":")[0]
        if not (owner_pid.isdigit() and worker.isdigit()):
            continue
        if _alive(int(owner_pid)) and _alive(int(worker)):
            continue
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
            killed += 1
    return killed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie is not alive: its sandboxes are orphans too.
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8")
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[:1] != ["Z"]
