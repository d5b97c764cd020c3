"""Phase 2: find the repository's ``*-engineer`` skill and its VERIFICATION.md.

Read straight from the commit being verified (no checkout needed): the seed's glob is
``.*/skills/*-engineer/`` or ``*/skills/*-engineer/`` at the top of the repository.
"""

from __future__ import annotations

import fnmatch

from verify_dag import git
from verify_dag.models import EngineerContext

_GLOBS = (".*/skills/*-engineer/SKILL.md", "*/skills/*-engineer/SKILL.md")
SUMMARY_LINES = 40


def find_skill_dirs(paths: list[str]) -> list[str]:
    dirs = {
        p.rsplit("/", 1)[0]
        for p in paths
        if p.count("/") == 3 and any(fnmatch.fnmatchcase(p, g) for g in _GLOBS)
    }
    return sorted(dirs)


def run(repo: str, commit: str) -> EngineerContext:
    dirs = find_skill_dirs(git.list_files(repo, commit))
    if not dirs:
        return EngineerContext(
            summary="No engineer skill found — toolchain discovered via exploration")
    skill_dir = dirs[0]
    notes = []
    if len(dirs) > 1:
        notes.append(f"several engineer skills found, using {skill_dir}: {', '.join(dirs)}")
    skill_md = git.read_file(repo, commit, f"{skill_dir}/SKILL.md") or ""
    summary = "\n".join(skill_md.splitlines()[:SUMMARY_LINES]).strip()
    verification = git.read_file(repo, commit, f"{skill_dir}/VERIFICATION.md")
    return EngineerContext(skill_dir=skill_dir, summary=summary, verification_md=verification,
                           notes=tuple(notes))
