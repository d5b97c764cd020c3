"""Re-verifying: an unchanged head against the cold run, and a one-file change.

Run by hand (the cold runs need the package index): ``python bench/bench_rerun.py [--corpus DIR]
[--runs N]``, on click 8.1.7 -> 8.1.8 from bench/realrepos (ruff, mypy, pyright, 650 tests).

- cold: an empty verify-dag cache (no env, no result cache, pyright not fetched yet): what a
  first run on a new machine pays.
- warm, no cache: envs built, ``--no-cache``: what a change never seen before pays.
- unchanged: the same head again, results taken from the result cache.

Pairs run side by side, unchanged then cold (then unchanged then warm), and the ratios are taken
pair by pair. The issue's target: unchanged / cold <= 0.1. Then one file is edited and
committed, and the report of the next run says which parts came from the cache: only that file's
static results and the suite should run again.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from pairs import clean_env, machine, pairs, spread, timed

HERE = Path(__file__).resolve().parent


def verify(*flags: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "verify_dag.cli",
        "verify",
        "--scope=branch",
        "--base=base",
        *flags,
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=Path(tempfile.gettempdir()) / "corpus")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    if not (args.corpus / "click").is_dir():
        subprocess.run(
            [sys.executable, HERE / "realrepos" / "make_corpus.py", args.corpus, "--case", "click"],
            check=True,
        )
    print(f"machine: {machine()}")
    with tempfile.TemporaryDirectory(prefix="bench-rerun-") as tmp:
        work = Path(tmp)
        repo = work / "click"
        subprocess.run(["git", "clone", "-q", str(args.corpus / "click"), str(repo)], check=True)
        warm = work / "warm-cache"
        env = clean_env(VERIFY_DAG_CACHE=str(warm), VERIFY_DAG_STORE=str(work / "store"))
        timed(verify(), cwd=repo, env=env)  # fills the warm cache: envs and results
        unchanged, cold = [], []
        for n in range(args.runs):
            t_u, _ = timed(verify(), cwd=repo, env=env)
            fresh = work / f"cold-{n}"
            t_c, _ = timed(verify(), cwd=repo, env={**env, "VERIFY_DAG_CACHE": str(fresh)})
            shutil.rmtree(fresh, ignore_errors=True)
            unchanged.append(t_u)
            cold.append(t_c)
        ratios = [u / c for u, c in zip(unchanged, cold, strict=True)]
        print(f"unchanged re-verify {spread(unchanged)} | cold run {spread(cold)}")
        print(
            f"ratio unchanged/cold median {statistics.median(ratios):.3f} "
            f"(min {min(ratios):.3f}, max {max(ratios):.3f}; {len(ratios)} pairs)"
        )
        nocache = pairs(verify(), verify("--no-cache"), runs=args.runs, cwd=repo, env_a=env,
                        env_b=env)  # fmt: skip
        print(nocache.line("click", "unchanged", "warm envs, --no-cache"))

        # One file edited: which parts come from the cache now.
        core = repo / "src" / "click" / "core.py"
        core.write_text(core.read_text() + "\n# an edit of one file\n")
        subprocess.run(["git", "commit", "-qam", "one file"], cwd=repo, check=True)
        out = work / "one-file.json"
        t_one, _ = timed(
            verify("--format=json", f"--output={out}"), cwd=repo, env=env
        )  # fmt: skip
        doc = json.loads(out.read_text())
        print(f"one-file change: {t_one:.2f} s")
        # skillResults items are the specification's exact shape; what came from the result
        # cache is in the additive skillDetails.
        for detail in doc["skillDetails"]:
            if detail["skill"] in ("static-analysis", "tester"):
                parts = [c["what"] for c in detail.get("cached", [])]
                print(f"  {detail['skill']}: from the cache: {', '.join(parts) or 'nothing'}")


if __name__ == "__main__":
    main()
