"""An exercise derived from the project's own declarations, when it declares none.

004 7c: "Determine exercise strategy based on change type", and "If you cannot determine HOW to
exercise the change, that is severity 9-10". A repository without a VERIFICATION.md still says
how its code is used:

- **console scripts** (``[project.scripts]``, poetry's ``[tool.poetry.scripts]``, setup.cfg's
  ``console_scripts``): each command whose package the change touches is run with ``--help``,
  and so is each subcommand the changed lines define (``add_parser("x")``, ``@cli.command()``);
- **an importable package**: every changed module of it is imported in the run's environment,
  and its doctests are run where the project runs doctests itself (pytest's
  ``--doctest-modules``, ``python -m doctest``, a ``DocTestSuite``): elsewhere a docstring's
  examples are documentation nobody runs, often not written to pass, and a failure of one would
  be verify-dag's false alarm.

A web app is what the engineer skill declares (START, HEALTH, EXERCISE), the declared exercise.
Only when nothing can be derived for a change to code is it the specification's finding; a
change to no code at all (documentation, tests, configuration) has nothing to exercise.
"""

from __future__ import annotations

import configparser
import contextvars
import json
import os
import re
import sys
import tomllib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath

from verify_dag import processes, resultcache, workspace
from verify_dag.errors import VerifyDagError
from verify_dag.models import EngineerContext, Finding, RunState, Scope, Toolchain
from verify_dag.models.findings import BuiltEnv
from verify_dag.phases import gates
from verify_dag.phases.exerciser import probes
from verify_dag.phases.exerciser.exercise import SKILL, Exercise, failure_finding
from verify_dag.phases.exerciser.probes import DOCTEST, Probe
from verify_dag.phases.tester import env as testenv
from verify_dag.phases.tester.env.base import Env

MAX_PROBES = 20
NO_STRATEGY_SEVERITY = 9
# Files that run when the project is used; a change to none of them has nothing to exercise.
CODE_SUFFIXES = frozenset(
    {".py", ".js", ".jsx", ".ts", ".tsx", ".mjs", ".cjs", ".go", ".rs", ".rb", ".java", ".kt"}
    | {".c", ".cc", ".cpp", ".h", ".hpp", ".cs", ".php", ".swift", ".scala", ".sh"}
)
_NOT_RUN_DIRS = frozenset(
    {"tests", "test", "testing", "docs", "doc", "examples", "benchmarks", "bench"}
)
_NOT_MODULES = frozenset({"setup.py", "conftest.py", "noxfile.py", "fabfile.py"})
# Subcommands a changed line defines: argparse's add_parser("x"), click's or typer's
# @group.command("x") / @group.command() above "def x".
_ADD_PARSER = re.compile(r"""add_parser\(\s*["']([\w-]+)["']""")
_NAMED = re.compile(r"""@\w+(?:\.\w+)*\.command\(\s*(?:name\s*=\s*)?["']([\w-]+)["']""")
_BARE = re.compile(r"@\w+(?:\.\w+)*\.command\(\s*\)\s*(?:@.*\s*)*def\s+(\w+)")


@dataclass(frozen=True)
class Strategy:
    probes: tuple[Probe, ...]
    root: Path  # where the project's modules import from (the checkout, or its src/)
    code_changed: bool  # whether the change touches code at all
    why_none: str  # with no probe: why nothing could be derived


def strategy(wt: Path, scope: Scope) -> Strategy:
    """What the project's declarations say to run for this change."""
    changed = [f.path for f in scope.included if f.status != "deleted"]
    code = [p for p in changed if runs(p)]
    root = wt / "src" if (wt / "src").is_dir() else wt
    modules = {m: p for p in code if (m := module_name(wt, p)) is not None}
    probes: list[Probe] = []
    for name, target in scripts(wt):
        package = target.partition(":")[0].strip().split(".")[0]
        if not any(m == package or m.startswith(package + ".") for m in modules):
            continue
        probes.append(Probe(f"{name} --help", (name, target, "--help"), "command"))
        for sub in subcommands(wt, scope, [modules[m] for m in modules]):
            probes.append(Probe(f"{name} {sub} --help", (name, target, sub, "--help"), "command"))
    if runs_doctests(wt):
        probes += [
            Probe(f"import {m} (and its doctests)", (m, DOCTEST), "module") for m in sorted(modules)
        ]
    else:
        probes += [Probe(f"import {m}", (m,), "module") for m in sorted(modules)]
    why = ""
    if not probes:
        why = (
            "the change touches no code (documentation, tests or configuration only)"
            if not code
            else "no console script or importable module of the project covers the changed "
            f"code ({', '.join(code[:5])}{' ...' if len(code) > 5 else ''})"
        )
    unique = tuple(dict.fromkeys(probes))[:MAX_PROBES]
    return Strategy(probes=unique, root=root, code_changed=bool(code), why_none=why)


