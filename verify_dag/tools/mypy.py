"""mypy, run as the project runs it, read from its one-line text output.

The text format is used rather than `--output json`: JSON only exists since mypy 1.11 (we allow
1.10) and is still marked experimental, while `path:line:col: severity: message  [code]` has been
stable for years. Exit codes: 0 clean, 1 errors reported, 2 crash, bad usage or a blocking error
(a syntax error stops type checking, but is still printed in the same format).

What is checked is the project's choice (:mod:`~verify_dag.tools.mypy_config`): its configured
targets, or else the changed files. File names go in an argument file, which mypy's command line
reads (`@file`, one argument a line), so no change is too large to check.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from verify_dag.models.findings import IssueClass
from verify_dag.models.toolchain import Command
from verify_dag.tools import mypy_config
from verify_dag.tools.base import (
    PY_SUFFIXES,
    TYPECHECK_ERROR,
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

_LINE = re.compile(
    r"^(?P<path>[^:\n]+?):(?P<line>\d+):(?:(?P<col>\d+):)? (?P<sev>error|warning|note): "
    r"(?P<msg>.*?)(?:  \[(?P<code>[a-z0-9-]+)\])?$"
)


def argv(inv: Invocation, declared: mypy_config.Declared | None = None) -> list[str] | None:
    """``declared``: the project's own mypy command line, whose options and targets count."""
    base = python_tool_argv("mypy", inv.python)
    if base is None:
        return None
    out = [*base]
    if declared is not None:
        # The project's options first: the output flags below then win where they differ.
        out.extend(declared.options)
        if declared.program == "stubtest":
            out.append(f"--config-file={_stubtest_config(declared, inv.scratch)}")
    # Flags override anything the project's config says about the output shape.
    out += [
        "--show-column-numbers",
        "--show-error-codes",
        "--no-error-summary",
        "--no-color-output",
        "--no-pretty",
        "--hide-error-context",
        # A real cache outside the checkout: the project's own, kept between runs when the
        # runner gives one (mypy re-checks a file whose content hash differs from its entry,
        # and paths differ per checkout, so an entry of another commit is never trusted
        # unchecked), else one thrown away with the run. `--cache-dir=/dev/null` would break
        # settings that need a cache (`num_workers`, incremental mode).
        f"--cache-dir={inv.cache or inv.scratch / 'cache'}",
    ]
    if inv.python is not None:
        # Imports resolve against the project's installed dependencies, not verify-dag's.
        out.append(f"--python-executable={inv.python}")
    config = mypy_config.read_for(inv.workdir, declared)
    if declared is not None and declared.targets:
        # The project's own targets, as its command line names them; none of them here: mypy
        # is not run (select gives it no file), and plain `mypy` would fail and say why.
        out += [t for m in declared.modules for t in ("-m", m)]
        out += [t for p in declared.packages for t in ("-p", p)]
        files = [
            p or "."
            for p in mypy_config.configured(mypy_config.Config(files=declared.files), inv.workdir)[
                0
            ]
        ]
        if not files:
            return out
    elif config.files:
        # The project's own targets; none of them here: plain `mypy` fails and says why.
        files = [p or "." for p in mypy_config.configured(config, inv.workdir)[0]]
        if not files:
            return out
    elif config.targets:
        return out  # packages or modules: the project's own invocation is plain `mypy`
    else:
        files = list(inv.files)
    listing = inv.scratch / "mypy-files.txt"
    # One argument a line; a line starting with "@" would name another argument file, and
    # "./" keeps it a path. A name holding a newline cannot be written so: it goes as it is.
    lines = [f"./{p}" if p.startswith("@") else p for p in files if "\n" not in p]
    listing.write_text("".join(f"{p}\n" for p in lines), encoding="utf-8")
    return [*out, "--", f"@{listing}", *(p for p in files if "\n" in p)]


def _stubtest_config(declared: mypy_config.Declared, scratch: Path) -> str:
    """The configuration stubtest builds with: the one it is given, else mypy's defaults (an
    empty one: stubtest reads no configuration file of its own accord)."""
    if declared.config:
        return declared.config
    empty = scratch / "stubtest-defaults.ini"
    empty.write_text("[mypy]\n", encoding="utf-8")
    return str(empty)


def for_command(command: Command) -> ToolSpec:
    """The spec that runs mypy as ``command`` declares it: the project's own command line
    (targets and options, from tox, a Makefile or CI), or plain SPEC when it was discovered
    from configuration alone."""
    declared = mypy_config.declared(command.argv, command.source)
    if declared is None or declared.argv() == ("mypy",):
        return SPEC

    def build(inv: Invocation) -> list[str] | None:
        return argv(inv, declared)

    def select(workdir: Path, files: Sequence[str]) -> tuple[list[str], str]:
        return mypy_config.select(workdir, files, declared)

    return replace(SPEC, argv=build, select=select)


