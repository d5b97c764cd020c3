"""The tester skill: run the discovered test suite and report exact counts and every failure.

Tests run the repository's code: in the checkout, through processes.run, with a time limit, capped
output and an environment without secrets, inside the environment tester/env provisions from what
the repository declares (our own interpreter when it declares nothing to install). Suites that
could not run (no command, an environment that could not be built, missing executable, time-out,
collection or usage errors, no tests, no readable report) are BLOCKED with a severity 10
environment finding: a suite that did not run is never a pass.

A pytest suite runs once, under coverage.py when something reads the coverage (qa's changed-line
coverage at deep: no second run is needed for it) and without it otherwise, with the selection the
repository declares for it (its pytest arguments, see
:mod:`~verify_dag.phases.tester.pytest_command`), so the counts are those of the repository's own
run.
Its junit report also gives the per-test results of the evidence bundle (verify_dag.evidence).
Beside it: the suite's environments (env/), the declared pytest command (pytest_command), the
junit report (junit) and coverage.py's files after the run (coverage_files).
"""

from __future__ import annotations

import re
import shlex
import sys
import tempfile
from pathlib import Path

from verify_dag import processes
from verify_dag.files import write_atomic
from verify_dag.models.findings import BuiltEnv, Finding, SkillOutcome
from verify_dag.models.scope import Scope
from verify_dag.models.toolchain import Command, Toolchain
from verify_dag.phases.tester import (
    coverage,
    coverage_files,
    exit_code_suite,
    junit,
    junit_plugin,
    pytest_command,
    pytest_evidence,
    skips,
)
from verify_dag.phases.tester import env as testenv
from verify_dag.phases.tester.coverage import CoverageData
from verify_dag.phases.tester.env import host
from verify_dag.phases.tester.env.base import Env, purelib
from verify_dag.phases.tester.outcome import (
    SKILL,
    blocked,
    declared_broken,
    env_note,
    label,
    suite_env,
    tail,
    unprovisioned,
)
from verify_dag.tools.base import module_available, python_tool_argv

# pytest's documented exit codes other than 0 (all passed) and 1 (some failed).
_PYTEST_EXIT = {
    2: "test execution was interrupted (collection errors or KeyboardInterrupt)",
    3: "pytest hit an internal error",
    4: "pytest was misused (bad command line or configuration)",
    5: "no tests were collected",
}
PER_TEST_TIMEOUT = 300.0
_VERBOSITY = re.compile(r"^-(?:q+|v+)$|^--(?:quiet|verbose|verbosity=.*)$")


def run(scope: Scope, toolchain: Toolchain, workdir: Path, timeout: float) -> SkillOutcome:
    return run_with_coverage(scope, toolchain, workdir, timeout, measure=False)[0]


def run_with_coverage(
    scope: Scope,
    toolchain: Toolchain,
    workdir: Path,
    timeout: float,
    *,
    cache_dir: Path | None = None,
    data_file: Path | None = None,
    xml_file: Path | None = None,
    per_test_timeout: float = PER_TEST_TIMEOUT,
    measure: bool = True,
) -> tuple[SkillOutcome, CoverageData | None]:
    """The outcome, and the coverage of the scoped files measured in the same run (None when
    the suite did not run to completion, coverage could not be collected, or ``measure`` is
    False: then the suite runs without coverage.py). ``data_file`` keeps the raw coverage.py
    data there instead of in a temporary directory; ``xml_file`` receives the scoped files'
    coverage as Cobertura XML (``coverage xml``), the input diff-cover reads to re-check qa's
    changed-line figure, when coverage was collected. ``per_test_timeout`` is pytest-timeout's
    limit on each test, where pytest-timeout is in the env."""
    outcome, data = _run_with_coverage(
        scope,
        toolchain,
        workdir,
        timeout,
        cache_dir=cache_dir,
        data_file=data_file,
        xml_file=xml_file,
        per_test_timeout=per_test_timeout,
        measure=measure,
    )
    return declared_broken(outcome, toolchain), data


def _run_with_coverage(
    scope: Scope,
    toolchain: Toolchain,
    workdir: Path,
    timeout: float,
    *,
    cache_dir: Path | None,
    data_file: Path | None,
    xml_file: Path | None,
    per_test_timeout: float,
    measure: bool,
) -> tuple[SkillOutcome, CoverageData | None]:
    command = toolchain.test
    if command is None:
        return blocked("no test command was discovered", ran=False), None
    with (
        testenv.runtime(workdir, toolchain, cache_dir) as env,
        tempfile.TemporaryDirectory(prefix="verify-dag-test-") as tmp,
    ):
        outcome, data = _in_env(
            scope,
            command,
            workdir,
            timeout,
            env,
            Path(tmp),
            data_file=data_file,
            xml_file=xml_file,
            per_test_timeout=per_test_timeout,
            measure=measure,
        )
    if env.builder and env.name:
        # Which env it was, so that the debugger builds the merge base's alike.
        outcome = outcome.model_copy(update={"env": BuiltEnv(builder=env.builder, name=env.name)})
    return outcome, data


