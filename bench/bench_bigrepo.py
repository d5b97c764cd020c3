"""A repository of about 5,000 files: where a light run's time goes, and the checkout paid once.

Run by hand (it downloads two ansible-core sdists once): ``python bench/bench_bigrepo.py
[--runs N]``. The repository is ansible-core 2.17.13 (tag ``base``) and 2.17.14 (``main``), made
as bench/realrepos makes its cases. Each run verifies the branch at light depth in this process
(the embedded default), with the result cache off (a change seen for the first time), and
prints every task's time from Celery's task_prerun and task_postrun signals, and every checkout
the run made with its time. A checkout per phase would cost that many more; the run's phases
share one per commit.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from pairs import machine
from tasktimes import TaskTimes

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "realrepos"))

from make_corpus import git, replace_tree, sdist, unpack  # noqa: E402

from verify_dag import git as vgit  # noqa: E402
from verify_dag.cli import main as cli  # noqa: E402

OLD, NEW = "2.17.13", "2.17.14"
_checkouts: list[tuple[str, float]] = []
_lock = threading.Lock()


def _counted_checkout(real: Any) -> Any:
    def checkout_into(repo: Any, sha: str, path: Path) -> Path:
        start = time.perf_counter()
        try:
            return real(repo, sha, path)  # type: ignore[no-any-return]
        finally:
            with _lock:
                _checkouts.append((sha[:12], time.perf_counter() - start))

    return checkout_into


def make_repo(root: Path) -> Path:
    root.mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    with tempfile.TemporaryDirectory() as tmp:
        for step, version in enumerate((OLD, NEW)):
            tree = unpack(sdist("ansible-core", version), Path(tmp) / version)
            replace_tree(root, tree)
            git(root, "add", "-A")
            git(root, "commit", "-q", "-m", f"ansible-core {version}")
            if step == 0:
                git(root, "tag", "base")
    return root


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    times = TaskTimes()
    vgit.checkout_into = _counted_checkout(vgit.checkout_into)
    print(f"machine: {machine()}")
    with tempfile.TemporaryDirectory(prefix="bench-bigrepo-") as tmp:
        work = Path(tmp)
        repo = make_repo(work / "ansible-core")
        files = subprocess.run(
            ["git", "ls-files"], cwd=repo, capture_output=True, text=True, check=True
        ).stdout.count("\n")
        print(f"ansible-core {OLD} -> {NEW}: {files} files")
        os.environ.update({"VERIFY_DAG_CACHE": str(work / "cache"), "VERIFY_DAG_STORE": str(work)})
        os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
        per_task: dict[str, list[float]] = defaultdict(list)
        walls = []
        for n in range(args.runs + 1):  # the first run builds the envs: uncounted
            times.clear()
            _checkouts.clear()
            start = time.perf_counter()
            code = cli(
                ["verify", str(repo), "--scope=branch", "--base=base", "--no-cache",
                 "--format=json", f"--output={work / f'report-{n}.json'}"]
            )  # fmt: skip
            wall = time.perf_counter() - start
            if n == 0:
                print(f"warm-up: exit {code}, {wall:.1f} s")
                continue
            walls.append(wall)
            for name, values in times.durations().items():
                per_task[name].extend(values)
            shown = ", ".join(f"{sha} {t:.2f} s" for sha, t in _checkouts)
            print(f"run {n}: {wall:.2f} s, exit {code}; checkouts: {len(_checkouts)} ({shown})")
        print(f"wall: median {statistics.median(walls):.2f} s")
        for name, values in sorted(per_task.items(), key=lambda kv: -statistics.median(kv[1])):
            print(f"  {name:<32} median {statistics.median(values):6.2f} s")


if __name__ == "__main__":
    main()
