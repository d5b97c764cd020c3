"""The sandbox every piece of repository code runs in (docs/security.md).

Repository code (build backends, test suites, linters' plugins, exercisers, completion commands,
contract oracles) is hostile until proven otherwise. :func:`wrap` turns a command into one that
runs inside Linux namespaces, built from what Linux offers without root. Both launchers give the
same view of the file system (:mod:`verify_dag.sandbox.view`): the whole of it read-only, the
worker's homes, /run and service state hidden, a private HOME and size-limited /tmp (sticky and
root's, as on any machine, where the worker is root: :mod:`verify_dag.sandbox.roottmp`), the host's
secret files empty, and only the step's own checkout and scratch writable; its own PID namespace
and /proc (no other process's environment or command line is readable), its own network
namespace with loopback only (a step that needs the package index reaches it, and nothing else,
through :mod:`verify_dag.netproxy`), and the unprivileged uid 65534. Every process it starts
dies with it.

- **bubblewrap** (``bwrap``, Debian's ``bubblewrap``), when it is installed and works.
- **unshare** (util-linux) otherwise, where the kernel lets an unprivileged user make user
  namespaces: :mod:`verify_dag.sandbox.inside` builds the same view in them.
- **none** when neither works: a verification then refuses to run repository code unless
  ``--no-sandbox`` (or ``VERIFY_DAG_SANDBOX=none``) chose it; the process group is still killed
  on every exit path.

Which one applied is recorded per step (:func:`tracking`) and reported in the skill's notes.
"""

# Long module: the two launchers (bubblewrap, unshare), how the best one is chosen, and the
# per-task record of which one ran belong together: a change to one must be read beside the others.

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextvars import ContextVar
from pathlib import Path
from typing import Literal

from verify_dag import netproxy
from verify_dag.errors import FatalError
from verify_dag.paths import cache_root
from verify_dag.sandbox import view
from verify_dag.sandbox.view import PRIVATE_HOME as PRIVATE_HOME
from verify_dag.sandbox.view import TMP_LIMIT_ENV as TMP_LIMIT_ENV
from verify_dag.sandbox.view import Policy as Policy
from verify_dag.sandbox.view import tmp_limit_mb as tmp_limit_mb

log = logging.getLogger(__name__)

Mode = Literal["bubblewrap", "unshare", "none"]
MODE_ENV = "VERIFY_DAG_SANDBOX"  # force a mode (bubblewrap | unshare | none); default: the best
REQUIRE_ENV = "VERIFY_DAG_REQUIRE_SANDBOX"  # a worker setting: refuse to run without bubblewrap
# Set in every sandboxed process: which worker process owns it, so that a worker starting after a
# killed one can find what its predecessor left running (:func:`reap_orphans`).
OWNER_ENV = "VERIFY_DAG_SANDBOX_OWNER"
WORKER_ENV = "VERIFY_DAG_WORKER_PID"
# The uid and gid repository code runs as inside its user namespace: nobody, never 0.
SANDBOX_UID = 65534

DESCRIPTIONS: dict[Mode, str] = {
    "bubblewrap": "bubblewrap (own PID namespace and /proc, loopback-only network, read-only file "
    "system, private HOME and size-limited /tmp, an unprivileged uid)",
    "unshare": "unshare (own PID namespace and /proc, loopback-only network, read-only file "
    "system, private HOME and size-limited /tmp, an unprivileged uid)",
    "none": "no sandbox (turned off by --no-sandbox or VERIFY_DAG_SANDBOX=none): repository "
    "code can read this host's processes and files and reach the network",
}


# Which isolation the repository code of the current step ran under; see :func:`tracking`.
_used: ContextVar[set[str] | None] = ContextVar("verify_dag_sandbox_used", default=None)
_required: ContextVar[bool] = ContextVar("verify_dag_sandbox_required", default=False)
# Whether a host that offers no sandbox may run repository code all the same: only where a
# command's --no-sandbox (or VERIFY_DAG_SANDBOX=none) chose it; code outside any tracked block
# refuses, so a path nobody thought of fails closed.
_unsandboxed: ContextVar[bool] = ContextVar("verify_dag_unsandboxed", default=False)


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


def record(modes: Sequence[str]) -> None:
    """Count ``modes`` as used by the block being tracked: commands another task ran for it
    (the derived probes run beside the suite), whose results it reports as its own."""
    used = _used.get()
    if used is not None:
        used.update(modes)


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
        [*_unshare_prefix([("ro-bind", "/", "/"), ("dev", "/dev"), ("proc", "/proc")]), "true"]
    ):
        return "unshare"
    return "none"


