"""The tester's entry in the result cache (verify_dag/resultcache.py): a suite's results, reused
by a later run that would run the same suite on the same code.

The key is what decides them: the tested tree (every file, the env's declarations among them),
the environment key (:func:`verify_dag.resultcache.host_key`: the interpreter and the tools
that build envs), the command, the per-test and suite time limits, whether coverage was
measured, and the scoped files (failures and skips are rated against them). Only a suite that
ran to its end is kept: a BLOCKED one (an env that could not be built, a time-out) runs again.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import ValidationError

from verify_dag import git, resultcache
from verify_dag.models.findings import SkillOutcome
from verify_dag.models.scope import Scope
from verify_dag.models.toolchain import Toolchain

_KIND = "suite"
_RAN = ("PASSED", "FAILED")


def key(
    scope: Scope,
    toolchain: Toolchain,
    workdir: Path,
    *,
    test_timeout: float,
    per_test_timeout: float,
    measure: bool,
) -> str | None:
    """The suite's entry, or None when there is nothing to key it on (no test command, or a
    checkout git does not know)."""
    tree = git.rev_parse(workdir, "HEAD^{tree}")
    if toolchain.test is None or not tree:
        return None
    scoped = [f.model_dump(mode="json") for f in scope.included]
    return resultcache.key(
        resultcache.host_key(),
        _KIND,
        tree,
        json.dumps(toolchain.test.model_dump(mode="json"), sort_keys=True),
        json.dumps(scoped, sort_keys=True),
        f"{test_timeout:g}",
        f"{per_test_timeout:g}",
        "coverage" if measure else "no coverage",
    )


def get(entry: str | None) -> list[SkillOutcome] | None:
    if entry is None:
        return None
    value = resultcache.get(_KIND, entry, "suite")
    if not isinstance(value, list) or not value:
        return None
    try:
        return [SkillOutcome.model_validate(o) for o in value]
    except ValidationError:
        return None


def put(entry: str | None, outcomes: list[SkillOutcome]) -> None:
    if entry is None or not outcomes or outcomes[0].status not in _RAN:
        return
    resultcache.put(_KIND, entry, [o.model_dump(mode="json") for o in outcomes])
