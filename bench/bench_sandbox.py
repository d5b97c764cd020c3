"""What the sandbox costs: the same command, and the same light verify, with and without it.

Run by hand: ``python bench/bench_sandbox.py [--runs N]``. Each pair runs side by side, A B A B:

- one command through the chokepoint (``processes.run(["true"])``) in bubblewrap and unsandboxed;
- a whole ``verify-dag verify --depth=light`` process on a small repository (one file, one test),
  with this host's sandbox and with ``VERIFY_DAG_SANDBOX=none``;
- as root: one command in bubblewrap through the root worker's launcher (a /tmp of another
  account, :mod:`verify_dag.sandbox.roottmp`) and in bubblewrap with its own tmpfs;
- waiting for a 35 ms command's end: ``processes._ended`` (a pidfd) against ``Popen.wait`` with
  a timeout (which polls with sleeps doubling up to 50 ms), each started the same way.

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


def pair(
    label: str,
    a: Callable[[], object],
    b: Callable[[], object],
    runs: int,
    names: tuple[str, str] = ("sandboxed", "unsandboxed"),
) -> None:
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
        f"{label}: {names[0]} {ma * 1000:.1f} ms, {names[1]} {mb * 1000:.1f} ms, "
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
        if os.geteuid() == 0 and sandbox.mode() == "bubblewrap":
            own_tmp = sandbox._foreign_tmp

            def plain_tmp() -> object:
                sandbox._foreign_tmp = lambda: None  # type: ignore[assignment]
                try:
                    return processes.run(["true"], cwd=wd, sandbox=sandbox.Policy())
                finally:
                    sandbox._foreign_tmp = own_tmp  # type: ignore[assignment]

            pair(
                "processes.run(true), root's /tmp launcher against bubblewrap's own tmpfs",
                lambda: processes.run(["true"], cwd=wd, sandbox=sandbox.Policy()),
                plain_tmp,
                args.runs * 5,
                names=("launcher", "own tmpfs"),
            )

        def waited(by_pidfd: bool) -> None:
            proc = subprocess.Popen(["sleep", "0.035"])
            if by_pidfd:
                processes._ended(proc, 10)  # type: ignore[arg-type]
            else:
                proc.wait(timeout=10)

        pair(
            "the end of a 35 ms command seen",
            lambda: waited(True),
            lambda: waited(False),
            args.runs * 5,
            names=("pidfd", "Popen.wait(timeout)"),
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