def _works(argv: list[str]) -> bool:
    # A probe of our own launcher, once per process, not repository code; processes.run (which
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
    _private_home(inner, policy.home)
    if policy.network and proxy is not None:
        # A network namespace of its own, the index proxy its one way out.
        argv = netproxy.command(proxy, list(argv))
    workdir = Path(cwd).resolve() if cwd is not None else None
    if chosen == "unshare":
        ops = view.plan(policy, workdir, env.get("PATH", ""), proxy)
        host_net = policy.network and proxy is None
        return [*_unshare_prefix(ops, network=host_net), *argv], inner
    return [*_bwrap_prefix(policy, workdir, env.get("PATH", ""), proxy), *argv], inner


def _private_home(env: dict[str, str], home: Path | None) -> None:
    env["HOME"] = PRIVATE_HOME if home is None else str(home)
    env["TMPDIR"] = "/tmp"
    for name in (
        "XDG_CONFIG_HOME",
        "XDG_DATA_HOME",
        "XDG_CACHE_HOME",
        "XDG_STATE_HOME",
        "XDG_RUNTIME_DIR",
    ):
        env.pop(name, None)


def _namespaces(*, network: bool) -> list[str]:
    """unshare's part: a user namespace whose root may mount, private mounts, its own PID
    namespace (the command is its first process, and all of it dies with it), IPC and UTS, and
    a network namespace with loopback only unless the step keeps the host's. setpriv (also
    util-linux) makes unshare die with the worker that started it, as bubblewrap's
    --die-with-parent does, and with it the whole namespace."""
    argv = [
        "setpriv",
        "--pdeathsig",
        "KILL",
        "--",
        "unshare",
        "--user",
        "--map-root-user",
        "--mount",
        "--propagation",
        "private",
        "--pid",
        "--fork",
        "--kill-child",
        "--ipc",
        "--uts",
    ]
    return argv if network else [*argv, "--net"]


def _unshare_prefix(ops: list[view.Op], *, network: bool = False) -> list[str]:
    inside = Path(__file__).resolve().parent / "inside.py"
    return [
        *_namespaces(network=network),
        "--",
        sys.executable,
        "-I",
        "-S",
        str(inside),
        str(_empty_root()),
        json.dumps(ops),
        "--",
    ]


def _empty_root() -> Path:
    """The mount point each unshare sandbox builds its root on, in its own mount namespace:
    one empty directory serves them all."""
    root = cache_root() / "sandbox-root"
    root.mkdir(parents=True, exist_ok=True)
    return root


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
    tmp = _foreign_tmp()
    launcher = _roottmp(tmp) if tmp is not None else []
    ops = view.plan(policy, workdir, path_var, proxy, tmp=tmp)
    return [*launcher, *argv, *view.bwrap_args(ops), "--"]


def _roottmp(mountpoint: Path) -> list[str]:
    """The launcher that gives a root worker's sandbox a /tmp of another account's
    (:mod:`verify_dag.sandbox.roottmp`), in front of bubblewrap's command line."""
    script = Path(__file__).resolve().parent / "roottmp.py"
    size = str(tmp_limit_mb() * 2**20)
    return [sys.executable, "-I", "-S", str(script), str(mountpoint), size, "--"]


def _foreign_tmp() -> Path | None:
    """Where a root worker mounts the sandbox's /tmp, or None where bubblewrap's own tmpfs
    serves: a worker that is not root cannot map a second uid, so its sandbox's /tmp is the
    sandbox's own (docs/security.md says what that changes)."""
    mountpoint = cache_root() / "sandbox-tmp"
    return mountpoint if _maps_root(mountpoint) else None


# bubblewrap in a user namespace as the sandbox's uid, over the host's root: what both probes run.
_USERNS_PROBE = (
    "bwrap",
    "--unshare-user",
    "--uid",
    str(SANDBOX_UID),
    "--ro-bind",
    "/",
    "/",
    "--dev",
    "/dev",
)


@functools.cache
def _maps_root(mountpoint: Path) -> bool:
    """Whether this root worker's launcher works here (a container may refuse it a mount
    namespace): probed once per process and mount point."""
    if os.geteuid() != 0 or not _user_namespaces():
        return False
    # /tmp sticky and not the sandbox user's own.
    sticky = ["test", "-k", "/tmp", "-a", "!", "-O", "/tmp"]
    bind = ["--gid", str(SANDBOX_UID), "--bind", str(mountpoint), "/tmp", "--"]
    return _works([*_roottmp(mountpoint), *_USERNS_PROBE, *bind, *sticky])


@functools.cache
def _user_namespaces() -> bool:
    """Whether bubblewrap can make a user namespace here (a container's seccomp profile may
    refuse it): then repository code runs as nobody, not as the worker's uid."""
    return _works([*_USERNS_PROBE, "true"])


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
