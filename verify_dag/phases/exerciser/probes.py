"""The derived exercise's probes as processes: the scripts they run, one run of the env's runner
for all of them, and their results in the result cache (verify_dag/resultcache.py)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from verify_dag import git, processes, resultcache
from verify_dag.phases.tester.env.base import Env

PROBE_TIMEOUT = 60.0
# Imports one module and, given "doctest" after its name, runs its doctests; prints one JSON
# line: what doctest counted. doctest and json are imported only then: doctest alone costs
# about three times a bare interpreter's start, once per probe.
_IMPORT = (
    "import importlib, sys\n"
    "m = importlib.import_module(sys.argv[1])\n"
    "if sys.argv[2:] != ['doctest']:\n"
    "    sys.exit(0)\n"
    "import doctest, json\n"
    "r = doctest.testmod(m, verbose=False, report=True)\n"
    "print(json.dumps({'attempted': r.attempted, 'failed': r.failed}))\n"
    "sys.exit(1 if r.failed else 0)\n"
)
DOCTEST = "doctest"  # the module probe's last argument when its doctests are to run
# What a console script's wrapper does: the entry point called with the given argv, which is
# sys.argv before the module is imported (pygments' `def main(args=sys.argv)` reads it then).
_SCRIPT = (
    "import importlib, sys\n"
    "name, target, *args = sys.argv[1:]\n"
    "sys.argv = [name, *args]\n"
    "module, _, attr = target.partition(':')\n"
    "obj = importlib.import_module(module.strip())\n"
    "for part in attr.strip().split('.'):\n"
    "    obj = getattr(obj, part)\n"
    "sys.exit(obj())\n"
)


@dataclass(frozen=True)
class Probe:
    label: str  # what the report says was exercised: "shop --help", "import shop.cart"
    argv: tuple[str, ...]  # after the interpreter
    kind: str  # "command" | "module"


class Planned(Protocol):
    """What the cache key reads of a derived exercise's plan."""

    @property
    def probes(self) -> tuple[Probe, ...]: ...

    @property
    def root(self) -> Path: ...


KIND = "exercise"
KEPT = 4000  # characters of each end of a probe's output: its last line, a traceback's end


def memo_key(plan: Planned, wt: Path) -> str | None:
    """The probes' entry in the result cache, as the suite's
    (verify_dag/phases/tester/suite_cache.py): what decides their results is the tree they
    import (and the env they run in, which that tree declares), verify-dag's own versions and the
    interpreter's (``host_key``), and the probes with the scripts that run them. None for a
    checkout git does not know."""
    tree = git.rev_parse(wt, "HEAD^{tree}")
    if not tree:
        return None
    listed = [[p.kind, script(p), *p.argv] for p in plan.probes]
    root = plan.root
    return resultcache.key(
        resultcache.host_key(),
        KIND,
        tree,
        json.dumps(listed),
        str(root.relative_to(wt)) if root.is_relative_to(wt) else str(root),
        f"{PROBE_TIMEOUT:g}",
    )


def remembered(entry: str | None, probes: int) -> list[processes.Result] | None:
    """The probes' results an earlier run of the same probes on the same code kept."""
    value = resultcache.get(KIND, entry, "derived exercise") if entry is not None else None
    if not isinstance(value, list) or len(value) != probes:
        return None
    try:
        return [processes.Result(int(code), str(out), str(err)) for code, out, err in value]
    except (TypeError, ValueError):
        return None


def script(probe: Probe) -> str:
    return _SCRIPT if probe.kind == "command" else _IMPORT


def one_line(script: str) -> str:
    # tox reads each line of an env's commands as a command of its own.
    return f"exec({script!r})"


# Runs each probe given as JSON ([script, arg, ...] each) in a process of its own, as many at
# once as there are cores, and prints one JSON line per probe, in order: its exit code and the
# ends of its output.
_BATCH = (
    "import json, os, subprocess, sys\n"
    "from concurrent.futures import ThreadPoolExecutor\n"
    "timeout = float(sys.argv[1])\n"
    "def probe(todo):\n"
    "    script, *args = todo\n"
    "    try:\n"
    "        p = subprocess.run([sys.executable, '-c', script, *args], capture_output=True,"
    " text=True, errors='replace', timeout=timeout)\n"
    "        return [p.returncode, p.stdout[-4000:], p.stderr[-4000:], False]\n"
    "    except subprocess.TimeoutExpired as e:\n"
    "        said = [x.decode(errors='replace') if isinstance(x, bytes) else x or ''"
    " for x in (e.stdout, e.stderr)]\n"
    "        return [-9, said[0][-4000:], said[1][-4000:], True]\n"
    "with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:\n"
    "    for out in pool.map(probe, json.loads(sys.argv[2])):\n"
    "        print('\\n' + _MARK + json.dumps(out), flush=True)\n"
)
_MARK = "verify-dag-probe:"


