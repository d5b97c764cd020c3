"""Phase 4 static analysis: real ruff and mypy on small projects, and the generic parser."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from verify_dag.models.findings import SkillOutcome
from verify_dag.models.scope import FileChange, LineRange, Scope
from verify_dag.models.toolchain import Command, Toolchain
from verify_dag.phases import static
from verify_dag.phases.triage import discover
from verify_dag.tools import REGISTRY, generic, mypy, ruff
from verify_dag.tools.base import Discovery, RawFinding, ToolSpec


def write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def scope_of(*changes: FileChange) -> Scope:
    return Scope(mode="branch", new_commit="0" * 40, included=changes)


def modified(path: str, *lines: int) -> FileChange:
    return FileChange(
        path=path, status="modified", lines=tuple(LineRange(start=n, end=n) for n in lines)
    )


def lint_command(*argv: str) -> Toolchain:
    return Toolchain(commands=(Command(kind="lint", argv=argv, source="test", exists=True),))


def run(scope: Scope, tc: Toolchain, root: Path, timeout: float = 60) -> SkillOutcome:
    return static.run(scope, tc, root, timeout)


def test_ruff_reports_added_line_and_not_the_unchanged_one(tmp_path: Path) -> None:
    # Rules pinned: ruff's default selection differs between versions.
    write(
        tmp_path,
        {
            "ruff.toml": '[lint]\nselect = ["F"]\n',
            "a.py": "import os\n\nimport sys\n\nprint(undefined_name)\n",
        },
    )
    out = run(scope_of(modified("a.py", 3, 5)), discover(tmp_path), tmp_path)
    assert out.status == "COMPLETED" and out.skill == "static-analysis"
    by_rule = {f.rule: f for f in out.findings}
    assert set(by_rule) == {"F401", "F821"}  # `import os` on line 1 is not this change's
    unused = by_rule["F401"]
    assert unused.title == "ruff F401: `sys` imported but unused"
    assert (unused.severity, unused.issue_class, unused.tool) == (5, "correctness", "ruff")
    assert unused.location is not None and unused.location.path == "a.py"
    assert unused.location.line == 3
    assert by_rule["F821"].severity == 7
    assert out.notes == "ruff (2 findings, 1 outside scoped lines not reported)"


def test_style_rules_are_severity_3(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "pyproject.toml": '[tool.ruff.lint]\nselect = ["E711"]\n',
            "b.py": "x = None\nif x == None:\n    pass\n",
        },
    )
    out = run(scope_of(FileChange(path="b.py", status="added")), discover(tmp_path), tmp_path)
    (finding,) = out.findings
    assert (finding.rule, finding.severity, finding.issue_class) == ("E711", 3, "style")


def test_ruff_never_fixes_the_checkout(tmp_path: Path) -> None:
    source = "import os\n"
    write(tmp_path, {"pyproject.toml": "[tool.ruff]\nfix = true\n", "a.py": source})
    out = run(scope_of(FileChange(path="a.py", status="added")), discover(tmp_path), tmp_path)
    assert [f.rule for f in out.findings] == ["F401"]
    assert (tmp_path / "a.py").read_text() == source


def test_mypy_finding_on_scoped_line(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "pyproject.toml": "[tool.mypy]\n[tool.ruff]\n",
            "m.py": 'old: int = "unchanged"\nnew: int = "changed"\n',
        },
    )
    out = run(scope_of(modified("m.py", 2)), discover(tmp_path), tmp_path)
    (finding,) = [f for f in out.findings if f.tool == "mypy"]
    assert (finding.rule, finding.severity, finding.issue_class) == ("assignment", 7, "correctness")
    assert finding.location is not None and finding.location.line == 2
    assert finding.title.startswith("mypy assignment: Incompatible types in assignment")
    assert "mypy (1 finding, 1 outside scoped lines not reported)" in out.notes
    assert "ruff (0 findings)" in out.notes


def test_mypy_syntax_error_exit_2_still_counts_as_a_run(tmp_path: Path) -> None:
    write(tmp_path, {"mypy.ini": "[mypy]\n", "s.py": "def f(:\n    pass\n"})
    tc = Toolchain(commands=tuple(c for c in discover(tmp_path).commands if c.tool == "mypy"))
    out = run(scope_of(FileChange(path="s.py", status="added")), tc, tmp_path)
    assert out.status == "COMPLETED"
    assert {f.rule for f in out.findings} == {"syntax"}


def test_ruff_crash_on_invalid_config_is_an_environment_finding(tmp_path: Path) -> None:
    write(tmp_path, {"ruff.toml": 'line-length = "x"\n', "a.py": "import os\n"})
    out = run(scope_of(FileChange(path="a.py", status="added")), discover(tmp_path), tmp_path)
    assert out.status == "NOT_RUN" and not out.ran
    (finding,) = out.findings
    assert (finding.title, finding.severity, finding.issue_class) == (
        "ruff could not run",
        7,
        "environment",
    )
    assert "exited 2" in finding.description and "ruff.toml" in finding.description
    assert "ruff could not run: exited 2" in out.notes


def test_generic_command_output_is_filtered_to_scoped_lines(tmp_path: Path) -> None:
    write(tmp_path, {"a.py": "x\ny\nz\n"})
    script = (
        "print('a.py:3:1: W100 new problem'); print('a.py:1:1: W200 old problem'); "
        "print('other.py:3:1: W300 elsewhere'); raise SystemExit(1)"
    )
    out = run(scope_of(modified("a.py", 3)), lint_command(sys.executable, "-c", script), tmp_path)
    assert out.status == "COMPLETED"
    (finding,) = out.findings
    assert (finding.rule, finding.severity, finding.issue_class) == ("W100", 3, "style")
    assert finding.location is not None and finding.location.line == 3


def test_generic_nonzero_exit_without_diagnostics_could_not_run(tmp_path: Path) -> None:
    write(tmp_path, {"a.py": "x\n"})
    script = "import sys; sys.stderr.write('config error\\n'); sys.exit(3)"
    out = run(
        scope_of(FileChange(path="a.py", status="added")),
        lint_command(sys.executable, "-c", script),
        tmp_path,
    )
    assert out.status == "NOT_RUN"
    assert "exited 3" in out.findings[0].description
    assert "config error" in out.findings[0].description


def test_timeout_and_missing_tool_are_not_silent(tmp_path: Path) -> None:
    write(tmp_path, {"a.py": "x = 1\n"})
    slow = Command(
        kind="lint",
        argv=(sys.executable, "-c", "import time; time.sleep(30)"),
        source="Makefile target lint",
        exists=True,
    )
    missing = Command(
        kind="typecheck", argv=("verify-dag-no-such-checker",), source="ci", exists=False
    )
    out = run(
        scope_of(FileChange(path="a.py", status="added")),
        Toolchain(commands=(slow, missing)),
        tmp_path,
        timeout=0.5,
    )
    assert out.status == "NOT_RUN"
    reasons = sorted(f.description for f in out.findings)
    assert len(reasons) == 2 and all(f.severity == 7 for f in out.findings)
    assert any("timed out after 0.5s" in r for r in reasons)
    assert any("verify-dag-no-such-checker was not found" in r for r in reasons)


def test_one_tool_running_is_completed_and_the_other_is_reported(tmp_path: Path) -> None:
    write(tmp_path, {"a.py": "import os\n"})
    tc = Toolchain(
        commands=(
            *discover(tmp_path).commands,
            Command(kind="lint", argv=("verify-dag-no-such-linter",), source="ci", exists=False),
        )
    )
    out = run(scope_of(FileChange(path="a.py", status="added")), tc, tmp_path)
    assert out.status == "COMPLETED" and out.ran
    assert {f.title for f in out.findings} == {
        "ruff F401: `os` imported but unused",
        "verify-dag-no-such-linter could not run",
    }
    assert out.notes == (
        "ruff (1 finding), verify-dag-no-such-linter could not run: "
        "verify-dag-no-such-linter was not found"
    )


def test_skipped_when_no_scoped_file_is_covered(tmp_path: Path) -> None:
    write(tmp_path, {"README.md": "hi\n", "a.py": "import os\n", "img.py": "x\n"})
    scope = scope_of(
        FileChange(path="README.md", status="modified", lines=None),
        FileChange(path="a.py", status="deleted"),
        FileChange(path="img.py", status="modified", binary=True),
    )
    out = run(scope, discover(tmp_path), tmp_path)
    assert out.status == "SKIPPED" and not out.ran
    assert out.reason.startswith("no files a discovered analyser covers")


def test_skipped_when_nothing_was_discovered(tmp_path: Path) -> None:
    out = run(scope_of(FileChange(path="a.c", status="added")), Toolchain(), tmp_path)
    assert (out.status, out.reason) == ("SKIPPED", "no linter or type checker discovered")


def test_file_names_with_spaces_and_unicode(tmp_path: Path) -> None:
    write(tmp_path, {"my dir/ünï côde.py": "import os\n"})
    out = run(
        scope_of(FileChange(path="my dir/ünï côde.py", status="added")),
        discover(tmp_path),
        tmp_path,
    )
    (finding,) = out.findings
    assert finding.location is not None and finding.location.path == "my dir/ünï côde.py"


# -- parsers on captured output -------------------------------------------------------------


def test_generic_parser_formats(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "app.js").write_text("x\n")
    out = "\n".join(
        [
            "src/a.py:12:5: F401 'os' imported but unused",  # flake8
            "src/a.py:3:0: C0114: Missing module docstring (missing-module-docstring)",  # pylint
            "src/main.rs:2:9: warning: unused variable: `x`",  # clippy short
            "./main.go:5:2: fmt.Printf format %d has arg s of wrong type string",  # go vet
            "vet: ./main.go:7:3: undefined: y",
            "src/a.ts(4,7): error TS2322: Type 'string' is not assignable to type 'number'.",  # tsc
            f"{tmp_path}/src/abs.py:1: something",
            "src/app.js",  # eslint stylish block
            "  10:3  error  'x' is assigned a value but never used  no-unused-vars",
            "make: *** [Makefile:3: lint] Error 1",
            "Found 3 errors.",
            "see https://example.com:443/docs",
        ]
    )
    got = [
        (f.path, f.line, f.col, f.code, f.severity, f.message)
        for f in generic.parse(out, "", tmp_path)
    ]
    assert got == [
        ("src/a.py", 12, 5, "F401", "", "'os' imported but unused"),
        ("src/a.py", 3, 0, "C0114", "", "Missing module docstring (missing-module-docstring)"),
        ("src/main.rs", 2, 9, None, "warning", "unused variable: `x`"),
        ("main.go", 5, 2, None, "", "fmt.Printf format %d has arg s of wrong type string"),
        ("main.go", 7, 3, None, "", "undefined: y"),
        ("src/a.ts", 4, 7, "TS2322", "error", "Type 'string' is not assignable to type 'number'."),
        ("src/abs.py", 1, None, None, "", "something"),
        ("src/app.js", 10, 3, "no-unused-vars", "error", "'x' is assigned a value but never used"),
    ]


def test_generic_parser_reads_stderr_and_rates_by_kind(tmp_path: Path) -> None:
    (f,) = generic.parse("", "src/lib.rs:1:1: error[E0308]: mismatched types", tmp_path)
    assert (f.code, f.severity) == ("E0308", "error")
    lint = generic.spec_for(Command(kind="lint", argv=("cargo", "clippy"), source="x", exists=True))
    types = generic.spec_for(
        Command(kind="typecheck", argv=("npx", "tsc"), source="x", exists=True)
    )
    assert lint.rate(f) == (5, "style") and types.rate(f) == (5, "correctness")
    assert lint.suffixes == frozenset({".rs"}) and ".tsx" in types.suffixes
    assert not lint.takes_files and lint.argv(["ignored.rs"]) == ["cargo", "clippy"]


def test_mypy_and_ruff_parsers(tmp_path: Path) -> None:
    text = (
        'a.py:3:5: error: Name "y" is not defined  [name-defined]\n'
        "a.py:3:5: note: Did you mean x?\n"
        "b.py:1: error: Cannot find implementation or library stub for module named "
        '"requests"  [import-not-found]\n'
    )
    errs = mypy.parse(text, "", tmp_path)
    assert [(e.path, e.line, e.col, e.code) for e in errs] == [
        ("a.py", 3, 5, "name-defined"),
        ("b.py", 1, None, "import-not-found"),
    ]
    assert mypy.rate(errs[1]) == (3, "environment")
    assert ruff.parse("not json", "", tmp_path) == []
    assert REGISTRY["ruff"].ok_exit_codes == frozenset({0, 1})
    assert REGISTRY["mypy"].ok_exit_codes == frozenset({0, 1})


# A linter as a new module of tools/ would declare it: how to run it, read it, rate a finding and
# find it in a project's config. It flags every line holding "TODO".
_TODO_LINT = (
    "import sys\n"
    "for path in sys.argv[1:]:\n"
    "    for n, line in enumerate(open(path), 1):\n"
    "        if 'TODO' in line:\n"
    "            print(f'{path}:{n}:1: TD001 a TODO left in')\n"
    "sys.exit(1 if any('TODO' in open(p).read() for p in sys.argv[1:]) else 0)\n"
)


def _todo_parse(stdout: str, stderr: str, workdir: Path) -> list[RawFinding]:
    out = []
    for line in stdout.splitlines():
        path, row, col, rest = line.split(":", 3)
        code, message = rest.strip().split(" ", 1)
        out.append(RawFinding(path, int(row), int(col), code, message))
    return out


TODO_SPEC = ToolSpec(
    name="todolint",
    argv=lambda files: [sys.executable, "-c", _TODO_LINT, *files],
    ok_exit_codes=frozenset({0, 1}),
    parse=_todo_parse,
    rate=lambda f: (4, "style"),
    suffixes=frozenset({".py"}),
    discovery=Discovery(
        kind="lint", argv=("todolint",), module="json", config_files=("todolint.toml",)
    ),
)


def test_a_linter_is_one_spec_and_its_registry_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Registered, a spec is discovered from its config file, run on the scoped files and rated
    by its own rule: nothing in triage or the static phase names it."""
    monkeypatch.setitem(REGISTRY, TODO_SPEC.name, TODO_SPEC)
    write(tmp_path, {"todolint.toml": "", "a.py": "x = 1\n# TODO: remove\n"})
    toolchain = discover(tmp_path)
    assert ("lint", "todolint", "todolint.toml") in [
        (c.kind, c.tool, c.source) for c in toolchain.commands
    ]
    out = run(scope_of(modified("a.py", 2)), toolchain, tmp_path)
    todo = [f for f in out.findings if f.tool == "todolint"]
    assert [(f.title, f.severity, f.issue_class) for f in todo] == [
        ("todolint TD001: a TODO left in", 4, "style")
    ]
    assert "todolint (1 finding)" in out.notes
