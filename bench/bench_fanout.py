"""Deep fan-out: every judgement reviewer waits 3 s on a model, the suite and static analysis run
beside them; the run should take no longer than its critical path (target: wall <= 1.1 x).

Run by hand: ``python bench/bench_fanout.py [--runs N] [--latency S]``. A small repository whose
change touches CLI help text and an HTML template, so triage gates ux-reviewer and
visual-verify in: at ``--depth=deep`` all six judgement reviewers run (reviewer,
codex-reviewer, comment-review, qa, ux-reviewer, visual-verify) beside the tester. The model is
the fake CLI of the tests (tests/fakes), answering after ``--latency`` seconds as ``claude``
and ``codex`` would: the only paid service, faked.

The run is the embedded default in this process, so every task's start and end are taken from
Celery's own task_prerun and task_postrun signals. The critical path is the longest path through
the DAG with those durations:

    scope + engineer + triage + max(test, static + max(review.*) + reviews)
      + collect + exerciser + debugger + report

and the wall time runs from the client's submit to the report in hand. Each run is on a fresh
change (nothing comes from the result cache).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pairs import machine
from tasktimes import TaskTimes

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from fakes import install  # noqa: E402  # tests/fakes: the fake model CLI

from verify_dag.cli import main as cli  # noqa: E402


def critical_path(d: dict[str, list[float]]) -> float:
    one = {name: max(v) for name, v in d.items()}
    reviews = max((v for k, v in one.items() if k.startswith("verify_dag.review.")), default=0.0)
    analysis = one.get("verify_dag.static", 0.0) + reviews + one.get("verify_dag.reviews", 0.0)
    before = sum(one.get(f"verify_dag.{p}", 0.0) for p in ("scope", "engineer", "triage"))
    after = sum(one.get(f"verify_dag.{p}", 0.0) for p in ("collect", "exerciser", "debugger"))
    return (
        before
        + max(one.get("verify_dag.test", 0.0), analysis)
        + after
        + one.get("verify_dag.report", 0.0)
    )


def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def make_repo(root: Path) -> Path:
    root.mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.name", "bench")
    git(root, "config", "user.email", "bench@example.invalid")
    files = {
        "pyproject.toml": "[tool.pytest.ini_options]\n"
        'pythonpath = ["src"]\ntestpaths = ["tests"]\n',
        "src/app/__init__.py": "",
        "src/app/cli.py": "import argparse\n\n\ndef parser():\n"
        "    return argparse.ArgumentParser(description='greet someone')\n",
        "src/app/templates/index.html": "<html><body><h1>Hello</h1></body></html>\n",
        "tests/test_cli.py": "from app.cli import parser\n\n\ndef test_parser():\n"
        "    assert parser().description\n",
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    git(root, "add", "-A")
    git(root, "commit", "-qm", "base")
    git(root, "tag", "base")
    return root


def change(root: Path, n: int) -> None:
    """A fresh change each run: CLI help text and markup (ux-reviewer, visual-verify), code."""
    (root / "src/app/cli.py").write_text(
        "import argparse\n\n\ndef parser():\n"
        f"    p = argparse.ArgumentParser(description='greet someone, take {n}')\n"
        "    p.add_argument('--name', help='who to greet')\n    return p\n"
    )
    (root / "src/app/templates/index.html").write_text(
        f"<html><body><h1>Hello</h1><p>take {n}</p></body></html>\n"
    )
    git(root, "add", "-A")
    git(root, "commit", "-qm", f"take {n}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--latency", type=float, default=3.0)
    args = parser.parse_args()
    times = TaskTimes()
    print(f"machine: {machine()}")
    with tempfile.TemporaryDirectory(prefix="bench-fanout-") as tmp:
        work = Path(tmp)
        install(work / "bin", ("claude", "codex"))
        os.environ.update(
            {
                "PATH": f"{work / 'bin'}{os.pathsep}{os.environ['PATH']}",
                "VERIFY_DAG_BACKEND": "claude",
                "FAKE_MODEL_LATENCY": str(args.latency),
                "VERIFY_DAG_CACHE": str(work / "cache"),
                "VERIFY_DAG_STORE": str(work / "store"),
            }
        )
        os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
        repo = make_repo(work / "repo")
        ratios = []
        for n in range(args.runs + 1):  # the first run builds what later runs reuse: uncounted
            change(repo, n)
            times.clear()
            out = work / f"report-{n}.json"
            start = time.perf_counter()
            code = cli(
                ["verify", str(repo), "--scope=branch", "--base=base", "--depth=deep",
                 "--format=json", f"--output={out}"]
            )  # fmt: skip
            wall = time.perf_counter() - start
            d = times.durations()
            path = critical_path(d)
            reviewers = sorted(k.removeprefix("verify_dag.review.") for k in d if ".review." in k)
            if n == 0:
                print(f"warm-up: exit {code}, reviewers {reviewers}")
                continue
            ratios.append(wall / path)
            print(
                f"run {n}: wall {wall:.2f} s, critical path {path:.2f} s, "
                f"ratio {wall / path:.3f}; reviewers run {len(reviewers)}: {', '.join(reviewers)}"
            )
        print(
            f"deep fan-out, model latency {args.latency:g} s: wall / critical path median "
            f"{statistics.median(ratios):.3f} (min {min(ratios):.3f}, max {max(ratios):.3f})"
        )


if __name__ == "__main__":
    main()