@dataclass(frozen=True)
class Where:
    """Where the probes run: the checkout, the env and its interpreter, their variables, and
    the run's bytecode prefix, which they share with the suite (the checkout's modules are
    compiled once for all of them, not once per probe, and the checkout holds only what was
    committed)."""

    wt: Path
    env: Env
    python: str
    variables: dict[str, str]
    pycache: Path

    def run(self, args: list[str], scratch: Path, timeout: float) -> processes.Result:
        """``python ARGS`` in the env, in the sandbox; ``scratch``: the runner's own tmp and
        log dirs (``Env.command``), made here."""
        scratch.mkdir(parents=True, exist_ok=True)
        # The host's own PYTHONDONTWRITEBYTECODE would keep each probe compiling the checkout.
        variables = {k: v for k, v in self.variables.items() if k != "PYTHONDONTWRITEBYTECODE"}
        if self.env.runner is None:
            # Through tox, tox sets the prefix for the commands alone (``Env.command``).
            variables["PYTHONPYCACHEPREFIX"] = str(self.pycache)
        return processes.run(
            self.env.command([self.python, *args], self.pycache, scratch),
            cwd=self.wt,
            env=variables,
            timeout=timeout,
            sandbox=self.env.policy(scratch, self.pycache),
        )


def batched(
    probes: tuple[Probe, ...], where: Where, scratch: Path
) -> list[processes.Result] | None:
    """Every probe's result from one run in the env: each probe is still a process of its own,
    but the env's runner (tox, with its set_env and commands_pre) starts once instead of once
    per probe, a second or more each. None when the batch's output does not give one result
    per probe (the runner itself failed, or the output was cut)."""
    todo = json.dumps([[script(p), *p.argv] for p in probes])
    driver = one_line(_BATCH.replace("_MARK", repr(_MARK)))
    res = where.run(
        ["-c", driver, str(PROBE_TIMEOUT), todo], scratch, PROBE_TIMEOUT * len(probes) + 30
    )
    found = []
    for line in res.stdout.splitlines():
        if not line.startswith(_MARK):
            continue
        try:
            code, out, err, late = json.loads(line[len(_MARK) :])
        except ValueError:
            return None
        found.append(processes.Result(int(code), str(out), str(err), timed_out=bool(late)))
    return found if len(found) == len(probes) and not res.timed_out else None


# How a probe's failure here is compared with the same probe's at the merge base: the doctests
# that failed (by the docstring they are in, line numbers set aside), and doctest's own counts
# on the last line when the module imported and only its examples failed.
_DOCTEST_FAILED = re.compile(r'^File "[^"]*", line \d+, in (\S+)$', re.MULTILINE)
_DOCTEST_COUNTS = re.compile(r'^\{"attempted": \d+, "failed": \d+\}$')


def last_line(res: processes.Result) -> str:
    text = res.stderr.strip() or res.stdout.strip()
    return text.splitlines()[-1].strip() if text else ""


def fails_there_too(here: processes.Result, there: processes.Result) -> bool:
    """Whether a probe that failed here (``here``) fails at the merge base (``there``) as
    well, so that it shows nothing of the change: a module or command that did not work there
    either (findpython's Windows-only module fails on one import there and on an assert here),
    or, where the module imported in both and only its doctests failed, no example failing
    here that passed there. A probe that hangs only here is the change's."""
    if there.returncode == 0 and not there.timed_out:
        return False
    if here.timed_out:
        return there.timed_out
    if _DOCTEST_COUNTS.match(last_line(here)):
        if not _DOCTEST_COUNTS.match(last_line(there)):
            return False
        failed_here = set(_DOCTEST_FAILED.findall(here.stdout))
        return failed_here <= set(_DOCTEST_FAILED.findall(there.stdout))
    return True
