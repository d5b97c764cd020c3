"""A cold test environment, built by uv and by pip from the same declarations.

Run by hand (it needs the package index): ``python bench/bench_envbuild.py [--corpus DIR]
[--runs N]``. For three cases of bench/realrepos, each pair makes two fresh venvs and installs
what the case declares for its tests (the project itself included, built from the checkout):
one with ``uv pip install``, as verify-dag's env builder does first, one with ``pip install``,
its fallback. Both installers' download caches are warm (an uncounted first pair fills them), so
the figures compare resolving, building and installing, not the network.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

from pairs import clean_env, machine, pairs

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "realrepos"))

from cases import CASES  # noqa: E402

CHOSEN = ("click", "platformdirs", "tomlkit")


def uv() -> str:
    from uv import find_uv_bin

    return str(find_uv_bin())


def build(installer: str, checkout: Path, venvs: Path, install: tuple[str, ...]) -> list[str]:
    """One shell line: a fresh venv without pip (as verify-dag makes them), then the installer
    into it: uv, or this interpreter's pip driving it (``pip --python``, as verify-dag's
    fallback does)."""
    venv = venvs / installer
    python = venv / "bin" / "python"
    if installer == "uv":
        into = f"{uv()} pip install -q --python {python}"
    else:
        into = f"{sys.executable} -m pip --python {python} install -q"
    args = " ".join(install)
    make = f"{sys.executable} -m venv --without-pip {venv}"
    return ["sh", "-c", f"rm -rf {venv} && {make} && cd {checkout} && {into} {args}"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=Path(tempfile.gettempdir()) / "corpus")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    print(f"machine: {machine()}")
    with tempfile.TemporaryDirectory(prefix="bench-envbuild-") as tmp:
        work = Path(tmp)
        env = clean_env(UV_CACHE_DIR=str(work / "uv-cache"), PIP_CACHE_DIR=str(work / "pip"))
        for case in (c for c in CASES if c.name in CHOSEN):
            if not (args.corpus / case.name).is_dir():
                subprocess.run(
                    [sys.executable, HERE / "realrepos" / "make_corpus.py", args.corpus,
                     "--case", case.name],
                    check=True,
                )  # fmt: skip
            checkout = work / case.name
            subprocess.run(
                ["git", "clone", "-q", str(args.corpus / case.name), str(checkout)], check=True
            )
            timing = pairs(
                build("uv", checkout, work, case.oracle_install),
                build("pip", checkout, work, case.oracle_install),
                runs=args.runs,
                env_a=env,
                env_b=env,
            )
            print(timing.line(case.name, "uv", "pip"), flush=True)
            print(f"  exit codes: uv {timing.a_codes}, pip {timing.b_codes}")


if __name__ == "__main__":
    main()
