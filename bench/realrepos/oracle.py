"""The by-hand oracle: each case's suite run the way its maintainers declare it.

Run by hand (it needs the package index): ``python bench/realrepos/oracle.py CORPUS``, after
``make_corpus.py CORPUS``. For each case it clones the repository's head (so VCS versions
build from real git metadata), makes a fresh venv, installs ``Case.oracle_install`` there,
runs ``Case.oracle_command`` and records the counts from the runner's final summary line,
in the runner's own words, with the timings. Results go to ``results/oracle.json``.

Run as root, the suite itself runs as ``nobody``: a maintainer runs their suite as themselves,
never as root, and verify-dag runs repository code unprivileged too. As root, tests that check
file permissions skip or fail (filelock's, findpython's), so the oracle would differ from both.
nobody must be able to reach the interpreter: one under root's own home (pyenv in /root, mode
700) is refused with the command that opens it.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from cases import CASES, Case

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"

# pytest's closing line: "==== 3 failed, 470 passed, 2 skipped, 24 subtests passed in 9.1s ====".
_PYTEST_LINE = re.compile(r"^=+ (.*\d+ \w+.*) in [\d.]+s( \([^)]*\))? =+$", re.M)
_PYTEST_QUIET = re.compile(r"^(\d+ \w+.*) in [\d.]+s( \([^)]*\))?$", re.M)
_COUNT = re.compile(r"(\d+) ((?:subtests )?\w+)")
# unittest's: "Ran 123 tests in 0.5s" then "OK (skipped=3)" or "FAILED (failures=1, errors=2)".
_UNITTEST_RAN = re.compile(r"^Ran (\d+) tests? in", re.M)
_UNITTEST_END = re.compile(r"^(OK|FAILED)(?: \((.*)\))?$", re.M)


def parse_counts(output: str) -> dict[str, int]:
    """The counts of the last summary line the runner printed, keyed by its own words."""
    lines = _PYTEST_LINE.findall(output) or _PYTEST_QUIET.findall(output)
    if lines:
        return {word: int(n) for n, word in _COUNT.findall(lines[-1][0])}
    ran = _UNITTEST_RAN.findall(output)
    if ran:
        counts = {"ran": int(ran[-1])}
        end = _UNITTEST_END.findall(output)
        if end and end[-1][1]:
            for part in end[-1][1].split(","):
                key, _, value = part.strip().partition("=")
                counts[key] = int(value)
        failed = counts.get("failures", 0) + counts.get("errors", 0)
        not_passed = failed + counts.get("skipped", 0) + counts.get("expected failures", 0)
        counts["passed"] = counts["ran"] - not_passed
        return counts
    return {}


# mypy's error line without --pretty: "path:line[:col]: error: message  [code]".
_MYPY_ERROR = re.compile(r"^(\S+?\.pyi?):(\d+):(?:\d+:)? error: .*\[([\w-]+)\]$", re.M)


def run(cmd: list[str], cwd: Path, env: dict[str, str], log: Path) -> tuple[int, str, float]:
    start = time.monotonic()
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=3600)
    elapsed = time.monotonic() - start
    with log.open("a") as out:
        out.write(f"$ {' '.join(cmd)}\n{proc.stdout}{proc.stderr}\n[exit {proc.returncode}]\n")
    return proc.returncode, proc.stdout + proc.stderr, elapsed


NOBODY = 65534


def unprivileged(cmd: list[str], tmp: Path, env: dict[str, str]) -> list[str]:
    """``cmd`` as nobody when this runs as root, with ``tmp`` (the checkout, the venv and a home)
    handed to it; as it is otherwise."""
    if os.geteuid() != 0:
        return cmd
    python = Path(os.path.realpath(sys.executable))
    closed = [d for d in python.parents if not os.stat(d).st_mode & 0o001]
    if closed:
        # nobody would get EACCES on every interpreter the suite starts (filelock's 80
        # subprocess tests), and a maintainer's interpreter is always theirs to run.
        sys.exit(
            f"oracle.py: nobody cannot reach this interpreter ({python}): {closed[0]} is not "
            f"searchable by others; run `chmod o+x {closed[0]}` for the measurement (and back "
            "afterwards), or use an interpreter outside it"
        )
    home = tmp / "home"
    home.mkdir(exist_ok=True)
    env["HOME"] = str(home)
    tmp.chmod(0o755)
    subprocess.run(["chown", "-R", f"{NOBODY}:{NOBODY}", str(tmp)], check=True)
    setpriv = shutil.which("setpriv") or "setpriv"
    return [setpriv, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--", *cmd]


def oracle(case: Case, corpus: Path) -> dict[str, object]:
    log = RESULTS / f"oracle-{case.name}.log"
    log.write_text("")
    with tempfile.TemporaryDirectory(prefix=f"oracle-{case.name}-") as tmp:
        checkout = Path(tmp) / "checkout"
        subprocess.run(["git", "clone", "-q", str(corpus / case.name), str(checkout)], check=True)
        venv = Path(tmp) / "venv"
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        env = {
            **os.environ,
            "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}",
            "VIRTUAL_ENV": str(venv),
            **case.oracle_env,
        }
        # The caller's PYTHON* settings are not the project's: tox passes none of them on
        # (PYTHONDONTWRITEBYTECODE=1 here failed execnet's test_dont_write_bytecode).
        for key in [k for k in env if k.startswith("PYTHON") and k not in case.oracle_env]:
            del env[key]
        pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q"]
        code, _, install_s = run([*pip, *case.oracle_install], checkout, env, log)
        if code:
            return {"case": case.name, "install_exit": code, "install_s": round(install_s, 1)}
        cmd = [str(venv / "bin" / "python"), *case.oracle_command[1:]]
        code, output, test_s = run(unprivileged(cmd, Path(tmp), env), checkout, env, log)
    return {
        "case": case.name,
        "command": " ".join(case.oracle_command),
        "exit": code,
        "counts": parse_counts(output),
        "install_s": round(install_s, 1),
        "test_s": round(test_s, 1),
    }


# pytest's order of words in its summary line (json.dumps may have sorted them).
ORDER = (
    "ran",
    "failed",
    "passed",
    "skipped",
    "deselected",
    "xfailed",
    "xpassed",
    "warnings",
    "errors",
    "error",
    "subtests failed",
    "subtests passed",
    "subtests skipped",
)


def counts_text(counts: dict[str, int]) -> str:
    rank = {word: i for i, word in enumerate(ORDER)}
    words = sorted(counts, key=lambda w: rank.get(w, len(ORDER)))
    return ", ".join(f"{counts[w]} {w}" for w in words)


def write_table(results: dict[str, dict[str, object]]) -> None:
    """The oracle's figures into README.md, between its markers."""
    lines = ["| case | command | counts | exit | install | tests |", "|---|---|---|---|---|---|"]
    for case in CASES:
        r = results.get(case.name)
        if r is None:
            continue
        if "counts" not in r:
            lines.append(
                f"| {case.name} | install failed | - | {r['install_exit']} | "
                f"{r['install_s']} s | - |"
            )
            continue
        counts = r["counts"]
        assert isinstance(counts, dict)
        text = counts_text(counts)
        lines.append(
            f"| {case.name} | `{r['command']}` | {text} | {r['exit']} "
            f"| {r['install_s']} s | {r['test_s']} s |"
        )
    readme = HERE / "README.md"
    begin, end = "<!-- oracle begin -->", "<!-- oracle end -->"
    head, rest = readme.read_text().split(begin, 1)
    readme.write_text(head + begin + "\n" + "\n".join(lines) + "\n" + end + rest.split(end, 1)[1])


