"""The resource limits of one step of repository code, and which of them it hit.

Processes and memory are limited by a cgroup of the step's own, made inside the worker's own
cgroup (so an operator's limits on the worker still hold): the ``pids`` and ``memory``
controllers of cgroup v1, or cgroup v2 where its controllers are delegated. A cgroup also
reports what was hit (``pids.events``, the memory controller's OOM-kill count), and every
process still in it when the step ends is killed, whatever it did to leave the step's process
group. Where this host gives no writable cgroup (a worker that is not root and was delegated
none), the rlimits of the subprocess chokepoint are the only limits: RLIMIT_DATA for memory
(its MemoryError is how a hit is seen), and no process limit, since RLIMIT_NPROC counts every
process of the worker's user and is not enforced for root.

The sizes: ``VERIFY_DAG_PROCESS_LIMIT`` (default 1024 processes and threads),
``VERIFY_DAG_MEMORY_LIMIT_MB`` (default half of this host's memory), and the sandbox's /tmp
(``VERIFY_DAG_TMP_LIMIT_MB``, verify_dag/sandbox.py) and file size (``VERIFY_DAG_FILE_LIMIT_MB``,
verify_dag/processes.py).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from verify_dag.models.findings import Finding

PROCESS_ENV = "VERIFY_DAG_PROCESS_LIMIT"
MEMORY_ENV = "VERIFY_DAG_MEMORY_LIMIT_MB"
DEFAULT_PROCESSES = 1024
_ROOT = Path("/sys/fs/cgroup")


def _number(env: str, default: int) -> int:
    text = os.environ.get(env, "").strip()
    return int(text) if text.isdigit() and int(text) > 0 else default


def processes() -> int:
    return _number(PROCESS_ENV, DEFAULT_PROCESSES)


def memory_mb() -> int:
    physical_mb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2**20
    return _number(MEMORY_ENV, physical_mb // 2)


@dataclass
class Step:
    """The cgroup directories of one step, by controller; empty when this host gives none."""

    dirs: dict[str, Path] = field(default_factory=dict)
    v2: bool = False

    def join(self) -> None:  # pragma: no cover - runs in the child between fork and exec
        """Move the calling process (the step's first) into the step's cgroups."""
        for path in dict.fromkeys(self.dirs.values()):
            with contextlib.suppress(OSError):
                (path / "cgroup.procs").write_text("0")

    def hit(self) -> list[str]:
        """The limits the step hit, in words: "processes (at most 1024)"."""
        out = []
        pids = self.dirs.get("pids")
        if pids is not None and _count(pids / "pids.events", "max") > 0:
            out.append(f"processes (at most {processes()}, {PROCESS_ENV})")
        memory = self.dirs.get("memory")
        if memory is not None:
            events = memory / ("memory.events" if self.v2 else "memory.oom_control")
            if _count(events, "oom_kill") > 0:
                out.append(f"memory (at most {memory_mb()} MB, {MEMORY_ENV})")
        return out

    def close(self) -> None:
        """Kill what is still in the step's cgroups, then remove them."""
        for path in dict.fromkeys(self.dirs.values()):
            for _ in range(50):
                pids = _pids(path)
                for pid in pids:
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.kill(pid, signal.SIGKILL)
                with contextlib.suppress(OSError):
                    path.rmdir()
                    break
                time.sleep(0.02)


# The limits the repository code of the current task hit; see :func:`tracking`.
_hit: ContextVar[list[str] | None] = ContextVar("verify_dag_limits_hit", default=None)


@contextlib.contextmanager
def tracking() -> Iterator[list[str]]:
    """Collect the limits every command of the block hit (the task wrappers turn them into
    findings of the skill whose code hit them)."""
    hit: list[str] = []
    token = _hit.set(hit)
    try:
        yield hit
    finally:
        _hit.reset(token)


def record(hit: tuple[str, ...]) -> None:
    found = _hit.get()
    if found is not None:
        found.extend(h for h in hit if h not in found)


def finding(limit: str, skill: str) -> Finding:
    """A limit the step's repository code hit, as a finding of the skill that ran it."""
    from verify_dag.models.findings import Finding  # pydantic: only where a limit was hit

    what = limit.split(" (", 1)[0]
    return Finding(
        title=f"Repository code hit the sandbox's {what} limit",
        severity=8,
        source=skill,
        issue_class="correctness",
        # One rule per limit: two limits hit are two issues, never merged by their wording.
        rule=f"resource-limit-{what.strip('/').split()[0]}",
        tool="verify-dag",
        description=(
            f"{skill}: the repository's code reached the limit on {limit} and was stopped "
            "there, so what it was doing did not finish. A fork bomb, a memory hog or a disk "
            "fill in the change does this; a project that needs more sets the variable named."
        ),
    )


def _count(path: Path, key: str) -> int:
    try:
        for line in path.read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == key and value.strip().isdigit():
                return int(value)
    except OSError:
        pass
    return 0


def _pids(path: Path) -> list[int]:
    try:
        return [int(x) for x in (path / "cgroup.procs").read_text().split()]
    except (OSError, ValueError):
        return []


def _own_cgroups() -> dict[str, str]:
    """This process's cgroup path per v1 controller ("pids": "/a/b"), and "" for v2's."""
    out: dict[str, str] = {}
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return out
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        for name in controllers.split(",") if controllers else [""]:
            out[name] = path
    return out


def open_step(name: str) -> Step:
    """A cgroup for step ``name`` under this process's own, with the limits set; a Step with
    no directories when this host gives no writable cgroup (the rlimits still hold)."""
    own = _own_cgroups()
    step = Step()
    for controller, limit_file, value in (
        ("pids", "pids.max", str(processes())),
        ("memory", "memory.limit_in_bytes", str(memory_mb() * 2**20)),
    ):
        if controller not in own:
            continue
        path = _ROOT / controller / own[controller].lstrip("/") / f"verify-dag-{name}"
        try:
            path.mkdir()
            (path / limit_file).write_text(value)
        except OSError:
            with contextlib.suppress(OSError):
                path.rmdir()
            continue
        step.dirs[controller] = path
    if not step.dirs and "" in own and (_ROOT / "cgroup.controllers").is_file():
        _v2(step, _ROOT / own[""].lstrip("/") / f"verify-dag-{name}")
    return step


def _v2(step: Step, path: Path) -> None:
    """cgroup v2 (a unified hierarchy at /sys/fs/cgroup): one directory for both controllers,
    where the worker's cgroup delegates them."""
    try:
        enabled = (path.parent / "cgroup.subtree_control").read_text().split()
    except OSError:
        return
    if not {"pids", "memory"} & set(enabled):
        return
    try:
        path.mkdir()
        if "pids" in enabled:
            (path / "pids.max").write_text(str(processes()))
            step.dirs["pids"] = path
        if "memory" in enabled:
            (path / "memory.max").write_text(str(memory_mb() * 2**20))
            step.dirs["memory"] = path
        step.v2 = True
    except OSError:
        step.close()
        step.dirs.clear()
