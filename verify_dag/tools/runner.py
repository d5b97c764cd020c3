"""The one runner of ToolSpecs: run a spec over files, and rate what it printed as a Finding.

The static phase runs every analyser through here, and so do the static baseline (the same tool
at the merge base) and the claim verifier (one analyser re-run on one file), so that a finding is
read and rated the same way wherever it is seen.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from verify_dag import util
from verify_dag.models.findings import Finding, Location
from verify_dag.models.toolchain import Command
from verify_dag.sandbox import Policy
from verify_dag.tools.base import Invocation, RawFinding, ToolSpec

# Characters of file arguments per invocation: far below ARG_MAX, so `--scope=all` on a large
# repository becomes several runs instead of an E2BIG.
_ARGV_BUDGET = 100_000
_TITLE_MAX = 160


@dataclass
class ToolRun:
    name: str
    raw: list[RawFinding] = field(default_factory=list)
    failure: str | None = None  # why the tool could not run (or stopped part way)
    detail: str = ""  # the first lines of its stderr (stdout if stderr was empty), redacted


def run(
    spec: ToolSpec,
    files: Sequence[str],
    workdir: Path,
    timeout: float,
    python: Path | None = None,
) -> ToolRun:
    """``spec`` over ``files`` (repo-relative) in ``workdir``, in chunks; stops at a failure.

    ``python`` is the project's interpreter when its environment is known: a spec that resolves
    imports (mypy) then resolves them there. None keeps verify-dag's own.
    """
    result = ToolRun(spec.name)
    env = util.scrubbed_env()
    if python is not None:
        # Inside the project's environment: its scripts first on PATH, which is also what makes
        # the sandbox show the environment (read-only) wherever it lives.
        env["PATH"] = os.pathsep.join(p for p in (str(python.parent), env.get("PATH")) if p)
    # One scratch directory per run, outside the checkout, gone when the run is.
    with tempfile.TemporaryDirectory(prefix="verify-dag-tool-") as tmp:
        scratch = Path(tmp)
        for chunk in _chunks(files, spec.takes_files, whole=spec.argfile):
            argv = spec.argv(Invocation(chunk, workdir, scratch, python))
            if argv is None:
                result.failure = f"{spec.name} is not installed (not importable, not on PATH)"
                return result
            # The project's config (mypy plugins, make recipes, npm scripts) executes repository
            # code, so these run like the test suite: scrubbed environment, time limit, capped
            # output; the scratch directory is the one place besides the checkout it may write.
            res = util.run(
                argv,
                cwd=workdir,
                timeout=timeout,
                env=env,
                sandbox=Policy(writable=(scratch,)),
            )
            result.detail = _head(res.stderr) or _head(res.stdout)
            if res.not_found:
                result.failure = f"{argv[0]} was not found"
                return result
            if res.timed_out:
                result.failure = f"timed out after {timeout:g}s"
                return result
            raw = spec.parse(res.stdout, res.stderr, workdir)
            result.raw.extend(raw)
            if res.returncode not in spec.ok_exit_codes and not _explained(spec, raw):
                result.failure = f"exited {res.returncode}" + (
                    ", output truncated" if res.truncated else ""
                )
                return result
    return result


def targets(spec: ToolSpec, files: Sequence[str], workdir: Path) -> tuple[list[str], str]:
    """The files of ``files`` that are ``spec``'s to check in ``workdir``, as the project's
    configuration says, and a remark on those it leaves out ("" when none)."""
    mine = [p for p in files if spec.applies_to(p)]
    if spec.select is None or not mine:
        return mine, ""
    return spec.select(workdir, mine)


def title(spec: ToolSpec, r: RawFinding) -> str:
    """The finding's title; also what findings without a rule code are matched on."""
    message = util.redact(r.message)
    text = f"{spec.name} {r.code}: {message}" if r.code else f"{spec.name}: {message}"
    return text[: _TITLE_MAX - 3] + "..." if len(text) > _TITLE_MAX else text


def finding(spec: ToolSpec, command: Command, r: RawFinding, source: str) -> Finding:
    """``r`` as a Finding of the skill ``source``, rated by the spec's own rule."""
    severity, issue_class = spec.rate(r)
    where = ":".join(str(x) for x in (r.path, r.line, r.col) if x is not None)
    return Finding(
        title=title(spec, r),
        severity=severity,
        description=(
            f"{spec.name} ({command.source}) reported at {where}: {util.redact(r.message)}"
        ),
        source=source,
        issue_class=issue_class,
        location=Location(path=r.path, line=r.line),
        rule=r.code,
        tool=spec.name,
    )


def _chunks(files: Sequence[str], takes_files: bool, whole: bool) -> Iterator[list[str]]:
    if not takes_files:
        yield []
        return
    if whole:
        yield list(files)
        return
    chunk: list[str] = []
    size = 0
    for path in files:
        if chunk and size + len(path) > _ARGV_BUDGET:
            yield chunk
            chunk, size = [], 0
        chunk.append(path)
        size += len(path) + 1
    if chunk:
        yield chunk


def _explained(spec: ToolSpec, raw: list[RawFinding]) -> bool:
    """A non-ok exit code that the tool's own diagnostics account for."""
    if spec.findings_explain_exit and raw:
        return True
    return any(r.code in spec.blocking_rules for r in raw)


def _head(text: str, lines: int = 6) -> str:
    return util.redact("\n".join(text.strip().splitlines()[:lines]))
