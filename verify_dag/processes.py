"""The one subprocess chokepoint: time limit, capped output, scrubbed environment.

Every external command (git, linters, test suites) goes through :func:`run`. Repository code is
untrusted (docs/security.md): it gets an environment without broker URLs, API keys or tokens,
runs in its own process group so a time-out kills the whole tree, and its output is capped.
"""
# Long module: the chokepoint and what must live beside it: the process groups it started (for
# Ctrl-C and a stopped run), the background children (an app under test), redaction and limits.

from __future__ import annotations

import contextlib
import functools
import math
import os
import resource
import select
import shutil
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from verify_dag import credentials, limits, netproxy, outside
from verify_dag import sandbox as _sandbox
from verify_dag.errors import CalledProcessError
from verify_dag.sandbox import Policy

DEFAULT_CAP = 1_000_000  # bytes kept per stream; the rest is drained and counted

# Git variables set by a hook or an outer git process would redirect commands in a scratch
# worktree to the user's repository.
_GIT_LEAKS = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_COMMON_DIR",
    "GIT_PREFIX",
)


def scrubbed_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """Repository code's environment: ours as credentials.passed allows, and ``extra``."""
    env = {k: v for k, v in os.environ.items() if credentials.passed(k, v)}
    env.setdefault("PATH", os.defpath)
    if extra:
        env.update(extra)
    return env


def git_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """Environment for our own git calls: no pager, no prompts, stable output."""
    env = {k: v for k, v in os.environ.items() if k not in _GIT_LEAKS}
    env.update({"GIT_TERMINAL_PROMPT": "0", "GIT_PAGER": "cat", "LC_ALL": "C", "LANG": "C"})
    if extra:
        env.update(extra)
    return env


def redact(text: str) -> str:
    """``text`` with every secret the worker knows and every secret shape replaced by
    ``[REDACTED]`` (see :mod:`verify_dag.redaction`)."""
    # Imported on first use: detect-secrets takes about 0.2 s to import.
    from verify_dag import redaction

    return redaction.redact(text)


@dataclass(frozen=True)
class Result:
    returncode: int
    stdout: str
    stderr: str
    timed_out: bool = False
    truncated: bool = False
    duration: float = 0.0
    not_found: bool = False
    # The resource limits the command hit, in words ("processes (at most 1024)"): repository
    # code only (verify_dag/limits.py).
    limits_hit: tuple[str, ...] = ()
    # stdout as it came, for output that is not text or whose byte counts matter (cat-file).
    stdout_bytes: bytes = field(default=b"", repr=False)


def _drain(stream: IO[bytes], cap: int, out: list[bytes], flags: list[bool]) -> None:
    kept = 0
    while True:
        chunk = stream.read(65536)
        if not chunk:
            break
        if kept < cap:
            take = chunk[: cap - kept]
            out.append(take)
            kept += len(take)
            if len(take) < len(chunk):
                flags.append(True)
        else:
            flags.append(True)
    stream.close()


MEMORY_ENV = limits.MEMORY_ENV
FILE_SIZE_ENV = "VERIFY_DAG_FILE_LIMIT_MB"
DEFAULT_FILE_LIMIT_MB = 8192  # above any pack file a mirror of a big repository writes


def _megabytes(env: str, default: int) -> int:
    text = os.environ.get(env, "").strip()
    return int(text) if text.isdigit() and int(text) > 0 else default


def resource_limits(memory_cgroup: bool = False) -> dict[int, int]:
    """The rlimits every child runs under: no core dumps; data memory (heap and
    private mappings, RLIMIT_DATA: unlike an address-space limit it leaves the large reservations
    of V8 or Go alone) at $VERIFY_DAG_MEMORY_LIMIT_MB (default half this machine's memory), so
    one runaway test cannot take a worker host down; and a cap on the size of any file it
    writes ($VERIFY_DAG_FILE_LIMIT_MB). A step whose memory a cgroup limits to that figure
    (verify_dag/limits.py) gets RLIMIT_DATA at three quarters of the machine's instead: the
    cgroup is what bites, and it says so."""
    physical_mb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2**20
    memory = physical_mb * 3 // 4 if memory_cgroup else limits.memory_mb()
    return {
        resource.RLIMIT_CORE: 0,
        resource.RLIMIT_DATA: memory * 2**20,
        resource.RLIMIT_FSIZE: file_limit_mb() * 2**20,
    }


