"""The tester's record of a pytest run for the evidence bundle (verify_dag/evidence.py): its cases
from the junit report, the command as it ran, and the version of the pytest that ran it."""

from __future__ import annotations

import importlib.metadata
import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

from verify_dag import processes
from verify_dag.models.evidence import SuiteEvidence
from verify_dag.phases.tester import junit, records
from verify_dag.phases.tester.env.base import Env, purelib
from verify_dag.phases.tester.outcome import environment, suite_env
from verify_dag.sandbox import Policy


def record(
    root: ET.Element, workdir: Path, base: list[str], env: Env, shown: str, returncode: int
) -> SuiteEvidence:
    cases = junit.cases(root, workdir)
    version = pytest_version(base, env)
    return SuiteEvidence(
        runner="pytest",
        runner_version=version,
        command=shown,
        returncode=returncode,
        per_test=True,
        tests=tuple(cases[: records.MAX_TESTS]),
        counts=records.counts(c.outcome for c in cases),
        truncated=len(cases) > records.MAX_TESTS,
        inventory=records.inventory(f"pytest {version or 'unknown'}", environment(env)),
    )


def pytest_version(base: list[str], env: Env) -> str | None:
    """The version of the pytest that ran the suite (its junit report does not say)."""
    if base[0] == sys.executable:
        try:
            return importlib.metadata.version("pytest")
        except importlib.metadata.PackageNotFoundError:
            return None
    if len(base) > 1 and base[1] == "-m":  # the provisioned env's interpreter
        # Read off the env's site-packages (a layer's and the env it sits on): no process.
        sites = [purelib(d / "python") for d in (env.path_dirs or [Path(base[0]).parent])]
        for dist in importlib.metadata.distributions(
            name="pytest", path=[str(s) for s in sites if s]
        ):
            return dist.version
        argv = [base[0], "-c", "import importlib.metadata as m; print(m.version('pytest'))"]
    else:
        argv = [base[0], "--version"]  # a pytest executable on PATH
    res = processes.run(argv, timeout=30, env=suite_env(env), sandbox=Policy())
    found = re.search(r"\d+(?:\.\w+)+", res.stdout + res.stderr)
    return found.group(0) if res.returncode == 0 and found else None
