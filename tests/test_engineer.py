"""Phase 2: the engineer skill is found in the commit being verified."""

from __future__ import annotations

from conftest import Repo

from verify_dag.phases import engineer


def test_finds_engineer_skill_and_verification(repo: Repo) -> None:
    repo.write(".claude/skills/shop-engineer/SKILL.md", "# shop engineer\nRun `make test`.\n")
    repo.write(".claude/skills/shop-engineer/VERIFICATION.md", "## Exerciser Gates\n- saves\n")
    repo.write(".claude/skills/other/SKILL.md", "not an engineer\n")
    ctx = engineer.run(str(repo.path), repo.commit())
    assert ctx.skill_dir == ".claude/skills/shop-engineer"
    assert "Run `make test`." in ctx.summary
    assert ctx.verification_md is not None and "Exerciser Gates" in ctx.verification_md


def test_no_engineer_skill(repo: Repo) -> None:
    repo.write("README.md", "hi\n")
    ctx = engineer.run(str(repo.path), repo.commit())
    assert ctx.skill_dir is None and ctx.verification_md is None
    assert ctx.summary.startswith("No engineer skill found")


def test_only_the_seed_globs_match() -> None:
    paths = [
        "tools/skills/api-engineer/SKILL.md",   # */skills/*-engineer/
        "a/b/skills/deep-engineer/SKILL.md",    # too deep: not the seed's glob
        ".agents/skills/x-engineer/README.md",  # no SKILL.md
    ]
    assert engineer.find_skill_dirs(paths) == ["tools/skills/api-engineer"]