# Where a project says it runs doctests: its pytest configuration, its test envs and sessions,
# its Makefile, its root conftest.
_DOCTEST_DECLARING = (
    "pytest.ini",
    ".pytest.ini",
    "pyproject.toml",
    "setup.cfg",
    "tox.ini",
    "tox.toml",
    "noxfile.py",
    "hatch.toml",
    "Makefile",
    "conftest.py",
)
_DOCTEST_RUN = re.compile(r"--doctest-modules|-m\s+doctest\b|DocTestSuite|doctest\.testmod")


def runs_doctests(wt: Path) -> bool:
    """Whether the project runs its modules' doctests itself; only then is a failing example
    its own check failing."""
    for name in _DOCTEST_DECLARING:
        try:
            text = (wt / name).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if _DOCTEST_RUN.search(text):
            return True
    return False


def runs(path: str) -> bool:
    """Whether ``path`` is code that runs when the project is used: not a test, an example,
    documentation or a build file (a change to those alone has nothing to exercise)."""
    p = PurePosixPath(path)
    name = p.name
    if p.suffix not in CODE_SUFFIXES or name in _NOT_MODULES or _NOT_RUN_DIRS & set(p.parts[:-1]):
        return False
    stem = name.split(".", 1)[0]
    test_like = stem.startswith("test_") or stem.endswith(("_test", "_tests"))
    return not test_like and ".test." not in name and ".spec." not in name


def module_name(wt: Path, path: str) -> str | None:
    """The dotted name ``path`` imports as, when it is a module of an importable package (or a
    top-level module of a src/ layout); None for tests, scripts and build files."""
    p = PurePosixPath(path)
    if p.suffix != ".py" or not runs(path):
        return None
    parts = list(p.with_suffix("").parts)
    if parts[0] == "src" and (wt / "src").is_dir():
        parts, base = parts[1:], wt / "src"
        if len(parts) == 1:
            return parts[0]
    else:
        base = wt
        if len(parts) == 1:  # a script at the top: importing it would run it
            return None
    for depth in range(1, len(parts)):
        if not (base.joinpath(*parts[:depth]) / "__init__.py").is_file():
            return None
    if parts[-1] == "__init__":
        parts = parts[:-1]
    if parts[-1] == "__main__" or not all(part.isidentifier() for part in parts):
        return None
    return ".".join(parts)


def scripts(wt: Path) -> list[tuple[str, str]]:
    """(command, "module:function") of every console script the project declares."""
    found: list[tuple[str, str]] = []
    try:
        doc = tomllib.loads((wt / "pyproject.toml").read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
        doc = {}
    project = _table(doc.get("project"))
    poetry = _table(_table(doc.get("tool")).get("poetry"))
    for table in (project.get("scripts"), poetry.get("scripts")):
        if isinstance(table, dict):
            found += [(n, t) for n, t in table.items() if isinstance(t, str) and ":" in t]
    cfg = configparser.ConfigParser(interpolation=None)
    try:
        cfg.read(wt / "setup.cfg", encoding="utf-8")
        block = cfg.get("options.entry_points", "console_scripts", fallback="")
    except configparser.Error:
        block = ""
    for line in block.splitlines():
        name, _, target = line.partition("=")
        if name.strip() and ":" in target:
            found.append((name.strip(), target.strip()))
    return list(dict.fromkeys(found))


def _table(value: object) -> dict[str, object]:
    # A declaration of another shape (a broken pyproject.toml) declares no script.
    return value if isinstance(value, dict) else {}


def subcommands(wt: Path, scope: Scope, paths: list[str]) -> list[str]:
    """Subcommands the changed lines of ``paths`` define."""
    names: list[str] = []
    for path in paths:
        change = scope.file(path)
        try:
            lines = (wt / path).read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError):
            continue
        ranges = change.lines if change is not None and change.lines is not None else None
        spans = [(r.start, r.end) for r in ranges] if ranges is not None else [(1, len(lines))]
        for start, end in spans:
            # A decorator's function is on a line or two below it.
            text = "\n".join(lines[start - 1 : end + 3])
            names += _ADD_PARSER.findall(text) + _NAMED.findall(text)
            names += [n.replace("_", "-") for n in _BARE.findall(text)]
    return list(dict.fromkeys(names))