def file_limit_mb() -> int:
    return _megabytes(FILE_SIZE_ENV, DEFAULT_FILE_LIMIT_MB)


def limit_settings() -> dict[str, str]:
    """The worker's limit settings, for a trusted helper of ours that itself runs repository code
    inside a sandbox (the exercise): the allow-list keeps them from repository code, and without
    them the helper would apply the defaults instead of the operator's figures."""
    names = (MEMORY_ENV, FILE_SIZE_ENV, limits.PROCESS_ENV, _sandbox.TMP_LIMIT_ENV)
    return {name: os.environ[name] for name in names if name in os.environ}


# Limits are set by prlimit(1) (util-linux, on every Linux host this runs on), which execs the
# command once they hold, and a step's cgroups are joined by sh before it execs prlimit: with no
# Python to run between fork and exec, Popen spawns with vfork. A ``preexec_fn`` makes it fork
# the whole worker instead, page tables and all: 73 ms a `git --version` from a process of
# 300 MB, against 4 ms through prlimit (200 each, side by side). Without prlimit, or for a
# program that will not be found (Popen's own error then says so), the hook does the same.
_RLIMIT_FLAGS = {
    resource.RLIMIT_CORE: "--core",
    resource.RLIMIT_DATA: "--data",
    resource.RLIMIT_FSIZE: "--fsize",
}
# $1: how many cgroup.procs files follow; each is written "0" (the writer itself), as
# limits.Step.join does, a failed write ignored as there; then the command.
_JOIN = (
    'n=$1; shift; while [ "$n" -gt 0 ]; do echo 0 >"$1"; shift; n=$((n - 1)); done 2>/dev/null; '
    'exec "$@"'
)


# Where a system keeps util-linux's programs, looked at before PATH (see _prlimit).
_SYSTEM_BIN = ("/usr/bin", "/bin", "/usr/sbin", "/sbin")


@functools.cache
def _prlimit() -> str | None:
    # Kept for the process's life, so not looked for on PATH alone: a caller that had narrowed
    # PATH at the first spawn (a test, a tool's own environment) left every later spawn of the
    # process on the hook, forking the whole worker.
    path = os.pathsep.join([*_SYSTEM_BIN, os.environ.get("PATH", "")])
    return shutil.which("prlimit", path=path)


def _launch(
    argv: list[str],
    rlimits: dict[int, int],
    env: Mapping[str, str],
    cwd: str | Path | None,
    step: limits.Step | None = None,
) -> tuple[list[str], Callable[[], None] | None]:
    """``argv`` as spawned under ``rlimits`` (and in ``step``'s cgroups), and the hook Popen
    must run in the child, when one is still needed."""
    outside.command(argv)  # git or not: verify_dag/cli/replay.py keeps only runs of git alone
    prlimit = _prlimit()
    unknown = set(rlimits) - set(_RLIMIT_FLAGS)
    if prlimit is None or unknown or _missing(argv[0], env, cwd) is not None:
        return argv, _limiter(rlimits, step)
    caps = {which: _capped(which, value) for which, value in rlimits.items()}
    flags = [f"{_RLIMIT_FLAGS[which]}={cap}:{cap}" for which, cap in caps.items()]
    out = [prlimit, *flags, "--", *argv]
    if step is not None and step.dirs:
        procs = [str(path / "cgroup.procs") for path in dict.fromkeys(step.dirs.values())]
        out = ["/bin/sh", "-c", _JOIN, "sh", str(len(procs)), *procs, *out]
    return out, None


def _capped(which: int, value: int) -> int:
    """Never above a hard limit the worker itself was started under."""
    hard = resource.getrlimit(which)[1]
    return value if hard == resource.RLIM_INFINITY else min(value, hard)


def _limiter(rlimits: dict[int, int], step: limits.Step | None = None) -> Callable[[], None]:
    def apply() -> None:  # pragma: no cover - runs in the child between fork and exec
        if step is not None:
            step.join()
        for which, value in rlimits.items():
            cap = _capped(which, value)
            resource.setrlimit(which, (cap, cap))

    return apply


# What a step's output says when an rlimit or the sandbox's /tmp stopped it (a cgroup's limits
# are read off the cgroup itself): the errors those limits give.
_NO_SPACE = "No space left on device"
_TOO_LARGE = "File too large"
_NO_MEMORY = ("MemoryError", "Cannot allocate memory", "std::bad_alloc")


