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


def test_only_the_documented_globs_match() -> None:
    paths = [
        "tools/skills/api-engineer/SKILL.md",  # */skills/*-engineer/
        "a/b/skills/deep-engineer/SKILL.md",  # too deep: one <dir> only (docs/verify.md)
        ".agents/skills/x-engineer/README.md",  # no SKILL.md
    ]
    assert engineer.find_skill_dirs(paths) == ["tools/skills/api-engineer"]


SKILL_MD = """\
# shop engineer

Read [testing notes](TESTING.md) and references/arch.md before changing the API.
See also ../../../README.md and https://example.com/x.md (never read: outside the skill).

## Build
```bash
pip install -e . \\
    --no-deps
```

## Lint and type check
Lint: `ruff check .`
- **Typecheck:** mypy src

## Running the app
START: python -m shop --port 8000
HEALTH: curl -fsS http://127.0.0.1:8000/health

## Notes
Test: `make smoke`
Build: prose after a colon is not a command unless it is inline code
"""

TESTING_MD = """\
# Testing

```console
$ pytest -q tests/unit
3 passed
$ pytest -q tests/api
```

```python
print("not a shell block")
```
"""

VERIFICATION_MD = """\
## Exerciser Gates
- Saved records can be reloaded
  CHECK: curl -fsS http://127.0.0.1:8000/records/1
  EXPECT: output contains "id"
- Checkout totals match the cart
## Review Gates
- Tenant queries remain scoped
EXERCISE: curl -fsS -X POST http://127.0.0.1:8000/records -d '{"x":1}'
START_TIMEOUT: 20
"""


def test_extracts_commands_app_and_gates(repo: Repo) -> None:
    base = ".claude/skills/shop-engineer"
    repo.write(f"{base}/SKILL.md", SKILL_MD)
    repo.write(f"{base}/TESTING.md", TESTING_MD)
    repo.write(f"{base}/references/arch.md", "## Test\n```sh\nmake test-arch\n```\n")
    repo.write(f"{base}/UNLINKED.md", "## Testing\n```\nnever read\n```\n")
    repo.write(f"{base}/VERIFICATION.md", VERIFICATION_MD)
    repo.write("README.md", "## Testing\n```\noutside the skill\n```\n")
    ctx = engineer.run(str(repo.path), repo.commit())
    assert ctx.references == (f"{base}/TESTING.md", f"{base}/references/arch.md")
    assert ctx.test_commands == (
        "make smoke",
        "pytest -q tests/unit",
        "pytest -q tests/api",
        "make test-arch",
    )
    assert ctx.build_commands == ("pip install -e . --no-deps",)
    assert ctx.lint_commands == ("ruff check .", "mypy src")
    # START and HEALTH come from SKILL.md; VERIFICATION.md adds the exercise and the wait.
    assert ctx.start == "python -m shop --port 8000"
    assert ctx.health == "curl -fsS http://127.0.0.1:8000/health"
    assert ctx.start_timeout is None  # a wait only counts with the START it belongs to
    assert ctx.exercise == ("curl -fsS -X POST http://127.0.0.1:8000/records -d '{\"x\":1}'",)
    assert ctx.exerciser_gates == (
        "Saved records can be reloaded",
        "Checkout totals match the cart",
    )
    assert ctx.review_gates == ("Tenant queries remain scoped",)
    assert ctx.notes == ()


def test_verification_md_declarations_win(repo: Repo) -> None:
    base = "tools/skills/api-engineer"
    repo.write(f"{base}/SKILL.md", "START: python old.py\nHEALTH: old-health\n")
    repo.write(f"{base}/VERIFICATION.md", "START: python new.py\nSTART_TIMEOUT: 12s\n")
    ctx = engineer.run(str(repo.path), repo.commit())
    assert (ctx.start, ctx.health, ctx.start_timeout) == ("python new.py", "old-health", 12.0)
    assert ctx.exerciser_gates == () and ctx.review_gates == ()


def test_referenced_files_stay_inside_the_skill_dir() -> None:
    files = [
        "s/skills/x-engineer/SKILL.md",
        "s/skills/x-engineer/A.md",
        "s/B.md",
        "s/skills/x-engineer/VERIFICATION.md",
    ]
    text = "[a](./A.md) [b](../../B.md) [c](/etc/C.md) VERIFICATION.md A.md"
    assert engineer.referenced_files("s/skills/x-engineer", text, files) == [
        "s/skills/x-engineer/A.md"
    ]