def exercise(
    plan: Strategy, wt: Path, env: Env, variables: dict[str, str], entry: str | None = None
) -> list[processes.Result]:
    """Run the probes in the run's environment, each in the sandbox, and give their results in
    order. ``entry``: where the result cache keeps them."""
    # No env to install: the suite runs on our interpreter, and so does this.
    python = str(env.python) if env.python is not None else sys.executable
    inner = {**variables, "PYTHONPATH": str(plan.root)}

    def probed(probe: Probe) -> processes.Result:
        return processes.run(
            env.command([python, "-c", probes.one_line(probes.script(probe)), *probe.argv]),
            cwd=wt,
            env=inner,
            timeout=probes.PROBE_TIMEOUT,
            sandbox=env.policy(),
        )

    results = probes.batched(plan.probes, wt, env, python, inner)
    if results is None:
        # The batch said nothing readable: each probe alone, as many at once as there are
        # cores, so what failed is told apart from what did not; each in a copy of this
        # context, which holds the sandbox the run requires.
        workers = max(1, min(len(plan.probes), os.cpu_count() or 1))
        contexts = [contextvars.copy_context() for _ in plan.probes]
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="exercise") as pool:
            results = list(pool.map(lambda c, p: c.run(probed, p), contexts, plan.probes))
    if entry is not None and not any(r.timed_out for r in results):
        kept = [[r.returncode, r.stdout[-probes.KEPT :], r.stderr[-probes.KEPT :]] for r in results]
        resultcache.put(probes.KIND, entry, kept)
    return results


def failed(res: processes.Result) -> bool:
    return res.returncode != 0 or res.timed_out


def judged(
    plan: Strategy,
    results: list[processes.Result],
    at_base: dict[int, processes.Result] | None = None,
    unchecked: str = "",
) -> Exercise:
    """The exercise the probes' results make: a failing probe is a finding unless the same
    probe fails at the merge base too (``at_base``, by the probe's index;
    :func:`~verify_dag.phases.exerciser.probes.fails_there_too`): then it says nothing of this
    change (a module of another platform, a script that reads its argv at import, doctests
    that need the project's own runner) and is told in the notes only.
    PASSED when no probe failed for the change and at least one succeeded. ``unchecked``: why
    the failures could not be looked at the base."""
    ex = Exercise("PASSED", "")
    done: list[str] = []
    before = 0
    for index, (probe, res) in enumerate(zip(plan.probes, results, strict=True)):
        said = _said(probe, res)
        if failed(res):
            seen = gates.excerpt(res.stderr, tail=True) or gates.excerpt(res.stdout, tail=True)
            got = "timed out" if res.timed_out else f"exited {res.returncode}"
            there = (at_base or {}).get(index)
            if there is not None and probes.fails_there_too(res, there):
                said_here = probes.last_line(res) or "no output"
                said_there = probes.last_line(there) or "no output"
                seen_there = (
                    f"{said_here}"
                    if said_here == said_there
                    else f"{said_here} here; {said_there} there"
                )
                done.append(
                    f"{probe.label}: {got}, and fails at the merge base too ({seen_there}): "
                    "no check of this change"
                )
                before += 1
                continue
            ex.findings.append(
                failure_finding(
                    f"Derived exercise failed: {probe.label}",
                    f"`{probe.label}` {got}: {seen or 'no output'}",
                )
            )
            done.append(f"{probe.label}: FAIL ({got})")
        else:
            done.append(f"{probe.label}: ok{said}")
    count = len(ex.findings)
    ok = len(plan.probes) - count - before
    also = f"; {before} fail at the merge base too" if before else ""
    if count:
        ex.status = "FAILED"
        ex.note = f"FAILED: {count} of {len(plan.probes)} derived exercise(s) failed{also}"
    elif ok:
        ex.note = f"PASSED: {ok} of {len(plan.probes)} derived exercise(s) succeeded{also}"
        if not before:
            ex.note = f"PASSED: {ok} derived exercise(s) succeeded"
    else:
        # Nothing ran that shows the change working: not a pass.
        ex.status = "BLOCKED"
        ex.note = (
            "NO_EXERCISE_STRATEGY: every exercise derived from the project's declarations "
            "fails at the merge base too, so none shows the change working"
        )
    ex.details.append(
        "exercised as the project declares it (nothing declared to exercise it): " + "; ".join(done)
    )
    if count and unchecked:
        ex.details.append(f"the failures were not looked at the merge base: {unchecked}")
    return ex