def static(case: Case, corpus: Path) -> dict[str, object]:
    """The project's declared type checker on the head: its errors as path:line:code."""
    log = RESULTS / f"static-{case.name}.log"
    log.write_text("")
    with tempfile.TemporaryDirectory(prefix=f"static-{case.name}-") as tmp:
        checkout = Path(tmp) / "checkout"
        subprocess.run(["git", "clone", "-q", str(corpus / case.name), str(checkout)], check=True)
        venv = Path(tmp) / "venv"
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        env = {
            **os.environ,
            "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}",
            "VIRTUAL_ENV": str(venv),
        }
        env.pop("PYTHONPATH", None)
        pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q"]
        code, _, _ = run([*pip, *case.static_install], checkout, env, log)
        if code:
            return {"case": case.name, "install_exit": code}
        cmd = [str(venv / "bin" / case.static_command[0]), *case.static_command[1:]]
        code, output, run_s = run(cmd, checkout, env, log)
    errors = sorted({f"{p}:{line}:{rule}" for p, line, rule in _MYPY_ERROR.findall(output)})
    return {
        "case": case.name,
        "command": " ".join(case.static_command),
        "exit": code,
        "errors": errors,
        "run_s": round(run_s, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus", type=Path, help="the directory make_corpus.py wrote")
    parser.add_argument("--case", action="append", help="only these cases (repeatable)")
    parser.add_argument("--table-only", action="store_true", help="only rewrite the table")
    parser.add_argument(
        "--static",
        action="store_true",
        help="run each case's declared type checker instead (results/static.json)",
    )
    args = parser.parse_args()
    if args.static:
        RESULTS.mkdir(exist_ok=True)
        path = RESULTS / "static.json"
        for case in CASES:
            if case.static_command and (not args.case or case.name in args.case):
                result = static(case, args.corpus.resolve())
                print(json.dumps(result)[:300], flush=True)
                results = json.loads(path.read_text()) if path.exists() else {}
                results[case.name] = result
                path.write_text(json.dumps(results, indent=2) + "\n")
        return
    if args.table_only:
        write_table(json.loads((RESULTS / "oracle.json").read_text()))
        return
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / "oracle.json"
    for case in CASES:
        if args.case and case.name not in args.case:
            continue
        result = oracle(case, args.corpus.resolve())
        print(json.dumps(result), flush=True)
        # Read again before writing: another run of this script may have added cases meanwhile.
        results = json.loads(path.read_text()) if path.exists() else {}
        results[case.name] = result
        path.write_text(json.dumps(results, indent=2) + "\n")
    write_table(json.loads(path.read_text()))


if __name__ == "__main__":
    main()