def _limits_hit(step: limits.Step | None, output: str) -> tuple[str, ...]:
    hit = step.hit() if step is not None else []
    if (step is None or "memory" not in step.dirs) and any(m in output for m in _NO_MEMORY):
        hit.append(f"memory (at most {limits.memory_mb()} MB, {MEMORY_ENV})")
    if _TOO_LARGE in output:
        hit.append(f"file size (at most {file_limit_mb()} MB, {FILE_SIZE_ENV})")
    if _NO_SPACE in output and _sandbox.mode() != "none":
        hit.append(
            f"/tmp space (at most {_sandbox.tmp_limit_mb()} MB, {_sandbox.TMP_LIMIT_ENV}; "
            "or the disk is full)"
        )
    limits.record(tuple(hit))
    return tuple(hit)


def run(
    argv: Sequence[str],
    *,
    cwd: str | Path | None = None,
    timeout: float | None = 600.0,
    env: Mapping[str, str] | None = None,
    input_data: bytes | None = None,
    cap: int = DEFAULT_CAP,
    check: bool = False,
    sandbox: Policy | None = None,
) -> Result:
    """Run ``argv`` (never through a shell) and return what came back.

    Repository code passes a ``sandbox`` policy: it then runs inside this host's sandbox
    (:mod:`verify_dag.sandbox`) with a scrubbed environment unless ``env`` is given.

    A missing executable is reported as ``not_found`` with return code 127, like a shell would,
    so callers can tell "could not run" from "ran and failed".
    """
    argv = [str(a) for a in argv]
    start = time.monotonic()
    step = uuid.uuid4().hex[:12]
    stack = contextlib.ExitStack()  # what the command needs while it runs (the index proxy)
    refused: list[str] = []
    child_env = (
        dict(env) if env is not None else (scrubbed_env() if sandbox is not None else git_env())
    )
    if sandbox is not None:
        # Inside a sandbox a missing program is the launcher's error, not ours: look first.
        missing = _missing(argv[0], child_env, cwd)
        if missing is not None:
            res = Result(127, "", missing, not_found=True)
            if check:
                raise CalledProcessError(argv, res.returncode, res.stderr)
            return res
        proxy = None
        if sandbox.network and _sandbox.mode() != "none":
            # Provisioning reaches the package index through a proxy, and nothing else.
            proxy, refused = stack.enter_context(netproxy.serving(child_env))
        argv, child_env = _sandbox.wrap(
            argv, sandbox, cwd=cwd, env=child_env, step=step, proxy=proxy
        )
    # Repository code gets a cgroup of its own: its process and memory limits, and what it hit.
    cgroup = limits.open_step(step) if sandbox is not None else None
    spawned, hook = _launch(
        argv,
        resource_limits(cgroup is not None and "memory" in cgroup.dirs),
        child_env,
        cwd,
        cgroup,
    )
    try:
        proc = subprocess.Popen(
            spawned,
            cwd=cwd,
            env=child_env,
            stdin=subprocess.PIPE if input_data is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            preexec_fn=hook,
        )
    except (FileNotFoundError, PermissionError, NotADirectoryError) as exc:
        if cgroup is not None:
            cgroup.close()
        stack.close()
        res = Result(127, "", f"{argv[0]}: {exc.strerror or exc}", not_found=True)
        if check:
            raise CalledProcessError(argv, res.returncode, res.stderr) from exc
        return res
    _started(proc)
    out: list[bytes] = []
    err: list[bytes] = []
    flags: list[bool] = []
    assert proc.stdout is not None and proc.stderr is not None
    readers = [
        threading.Thread(target=_drain, args=(proc.stdout, cap, out, flags), daemon=True),
        threading.Thread(target=_drain, args=(proc.stderr, cap, err, flags), daemon=True),
    ]
    for t in readers:
        t.start()
    if input_data is not None and proc.stdin is not None:
        try:
            proc.stdin.write(input_data)
            proc.stdin.close()
        except BrokenPipeError:
            pass
    timed_out = False
    try:
        timed_out = not _ended(proc, timeout)
    finally:
        # Every exit path, a normal one too: what the command left running in its group (a
        # sandbox's namespace ends with it already) goes with it.
        _kill_group(proc)
        if sandbox is not None and _sandbox.mode() == "none":
            # Nothing else holds a daemon that left the group; a namespace does.
            _sandbox.kill_step(step)
        stack.close()
    for t in readers:
        t.join(timeout=5)
    raw = b"".join(out)
    errors = b"".join(err).decode("utf-8", "replace")
    if refused and proc.returncode != 0:
        # Where an install failed for a host it may not reach, say so where its error is read.
        errors += (
            f"\nverify-dag: provisioning reaches the package index only; refused "
            f"{', '.join(dict.fromkeys(refused))} ({netproxy.HOSTS_ENV} adds hosts)\n"
        )
    hit: tuple[str, ...] = ()
    if cgroup is not None:
        hit = _limits_hit(cgroup, raw.decode("utf-8", "replace")[-20000:] + errors[-20000:])
        cgroup.close()
    res = Result(
        returncode=proc.returncode if not timed_out else -signal.SIGKILL,
        stdout=raw.decode("utf-8", "replace"),
        stdout_bytes=raw,
        stderr=errors,
        timed_out=timed_out,
        limits_hit=hit,
        truncated=bool(flags),
        duration=time.monotonic() - start,
    )
    if check and (res.returncode != 0 or timed_out):
        raise CalledProcessError(argv, res.returncode, res.stderr)
    return res