def _said(probe: Probe, res: processes.Result) -> str:
    if probe.kind != "module":
        return ""
    last = res.stdout.strip().splitlines()[-1:] or [""]
    try:
        counted = json.loads(last[0])
    except ValueError:
        return ""
    if probe.argv[-1:] != (DOCTEST,):
        return ""
    if not isinstance(counted, dict) or not counted.get("attempted"):
        return " (no doctests)"
    return f" ({counted['attempted']} doctest example(s))"


def no_strategy(why: str, where: str) -> Exercise:
    """Nothing could be derived for a change to code: the specification's severity 9 finding
    ("If you cannot determine HOW to exercise the change, that is severity 9-10")."""
    text = (
        f"No START, EXERCISE or exerciser gate is declared ({where}), and {why}: "
        "nothing shows the change working. Declare how to exercise it in the engineer "
        "skill's VERIFICATION.md (docs/gates.md)."
    )
    finding = Finding(
        title="Cannot determine how to exercise the change",
        severity=NO_STRATEGY_SEVERITY,
        description=text,
        source=SKILL,
        issue_class="correctness",
    )
    return Exercise(
        "BLOCKED",
        f"NO_EXERCISE_STRATEGY: no START, EXERCISE or exerciser gate declared ({where}), and {why}",
        findings=[finding],
    )


def instead(state: RunState, wt: Path, declared: Exercise) -> Exercise:
    """What replaces an exercise that found nothing declared (BLOCKED NO_EXERCISE_STRATEGY):
    the derived one, the specification's finding when none can be derived, or the same
    BLOCKED with the reason when the change has no code to exercise."""
    if declared.status != "BLOCKED" or not declared.note.startswith("NO_EXERCISE_STRATEGY"):
        return declared
    assert state.scope is not None
    eng = state.engineer or EngineerContext()
    where = (
        f"engineer skill at {eng.skill_dir} declares none"
        if eng.skill_dir
        else "no engineer skill found"
    )
    plan = strategy(wt, state.scope)
    if not plan.probes:
        if plan.code_changed:
            out = no_strategy(plan.why_none, where)
        else:
            out = Exercise("BLOCKED", f"NO_EXERCISE_STRATEGY: {plan.why_none}: nothing to exercise")
    else:
        results, error = _results(state, plan, wt)
        if results is None:
            out = Exercise(
                "BLOCKED",
                "NO_EXERCISE_STRATEGY: the exercise derived from the project's "
                f"declarations could not run: its environment failed ({error})",
            )
        else:
            failing = [i for i, res in enumerate(results) if failed(res)]
            at_base, unchecked = _at_base(state, plan, wt, failing) if failing else ({}, "")
            out = judged(plan, results, at_base, unchecked)
    # Review gates with a CHECK ran in the declared exercise: their results and failures stand.
    out.gates = [*declared.gates, *out.gates]
    out.findings = [*declared.findings, *out.findings]
    out.details = [*declared.details, *out.details]
    return out


def _results(
    state: RunState, plan: Strategy, wt: Path, want: BuiltEnv | None = None
) -> tuple[list[processes.Result] | None, str]:
    """The probes' results in ``wt``'s env (its builder's ``want`` env, when given), from the
    result cache when the same probes ran on the same code (without building the env: the tree
    declares it, as for the suite's results); None and why when the env could not be built."""
    entry = probes.memo_key(plan, wt)
    known = probes.remembered(entry, len(plan.probes))
    if known is not None:
        return known, ""
    with testenv.runtime(wt, state.toolchain or Toolchain(), want=want) as tenv:
        if tenv.error is not None:
            return None, tenv.error
        variables = testenv.suite_env(tenv, {"PYTHONDONTWRITEBYTECODE": "1"})
        return exercise(plan, wt, tenv, variables, entry), ""


def _at_base(
    state: RunState, plan: Strategy, wt: Path, failing: list[int]
) -> tuple[dict[int, processes.Result], str]:
    """The failing probes run again at the merge base, in its env built as the suite's was
    (the same builder and env): their results by index, or why they could not be."""
    assert state.scope is not None
    base = state.scope.merge_base or state.scope.old_commit
    if base is None:
        return {}, f"a whole-file scope ({state.scope.mode}) has no base commit"
    want = next((o.env for o in state.outcomes if o.skill == "tester" and o.env), None)
    try:
        with workspace.checkout(state.run_id, state.request.repo, base) as bwt:
            there = replace(
                plan,
                probes=tuple(plan.probes[i] for i in failing),
                root=bwt / plan.root.relative_to(wt),
            )
            results, error = _results(state, there, bwt, want)
    except VerifyDagError as exc:
        return {}, f"could not check out the merge base {base}: {exc.message}"
    if results is None:
        return {}, f"the merge base's environment could not be built ({error})"
    return dict(zip(failing, results, strict=True)), ""
