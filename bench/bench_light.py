"""A warm light verify against the same tools run by hand, one after another, in a ready venv.

Run by hand (it needs the package index once, to build the corpus and the venvs):
``python bench/bench_light.py [--corpus DIR] [--runs N]``. Three real release diffs from
bench/realrepos: click 8.1.7 -> 8.1.8 (click-sized: 650 tests, ruff, mypy and pyright), platformdirs
4.14.4 -> 4.14.5 (a few thousand tests) and tomlkit 0.15.1 -> 0.15.2 (mypy takes longer than its
suite).

- A: ``verify-dag verify --scope=branch --base=base --no-cache`` in a checkout of the case: its
  envs built by an uncounted warm-up run, nothing taken from the result cache (a change it has
  not seen), mypy's own cache warm as a developer's is.
- B: the tools verify-dag ran there, run by hand one after another in one ready venv (the
  project and what it declares for its tests and its type checker installed): ruff on the
  changed Python files, the project's type checkers as it declares them, its test command.

Pairs run A B A B; the ratio is taken pair by pair. The issue's target is a median ratio of at
most 1.0: static analysis and the suite side by side win back what orchestration costs.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from pairs import clean_env, machine, pairs

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "realrepos"))

from cases import CASES  # noqa: E402  # bench/realrepos is not a package


@dataclass(frozen=True)
class ByHand:
    install: tuple[str, ...]  # pip install arguments for the ready venv, in the checkout
    static: tuple[tuple[str, ...], ...]  # the project's type checkers, as it runs them
    tests: tuple[str, ...]  # its test command


_CASE = {c.name: c for c in CASES}
BY_HAND = {
    "click": ByHand(
        install=(*_CASE["click"].oracle_install, "-r", "requirements/typing.txt"),
        # tox.ini [testenv:typing]: mypy (its [tool.mypy] files) and pyright tests/typing.
        static=(("mypy",), ("pyright", "tests/typing")),
        tests=("python", "-m", "pytest", "-v", "--tb=short"),
    ),
    "platformdirs": ByHand(
        install=_CASE["platformdirs"].oracle_install,
        static=(),  # no type checker declared in the sdist
        tests=("python", "-m", "pytest", "--durations", "10", "tests"),
    ),
    "tomlkit": ByHand(
        install=(*_CASE["tomlkit"].oracle_install, "mypy"),
        static=(("mypy",),),  # [tool.mypy] files = tomlkit, tests
        tests=("python", "-m", "pytest", "-q", "tests"),
    ),
}


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout.strip()


def prepare(name: str, corpus: Path, work: Path) -> tuple[Path, Path]:
    """A checkout of the case (branch main, tag base) and its ready venv."""
    if not (corpus / name).is_dir():
        subprocess.run(
            [sys.executable, HERE / "realrepos" / "make_corpus.py", corpus, "--case", name],
            check=True,
        )
    checkout = work / name
    subprocess.run(["git", "clone", "-q", str(corpus / name), str(checkout)], check=True)
    git(checkout, "fetch", "-q", "origin", "refs/tags/base:refs/tags/base")
    venv = work / f"{name}-venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    ruff = subprocess.run(
        [sys.executable, "-m", "ruff", "--version"], check=True, capture_output=True, text=True
    ).stdout.split()[-1]
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q"]
    subprocess.run([*pip, *BY_HAND[name].install, f"ruff=={ruff}"], cwd=checkout, check=True)
    return checkout, venv


def by_hand(name: str, checkout: Path) -> list[str]:
    """One shell line: ruff on the changed files, the type checkers, the tests, in turn."""
    changed = git(checkout, "diff", "--name-only", "--diff-filter=d", "base", "HEAD").split()
    py = " ".join(p for p in changed if p.endswith((".py", ".pyi")))
    spec = BY_HAND[name]
    steps = [f"ruff check --no-fix {py}"] if py else []
    steps += [" ".join(cmd) for cmd in spec.static]
    steps.append(" ".join(spec.tests))
    # One after another whatever each says (the venv's bin is first on PATH).
    return ["sh", "-c", "; ".join(steps)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=Path(tempfile.gettempdir()) / "corpus")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--case", action="append", choices=sorted(BY_HAND))
    args = parser.parse_args()
    print(f"machine: {machine()}")
    with tempfile.TemporaryDirectory(prefix="bench-light-") as tmp:
        work = Path(tmp)
        cache = work / "verify-dag-cache"
        for name in args.case or list(BY_HAND):
            checkout, venv = prepare(name, args.corpus, work)
            verify = [
                sys.executable, "-m", "verify_dag.cli", "verify", "--scope=branch",
                "--base=base", "--no-cache", "--format=markdown",
            ]  # fmt: skip
            env_a = clean_env(VERIFY_DAG_CACHE=str(cache), VERIFY_DAG_STORE=str(work / "store"))
            env_b = clean_env(VIRTUAL_ENV=str(venv), PATH=f"{venv}/bin:{clean_env()['PATH']}")
            # Warm-up (uncounted): verify-dag builds its envs and fetches pyright; mypy's and
            # pyright's caches fill on both sides.
            timing = pairs(
                verify, by_hand(name, checkout), runs=args.runs, warmup=1, cwd=checkout,
                env_a=env_a, env_b=env_b,
            )  # fmt: skip
            print(timing.line(name, "verify", "by hand"), flush=True)
            print(f"  exit codes: verify {timing.a_codes}, by hand {timing.b_codes}", flush=True)


if __name__ == "__main__":
    main()