def merge_lines(lines: Sequence[tuple[tuple[str, ...], str]]) -> tuple[str, ...] | None:
    """The one mypy (or stubtest) command line several declared ones amount to."""
    found = [d for argv, source in lines if (d := mypy_config.declared(argv, source)) is not None]
    one = mypy_config.merged(found)
    return None if one is None else one.argv()


def options_only(argv: tuple[str, ...]) -> tuple[str, ...]:
    found = mypy_config.declared(argv)
    return ("mypy", *found.options) if found is not None else argv


def parse(stdout: str, stderr: str, workdir: Path) -> list[RawFinding]:
    out: list[RawFinding] = []
    for raw in stdout.splitlines():
        m = _LINE.match(raw.rstrip())
        # Notes explain the error before them; they are not findings of their own.
        if m is None or m["sev"] == "note":
            continue
        out.append(
            RawFinding(
                path=relative(m["path"], workdir),
                line=int(m["line"]),
                col=int(m["col"]) if m["col"] else None,
                code=m["code"],
                message=m["msg"],
                severity=m["sev"],
            )
        )
    return out


_CORRECT: IssueClass = "correctness"
_STYLE: IssueClass = "style"
_ENV: IssueClass = "environment"

# The table by error code ("" is every code not listed): the class and what each means. mypy
# runs only where the project declares it, and every error it reports fails the project's own
# type check: 004's "Build/typecheck errors ... are findings with severity 9-10". So every error
# is 9, whatever its class; only a missing dependency, which is this host's environment and not
# the change, stays 3 (mypy's notes explain an error and are no finding of their own).
_ERR = TYPECHECK_ERROR
CODES: dict[str, Rating] = {
    "syntax": Rating(_ERR, _CORRECT, "syntax error: Python would not compile the file"),
    "name-defined": Rating(_ERR, _CORRECT, "a name that is not defined"),
    "attr-defined": Rating(_ERR, _CORRECT, "an attribute or module member that does not exist"),
    "union-attr": Rating(_ERR, _CORRECT, "an attribute one member of a union (often None) lacks"),
    "call-arg": Rating(_ERR, _CORRECT, "a call with missing, extra or unknown arguments"),
    "arg-type": Rating(_ERR, _CORRECT, "an argument of the wrong type"),
    "call-overload": Rating(_ERR, _CORRECT, "a call no overload accepts"),
    "return-value": Rating(_ERR, _CORRECT, "a return value of the wrong type"),
    "return": Rating(_ERR, _CORRECT, "a missing return statement"),
    "assignment": Rating(_ERR, _CORRECT, "an assignment of the wrong type"),
    "index": Rating(_ERR, _CORRECT, "an index the value does not support"),
    "operator": Rating(_ERR, _CORRECT, "an operand the operator does not support"),
    "override": Rating(_ERR, _CORRECT, "an override incompatible with its base class"),
    "abstract": Rating(_ERR, _CORRECT, "an abstract class instantiated"),
    "misc": Rating(_ERR, _CORRECT, "mypy's other type errors"),
    "": Rating(_ERR, _CORRECT, "any other error code: a type error"),
    "no-redef": Rating(_ERR, _CORRECT, "a name defined twice"),
    "possibly-undefined": Rating(_ERR, _CORRECT, "a name that may be unbound on some path"),
    "comparison-overlap": Rating(_ERR, _CORRECT, "a comparison that is always false"),
    "truthy-bool": Rating(_ERR, _CORRECT, "a value that is always true in a condition"),
    "unreachable": Rating(_ERR, _CORRECT, "code mypy proves unreachable"),
    "redundant-expr": Rating(_ERR, _STYLE, "a redundant condition"),
    "var-annotated": Rating(_ERR, _STYLE, "a variable mypy needs an annotation for"),
    "no-any-return": Rating(_ERR, _STYLE, "returning Any where a type is declared"),
    "no-any-unimported": Rating(_ERR, _STYLE, "a type that became Any through an import"),
    "no-untyped-def": Rating(_ERR, _STYLE, "a function without annotations"),
    "no-untyped-call": Rating(_ERR, _STYLE, "a call to an unannotated function"),
    "untyped-decorator": Rating(_ERR, _STYLE, "an unannotated decorator"),
    "type-arg": Rating(_ERR, _STYLE, "a generic type without its parameters"),
    "unused-ignore": Rating(_ERR, _STYLE, "a `# type: ignore` that ignores nothing"),
    "ignore-without-code": Rating(_ERR, _STYLE, "a `# type: ignore` without an error code"),
    "redundant-cast": Rating(_ERR, _STYLE, "a cast to the type the value already has"),
    "import-not-found": Rating(3, _ENV, "a missing dependency: mypy cannot find the module"),
    "import-untyped": Rating(3, _ENV, "a dependency without type information or stubs"),
    "import": Rating(3, _ENV, "a missing dependency (older mypy versions)"),
}