_DAY_MS = 86_400_000


def _ended(proc: subprocess.Popen[bytes], timeout: float | None) -> bool:
    """Wait for ``proc`` to end; False when ``timeout`` passed first. A pidfd wakes this thread
    the moment the process ends: Popen.wait(timeout) polls with sleeps that double up to 50 ms,
    so a command was seen to end up to 50 ms after it did, and a short one up to twice its time
    (a 33 ms command at 63.5 ms), every command of a run."""
    if timeout is None:
        proc.wait()
        return True
    try:
        fd = os.pidfd_open(proc.pid)
    except OSError:  # a kernel before 5.3, or a seccomp profile that refuses the call
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return False
        return True
    try:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        deadline = time.monotonic() + timeout
        # One wait is at most a day: poll takes a C int of milliseconds, and a caller may
        # give a limit of years (an infinite one is None).
        while not poller.poll(
            min(_DAY_MS, max(0, math.ceil((deadline - time.monotonic()) * 1000)))
        ):
            if time.monotonic() >= deadline:
                return False
    finally:
        os.close(fd)
    proc.wait()
    return True


def _missing(program: str, env: Mapping[str, str], cwd: str | Path | None) -> str | None:
    """Why ``program`` cannot be started, as Popen would say it; None when it can."""
    if os.sep in program:
        path = Path(program) if os.path.isabs(program) else Path(cwd or ".") / program
        if path.is_file() and os.access(path, os.X_OK):
            return None
        reason = "Permission denied" if path.exists() else "No such file or directory"
        return f"{program}: {reason}"
    if shutil.which(program, path=env.get("PATH", os.defpath)) is None:
        return f"{program}: No such file or directory"
    return None


# The process groups started here and not yet reaped, with the run each was started for (None:
# outside a run's phase). Each child runs in a session of its own (a time-out kills its whole
# tree), so a Ctrl-C at the terminal does not reach it: an interrupted command ends them through
# kill_children(), and a run stopped at its --timeout ends its own through stop_run().
_LIVE: dict[int, str | None] = {}
_LIVE_LOCK = threading.Lock()
# The run whose phase this thread (or task) is running: set by the task wrappers (tasks/base.py).
_RUN: ContextVar[str | None] = ContextVar("verify_dag_run", default=None)
# Runs stopped in this process: a command one of their phases starts from now on is killed at once.
_STOPPED: set[str] = set()


@contextlib.contextmanager
def for_run(run_id: str) -> Iterator[None]:
    """Tag the commands started inside with ``run_id`` (``stop_run`` ends them)."""
    token = _RUN.set(run_id)
    try:
        yield
    finally:
        _RUN.reset(token)


# How far below the host's other work a command started ahead of need runs (nice(1)'s own step).
BACKGROUND_NICE = 10
_BACKGROUND: ContextVar[bool] = ContextVar("verify_dag_background", default=False)


@contextlib.contextmanager
def in_background() -> Iterator[None]:
    """Commands started inside yield the processor to the host's other work: work done ahead
    of when it is needed (the derived probes beside the suite) takes the cores the run's
    slowest step leaves idle, not its share of theirs. An idle host runs them at full speed."""
    token = _BACKGROUND.set(True)
    try:
        yield
    finally:
        _BACKGROUND.reset(token)