def _in_env(
    scope: Scope,
    command: Command,
    workdir: Path,
    timeout: float,
    env: Env,
    tmp: Path,
    *,
    data_file: Path | None,
    xml_file: Path | None,
    per_test_timeout: float,
    measure: bool,
) -> tuple[SkillOutcome, CoverageData | None]:
    if env.error is not None:
        return unprovisioned(env), None
    if env.declared_commands:
        # A builder's env (tox's, hatch's) declares what its suite runs: the suite its
        # maintainers run. tox runs any other commands as declared.
        found = pytest_command.from_env(env)
        if found is None and env.runner is not None:
            return exit_code_suite.run(command, workdir, timeout, env, tox=True), None
        if found is None:
            # A builder's own line that runs no pytest (a hatch script running unittest).
            line = env.declared_commands[0]
            own = Command(kind="test", argv=line, source=f"{env.source} commands", exists=True)
            return exit_code_suite.run(own, workdir, timeout, env), None
        command = found
    if command.tool == "pytest":
        return _pytest(
            scope,
            command,
            workdir,
            timeout,
            env,
            (data_file or tmp / ".coverage") if measure else None,
            xml_file,
            per_test_timeout,
        )
    return exit_code_suite.run(command, workdir, timeout, env), None


def _pytest_argv(env: Env, data_file: Path | None) -> tuple[list[str] | None, str | None]:
    """(how to start pytest, the interpreter that records coverage or None when it cannot or
    ``data_file`` is None: no coverage wanted)."""
    if env.python is not None:
        python = str(env.python)  # testenv always installs pytest and coverage there
    else:
        found = python_tool_argv("pytest")
        if found is None or found[0] != sys.executable or not module_available("coverage"):
            return found, None
        python = sys.executable
    if data_file is None:
        return [python, "-m", "pytest"], None
    return [
        python,
        "-m",
        "coverage",
        "run",
        "--branch",
        f"--data-file={data_file}",
        "-m",
        "pytest",
    ], python