_MISSING = frozenset({"import-not-found", "import-untyped", "import"})
# What mypy reports because a module it could not import is Any: strict settings make errors of
# using that Any. mypy already treats the missing module as Any (so nothing of its use is
# checked); what it then says about the Any is about the environment, not the change.
_FROM_ANY = frozenset(
    {"no-any-return", "no-any-unimported", "no-untyped-call", "untyped-decorator"}
)
_ANY_MISC = re.compile(r'\(has type "Any"\)|Untyped decorator|contains "Any"|becomes "Any"')
_STAR = re.compile(r"\bimport\s+\*")
_QUOTED = re.compile(r'"([^"]+)"')
_LISTED = 5  # consequences named in the missing-dependency finding's message


def rate(f: RawFinding) -> tuple[int, IssueClass]:
    row = CODES.get(f.code or "", CODES[""])
    if f.severity == "warning":  # does not fail the type check
        return min(row.severity, 3), row.issue_class
    return row.severity, row.issue_class


def settle(kept: list[RawFinding], everything: list[RawFinding], workdir: Path) -> list[RawFinding]:
    """Missing imports and what follows only from them become ONE missing-dependency finding.

    The one finding sits on the first missing import on a changed line (else on the first
    consequence there) and names the modules and the consequences it stands for. Consequences:
    the Any codes above, and undefined names in a file that star-imports a missing module.
    """
    missing = [r for r in everything if r.code in _MISSING]
    if not missing:
        return kept
    starred = {r.path for r in missing if _STAR.search(_line(workdir, r))}

    def follows(r: RawFinding) -> bool:
        if r.code in _FROM_ANY or (r.code == "misc" and _ANY_MISC.search(r.message)):
            return True
        return r.code == "name-defined" and r.path in starred

    imports = [r for r in kept if r.code in _MISSING]
    after = [r for r in kept if r.code not in _MISSING and follows(r)]
    rest = [r for r in kept if r.code not in _MISSING and not follows(r)]
    if not imports and not after:
        return kept
    modules = list(dict.fromkeys(m[1] for r in missing if (m := _QUOTED.search(r.message))))
    shown = ", ".join(f'"{m}"' for m in modules[:_LISTED])
    more = f" and {len(modules) - _LISTED} more" if len(modules) > _LISTED else ""
    message = (
        f"missing dependency: {shown}{more} cannot be imported where mypy ran (not installed "
        "there, or without type information); mypy treats them as Any"
    )
    if after:
        listed = "; ".join(f"{r.path}:{r.line} [{r.code}] {r.message}" for r in after[:_LISTED])
        extra = f"; and {len(after) - _LISTED} more" if len(after) > _LISTED else ""
        message += f". {len(after)} finding(s) follow only from that: {listed}{extra}"
    anchor = (imports or after)[0]
    one = RawFinding(
        path=anchor.path,
        line=anchor.line,
        col=anchor.col,
        code=anchor.code if imports else "import-not-found",
        message=message,
        severity="error",
    )
    return [one, *rest]


def _line(workdir: Path, r: RawFinding) -> str:
    try:
        lines = (workdir / r.path).read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return ""
    return lines[r.line - 1] if r.line and r.line <= len(lines) else ""


SPEC = ToolSpec(
    name="mypy",
    argv=argv,
    ok_exit_codes=frozenset({0, 1}),
    parse=parse,
    rate=rate,
    suffixes=PY_SUFFIXES,
    blocking_rules=frozenset({"syntax"}),
    argfile=True,
    own_cache=True,
    # Not read_only: with `num_workers` mypy's workers write their status files into the
    # working directory (.mypy_worker.*.json).
    select=mypy_config.select,
    settle=settle,
    discovery=Discovery(
        kind="typecheck",
        argv=("mypy",),
        module="mypy",
        config_files=("mypy.ini", ".mypy.ini"),
        ini_sections=("mypy",),
    ),
    package="mypy",
    # stubtest, mypy's stub checker, type-checks its modules with mypy.
    declarations=Declarations(
        programs=("mypy", "stubtest"),
        modules=(("mypy", "mypy"), ("mypy.stubtest", "stubtest")),
        spec=for_command,
        merge=merge_lines,
        options_only=options_only,
    ),
    mirror=Mirror(
        repos=("pre-commit/mirrors-mypy",),
        hooks=("mypy",),
        entry=("mypy",),
        args=("--ignore-missing-imports",),
    ),
)
