"""What the sandbox costs: the same command, and the same light verify, with and without it.

Run by hand: ``python bench/bench_sandbox.py [--runs N]``. Each pair runs side by side, A B A B:

- one command through the chokepoint (``processes.run(["true"])``) in bubblewrap and unsandboxed;
- a whole ``verify-dag verify --depth=light`` process on a small repository (one file, one test),
  with this host's sandbox and with ``VERIFY_DAG_SANDBOX=none``.

It prints the medians and their ratio. The cost is namespaces and mounts per command, so it is a
fixed amount per sandboxed command, not a share of the suite's own time.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bench_orchestration import make_repo

from verify_dag import processes, sandbox


def pair(label: str, a: Callable[[], object], b: Callable[[], object], runs: int) -> None:
    times: dict[str, list[float]] = {"a": [], "b": []}
    a()
    b()  # warm-up: imports, caches
    for _ in range(runs):
        for key, fn in (("a", a), ("b", b)):
            start = time.perf_counter()
            fn()
            times[key].append(time.perf_counter() - start)
    ma, mb = statistics.median(times["a"]), statistics.median(times["b"])
    print(
        f"{label}: sandboxed {ma * 1000:.1f} ms, unsandboxed {mb * 1000:.1f} ms, "
        f"ratio {ma / mb:.2f}, difference {(ma - mb) * 1000:+.1f} ms (medians of {runs})"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    print(f"sandbox on this host: {sandbox.mode()}")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        wd = root / "wd"
        wd.mkdir()
        pair(
            "processes.run(true)",
            lambda: processes.run(["true"], cwd=wd, sandbox=sandbox.Policy()),
            lambda: processes.run(["true"], cwd=wd),
            args.runs * 5,
        )
        (root / "repo").mkdir()
        repo = make_repo(root / "repo")
        argv = [
            sys.executable,
            "-m",
            "verify_dag.cli",
            "verify",
            str(repo),
            "--scope=branch",
            "--base=base",
            "--depth=light",
            "--format=json",
        ]
        store = root / "store"

        def verify(mode: str | None) -> None:
            env = {**os.environ, "VERIFY_DAG_STORE": str(store)}
            if mode is not None:
                env[sandbox.MODE_ENV] = mode
            out = root / f"out-{time.monotonic_ns()}.json"
            subprocess.run(
                [*argv, f"--output={out}"], env=env, check=False, capture_output=True, timeout=300
            )

        pair(
            "verify --depth=light (whole process)",
            lambda: verify(None),
            lambda: verify("none"),
            args.runs,
        )


if __name__ == "__main__":
    main()
