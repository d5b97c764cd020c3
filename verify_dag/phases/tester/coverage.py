"""qa's changed-line coverage, from the coverage.py data the tester's single suite run collected.

The figure is diff-cover's: of the added or modified lines that coverage.py counts as executable
statements (excluded lines are not counted), the share that ran. Lines of files the run never
measured are left out of it, as diff-cover leaves them out.

Findings, class "coverage" from qa:
- one per run of consecutive unexecuted changed statements in a file ("lines 12-18 not executed
  by any test"), severity 4; severity 6 when the run holds every body statement of a function
  the change added whole, since then a whole new behaviour is untested rather than a branch of
  one. Both stay below 7: untested code is not a failure, and must not wake the debugger.
- severity 3 for a changed source file whose tests were not touched at all in the diff (no
  changed test file matches its module name): a heuristic, hence the low severity.

Both kinds are only about the code the project measures: a file coverage.py reported (the
project's own ``[tool.coverage]`` / ``.coveragerc`` ``source``, ``include`` and ``omit`` decide
that, since the suite ran under its configuration), never about test files, conftest, docs or
configuration. Test files still count in the figure, as diff-cover counts them.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Mapping
from pathlib import Path, PurePosixPath

from verify_dag import processes
from verify_dag.models.base import Frozen
from verify_dag.models.findings import Finding, Location, SkillOutcome
from verify_dag.models.scope import FileChange, Scope
from verify_dag.phases.tester import coverage_files
from verify_dag.sandbox import Policy
from verify_dag.tools.base import relative

SKILL = "qa"
_SOURCE_SUFFIXES = frozenset({".py", ".js", ".jsx", ".mjs", ".cjs", ".ts", ".tsx", ".go", ".rb"})
_TEST_AFFIX = re.compile(r"^tests?_|_(?:tests?|spec)$")
_TEST_DIRS = frozenset({"test", "tests", "testing", "__tests__", "spec"})
_NOT_SOURCE = frozenset(
    {"setup.py", "noxfile.py", "conftest.py", "manage.py", "fabfile.py", "conf.py"}
)
_NOT_CODE_DIRS = frozenset(
    {"docs", "doc", "examples", "example", "scripts", "bench", "benchmarks", ".github"}
)


class AddedFunction(Frozen):
    name: str
    start: int  # the def line
    end: int


class FileCoverage(Frozen):
    path: str  # repo-relative
    statements: tuple[int, ...]  # executable changed lines (coverage.py's statements)
    executed: tuple[int, ...]  # the ones that ran
    functions: tuple[AddedFunction, ...] = ()  # functions the change added whole


class CoverageData(Frozen):
    """What the tester measured, for the scoped Python files and their changed lines only."""

    tool: str = "coverage.py"
    files: tuple[FileCoverage, ...] = ()
    # Whether the project tells coverage.py what its code is (`source` or `include` in its
    # configuration): then the files coverage reported are that code, and nothing else is.
    source_declared: bool = False
    # Set (to the env's name) when the suite imported the project from a copy its env installed
    # (a tox or nox env building a wheel or sdist): that copy's lines are not the checkout's.
    installed_copy: str = ""


class QaResult(Frozen):
    covered: int
    total: int
    findings: tuple[Finding, ...] = ()
    note: str = ""

    @property
    def percent(self) -> float | None:
        return 100.0 * self.covered / self.total if self.total else None

    def diff_cover_percent(self, *, total_percent_float: bool = False) -> float:
        """The figure as diff-cover prints it: truncated to an int, or rounded to 2 places with
        --total-percent-float; 100 when no changed line is measured."""
        if not self.total:
            return 100
        value = self.covered / self.total * 100
        return round(value, 2) if total_percent_float else int(value)


def measure(
    python: str,
    data_file: Path,
    workdir: Path,
    scope: Scope,
    env: Mapping[str, str],
    timeout: float = 300,
) -> CoverageData | None:
    """Read ``data_file`` with the coverage.py that wrote it (the suite's interpreter) into the
    small model qa needs. None when there is no data at all."""
    scoped = {f.path: f for f in scope.included if f.status != "deleted" and f.path.endswith(".py")}
    if not scoped:
        return CoverageData()
    if not data_file.is_file() and list(data_file.parent.glob(data_file.name + ".*")):
        # A repository that configures `parallel = true` gets one file per process.
        processes.run(
            [python, "-m", "coverage", "combine", f"--data-file={data_file}"],
            cwd=workdir,
            timeout=timeout,
            env=env,
            sandbox=Policy(writable=(data_file.parent,)),
        )
    if not data_file.is_file():
        return None
    out = data_file.parent / "coverage.json"
    # Analysing a file means parsing it: only the scoped ones, when coverage can be told so.
    include = coverage_files.include_option([str((workdir / p).resolve()) for p in scoped])
    # -i: files that were measured but are gone (generated, temporary) must not sink the report.
    res = processes.run(
        [
            python,
            "-m",
            "coverage",
            "json",
            "-i",
            *include,
            f"--data-file={data_file}",
            "-o",
            str(out),
        ],
        cwd=workdir,
        timeout=timeout,
        env=env,
        sandbox=Policy(writable=(data_file.parent,)),
    )
    if not out.is_file():
        return CoverageData() if "No data to report" in res.stdout + res.stderr else None
    report = json.loads(out.read_text(encoding="utf-8"))
    files = []
    for name, info in sorted(report.get("files", {}).items()):
        change = scoped.get(relative(name, workdir))
        if change is None:
            continue
        executed = {n for n in info.get("executed_lines", ()) if change.covers(n)}
        missing = {n for n in info.get("missing_lines", ()) if change.covers(n)}
        files.append(
            FileCoverage(
                path=change.path,
                statements=tuple(sorted(executed | missing)),
                executed=tuple(sorted(executed)),
                functions=_added_functions(workdir / change.path, change),
            )
        )
    version = report.get("meta", {}).get("version", "")
    return CoverageData(
        tool=f"coverage.py {version}".strip(),
        files=tuple(files),
        source_declared=_source_declared(python, workdir, env, timeout),
    )


# coverage.py's own reading of the project's configuration (.coveragerc, setup.cfg, tox.ini,
# pyproject.toml), asked of the suite's coverage.py rather than re-implemented.
_ASK_SOURCE = (
    "import coverage; c = coverage.Coverage(); "
    "print(bool(c.config.source or c.config.run_include or c.config.source_pkgs))"
)


def _source_declared(python: str, workdir: Path, env: Mapping[str, str], timeout: float) -> bool:
    res = processes.run(
        [python, "-c", _ASK_SOURCE], cwd=workdir, timeout=timeout, env=env, sandbox=Policy()
    )
    return res.returncode == 0 and res.stdout.strip() == "True"


def _added_functions(path: Path, change: FileChange) -> tuple[AddedFunction, ...]:
    try:
        tree = ast.parse(path.read_bytes())
    except (OSError, SyntaxError, ValueError):
        return ()
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.end_lineno:
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            if all(change.covers(n) for n in range(first, node.end_lineno + 1)):
                out.append(AddedFunction(name=node.name, start=node.lineno, end=node.end_lineno))
    return tuple(sorted(out, key=lambda f: f.start))


def diff_coverage(scope: Scope, data: CoverageData) -> QaResult:
    covered = total = 0
    findings: list[Finding] = []
    for fc in data.files:
        change = scope.file(fc.path)
        if change is None:
            continue
        statements = [n for n in fc.statements if change.covers(n)]
        executed = set(fc.executed)
        total += len(statements)
        covered += sum(1 for n in statements if n in executed)
        if not _is_test(PurePosixPath(fc.path)):
            findings.extend(_missing(fc, statements, executed))
    measured = {fc.path for fc in data.files} if data.source_declared else None
    findings.extend(_untested_files(scope, measured))
    note = (
        f"the project ran from the copy {data.installed_copy} installed, not from the checkout: "
        "its changed lines are not measured, only the checkout's own files (tests) are"
        if data.installed_copy
        else ""
    )
    return QaResult(covered=covered, total=total, findings=tuple(findings), note=note)


def _missing(fc: FileCoverage, statements: list[int], executed: set[int]) -> list[Finding]:
    """One finding per run of unexecuted statements with no executed statement between them."""
    runs: list[list[int]] = []
    previous_missed = False
    for n in statements:
        missed = n not in executed
        if missed and previous_missed:
            runs[-1].append(n)
        elif missed:
            runs.append([n])
        previous_missed = missed
    out = []
    for run in runs:
        whole = [
            f for f in fc.functions if (body := _body(f, statements)) and set(body) <= set(run)
        ]
        span = str(run[0]) if run[0] == run[-1] else f"{run[0]}-{run[-1]}"
        what = f"line {span}" if run[0] == run[-1] else f"lines {span}"
        plural = "s" if len(run) != 1 else ""
        text = (
            f"{fc.path} {what}: changed in this scope, not executed by any test "
            f"({len(run)} statement{plural})."
        )
        if whole:
            text += " No test calls the new " + ", ".join(f"{f.name}()" for f in whole) + "."
        out.append(
            Finding(
                title=f"{what} not executed by any test",
                severity=6 if whole else 4,
                description=text,
                source=SKILL,
                issue_class="coverage",
                location=Location(path=fc.path, line=run[0], end_line=run[-1]),
            )
        )
    return out


def _body(function: AddedFunction, statements: list[int]) -> list[int]:
    # The def line itself runs when the module is imported; only the body says it was called.
    return [n for n in statements if function.start < n <= function.end]


def _untested_files(scope: Scope, measured: set[str] | None) -> list[Finding]:
    """Changed source files whose tests the change did not touch: of the files coverage.py
    reported when the project declares its code (``measured``), else of the files outside
    documentation, example and script directories."""
    changed = [PurePosixPath(f.path) for f in scope.included if f.status != "deleted"]
    # What each changed test file is about: its name without the test affixes, and its folders.
    tested = [{_subject(t), *t.parts[:-1]} for t in changed if _is_test(t)]
    out = []
    for path in changed:
        if path.suffix not in _SOURCE_SUFFIXES or path.name in _NOT_SOURCE or _is_test(path):
            continue
        if measured is not None and path.suffix == ".py" and str(path) not in measured:
            continue  # not code the project measures
        if measured is None and _NOT_CODE_DIRS & {p.lower() for p in path.parts[:-1]}:
            continue  # docs/conf.py, examples, scripts: not the code the tests are for
        module = (path.parent.name if path.stem in ("__init__", "index") else path.stem).lower()
        if module and not any(module in t or any(_token_of(module, s) for s in t) for t in tested):
            out.append(
                Finding(
                    title=f"No test changed for {path.name}",
                    severity=3,
                    source=SKILL,
                    issue_class="coverage",
                    location=Location(path=str(path)),
                    description=f"{path} changed, but no test file matching '{module}' was "
                    "added or modified in this scope (test_*.py, *_test.py or under tests/).",
                )
            )
    return out


def _subject(path: PurePosixPath) -> str:
    """test_calc.py, calc_test.py, calc.test.ts, calc.spec.js -> calc."""
    stem = path.name.split(".")[0].lower()
    return _TEST_AFFIX.sub("", stem)


def _token_of(module: str, name: str) -> bool:
    # test_calc_extra.py is about calc; test_calculator.py is not.
    return name.startswith(module + "_") or name.endswith("_" + module)


def _is_test(path: PurePosixPath) -> bool:
    name = path.name.lower()
    return (
        name == "conftest.py"
        or bool(_TEST_AFFIX.search(name.split(".")[0]))
        or any(f".{w}." in name for w in ("test", "spec"))
        or bool(_TEST_DIRS & set(path.parts[:-1]))
    )


def qa_outcome(result: QaResult) -> SkillOutcome:
    pct = result.percent
    notes = (
        "no changed executable lines"
        if pct is None
        else f"diff coverage {pct:.1f}% ({result.covered}/{result.total} changed lines)"
    )
    return SkillOutcome(
        skill=SKILL,
        status="COMPLETED",
        notes=f"{notes}; {result.note}" if result.note else notes,
        findings=result.findings,
        reason="changed-line coverage from the tester's run",
    )
