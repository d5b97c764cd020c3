"""The debugger's re-run of one failing test at the merge base, and what its outcome says:
"yes" only when it fails there the same way, "no" when it passes there or is not part of the
base's suite (the diff adds it or its file, or nothing there collects its file), else
"undetermined" with pytest's own words."""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from pathlib import Path

from verify_dag import processes
from verify_dag.models import Diagnosis
from verify_dag.phases.debugger.signature import (
    PreExisting,
    Signature,
    base_signature,
    branch_signature,
    counts,
    defines,
    excerpt,
    hung,
    summary,
    touched,
)
from verify_dag.phases.tester.env.base import Runner
from verify_dag.sandbox import Policy

# pytest's exit 4 when the node id names no file or no test: the test is not at the base.
_NOT_FOUND = re.compile(r"^ERROR: (?:file or directory )?not found: ", re.MULTILINE)
# pytest 8's words when an argument's file is never collected: the match stopped at its
# directory, not at a module (``(no match in any of [<Module test_x.py>])`` is a missing test).
_UNCOLLECTED = re.compile(r"^\(no match in any of \[<(?:Dir|Package) [^\]]*\]\)$", re.MULTILINE)
# pytest's exit codes that mean "the test could not be run as asked" at the base.
_UNRUNNABLE = {
    2: "collection errors at the merge base (or the run was interrupted)",
    3: "pytest hit an internal error at the merge base",
    4: "usage error at the merge base (its options, plugins or configuration differ)",
    5: "no tests collected at the merge base (deselected or ignored there)",
}


def as_file(sig: Signature, file: Diagnosis, scoped: set[str]) -> Diagnosis:
    """The verdict a re-run of another test of the same file gave on the whole file."""
    why = file.evidence.split("\n", 1)[0]
    return Diagnosis(
        failure=sig.key,
        pre_existing=file.pre_existing,
        command=file.command,
        evidence=f"{why} (found re-running {file.failure}, a test of the same file)",
        touched_by_diff=touched(sig, scoped),
    )


def rerun(
    argv: list[str],
    env: dict[str, str],
    wt: Path,
    base: str,
    sig: Signature,
    timeout: float,
    scoped: set[str],
    renamed: dict[str, str],
    at_head: Callable[[str], str | None],
    runner: Runner | None = None,
    limit: float | None = None,
    files: dict[str, Diagnosis] | None = None,
) -> Diagnosis:
    """``sig``'s test re-run at the base; ``at_head`` reads a file of the verified commit.
    ``runner``: tox built the base's env, and the test runs through tox as the suite did.
    ``limit``: the test timed out in the tester's run; pytest-timeout's limit on this re-run.
    ``files``: where a verdict on the test's whole file is kept, by the file's path."""
    assert sig.nodeid is not None
    path, sep, rest = sig.nodeid.partition("::")
    old = renamed.get(path)
    nodeid = f"{old}{sep}{rest}" if old else sig.nodeid
    # --tb=long after the repository's addopts: the crash line `path:line: ExcType` is what the
    # signature is read from, and a repository's --tb=short/line/no would drop it.
    short = ["-o", f"timeout={limit:g}"] if limit is not None else []
    cmd = [*argv, "-q", "-p", "no:cacheprovider", f"--rootdir={wt}", "--tb=long", *short, nodeid]
    run, policy = (runner.command(cmd), runner.policy()) if runner else (cmd, Policy())
    res = processes.run(run, cwd=wt, timeout=timeout, env=env, sandbox=policy)
    via = f", through tox env {runner.name}" if runner else ""
    command = f"{shlex.join(cmd)}  (cwd: {wt}, a scratch worktree of {base}{via})"
    output = "\n".join(t for t in (res.stdout.strip(), res.stderr.strip()) if t)

    def verdict(pre: PreExisting, why: str) -> Diagnosis:
        why = f"{why} (renamed from {old} by the diff)" if old else why
        if limit is not None:
            why = (
                f"{why} (it timed out in the tester's run: re-run under the debugger's short "
                f"limit of {limit:g}s)"
            )
        return Diagnosis(
            failure=sig.key,
            pre_existing=pre,
            command=command,
            evidence=excerpt(why, output),
            touched_by_diff=touched(sig, scoped),
        )

    if res.not_found:
        return verdict("undetermined", f"{cmd[0]} was not found")
    if res.timed_out:
        return verdict("undetermined", f"timed out after {timeout:g}s at the merge base")
    if limit is not None and hung(output):
        # A hang at the base under a short limit and one here under the full limit are not the
        # same observation: the test may be slow at the base, not stuck.
        return verdict("undetermined", f"timed out at the merge base too, after {limit:g}s")
    if res.returncode == 4 and _NOT_FOUND.search(output):
        # A test the diff added is new: it cannot have failed there. pytest finding no such id
        # says no more than that, though: an inherited or generated test, or an id pytest does
        # not accept, is not found either. So "no" only when the diff adds the definition.
        # The name before the parameters: a parameter id may hold "::" itself (test_p[a::b]).
        name = sig.nodeid.split("[", 1)[0].rsplit("::", 1)[-1]
        at_base = wt / (old or path)
        base_text = at_base.read_text(errors="replace") if at_base.is_file() else None
        if defines(at_head(path), name) and not defines(base_text, name):
            return verdict(
                "no",
                "pytest exited 4: the test does not exist at the merge base, so it "
                "cannot have failed there (the diff adds its definition)",
            )
        whole: Diagnosis | None = None
        if base_text is None and at_head(path) is not None:
            whole = verdict(
                "no",
                f"pytest exited 4: {old or path} does not exist at the merge base, so no test "
                "of it can have failed there (the diff adds the file)",
            )
        elif base_text is not None and _UNCOLLECTED.search(output):
            # pytest matched no node for the file itself: at the base, no collector takes it
            # (a plugin that collects such files is not installed or not configured there, or
            # the base's conftest ignores it), so the base's own suite holds none of its tests.
            whole = verdict(
                "no",
                f"pytest exited 4: the merge base's own configuration collects no test from "
                f"{old or path} (pytest matched no node for the file), so none of its tests "
                "can have failed there",
            )
        if whole is not None:
            if files is not None:
                files[path] = whole
            return whole
        return verdict(
            "undetermined",
            f"pytest exited 4: no test {nodeid} at the merge base, and the diff adds no "
            f"definition of {name} in {path}: an inherited or generated test, or an id pytest "
            "does not accept, cannot be looked for there",
        )
    if res.returncode in _UNRUNNABLE:
        return verdict(
            "undetermined", f"pytest exited {res.returncode}: {_UNRUNNABLE[res.returncode]}"
        )
    found = counts(res.stdout)
    if res.returncode == 0:
        if found.get("passed", 0) and not found.get("failed") and not found.get("error"):
            return verdict("no", "passes at the merge base")
        return verdict("undetermined", f"did not pass or fail at the merge base ({summary(found)})")
    if res.returncode != 1:
        return verdict("undetermined", f"pytest exited {res.returncode} at the merge base")
    here_exc, here_msg = branch_signature(sig.findings)
    there_exc, there_msg = base_signature(output)
    if here_exc and there_exc:
        if here_exc == there_exc:
            return verdict("yes", f"fails at the merge base with the same signature: {there_exc}")
        return verdict(
            "undetermined",
            f"fails at the merge base with a different signature: "
            f"{there_exc} there, {here_exc} here",
        )
    if here_msg and here_msg == there_msg:
        return verdict("yes", f"fails at the merge base with the same message: {there_msg}")
    return verdict(
        "undetermined",
        "fails at the merge base too, but the failure signatures could not be matched",
    )
