"""Side-by-side timing for the benchmarks: two commands run in turn, A B A B, as whole processes.

Each pair is timed with ``time.perf_counter`` around ``subprocess.run``; the ratio A/B is taken
pair by pair, so a machine whose speed drifts during the run still gives a fair figure. The
medians are what the benchmarks print and the README quotes.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Timing:
    a: list[float] = field(default_factory=list)
    b: list[float] = field(default_factory=list)
    a_codes: list[int] = field(default_factory=list)
    b_codes: list[int] = field(default_factory=list)

    @property
    def ratios(self) -> list[float]:
        return [x / y for x, y in zip(self.a, self.b, strict=True) if y > 0]

    def line(self, label: str, a_name: str, b_name: str) -> str:
        return (
            f"{label}: {a_name} {spread(self.a)} | {b_name} {spread(self.b)} | "
            f"ratio {a_name}/{b_name} median {statistics.median(self.ratios):.2f} "
            f"(min {min(self.ratios):.2f}, max {max(self.ratios):.2f}; "
            f"{len(self.ratios)} pairs)"
        )


def spread(values: Sequence[float]) -> str:
    return (
        f"median {statistics.median(values):.2f} s (min {min(values):.2f}, max {max(values):.2f})"
    )


def timed(
    argv: Sequence[str], *, cwd: Path | None = None, env: Mapping[str, str] | None = None
) -> tuple[float, int]:
    """One whole-process run: (wall seconds, exit code); output is discarded."""
    start = time.perf_counter()
    proc = subprocess.run(
        list(argv),
        cwd=cwd,
        env=dict(env) if env is not None else None,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=False,
    )
    return time.perf_counter() - start, proc.returncode


def pairs(
    a: Sequence[str],
    b: Sequence[str],
    *,
    runs: int,
    warmup: int = 1,
    cwd: Path | None = None,
    env_a: Mapping[str, str] | None = None,
    env_b: Mapping[str, str] | None = None,
) -> Timing:
    """``runs`` pairs of A then B after ``warmup`` uncounted pairs."""
    out = Timing()
    for n in range(warmup + runs):
        ta, ca = timed(a, cwd=cwd, env=env_a)
        tb, cb = timed(b, cwd=cwd, env=env_b)
        if n >= warmup:
            out.a.append(ta)
            out.b.append(tb)
            out.a_codes.append(ca)
            out.b_codes.append(cb)
    return out


def clean_env(**extra: str) -> dict[str, str]:
    """The caller's environment without the Python settings a developer's shell may carry
    (PYTHONDONTWRITEBYTECODE would make every process compile its imports from source)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env.update(extra)
    return env


def machine() -> str:
    """One line naming the machine the figures were taken on."""
    cpus = os.cpu_count() or 0
    try:
        mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (ValueError, OSError):
        mem = 0.0
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{cpus} cores, {mem:.0f} GiB, {model or 'unknown CPU'}, {os.uname().release}"
