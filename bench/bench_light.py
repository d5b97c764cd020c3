"""A warm light verify against the same work done by hand, and the runs that reuse what it found.

Run by hand (it needs the package index once, to build the corpus and the venvs):
``python bench/bench_light.py [--corpus DIR] [--runs N] [--cold-runs N]``. Three real release
diffs from bench/realrepos: click 8.1.7 -> 8.1.8 (click-sized: 650 tests, ruff, mypy and
pyright), platformdirs 4.14.4 -> 4.14.5 (a few thousand tests) and tomlkit 0.15.1 -> 0.15.2
(mypy takes longer than its suite).

- verify: ``verify-dag verify --scope=branch --base=base --no-cache`` in a checkout of the case:
  its envs built by an uncounted warm-up run, nothing taken from the result cache (a change it
  has not seen), mypy's own cache warm as a developer's is.
- runner by hand: what a maintainer runs for the same answer, one after another: the project's
  declared runner for the tests (``tox run -e ENV`` on a tox project, with its envs warm; pytest
  in a ready venv where nothing is declared), then ruff on the changed files and the type
  checkers verify-dag ran, from the env the project declares them in.
- bare tools: the same tools run one after another in one ready venv (the project and what it
  declares for its tests and its type checker installed): no runner at all.

Then, per case: an unchanged re-verify against a cold run (an empty verify-dag cache: envs
built, tools fetched), twice: built (a run whose every part comes from the result cache; a
variable of no meaning to it makes the kept answer miss) and answered (the kept answer of such
a run, before a run is built: docs/verify.md); and a one-file change after a verified head
against the same cold run. Last, the CLI's start-up: ``verify-dag --version`` and an unchanged
re-verify's import time, answered and built, beside ``python -c pass``.

Commands run in turn (A B C A B C ...) and every ratio is taken round by round, so a machine
whose speed drifts still gives a fair figure. The targets: verify / runner by hand <= 1.0,
verify / bare tools <= 1.5, unchanged / cold <= 0.1.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from pairs import clean_env, machine, spread, timed

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "realrepos"))

from cases import CASES  # noqa: E402  # bench/realrepos is not a package


@dataclass(frozen=True)
class ByHand:
    install: tuple[str, ...]  # pip install arguments for the ready venv, in the checkout
    static: tuple[tuple[str, ...], ...]  # the project's type checkers, as it runs them
    tests: tuple[str, ...]  # its test command
    # The declared runner: the tox env that runs the tests and the one that holds the type
    # checkers ("" where nothing is declared: then the ready venv is the runner's env), and
    # tox overrides this machine needs (a package env asking for a Python it lacks).
    tox_tests: str = ""
    tox_static: str = ""
    tox_extra: tuple[str, ...] = ()


_CASE = {c.name: c for c in CASES}
BY_HAND = {
    "click": ByHand(
        install=(*_CASE["click"].oracle_install, "-r", "requirements/typing.txt"),
        # tox.ini [testenv:typing]: mypy (its [tool.mypy] files) and pyright tests/typing.
        static=(("mypy",), ("pyright", "tests/typing")),
        tests=("python", "-m", "pytest", "-v", "--tb=short"),
        tox_tests="py311",
        tox_static="typing",
    ),
    "platformdirs": ByHand(
        install=_CASE["platformdirs"].oracle_install,
        static=(),  # no type checker declared in the sdist
        tests=("python", "-m", "pytest", "--durations", "10", "tests"),
        tox_tests="3.11",
        # Its package env asks for 3.15 (default_base_python): built on this Python, as
        # verify-dag does and a maintainer without 3.15 would.
        tox_extra=("-x", f"env_pkg_base.base_python=py{sys.version_info[0]}{sys.version_info[1]}"),
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


def runner_by_hand(name: str, checkout: Path, tox_work: Path) -> list[str]:
    """One shell line: the declared runner's tests, then ruff on the changed files and the type
    checkers from the env that declares them, in turn (the bare tools where nothing is declared:
    the ready venv is then the runner's env)."""
    spec = BY_HAND[name]
    if not spec.tox_tests:
        return by_hand(name, checkout)
    tox = f"{sys.executable} -m tox --workdir {tox_work}"
    extra = " ".join(spec.tox_extra)
    steps = [f"{tox} run -e {spec.tox_tests} {extra}"]
    # ruff and the type checkers; ruff at the version the ready venv has (verify-dag's own).
    tools = by_hand(name, checkout)[2].split("; ")[:-1]
    steps += [f"{sys.executable} -m {s}" if s.startswith("ruff ") else s for s in tools]
    if spec.tox_static:
        bin_dir = tox_work / spec.tox_static / "bin"
        steps = [s if not s.startswith(("mypy", "pyright")) else f"{bin_dir}/{s}" for s in steps]
    return ["sh", "-c", "; ".join(steps)]


def ready_runner(name: str, checkout: Path, tox_work: Path, env: dict[str, str]) -> None:
    """The runner's envs built once, as a maintainer's are before the runs that count."""
    spec = BY_HAND[name]
    tox = [sys.executable, "-m", "tox", "--workdir", str(tox_work)]
    for env_name in (spec.tox_tests, spec.tox_static):
        if env_name:
            subprocess.run(
                [*tox, "run", "-e", env_name, *spec.tox_extra, "--notest"],
                cwd=checkout, env=env, check=False, capture_output=True,
            )  # fmt: skip


def verify(*flags: str) -> list[str]:
    return [
        sys.executable, "-m", "verify_dag.cli", "verify", "--scope=branch", "--base=base",
        "--format=markdown", *flags,
    ]  # fmt: skip


def rounds(
    commands: list[tuple[list[str], dict[str, str]]], *, runs: int, warmup: int, cwd: Path
) -> list[list[float]]:
    """Each command's wall seconds, the commands run in turn (A B C A B C ...)."""
    out: list[list[float]] = [[] for _ in commands]
    for n in range(warmup + runs):
        for i, (argv, env) in enumerate(commands):
            took, _ = timed(argv, cwd=cwd, env=env)
            if n >= warmup:
                out[i].append(took)
    return out


def ratio(a: list[float], b: list[float]) -> str:
    r = [x / y for x, y in zip(a, b, strict=True)]
    return (
        f"median {statistics.median(r):.2f} (min {min(r):.2f}, max {max(r):.2f}; {len(r)} rounds)"
    )


def import_ms(argv: list[str], cwd: Path, env: dict[str, str]) -> float:
    """Milliseconds the process spent importing, as ``python -X importtime`` counts them: the
    sum of the top-level imports' cumulative times."""
    proc = subprocess.run(
        [argv[0], "-X", "importtime", *argv[1:]], cwd=cwd, env=env, capture_output=True,
        text=True, check=False,
    )  # fmt: skip
    total = 0
    for line in proc.stderr.splitlines():
        parts = line.split("|")
        if line.startswith("import time:") and len(parts) == 3 and parts[2].startswith(" ") \
                and not parts[2].startswith("  ") and parts[1].strip().isdigit():  # fmt: skip
            total += int(parts[1])
    return total / 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=Path(tempfile.gettempdir()) / "corpus")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--cold-runs", type=int, default=1)
    parser.add_argument("--case", action="append", choices=sorted(BY_HAND))
    args = parser.parse_args()
    print(f"machine: {machine()}")
    with tempfile.TemporaryDirectory(prefix="bench-light-") as tmp:
        work = Path(tmp)
        cache = work / "verify-dag-cache"
        hit: tuple[list[str], Path, dict[str, str]] | None = None
        for name in args.case or list(BY_HAND):
            checkout, venv = prepare(name, args.corpus, work)
            env_a = clean_env(VERIFY_DAG_CACHE=str(cache), VERIFY_DAG_STORE=str(work / "store"))
            env_b = clean_env(VIRTUAL_ENV=str(venv), PATH=f"{venv}/bin:{clean_env()['PATH']}")
            tox_work = work / f"{name}-tox"
            ready_runner(name, checkout, tox_work, clean_env())
            # The warm-up round (uncounted): verify-dag builds its envs and fetches pyright;
            # mypy's and pyright's caches fill on every side.
            a, r, b = rounds(
                [
                    (verify("--no-cache"), env_a),
                    (
                        runner_by_hand(name, checkout, tox_work),
                        clean_env() if BY_HAND[name].tox_tests else env_b,
                    ),
                    (by_hand(name, checkout), env_b),
                ],
                runs=args.runs, warmup=1, cwd=checkout,
            )  # fmt: skip
            print(f"{name}: verify --no-cache {spread(a)} | runner by hand {spread(r)} | "
                  f"bare tools {spread(b)}", flush=True)  # fmt: skip
            print(f"  verify / runner by hand {ratio(a, r)}", flush=True)
            print(f"  verify / bare tools {ratio(a, b)}", flush=True)

            # Unchanged head against a cold run: the result cache filled first, a fresh
            # verify-dag cache for each cold run.
            timed(verify(), cwd=checkout, env=env_a)  # computes what the cache lacks
            timed(verify(), cwd=checkout, env=env_a)  # every part from it: its answer is kept
            built, answered, cold = [], [], []
            for n in range(args.cold_runs):
                # A variable that means nothing to the run misses the kept answer's key (it
                # holds the whole environment): the run is built, every part from the cache.
                miss = {**env_a, "BENCH_LIGHT_ROUND": str(n)}
                built.append(timed(verify(), cwd=checkout, env=miss)[0])
                answered.append(timed(verify(), cwd=checkout, env=env_a)[0])
                fresh = work / f"cold-{name}-{n}"
                cold_env = {**env_a, "VERIFY_DAG_CACHE": str(fresh)}
                cold.append(timed(verify(), cwd=checkout, env=cold_env)[0])
                shutil.rmtree(fresh, ignore_errors=True)
            print(f"  unchanged re-verify: built from the result cache {spread(built)} | "
                  f"answered {spread(answered)} | cold run {spread(cold)}", flush=True)  # fmt: skip
            print(f"  unchanged / cold: built {ratio(built, cold)} | answered "
                  f"{ratio(answered, cold)}", flush=True)  # fmt: skip
            hit = hit or (verify(), checkout, env_a)

            # One file changed after a verified head: what runs again, and how long it takes.
            changed = git(checkout, "diff", "--name-only", "--diff-filter=M", "base", "HEAD")
            target = next(
                p
                for p in changed.split()
                if p.endswith(".py") and not p.startswith(("docs/", "tests/")) and "test" not in p
            )
            path = checkout / target
            path.write_text(path.read_text() + "\n# an edit of one file\n")
            git(checkout, "commit", "-qam", "one file")
            out = work / f"{name}-one-file.json"
            one, _ = timed(
                verify("--format=json", f"--output={out}"), cwd=checkout, env=env_a
            )  # fmt: skip
            git(checkout, "reset", "-q", "--hard", "HEAD~1")
            ratios = [one / c for c in cold]
            print(f"  one-file change ({target}) {one:.2f} s | one-file / cold median "
                  f"{statistics.median(ratios):.2f}", flush=True)  # fmt: skip
            try:
                doc = json.loads(out.read_text())
            except (OSError, ValueError):
                doc = {}
            for result in doc.get("skillDetails", []):
                if result["skill"] in ("static-analysis", "tester", "exerciser"):
                    parts = [c["what"] for c in result.get("cached", [])]
                    print(f"    {result['skill']}: from the cache: {', '.join(parts) or 'nothing'}")

        # The CLI's start-up beside the interpreter's own.
        py = sys.executable
        version = [py, "-m", "verify_dag.cli", "--version"]
        bare = [py, "-c", "pass"]
        v, p = rounds([(version, clean_env()), (bare, clean_env())], runs=10, warmup=1, cwd=work)
        print(f"cli: verify-dag --version {spread(v)} | python -c pass {spread(p)} | "
              f"ratio {ratio(v, p)}")  # fmt: skip
        if hit is not None:
            argv, where, env = hit
            # Built: a variable of no meaning to the run misses the kept answer, as above.
            miss = {**env, "BENCH_LIGHT_ROUND": "imports"}
            print(
                f"cli import time: python -c pass {import_ms(bare, where, env):.0f} ms | "
                f"--version {import_ms(version, where, env):.0f} ms | unchanged re-verify "
                f"answered {import_ms(argv, where, env):.0f} ms, built "
                f"{import_ms(argv, where, miss):.0f} ms"
            )


if __name__ == "__main__":
    main()
