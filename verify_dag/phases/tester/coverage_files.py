"""What coverage.py leaves after the tester's run: the data files of a parallel run combined, and
the scoped files' coverage as Cobertura XML. Both run the suite environment's own coverage.py,
sandboxed, writing only next to the data.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from verify_dag import processes
from verify_dag.models.scope import Scope
from verify_dag.sandbox import Policy

# Linux refuses any single argument over 128 KiB (MAX_ARG_STRLEN) with E2BIG; an --include of a
# few thousand paths is one such argument. Past this, coverage reports every measured file and
# the caller keeps the scoped ones: slower, never a suite that silently did not count.
INCLUDE_MAX = 64 * 1024


def include_option(paths: list[str]) -> list[str]:
    """``--include`` narrowed to ``paths``, or nothing when it cannot be said safely: a name
    with a comma or a glob character would be read as a pattern list, and a list that long
    would not fit in one argument."""
    if not paths or any(c in p for p in paths for c in ",*?["):
        return []
    option = f"--include={','.join(paths)}"
    return [option] if len(option.encode()) <= INCLUDE_MAX else []


def combine(python: str, data_file: Path, workdir: Path, env: dict[str, str]) -> None:
    """One data file from the per-process ones, when the suite wrote several."""
    if not data_file.is_file() and list(data_file.parent.glob(data_file.name + ".*")):
        # A repository that configures `parallel = true` gets one file per process.
        processes.run(
            [python, "-m", "coverage", "combine", f"--data-file={data_file}"],
            cwd=workdir,
            timeout=300,
            env=env,
            sandbox=Policy(writable=(data_file.parent,)),
        )


def cobertura(
    python: str, data_file: Path, xml_file: Path, workdir: Path, env: dict[str, str], scope: Scope
) -> None:
    """The coverage of the scoped files as Cobertura XML, written by the coverage.py that
    measured it: what diff-cover reads to re-check qa's changed-line figure, and no more (it only
    looks at changed files), so it stays small enough to keep with the run. Run from the
    checkout's root, so file names in it are repository-relative, as diff-cover matches them
    against `git diff`. Best effort: nothing is written without data."""
    if not data_file.is_file():
        return
    xml_file.parent.mkdir(parents=True, exist_ok=True)
    scoped = [f.path for f in scope.included if f.status != "deleted" and not f.binary]
    # --include patterns without a wildcard are taken relative to the working directory.
    include = include_option(scoped)
    # -i: files that were measured but are gone (generated, temporary) must not sink the report.
    # Written next to the data, then moved: the sandboxed coverage.py never sees the store.
    written = data_file.parent / "coverage.xml"
    processes.run(
        [
            python,
            "-m",
            "coverage",
            "xml",
            "-i",
            f"--data-file={data_file}",
            *include,
            "-o",
            str(written),
        ],
        cwd=workdir,
        timeout=300,
        env=env,
        sandbox=Policy(writable=(data_file.parent,)),
    )
    if written.is_file():
        shutil.move(written, xml_file)
