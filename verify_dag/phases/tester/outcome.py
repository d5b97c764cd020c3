"""What every tester outcome shares: the shapes of a suite that could not run, and the notes
and labels both runners (pytest's and any other) put on theirs."""

from __future__ import annotations

import os
from pathlib import Path

from verify_dag import declarations, processes
from verify_dag.models.findings import Finding, SkillOutcome
from verify_dag.models.toolchain import Command, Toolchain
from verify_dag.phases.tester import env as testenv
from verify_dag.phases.tester.env.base import Env, redacted

SKILL = "tester"


def suite_env(
    env: Env, plugin_dir: Path | None = None, pycache: Path | None = None
) -> dict[str, str]:
    """The suite's environment. The suite writes bytecode as usual (PYTHONDONTWRITEBYTECODE
    would change ``sys.dont_write_bytecode``, which suites test: execnet's
    test_dont_write_bytecode failed under it), into ``pycache`` (PYTHONPYCACHEPREFIX), so the
    checkout holds what was committed. Through tox the prefix is set by tox for the suite's
    commands (``Runner.command``), never on tox itself: tox's 200 modules would otherwise be
    compiled from source on every run (0.7 s of a 1.7 s suite on click)."""
    if plugin_dir is None:
        out = testenv.suite_env(env, {"PYTHONDONTWRITEBYTECODE": "1"})
    else:
        through_tox = env.runner is not None or pycache is None
        prefix = {} if through_tox else {"PYTHONPYCACHEPREFIX": str(pycache)}
        out = testenv.suite_env(env, prefix)
        out.pop("PYTHONDONTWRITEBYTECODE", None)  # the caller's own, too
    if plugin_dir is not None:
        # Only our plugin's directory is added: it holds nothing the suite could import by
        # accident.
        out["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(plugin_dir), out.get("PYTHONPATH", "")) if p
        )
    return out


def environment(env: Env) -> str:
    return env.source or "verify-dag's own interpreter (nothing declared to install)"


def env_note(env: Env) -> str:
    said = "".join(f"; {n}" for n in env.notes)  # why a declared runner was not the one used
    if not env.source:
        return said
    return f"; env from {env.source}" + (" (cached)" if env.reused else "") + said


def unprovisioned(env: Env) -> SkillOutcome:
    reason = "the test environment could not be provisioned"
    finding = Finding(
        title="Test environment could not be provisioned",
        severity=10,
        source=SKILL,
        issue_class="environment",
        description=redacted(
            f"{reason} from {env.source or 'the declared dependencies'}: {env.error}. "
            "The suite's result is unknown, not passing."
        )[:4000],
    )
    return SkillOutcome(
        skill=SKILL,
        status="BLOCKED",
        notes=f"tests could not run: {reason}",
        reason=reason,
        findings=(finding,),
    )


def declared_broken(outcome: SkillOutcome, toolchain: Toolchain) -> SkillOutcome:
    """A suite that could not run because the change broke a file its env is built from or
    pytest is configured by: BLOCKED for that reason, pointing at the finding the static phase
    makes on the file (verify_dag/declarations.py) instead of raising one of its own, with
    what the installer or pytest said kept in the notes."""
    broken = declarations.named(toolchain.broken, declarations.CONFIGURING)
    if not broken or outcome.status != "BLOCKED":
        return outcome
    said = "; ".join(f.description.splitlines()[0][:300] for f in outcome.findings)
    return outcome.model_copy(
        update={
            "notes": f"tests could not run: {declarations.because(broken)}"
            + (f" ({said})" if said else ""),
            "findings": (),
        }
    )


def label(command: Command) -> str:
    return f"{command.display()} ({command.source})"


def blocked(reason: str, detail: str = "", *, ran: bool = True) -> SkillOutcome:
    finding = Finding(
        title="Tests could not run",
        severity=10,
        source=SKILL,
        issue_class="environment",
        description=f"{reason}. The suite's result is unknown, not passing."
        + (f"\n{detail}" if detail else ""),
    )
    return SkillOutcome(
        skill=SKILL,
        status="BLOCKED",
        notes=f"tests could not run: {reason}",
        reason=reason,
        ran=ran,
        findings=(finding,),
    )


def tail(res: processes.Result, lines: int = 30) -> str:
    text = "\n".join(t for t in (res.stdout.strip(), res.stderr.strip()) if t)
    return processes.redact("\n".join(text.splitlines()[-lines:]))
