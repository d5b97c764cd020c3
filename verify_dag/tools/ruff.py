"""ruff check, read from its JSON output.

Exit codes (docs.astral.sh/ruff/linter/#exit-codes): 0 no violations, 1 violations found,
2 abnormal termination (invalid configuration or CLI options, internal error). We do not pass
--exit-zero: it would still exit 2 on a crash, but 0/1 is useful evidence that the run was whole.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from verify_dag.models.findings import IssueClass
from verify_dag.models.toolchain import Command
from verify_dag.tools.base import (
    PY_SUFFIXES,
    Declarations,
    Discovery,
    Invocation,
    Mirror,
    Rating,
    RawFinding,
    ToolSpec,
    python_tool_argv,
    relative,
)


def argv(inv: Invocation, declared: Declared | None = None) -> list[str] | None:
    """``declared``: the project's own `ruff check` command line, whose options count."""
    base = python_tool_argv("ruff", inv.python)
    if base is None:
        return None
    # --no-fix: a project may set `fix = true`, and verification must never edit the checkout.
    # --force-exclude: files we name explicitly still honour the project's exclude settings.
    # Ruff reads no argument files, so the runner chunks the file list instead.
    return [
        *base,
        "check",
        *(declared.options if declared is not None else ()),
        "--output-format=json",
        "--no-cache",
        "--no-fix",
        "--force-exclude",
        "--",
        *inv.files,
    ]


# `ruff check` options that decide what is reported (the rules, their files, the settings
# they read), passed on from the project's command line; the others are about output, caches
# and fixing, which the run sets itself. Those with a value, to tell it from a target.
_PASSED = frozenset(
    {
        *("--select", "--ignore", "--extend-select", "--extend-ignore", "--per-file-ignores"),
        *("--extend-per-file-ignores", "--target-version", "--exclude", "--extend-exclude"),
        *("--config", "--line-length", "--extension", "--dummy-variable-rgx", "--preview"),
        *("--no-preview", "--respect-gitignore", "--no-respect-gitignore", "--isolated"),
        "--ignore-noqa",
    }
)
_VALUED = frozenset(
    {
        *("--select", "--ignore", "--extend-select", "--extend-ignore", "--per-file-ignores"),
        *("--extend-per-file-ignores", "--target-version", "--exclude", "--extend-exclude"),
        *("--config", "--line-length", "--extension", "--dummy-variable-rgx"),
        *("--output-format", "--output-file", "-o", "--fixable", "--unfixable"),
        *("--extend-fixable", "--extend-unfixable", "--cache-dir", "--stdin-filename"),
        "--color",
    }
)


@dataclass(frozen=True)
class Declared:
    """The project's own `ruff check` command line (or the union of several)."""

    options: tuple[str, ...] = ()  # one token each (`--select=E,F`), passed on
    targets: tuple[str, ...] = ()  # paths as written; () is the whole checkout, as `ruff check`
    source: str = ""

    def argv(self) -> tuple[str, ...]:
        """As a command line :func:`declared` reads back (the toolchain's Command.argv)."""
        return ("ruff", "check", *self.options, *self.targets)

    def covers(self, path: str) -> bool:
        return not self.targets or any(_under(path, t) for t in self.targets)


def declared(argv: Sequence[str], source: str = "") -> Declared | None:
    """A `ruff check ...` command line (global options may come before `check`) as its
    targets and the options that configure the check; None when it is no `ruff check` or
    reads its code from stdin."""
    if not argv or argv[0] != "ruff":
        return None
    tokens = list(argv[1:])
    options: list[str] = []
    targets: list[str] = []
    command = False
    while tokens:
        tok = tokens.pop(0)
        if tok == "--":
            targets.extend(tokens)
            break
        if not tok.startswith("-"):
            if not command:
                if tok != "check":
                    return None  # `ruff format`, `ruff rule`, ...
                command = True
            else:
                targets.append(tok)
            continue
        if tok == "-":
            return None
        name, eq, value = tok.partition("=")
        if name in _VALUED and not eq:
            value = tokens.pop(0) if tokens else ""
        if name in ("--stdin-filename", "-h", "--help", "-V", "--version"):
            return None
        if name in _PASSED:
            options.append(f"{name}={value}" if name in _VALUED else name)
    if not command:
        return None
    whole = not targets or any(_norm(t) == "" for t in targets)
    return Declared(tuple(options), () if whole else tuple(targets), source)


def merged(invocations: Sequence[Declared]) -> Declared | None:
    """One Declared for several: the union of their targets (one of them on the whole
    checkout makes it the whole), with the options they all share."""
    if not invocations:
        return None
    first = invocations[0]
    options = tuple(o for o in first.options if all(o in d.options for d in invocations[1:]))
    whole = any(not d.targets for d in invocations)
    targets = () if whole else tuple(dict.fromkeys(t for d in invocations for t in d.targets))
    sources = "; ".join(dict.fromkeys(d.source for d in invocations if d.source))
    return Declared(options, targets, sources)


def merge_lines(lines: Sequence[tuple[tuple[str, ...], str]]) -> tuple[str, ...] | None:
    """The one `ruff check` command line several declared ones amount to."""
    one = merged([d for argv, source in lines if (d := declared(argv, source)) is not None])
    return None if one is None else one.argv()


def options_only(argv: tuple[str, ...]) -> tuple[str, ...]:
    found = declared(argv)
    return ("ruff", "check", *found.options) if found is not None else argv


def select(declared: Declared, files: Sequence[str]) -> tuple[list[str], str]:
    """The changed files inside the project's ruff targets, and a remark on the rest."""
    inside = [p for p in files if declared.covers(p)]
    left = len(files) - len(inside)
    where = f"{', '.join(declared.targets)}, {declared.source}"
    remark = f"{left} changed file(s) outside ruff's targets ({where}) not checked"
    return inside, remark if left else ""