def _started(proc: subprocess.Popen[bytes]) -> None:
    if _BACKGROUND.get():
        # Set as the command starts: what it forks from then on inherits it, and a launcher
        # (sh, prlimit, bubblewrap) takes milliseconds to fork its first child.
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, proc.pid, BACKGROUND_NICE)
    run = _RUN.get()
    with _LIVE_LOCK:
        _LIVE[proc.pid] = run
        stopped = run is not None and run in _STOPPED
    if stopped:
        # The phase that asked for it learns of the stop as of any killed command.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)


def _reaped(proc: subprocess.Popen[bytes]) -> None:
    with _LIVE_LOCK:
        _LIVE.pop(proc.pid, None)


def stop_run(run_id: str) -> int:
    """Kill the process groups ``run_id``'s phases started, and every one they start from now
    on: an in-process run stopped at its --timeout must not go on through its next commands.
    Other runs of this process (a test session, an in-process fleet audit) are left alone."""
    with _LIVE_LOCK:
        _STOPPED.add(run_id)
        groups = sorted(pgid for pgid, run in _LIVE.items() if run == run_id)
    return _kill_all(groups)


def kill_children() -> int:
    """SIGKILL every process group this process started and has not reaped; how many."""
    with _LIVE_LOCK:
        groups = sorted(_LIVE)
    return _kill_all(groups)


def _kill_all(groups: list[int]) -> int:
    for pgid in groups:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)
    return len(groups)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    _reaped(proc)


@dataclass
class Background:
    """A child :func:`start_background` left running, and the tail of what it printed."""

    proc: subprocess.Popen[bytes]
    step: str
    sandboxed: bool
    log: bytearray
    reader: threading.Thread
    deadline: threading.Timer

    def output(self) -> str:
        return bytes(self.log).decode("utf-8", "replace")

    def stop(self, grace: float = 5.0) -> None:
        """TERM the whole group, then KILL it: children that ignored TERM or outlived the
        leader go too (the group id stays valid while any member lives)."""
        self.deadline.cancel()
        for sig in (signal.SIGTERM, signal.SIGKILL):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, sig)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=grace)
        if self.proc.returncode is not None:
            _reaped(self.proc)
        if self.sandboxed and _sandbox.mode() == "none":
            _sandbox.kill_step(self.step)  # as run() does: a daemon that left the group
        self.reader.join(timeout=2)
        if not self.reader.is_alive() and self.proc.stdout is not None:
            self.proc.stdout.close()


def start_background(
    argv: Sequence[str],
    *,
    cwd: str | Path | None = None,
    timeout: float,
    env: Mapping[str, str] | None = None,
    cap: int = DEFAULT_CAP,
    sandbox: Policy | None = None,
) -> Background:
    """Start ``argv`` and return while it runs (an app under test must stay up while it is
    exercised), under :func:`run`'s rules otherwise: the same sandbox wrapping, scrubbed
    environment and resource limits, its own process group, killed whole after ``timeout``
    seconds if :meth:`Background.stop` has not been called by then. stdout and stderr are
    merged and only the last ``cap`` bytes are kept: a crash is reported at the end.

    A missing executable raises FileNotFoundError, as Popen does.
    """
    argv = [str(a) for a in argv]
    step = uuid.uuid4().hex[:12]
    child_env = dict(env) if env is not None else scrubbed_env()
    if sandbox is not None:
        missing = _missing(argv[0], child_env, cwd)
        if missing is not None:
            raise FileNotFoundError(missing)
        argv, child_env = _sandbox.wrap(argv, sandbox, cwd=cwd, env=child_env, step=step)
    spawned, hook = _launch(argv, resource_limits(), child_env, cwd)
    proc = subprocess.Popen(
        spawned,
        cwd=cwd,
        env=child_env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        preexec_fn=hook,
    )
    _started(proc)
    log = bytearray()

    def drain() -> None:
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        # os.read returns what is there: the tail is current when the child dies or hangs.
        with contextlib.suppress(OSError, ValueError):
            while chunk := os.read(fd, 65536):
                log.extend(chunk)
                if len(log) > cap:
                    del log[: len(log) - cap]

    def expire() -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    deadline = threading.Timer(timeout, expire)
    deadline.daemon = True
    deadline.start()
    return Background(proc, step, sandbox is not None, log, reader, deadline)