def _pytest(
    scope: Scope,
    command: Command,
    workdir: Path,
    timeout: float,
    env: Env,
    data_file: Path | None,
    xml_file: Path | None,
    per_test_timeout: float = PER_TEST_TIMEOUT,
) -> tuple[SkillOutcome, CoverageData | None]:
    base, python = _pytest_argv(env, data_file)
    if base is None:
        return blocked("pytest is not installed (not importable, not on PATH)", ran=False), None
    if data_file is not None:
        data_file.parent.mkdir(parents=True, exist_ok=True)
    kept, dropped = pytest_command.selection(pytest_command.args(command.argv) or ())
    # The junit report and the coverage data live outside the checkout, so the suite's own files
    # stay untouched.
    with tempfile.TemporaryDirectory(prefix="verify-dag-junit-") as tmp:
        report = Path(tmp) / "junit.xml"
        plugin_dir = junit_plugin.install_plugin(Path(tmp) / "plugin")
        if env.runner is not None and env.python is not None:
            # tox passes PYTHONPATH only where the project's set_env does not set its own: the
            # plugin goes into the env itself, which is verify-dag's (cached, locked) copy.
            site = purelib(env.python)
            if site is not None:
                # Replaced in one rename: a run of the same env beside this one may be
                # importing it.
                plugin = plugin_dir / f"{junit_plugin.PLUGIN}.py"
                write_atomic(site / plugin.name, plugin.read_bytes())
        # The declared selection first, ours after it: where both set one value, ours wins.
        # xunit1, not xunit2: only xunit1 testcases carry the `file` and `line` attributes that
        # locate a failure (pytest drops them under xunit2).
        # --rootdir: junit paths and node ids are relative to the rootdir, and they must be
        # repo-relative to be compared with the scope, even if pytest would pick an ancestor.
        quiet = [] if any(_VERBOSITY.match(a) for a in kept) else ["-q"]
        ours = [
            "-p",
            "no:cacheprovider",
            f"--rootdir={workdir.resolve()}",
            f"--junitxml={report}",
            "-o",
            "junit_family=xunit1",
            "-p",
            junit_plugin.PLUGIN,
            *_per_test_limit(env, kept, per_test_timeout),
            # On verify-dag's own interpreter: without its dependencies' plugins (env/host.py).
            *(host.not_ours() if env.python is None and base[0] == sys.executable else ()),
        ]
        end = kept.index("--") if "--" in kept else len(kept)  # after `--`, all are paths
        argv = [*base, *quiet, *kept[:end], *ours, *kept[end:]]
        pycache = testenv.run_pycache(workdir, Path(tmp), env)
        res = processes.run(
            env.command(argv, pycache),
            cwd=workdir,
            timeout=timeout,
            env=suite_env(env, plugin_dir, pycache),
            sandbox=env.policy(Path(tmp), pycache, *([data_file.parent] if data_file else [])),
        )
        if res.not_found:
            return blocked(f"{argv[0]} was not found", ran=False), None
        if res.timed_out:
            return blocked(f"the suite timed out after {timeout:g}s", tail(res)), None
        root = junit.read(report)
        if res.returncode not in (0, 1):
            why = _PYTEST_EXIT.get(res.returncode, "pytest ended abnormally")
            errors = junit.error_messages(root) if root is not None else ""
            return blocked(f"pytest exited {res.returncode}: {why}", errors or tail(res)), None
        if root is None:
            return blocked("pytest wrote no readable junit report", tail(res)), None
        shown = _shown(
            argv,
            {
                str(workdir.resolve()): ".",
                **({str(data_file): data_file.name} if data_file else {}),
                str(report): report.name,
            },
        )
    measured = None
    if python is not None and data_file is not None:
        coverage_files.combine(python, data_file, workdir, suite_env(env))
        measured = coverage.measure(python, data_file, workdir, scope, suite_env(env))
        if measured is not None and _installed_copy(env):
            measured = measured.model_copy(update={"installed_copy": env.source})
        if xml_file is not None:
            coverage_files.cobertura(python, data_file, xml_file, workdir, suite_env(env), scope)
    counts = junit.counts(root)
    findings = [
        junit.failure(tc, scope, SKILL)
        for tc in root.iter("testcase")
        if junit.problem(tc) is not None
    ]
    if res.returncode == 1 and not findings:
        # pytest says something failed but no testcase records it (a plugin, a session hook):
        # still a failure, described by the output.
        findings.append(
            Finding(
                title="Test run failed",
                severity=9,
                issue_class="test-failure",
                source=SKILL,
                description=f"pytest exited 1\n{tail(res)}",
            )
        )
    failed = bool(findings)
    findings += skips.findings(root, scope, workdir)  # a skipped test is not a pass, nor a failure
    outcome = SkillOutcome(
        skill=SKILL,
        status="FAILED" if failed else "PASSED",
        notes=counts.notes() + pytest_command.dropped_note(dropped) + env_note(env),
        reason=f"test command discovered: {label(command)}",
        findings=tuple(findings),
        evidence=pytest_evidence.record(root, workdir, base, env, shown, res.returncode),
    )
    return outcome, measured


_EDITABLE = re.compile(r'"editable"\s*:\s*true')


def _installed_copy(env: Env) -> bool:
    """Whether a tox or nox env installed the project as a wheel or sdist (what tox does by
    default) rather than editable: pip and uv record an editable install in direct_url.json."""
    if not (env.runner is not None or env.source.startswith("nox ")) or env.python is None:
        return False
    site = purelib(env.python)
    if site is None:
        return False
    return not any(
        _EDITABLE.search(p.read_text(encoding="utf-8", errors="replace"))
        for p in site.glob("*.dist-info/direct_url.json")
    )


def _per_test_limit(env: Env, kept: tuple[str, ...], seconds: float) -> list[str]:
    """pytest-timeout's limit on each test, so that one hanging test fails alone and every other
    result still counts. Given as an ini override, which pytest only warns about if the plugin
    is somehow not loaded; a ``--timeout`` the project passes itself wins (the command line
    beats the ini). Every env the tester builds has pytest-timeout; our own interpreter may not."""
    if seconds <= 0 or any(a == "--timeout" or a.startswith("--timeout=") for a in kept):
        return []
    if env.python is None and not module_available("pytest_timeout"):
        return []
    return ["-o", f"timeout={seconds:g}"]


def _shown(argv: list[str], paths: dict[str, str]) -> str:
    """The command as it ran, for the evidence bundle: the interpreter as `python`, and the
    checkout and scratch files by the names that mean something outside this worker."""
    out = ["python" if Path(argv[0]).name.startswith("python") else Path(argv[0]).name]
    for arg in argv[1:]:
        for path, name in paths.items():
            arg = arg.replace(path, name)
        out.append(arg)
    return shlex.join(out)
