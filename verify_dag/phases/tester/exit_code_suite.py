"""A suite that is not pytest's (make, npm, cargo, unittest through tox, ...): its exit code is the
result, with unittest's own summary line when it prints one."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from verify_dag import processes
from verify_dag.models.evidence import SuiteEvidence
from verify_dag.models.findings import Finding, SkillOutcome
from verify_dag.models.toolchain import Command
from verify_dag.phases.tester import records
from verify_dag.phases.tester.env.base import Env
from verify_dag.phases.tester.outcome import (
    SKILL,
    blocked,
    env_note,
    environment,
    label,
    suite_env,
    tail,
)
from verify_dag.sandbox import Policy
from verify_dag.tools.base import PYTHON_NAMES, resolve_argv


def run(
    command: Command, workdir: Path, timeout: float, env: Env, *, tox: bool = False
) -> SkillOutcome:
    """A suite that is not pytest's: its exit code is the result. ``tox``: the tox env's own
    commands, run by tox as declared (unittest, a script, ...)."""
    if tox and env.runner is not None:
        argv = env.runner.own_commands()
        command = Command(
            kind="test",
            argv=("tox", "run", "-e", env.runner.name),
            source=f"tox env {env.runner.name} commands: "
            + "; ".join(shlex.join(a) for a in env.runner.commands),
            exists=True,
        )
        policy = env.policy()
    else:
        policy = Policy(readonly=env.readable)
        argv = resolve_argv(command.argv)
    if not tox and env.python is not None and Path(command.argv[0]).name in PYTHON_NAMES:
        argv[0] = str(env.python)  # `python -m X` runs in the repository's env when it has one
    res = processes.run(
        argv,
        cwd=workdir,
        timeout=timeout,
        env=suite_env(env),
        sandbox=policy,
    )
    if res.not_found:
        return blocked(f"{command.argv[0]} was not found ({label(command)})", ran=False)
    if res.timed_out:
        return blocked(f"{command.display()} timed out after {timeout:g}s", tail(res))
    if res.returncode in (126, 127):
        # The shell's "not executable" / "command not found", from inside make or npm.
        return blocked(
            f"{command.display()} exited {res.returncode}: a command it runs is "
            "missing or not executable",
            tail(res),
        )
    reason = f"test command discovered: {label(command)}"
    runner = Path(command.argv[0]).name
    suite = SuiteEvidence(
        runner=runner,
        runner_version=None,
        command=command.display(),
        returncode=res.returncode,
        per_test=False,
        inventory=records.inventory(runner, environment(env)),
    )
    summary = _unittest_summary(res.stdout + "\n" + res.stderr)
    counted = f"; {summary}" if summary else " (no per-test counts from this runner)"
    if res.returncode == 0:
        return SkillOutcome(
            skill=SKILL,
            status="PASSED",
            reason=reason,
            evidence=suite,
            notes=f"{command.display()} exited 0{counted}" + env_note(env),
        )
    finding = Finding(
        title=f"Test command failed: {command.display()}",
        severity=9,
        source=SKILL,
        issue_class="test-failure",
        description=f"exited {res.returncode}\n{tail(res)}",
    )
    return SkillOutcome(
        skill=SKILL,
        status="FAILED",
        reason=reason,
        findings=(finding,),
        evidence=suite,
        notes=f"{command.display()} exited {res.returncode}{counted}" + env_note(env),
    )


_UNITTEST_RAN = re.compile(r"^Ran (\d+) tests? in [\d.]+s\s*$", re.MULTILINE)
_UNITTEST_END = re.compile(r"^(OK|FAILED|NO TESTS RAN)(?: \(([^)]*)\))?\s*$", re.MULTILINE)


def _unittest_summary(text: str) -> str | None:
    """unittest's own last summary, in its words ("Ran 929 tests: OK (skipped=3)"): the counts
    a suite run by ``python -m unittest`` gives, when it gives them."""
    ran = _UNITTEST_RAN.findall(text)
    end = _UNITTEST_END.findall(text)
    if not ran or not end:
        return None
    word, detail = end[-1]
    return f"unittest: Ran {ran[-1]} tests, {word}" + (f" ({detail})" if detail else "")
