"""Phase 2-3 outputs: engineer skill context and the discovered TOOLCHAIN."""

from __future__ import annotations

from typing import Literal

from verify_dag.models.base import Frozen

CommandKind = Literal["test", "build", "lint", "typecheck"]


class Command(Frozen):
    kind: CommandKind
    argv: tuple[str, ...]
    source: str  # where it was discovered: "pyproject.toml [tool.pytest.ini_options]", ...
    exists: bool  # the executable was found (which/type check)
    tool: str | None = None  # a ToolSpec name when a structured parser exists (ruff, mypy, pytest)

    def display(self) -> str:
        return " ".join(self.argv)


class Broken(Frozen):
    """A declaration file of the checkout that its parser rejects (verify_dag/declarations.py)."""

    path: str  # repo-relative: pyproject.toml, tox.ini, ...
    line: int  # 1-based, where the parser stopped
    column: int | None
    parser: str  # TOML, INI, Python, YAML
    message: str  # the parser's own words


class Toolchain(Frozen):
    commands: tuple[Command, ...] = ()
    notes: tuple[str, ...] = ()
    # Declaration files that do not parse: a finding each (phases/static), and the reason the
    # tools that read them could not run.
    broken: tuple[Broken, ...] = ()

    def of(self, kind: CommandKind) -> tuple[Command, ...]:
        return tuple(c for c in self.commands if c.kind == kind)

    @property
    def test(self) -> Command | None:
        found = self.of("test")
        return found[0] if found else None


class EngineerContext(Frozen):
    skill_dir: str | None = None  # repo-relative directory of the *-engineer skill
    summary: str = ""
    verification_md: str | None = None
    notes: tuple[str, ...] = ()
    # Extracted from SKILL.md, the reference files it points to and VERIFICATION.md (phase 2).
    references: tuple[str, ...] = ()  # repo-relative reference files that were read
    test_commands: tuple[str, ...] = ()
    build_commands: tuple[str, ...] = ()
    lint_commands: tuple[str, ...] = ()
    start: str | None = None  # shell text that starts the app (START:)
    health: str | None = None  # shell text that exits 0 once the app is up (HEALTH:)
    start_timeout: float | None = None  # seconds to wait for HEALTH (START_TIMEOUT:)
    exercise: tuple[str, ...] = ()  # shell commands that drive the app (EXERCISE:)
    exerciser_gates: tuple[str, ...] = ()  # gate rules as written; CHECKs stay in verification_md
    review_gates: tuple[str, ...] = ()
