"""Any other linter, run exactly as discovered (`make lint`, `npm run lint`, `cargo clippy`, ...).

Such commands analyse the whole project, so their output is parsed for the two shapes nearly every
linter and compiler prints, and the static phase keeps what falls on scoped lines:

    path:line:col: message        path:line: message        (gcc, flake8, pylint, clippy, go vet)
    path(line,col): message                                   (tsc, MSBuild)

Their exit codes are not documented in one place: 0 means clean, anything else may be findings or
a failure to run, which the static phase tells apart by whether any diagnostic could be parsed.
"""

from __future__ import annotations

import re
from pathlib import Path

from verify_dag.models.findings import IssueClass
from verify_dag.models.toolchain import Command
from verify_dag.tools.base import (
    PY_SUFFIXES,
    TYPECHECK_ERROR,
    Invocation,
    Rater,
    RawFinding,
    ToolSpec,
    relative,
    resolve_argv,
)

_COLON = re.compile(
    r"^(?P<path>[^\s:()][^:()]*?):(?P<line>\d+)(?::(?P<col>\d+))?:\s*(?P<msg>\S.*)$"
)
_PAREN = re.compile(r"^(?P<path>[^\s:()][^()]*?)\((?P<line>\d+),(?P<col>\d+)\):\s*(?P<msg>\S.*)$")
_SEVERITY = re.compile(
    r"^(?P<sev>error|warning|note|info|fatal error)(?:\[(?P<code>[^\]]+)\])?"
    r"(?:\s+(?P<code2>[A-Z]+\d+))?\s*:\s*(?P<rest>.*)$",
    re.IGNORECASE,
)
# ESLint "stylish":   12:5  error  'x' is assigned a value but never used  no-unused-vars
_STYLISH = re.compile(
    r"^\s+(?P<line>\d+):(?P<col>\d+)\s+(?P<sev>error|warning)\s+(?P<msg>.+?)"
    r"(?:\s{2,}(?P<code>[\w@/-]+))?\s*$",
    re.IGNORECASE,
)
_CODE = re.compile(r"^(?P<code>[A-Z]{1,4}\d{2,5})[:\s]\s*(?P<rest>.*)$")
_PREFIX = re.compile(r"^(?:go )?vet:\s+")  # go vet's type errors: "vet: ./a.go:3:2: undefined: x"
# `go vet` and compilers prefix their lines with a tool name; these look like paths but are not.
_NOT_PATHS = frozenset({"make", "npm", "error", "warning", "note", "vet", "go", "cargo"})

_JS = frozenset(
    {".js", ".jsx", ".mjs", ".cjs", ".ts", ".tsx", ".mts", ".cts", ".vue", ".svelte", ".astro"}
)
# Which files a well-known runner can possibly report on; others (make, CI scripts) may run
# anything, so they apply to every scoped file.
_SUFFIXES_BY_RUNNER: dict[str, frozenset[str]] = {
    "cargo": frozenset({".rs"}),
    "go": frozenset({".go"}),
    "golangci-lint": frozenset({".go"}),
    "npm": _JS,
    "npx": _JS,
    "yarn": _JS,
    "pnpm": _JS,
    "eslint": _JS,
    "tsc": _JS,
    "flake8": PY_SUFFIXES,
    "pylint": PY_SUFFIXES,
    "pyright": PY_SUFFIXES,
}


def parse_line(text: str, workdir: Path) -> RawFinding | None:
    text = _PREFIX.sub("", text.rstrip())
    m = _COLON.match(text) or _PAREN.match(text)
    if m is None or m["path"].strip().lower() in _NOT_PATHS or "://" in text[: m.end("path") + 3]:
        return None
    msg, code, sev = m["msg"], None, ""
    s = _SEVERITY.match(msg)
    if s is not None:
        sev, msg = s["sev"].lower(), s["rest"]
        code = s["code"] or s["code2"]
    c = _CODE.match(msg)
    if code is None and c is not None:
        code, msg = c["code"], c["rest"]
    return RawFinding(
        path=relative(m["path"].strip(), workdir),
        line=int(m["line"]),
        col=int(m["col"]) if m["col"] else None,
        code=code,
        message=msg.strip(),
        severity=sev,
    )


def parse(stdout: str, stderr: str, workdir: Path) -> list[RawFinding]:
    out: list[RawFinding] = []
    current: str | None = None  # the file heading an ESLint "stylish" block
    # Many tools (clippy, go vet, compilers) print diagnostics on stderr.
    for text in (*stdout.splitlines(), *stderr.splitlines()):
        found = parse_line(text, workdir)
        if found is not None:
            out.append(found)
            continue
        block = _STYLISH.match(text)
        if block is not None and current is not None:
            out.append(
                RawFinding(
                    path=current,
                    line=int(block["line"]),
                    col=int(block["col"]),
                    code=block["code"],
                    message=block["msg"].strip(),
                    severity=block["sev"].lower(),
                )
            )
        elif text.strip() and not text[0].isspace():
            # ESLint's default formatter prints each file on its own line before its problems.
            heading = text.strip()
            current = relative(heading, workdir) if (workdir / heading).is_file() else None
    return out


def rater(kind: str) -> Rater:
    def rate(f: RawFinding) -> tuple[int, IssueClass]:
        """Without a rule catalogue: a declared type checker's errors 9 (they fail the project's
        own type check: 004's "Build/typecheck errors ... severity 9-10"), a linter's errors 5,
        anything else (warnings, notes) 3; a type checker's are correctness."""
        error = f.severity in ("error", "fatal error")
        if kind == "typecheck":
            return (TYPECHECK_ERROR if error else 3), "correctness"
        return (5 if error else 3), "style"

    return rate


def spec_for(command: Command) -> ToolSpec:
    """A spec for a discovered command; its argv ignores the file list (it runs as discovered)."""
    run_argv = resolve_argv(command.argv)

    def argv(inv: Invocation) -> list[str] | None:
        return run_argv

    runner = Path(command.argv[0]).name if command.argv else ""
    if len(command.argv) >= 3 and command.argv[1] == "-m":
        runner = command.argv[2]
    return ToolSpec(
        name=command.display(),
        argv=argv,
        ok_exit_codes=frozenset({0}),
        parse=parse,
        rate=rater(command.kind),
        suffixes=_SUFFIXES_BY_RUNNER.get(runner, frozenset()),
        takes_files=False,
        findings_explain_exit=True,
    )