def for_command(command: Command) -> ToolSpec:
    """The spec that runs ruff as ``command`` declares it, or plain SPEC when it was
    discovered from configuration alone."""
    found = declared(command.argv, command.source)
    if found is None or found.argv() == ("ruff", "check"):
        return SPEC
    decl = found

    def build(inv: Invocation) -> list[str] | None:
        return argv(inv, decl)

    def choose(workdir: Path, files: Sequence[str]) -> tuple[list[str], str]:
        return select(decl, files)

    return replace(SPEC, argv=build, select=choose)


def _norm(target: str) -> str:
    text = Path(target).as_posix()
    text = "" if text == "." else text
    return text[2:] if text.startswith("./") else text.rstrip("/")


def _under(path: str, target: str) -> bool:
    t = _norm(target)
    return not t or path == t or path.startswith(t + "/")


def parse(stdout: str, stderr: str, workdir: Path) -> list[RawFinding]:
    start = stdout.find("[")
    if start < 0:
        return []
    try:
        items: Any = json.loads(stdout[start:])
    except json.JSONDecodeError:
        return []
    if not isinstance(items, list):
        return []
    out: list[RawFinding] = []
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("filename"), str):
            continue
        loc = item.get("location")
        loc = loc if isinstance(loc, dict) else {}
        out.append(
            RawFinding(
                path=relative(item["filename"], workdir),
                line=loc.get("row") if isinstance(loc.get("row"), int) else None,
                col=loc.get("column") if isinstance(loc.get("column"), int) else None,
                # ruff 0.5+ reports syntax errors with code null (older) or "invalid-syntax"
                # (newer).
                code=item.get("code") or "invalid-syntax",
                message=str(item.get("message", "")),
                severity=str(item.get("severity") or "error"),
                url=item["url"] if isinstance(item.get("url"), str) and item["url"] else None,
            )
        )
    return out


_CORRECT: IssueClass = "correctness"
_STYLE: IssueClass = "style"

# The severity table: a rule code's longest matching prefix decides ("" matches every code; a
# prefix of letters only matches that whole linter name).
# 7 is code that fails when it runs (it does not compile, a name is not defined, a format call
# raises); 5 a probable bug; 2-3 style, upgrades and completeness, which never fail at run time.
RULES: dict[str, Rating] = {
    "invalid-syntax": Rating(7, _CORRECT, "syntax error: Python refuses to compile the file"),
    "E9": Rating(7, _CORRECT, "syntax or read error (E999, E902): the file cannot be compiled"),
    "F7": Rating(7, _CORRECT, "a statement the compiler rejects (break outside a loop, ...)"),
    "F82": Rating(7, _CORRECT, "undefined name, in `__all__` too, or used before assignment"),
    "F50": Rating(7, _CORRECT, "a %-format that raises (wrong count or key, bad directive)"),
    "F504": Rating(5, _CORRECT, "a %-format's unused named argument (ignored, not raised)"),
    "F52": Rating(7, _CORRECT, "a `.format` call that raises (missing argument, bad string)"),
    "F522": Rating(5, _CORRECT, "a `.format` call's unused named argument (ignored)"),
    "F523": Rating(5, _CORRECT, "a `.format` call's unused positional argument (ignored)"),
    "F": Rating(5, _CORRECT, "other pyflakes: unused imports and variables, redefinitions"),
    "PLE": Rating(5, _CORRECT, "pylint errors: probable bugs"),
    "B": Rating(4, _CORRECT, "bugbear: likely bugs, often deliberate"),
    "S": Rating(4, "security", "bandit: a pattern that needs a security reading"),
    "ANN": Rating(2, _STYLE, "annotation completeness"),
    "UP": Rating(2, _STYLE, "pyupgrade: newer syntax for the same code"),
    "I": Rating(2, _STYLE, "import order"),
    "D": Rating(2, _STYLE, "docstring conventions"),
    "E501": Rating(2, _STYLE, "line length"),
    "": Rating(3, _STYLE, "every other rule: style"),
}


def rating(code: str | None) -> Rating:
    """The table row of ``code``: its longest matching prefix."""
    code = code or "invalid-syntax"
    return RULES[max((p for p in RULES if _matches(p, code)), key=len)]


def _matches(prefix: str, code: str) -> bool:
    """A prefix of letters is a whole linter's name: "S" is bandit (S101), not flake8-simplify
    (SIM201); "F" is pyflakes, not flake8-boolean-trap (FBT001)."""
    if not code.startswith(prefix):
        return False
    rest = code[len(prefix) :]
    return not prefix or not rest or prefix[-1].isdigit() or rest[0].isdigit()


def rate(f: RawFinding) -> tuple[int, IssueClass]:
    row = rating(f.code)
    return row.severity, row.issue_class


SPEC = ToolSpec(
    name="ruff",
    argv=argv,
    ok_exit_codes=frozenset({0, 1}),
    parse=parse,
    rate=rate,
    suffixes=PY_SUFFIXES,
    per_file=True,
    read_only=True,
    discovery=Discovery(
        kind="lint",
        argv=("ruff", "check"),
        module="ruff",
        config_files=("ruff.toml", ".ruff.toml"),
        default_source="Python files (ruff default rules)",
    ),
    package="ruff",
    declarations=Declarations(
        programs=("ruff",),
        modules=(("ruff", "ruff"),),
        spec=for_command,
        merge=merge_lines,
        options_only=options_only,
    ),
    mirror=Mirror(
        repos=("astral-sh/ruff-pre-commit", "charliermarsh/ruff-pre-commit"),
        hooks=("ruff", "ruff-check"),
        entry=("ruff", "check", "--force-exclude"),
    ),
)
