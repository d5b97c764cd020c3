"""Phase 4 static analysis: real ruff and mypy on small projects, and the generic parser."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from verify_dag.models.findings import SkillOutcome
from verify_dag.models.scope import FileChange, LineRange, Scope
from verify_dag.models.toolchain import Command, Toolchain
from verify_dag.phases import static
from verify_dag.phases.triage import discover
from verify_dag.tools import REGISTRY, generic, mypy, mypy_config, ruff, runner
from verify_dag.tools.base import Discovery, Invocation, RawFinding, ToolSpec


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
    assert (finding.rule, finding.severity, finding.issue_class) == ("assignment", 9, "correctness")
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
    assert lint.rate(f) == (5, "style") and types.rate(f) == (9, "correctness")
    # 004 8c: "Build/typecheck errors ... are findings with severity 9-10"; a type checker's
    # warnings and notes stay lower.
    (w,) = generic.parse("", "src/a.ts:1:1: warning: unused label", tmp_path)
    assert types.rate(w) == (3, "correctness") and lint.rate(w) == (3, "style")
    assert lint.suffixes == frozenset({".rs"}) and ".tsx" in types.suffixes
    call = Invocation(["ignored.rs"], tmp_path, tmp_path)
    assert not lint.takes_files and lint.argv(call) == ["cargo", "clippy"]


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
    argv=lambda inv: [sys.executable, "-c", _TODO_LINT, *inv.files],
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


# -- mypy as the project runs it ------------------------------------------------------------


def mypy_only(root: Path) -> Toolchain:
    return Toolchain(commands=tuple(c for c in discover(root).commands if c.tool == "mypy"))


BAD = 'x: int = "changed"\n'


def test_mypy_checks_only_the_files_the_project_configures(tmp_path: Path) -> None:
    """`files = ["src"]`: a changed test file is not mypy's business, and mypy's findings in
    files the change did not touch (it checks all of src/) are not reported."""
    write(
        tmp_path,
        {
            "pyproject.toml": '[tool.mypy]\nfiles = ["src"]\n',
            "src/pkg/__init__.py": "",
            "src/pkg/a.py": BAD,
            "src/pkg/untouched.py": 'y: int = "old"\n',
            "tests/test_a.py": BAD,
        },
    )
    scope = scope_of(modified("src/pkg/a.py", 1), modified("tests/test_a.py", 1))
    out = run(scope, mypy_only(tmp_path), tmp_path)
    assert out.status == "COMPLETED"
    located = [(f.location.path, f.location.line) for f in out.findings if f.location]
    assert located == [("src/pkg/a.py", 1)]
    assert out.notes == (
        "mypy (1 finding, 1 outside scoped lines not reported, 1 changed file(s) outside "
        "mypy's files (src, pyproject.toml) not checked)"
    )


def test_mypy_does_not_run_when_no_changed_file_is_in_its_files(tmp_path: Path) -> None:
    write(
        tmp_path,
        {"mypy.ini": "[mypy]\nfiles = src/*.py, lib\n", "src/a.py": "", "tests/t.py": BAD},
    )
    out = run(scope_of(modified("tests/t.py", 1)), mypy_only(tmp_path), tmp_path)
    assert out.status == "SKIPPED" and not out.findings
    assert out.reason.endswith(
        "mypy: 1 changed file(s) outside mypy's files (src/*.py, lib, mypy.ini) not checked"
    )


def test_a_configured_file_the_checkout_lacks_does_not_stop_mypy(tmp_path: Path) -> None:
    """A release's sdist leaves out the noxfile its mypy `files` names: plain `mypy` would stop
    at "can't read file", which says nothing about the change."""
    write(
        tmp_path,
        {"pyproject.toml": '[tool.mypy]\nfiles = ["src", "noxfile.py"]\n', "src/a.py": BAD},
    )
    out = run(scope_of(modified("src/a.py", 1)), mypy_only(tmp_path), tmp_path)
    assert out.status == "COMPLETED", out.notes
    assert [f.rule for f in out.findings] == ["assignment"]
    assert (
        out.notes
        == "mypy (1 finding, mypy's files name what this checkout lacks, left out: noxfile.py)"
    )


def test_mypy_exclude_applies_to_the_changed_files(tmp_path: Path) -> None:
    """Without `files`, the changed files are checked minus what `exclude` drops when mypy
    discovers files (a directory matches with its trailing slash)."""
    write(
        tmp_path,
        {
            "setup.cfg": "[mypy]\nexclude = ^(build|generated)/\n",
            "generated/g.py": BAD,
            "app.py": BAD,
        },
    )
    scope = scope_of(modified("generated/g.py", 1), modified("app.py", 1))
    out = run(scope, mypy_only(tmp_path), tmp_path)
    assert [f.location.path for f in out.findings if f.location] == ["app.py"]
    assert "1 changed file(s) excluded by mypy's exclude (setup.cfg) not checked" in out.notes


def test_a_source_and_its_stub_changed_together_are_checked_through_the_stub(
    tmp_path: Path,
) -> None:
    """mypy refuses both files of one module on its command line ("Duplicate module"), and its
    own discovery reads the stub: the stub is checked, the source is named as left out."""
    write(
        tmp_path,
        {
            "mypy.ini": "[mypy]\n",
            "src/pkg/__init__.py": "",
            "src/pkg/v.py": BAD,
            "src/pkg/v.pyi": "def f() -> int: ...\nx: int = 'stub'\n",
        },
    )
    scope = scope_of(modified("src/pkg/v.py", 1), modified("src/pkg/v.pyi", 2))
    out = run(scope, mypy_only(tmp_path), tmp_path)
    assert out.status == "COMPLETED", out.notes
    assert [(f.location.path, f.rule) for f in out.findings if f.location] == [
        ("src/pkg/v.pyi", "assignment")
    ]
    assert out.notes == (
        "mypy (1 finding, 1 changed file(s) with a .pyi stub beside them (mypy checks the "
        "stub) not checked)"
    )


def test_mypy_selection_reads_configuration_as_mypy_does(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            # mypy.ini comes first, even with setup.cfg and pyproject also configuring mypy.
            "mypy.ini": (
                "[mypy]\nfiles = src,\nexclude = (?x)(\n    _old\\.py$\n  | /vendor/\n  )\n"
            ),
            "pyproject.toml": '[tool.mypy]\nfiles = ["tests"]\n',
            "src/a.py": "",
            "tests/t.py": "",
        },
    )
    files = ["src/a.py", "src/b_old.py", "src/x/vendor/v.py", "src/.hidden/h.py", "src/r.txt"]
    assert mypy_config.select(tmp_path, files)[0] == ["src/a.py"]
    (tmp_path / "mypy.ini").unlink()
    assert mypy_config.select(tmp_path, ["src/a.py", "tests/t.py"])[0] == ["tests/t.py"]
    (tmp_path / "pyproject.toml").write_text('[tool.mypy]\npackages = ["pkg"]\n')
    assert mypy_config.select(tmp_path, ["src/a.py"]) == (["src/a.py"], "")


def test_mypy_runs_with_a_cache_projects_with_num_workers_need(tmp_path: Path) -> None:
    """`--cache-dir=/dev/null` made mypy refuse parallel mode; the throwaway cache lives outside
    the checkout, which stays as it was."""
    root = tmp_path / "project"
    write(root, {"mypy.ini": "[mypy]\nnum_workers = 2\n", "a.py": BAD})
    out = run(scope_of(modified("a.py", 1)), mypy_only(root), root)
    assert out.status == "COMPLETED", out.notes
    assert [f.rule for f in out.findings] == ["assignment"]
    assert sorted(p.name for p in root.iterdir()) == ["a.py", "mypy.ini"]


def test_mypy_argument_list_does_not_grow_with_the_change(tmp_path: Path) -> None:
    many = [f"pkg/module_{n:05d}_{'x' * 60}.py" for n in range(5000)]
    call = Invocation([*many, "@odd.py", "-dash.py"], tmp_path, tmp_path)
    argv = mypy.argv(call)
    assert argv is not None and len(" ".join(argv)) < 1000
    listing = (tmp_path / "mypy-files.txt").read_text().splitlines()
    assert listing == [*many, "./@odd.py", "-dash.py"]
    assert argv[-2:] == ["--", f"@{tmp_path / 'mypy-files.txt'}"]


def test_mypy_reads_files_whose_names_look_like_options(tmp_path: Path) -> None:
    names = ["@odd.py", "-dash.py", "my dir/ünï.py"]
    write(tmp_path, {"mypy.ini": "[mypy]\n", **{n: BAD for n in names}})
    out = run(scope_of(*(modified(n, 1) for n in names)), mypy_only(tmp_path), tmp_path)
    assert sorted(f.location.path for f in out.findings if f.location) == sorted(names)


def _venv_with_typed_dependency(root: Path) -> Path:
    """A real venv (as a project's .venv or .tox env lies in its checkout) holding a typed
    package the project imports; verify-dag's interpreter does not have it."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    python = root / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    write(Path(site), {"fakedep/__init__.py": "def half(n: int) -> int:\n    return n // 2\n"})
    (Path(site) / "fakedep" / "py.typed").write_text("")
    return python


def test_mypy_resolves_imports_in_the_projects_environment(tmp_path: Path) -> None:
    """The environment lies outside the checkout (as verify-dag's own envs do): the sandbox
    still shows it to mypy."""
    python = _venv_with_typed_dependency(tmp_path / "envs" / "project")
    root = tmp_path / "checkout"
    write(root, {"mypy.ini": "[mypy]\n", "a.py": 'from fakedep import half\nhalf("2")\n'})
    scope = scope_of(FileChange(path="a.py", status="added"))
    ours = run(scope, mypy_only(root), root)
    assert [(f.rule, f.severity, f.issue_class) for f in ours.findings] == [
        ("import-not-found", 3, "environment")
    ]
    theirs = static.run(scope, mypy_only(root), root, 60, python=python)
    assert [
        (f.rule, f.severity, f.location.line if f.location else 0) for f in theirs.findings
    ] == [("arg-type", 9, 2)]


# A stand-in for the mypy a project pins in its environment: it prints what it was given.
_PINNED_MYPY = (
    "import sys\n"
    "print('a.py:1:1: error: pinned mypy ran with ' + ' '.join(sys.argv[1:])[:300] + '  [misc]')\n"
    "sys.exit(1)\n"
)


def test_the_mypy_the_projects_environment_installed_runs(tmp_path: Path) -> None:
    """The version the project pins (and its plugins) when its environment has one; the
    console script beside the interpreter says it is installed."""
    python = _venv_with_typed_dependency(tmp_path / ".venv")
    site = python.parent.parent / "lib"
    (next(site.glob("python*/site-packages")) / "mypy").mkdir()
    (next(site.glob("python*/site-packages")) / "mypy" / "__main__.py").write_text(_PINNED_MYPY)
    write(tmp_path, {"mypy.ini": "[mypy]\n", "a.py": BAD})
    scope = scope_of(FileChange(path="a.py", status="added"))
    (ours,) = static.run(scope, mypy_only(tmp_path), tmp_path, 60, python=python).findings
    assert ours.rule == "assignment"  # no console script: verify-dag's own mypy
    (python.parent / "mypy").write_text("#!/bin/sh\n")
    (pinned,) = static.run(scope, mypy_only(tmp_path), tmp_path, 60, python=python).findings
    assert pinned.title.startswith("mypy misc: pinned mypy ran with --show-column-numbers")
    assert f"--python-executable={python}" in pinned.description


def test_the_mypy_a_layered_env_installed_runs(tmp_path: Path) -> None:
    """A project installed per run over its cached env (the layer) is checked by the mypy that
    env installed, the version its declarations pin, as a plain env's is: the layer's bin lists
    the cached env's commands, so the tool is seen beside the interpreter the static tools get.
    Before, verify-dag's own mypy ran there."""
    write(
        tmp_path,
        {
            "pyproject.toml": '[build-system]\nrequires = ["setuptools>=61"]\n'
            'build-backend = "setuptools.build_meta"\n\n'
            '[project]\nname = "verify-dag-layered"\nversion = "0.1"\n',
            "requirements-test.txt": "./pinned\n",
            "src/verify_dag_layered/__init__.py": "",
            "pinned/pyproject.toml": '[build-system]\nrequires = ["setuptools>=61"]\n'
            'build-backend = "setuptools.build_meta"\n\n'
            '[project]\nname = "mypy"\nversion = "0.0.1"\n\n'
            '[project.scripts]\nmypy = "mypy:main"\n',
            "pinned/mypy/__init__.py": "def main():\n    pass\n",
            "pinned/mypy/__main__.py": _PINNED_MYPY,
            "mypy.ini": "[mypy]\n",
            "a.py": BAD,
        },
    )
    from verify_dag.phases.tester import env as testenv

    with testenv.interpreter(tmp_path, mypy_only(tmp_path), tmp_path / "cache") as (python, bad):
        assert python is not None and not bad
        assert (python.parent.parent / "pyvenv.cfg").is_file()  # the layer, not the cached env
        scope = scope_of(FileChange(path="a.py", status="added"))
        (found,) = static.run(scope, mypy_only(tmp_path), tmp_path, 60, python=python).findings
    assert found.title.startswith("mypy misc: pinned mypy ran with --show-column-numbers")


CASCADE = """\
from missing_star import *
from missing_lib import Base, deco
import yaml_not_here


class C(Base):
    pass


@deco
def f(x: int) -> int:
    return x


def g() -> int:
    return thing()


wrong: int = "a real type error"
"""


def test_a_missing_dependency_is_one_finding_not_a_cascade(tmp_path: Path) -> None:
    """Strict mypy without the project's dependencies: the imports it cannot resolve and what
    follows only from them (subclassing Any, an untyped decorator, returning Any, names from a
    star import) are one environment finding; the real type error keeps its 7."""
    write(tmp_path, {"mypy.ini": "[mypy]\nstrict = true\n", "a.py": CASCADE})
    out = run(scope_of(FileChange(path="a.py", status="added")), mypy_only(tmp_path), tmp_path)
    got = [
        (f.rule, f.severity, f.issue_class, f.location.line if f.location else 0)
        for f in out.findings
    ]
    assert got == [
        ("import-not-found", 3, "environment", 1),
        ("assignment", 9, "correctness", 19),
    ]
    one = out.findings[0]
    assert '"missing_star", "missing_lib", "yaml_not_here"' in one.title
    assert "4 finding(s) follow only from that" in one.description
    assert "a.py:16 [name-defined]" in one.description


def test_consequences_alone_anchor_the_missing_dependency_finding(tmp_path: Path) -> None:
    """The import is on an unchanged line; what follows from it on a changed line is still the
    one environment finding, on that changed line, never the import's line off the diff."""
    write(tmp_path, {"mypy.ini": "[mypy]\nstrict = true\n", "a.py": CASCADE})
    out = run(scope_of(modified("a.py", 6, 19)), mypy_only(tmp_path), tmp_path)
    got = [(f.rule, f.severity, f.location.line if f.location else 0) for f in out.findings]
    assert got == [("import-not-found", 3, 6), ("assignment", 9, 19)]


# -- severity tables ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        ("invalid-syntax", (7, "correctness")),
        ("E999", (7, "correctness")),
        ("F821", (7, "correctness")),
        ("F706", (7, "correctness")),
        ("F524", (7, "correctness")),
        ("F523", (5, "correctness")),
        ("F811", (5, "correctness")),
        ("B006", (4, "correctness")),
        ("ANN001", (2, "style")),
        ("UP006", (2, "style")),
        ("I001", (2, "style")),
        ("E501", (2, "style")),
        ("E711", (3, "style")),
        ("S101", (4, "security")),
        ("SIM201", (3, "style")),  # flake8-simplify, not bandit's S
        ("FBT001", (3, "style")),  # flake8-boolean-trap, not pyflakes
        ("INP001", (3, "style")),
        ("DTZ005", (3, "style")),
        ("BLE001", (3, "style")),
        ("PLE0101", (5, "correctness")),
    ],
)
def test_ruff_severity_follows_the_rule(code: str, expected: tuple[int, str]) -> None:
    assert ruff.rate(RawFinding("a.py", 1, 1, code, "m")) == expected


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        ("arg-type", (9, "correctness")),
        ("call-arg", (9, "correctness")),
        ("attr-defined", (9, "correctness")),
        ("return-value", (9, "correctness")),
        ("some-future-code", (9, "correctness")),
        ("no-redef", (9, "correctness")),
        ("no-untyped-def", (9, "style")),
        ("no-any-return", (9, "style")),
        ("import-untyped", (3, "environment")),
    ],
)
def test_mypy_severity_follows_the_error_code(code: str, expected: tuple[int, str]) -> None:
    """004 8c: "Build/typecheck errors and test failures are findings with severity 9-10". mypy
    runs where the project declares it, and each error it reports fails that type check; a
    missing dependency is this host's environment (3), and a warning does not fail it."""
    assert mypy.rate(RawFinding("a.py", 1, 1, code, "m", "error")) == expected
    assert mypy.rate(RawFinding("a.py", 1, 1, code, "m", "warning"))[0] <= 3


DOCS = Path(__file__).resolve().parent.parent / "docs" / "static.md"


def _doc_table(heading: str) -> dict[str, tuple[int, str]]:
    text = DOCS.read_text(encoding="utf-8")
    section = text.split(f"\n### {heading}\n", 1)[1].split("\n#", 1)[0]
    rows: dict[str, tuple[int, str]] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and cells[1].isdigit():
            rows[cells[0].strip("`").replace("(any other)", "")] = (int(cells[1]), cells[2])
    return rows


def test_the_documented_tables_are_the_tables_in_use() -> None:
    assert _doc_table("ruff") == {k: (r.severity, r.issue_class) for k, r in ruff.RULES.items()}
    assert _doc_table("mypy") == {k: (r.severity, r.issue_class) for k, r in mypy.CODES.items()}


@pytest.mark.parametrize("mypy_files", ["", 'files = ["."]\n'])
def test_no_finding_off_the_changed_lines(tmp_path: Path, mypy_files: str) -> None:
    """Every line has a ruff and a mypy finding, in the changed file and in an untouched one;
    whether mypy checks the changed files or its configured tree, only lines 2 and 3 of the
    changed file are reported."""
    bad = "".join(f'import os as o{n}\nv{n}: int = "s"\n' for n in range(3))
    write(
        tmp_path / "p",
        {
            "pyproject.toml": f'[tool.mypy]\n{mypy_files}[tool.ruff.lint]\nselect = ["F"]\n',
            "a.py": bad,
            "b.py": bad,
        },
    )
    root = tmp_path / "p"
    out = run(scope_of(modified("a.py", 2, 3)), discover(root), root)
    where = sorted((f.tool, f.location.path, f.location.line) for f in out.findings if f.location)
    assert where == [("mypy", "a.py", 2), ("ruff", "a.py", 3)]
    assert all(f.location is not None for f in out.findings)


def declared_spec(root: Path, tool: str) -> ToolSpec:
    """The spec the static phase runs for the tool triage discovered in ``root``."""
    (command,) = [c for c in discover(root).commands if c.tool == tool]
    return (mypy if tool == "mypy" else ruff).for_command(command)


def test_mypy_checks_the_targets_of_the_projects_own_command_line(tmp_path: Path) -> None:
    """tox runs `mypy pkg`: a changed test file is not mypy's business, however wrong."""
    write(
        tmp_path,
        {
            "pyproject.toml": "[tool.mypy]\n",
            "tox.ini": "[testenv]\ncommands =\n    types: mypy pkg\n",
            "pkg/a.py": 'x: int = "a"\n',
            "tests/t.py": 'y: int = "b"\n',
        },
    )
    spec = declared_spec(tmp_path, "mypy")
    targets, remark = runner.targets(spec, ["pkg/a.py", "tests/t.py"], tmp_path)
    assert targets == ["pkg/a.py"]
    assert remark == (
        "1 changed file(s) outside mypy's targets (pkg, tox.ini [testenv] commands) not checked"
    )
    result = runner.run(spec, targets, tmp_path, 120)
    assert result.failure is None
    assert [(r.path, r.code) for r in result.raw] == [("pkg/a.py", "assignment")]
    # Nothing of the change inside its targets: mypy is not run.
    assert runner.targets(spec, ["tests/t.py"], tmp_path)[0] == []


def test_mypy_gets_the_check_options_of_the_projects_command_line(tmp_path: Path) -> None:
    files = {"pkg/a.py": "def f(x):\n    return x\n"}
    write(tmp_path / "plain", {**files, "Makefile": "lint:\n\tmypy pkg\n"})
    write(tmp_path / "strict", {**files, "Makefile": "lint:\n\tmypy --strict pkg --pretty\n"})
    codes = {}
    for name in ("plain", "strict"):
        root = tmp_path / name
        result = runner.run(declared_spec(root, "mypy"), ["pkg/a.py"], root, 120)
        assert result.failure is None
        codes[name] = [r.code for r in result.raw]
    # --strict is passed on; --pretty is not (the run reads mypy's one-line output).
    assert codes == {"plain": [], "strict": ["no-untyped-def"]}


def test_stubtest_has_mypy_check_its_modules_with_mypy_defaults(tmp_path: Path) -> None:
    """stubtest builds the modules it names with mypy's defaults (no --mypy-config-file): the
    project's setup.cfg [mypy] strictness is not what it checks with, and tests are outside."""
    write(
        tmp_path,
        {
            "Makefile": "check:\n\tstubtest pkg.more\n",
            "setup.cfg": "[mypy]\ndisallow_untyped_defs = true\n",
            "pkg/__init__.py": "",
            "pkg/more.py": "def f(x):\n    return x\n",
            "pkg/more.pyi": 'def f(x): ...\nv: int = "s"\n',
            "tests/t.py": "def g(x):\n    return x\n",
        },
    )
    spec = declared_spec(tmp_path, "mypy")
    changed = ["pkg/more.py", "pkg/more.pyi", "tests/t.py"]
    targets, remark = runner.targets(spec, changed, tmp_path)
    assert targets == ["pkg/more.pyi"]
    assert "1 changed file(s) outside mypy's targets (pkg.more, Makefile target check)" in remark
    assert "1 changed file(s) with a .pyi stub beside them (mypy checks the stub)" in remark
    assert "stubtest's comparison of the stubs with the running code is not run" in remark
    result = runner.run(spec, targets, tmp_path, 120)
    assert result.failure is None
    assert [(r.path, r.line, r.code) for r in result.raw] == [("pkg/more.pyi", 2, "assignment")]


def test_ruff_checks_its_declared_targets_with_the_declared_rules(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "Makefile": "check:\n\truff check pkg --select F401 --output-format=concise\n",
            "pyproject.toml": '[tool.ruff.lint]\nselect = ["F"]\n',
            "pkg/a.py": "import os\nprint(undefined_name)\n",
            "docs/conf.py": "import sys\n",
        },
    )
    spec = declared_spec(tmp_path, "ruff")
    targets, remark = runner.targets(spec, ["pkg/a.py", "docs/conf.py"], tmp_path)
    assert targets == ["pkg/a.py"]
    assert remark == (
        "1 changed file(s) outside ruff's targets (pkg, Makefile target check) not checked"
    )
    result = runner.run(spec, targets, tmp_path, 120)
    assert result.failure is None
    assert [r.code for r in result.raw] == ["F401"]  # F821 is not among the declared rules


def test_declared_command_lines_read_as_each_tool_reads_them() -> None:
    d = mypy_config.declared(
        ("mypy", "--python-version", "3.11", "-n", "2", "--html-report", "out", "-m", "a", "b")
    )
    assert d is not None
    assert (d.options, d.modules, d.files) == (("--python-version=3.11", "-n2"), ("a",), ("b",))
    assert mypy_config.declared(("mypy", "-c", "x = 1")) is None
    assert mypy_config.declared(("stubtest", "--check-typeshed")) is None
    s = mypy_config.declared(("stubtest", "--allowlist", "al.txt", "--mypy-config-file=m.ini", "p"))
    assert s is not None and (s.packages, s.config) == (("p",), "m.ini")
    r = ruff.declared(("ruff", "--config", "r.toml", "check", "--fix", "--ignore", "E501", "."))
    assert r is not None and r.argv() == ("ruff", "check", "--config=r.toml", "--ignore=E501")
    assert ruff.declared(("ruff", "format", "src")) is None
    assert ruff.declared(("ruff", "check", "-")) is None


def test_a_declared_config_file_is_the_configuration_mypy_reads(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "pyproject.toml": '[tool.mypy]\nfiles = ["tests"]\n',
            "tox.ini": "[testenv:types]\ncommands = mypy --config-file ci/mypy.ini\n",
            "ci/mypy.ini": "[mypy]\nfiles = src\n",
            "src/a.py": 'x: int = "a"\n',
            "tests/t.py": 'y: int = "b"\n',
        },
    )
    spec = declared_spec(tmp_path, "mypy")
    targets, remark = runner.targets(spec, ["src/a.py", "tests/t.py"], tmp_path)
    assert targets == ["src/a.py"]
    assert remark == "1 changed file(s) outside mypy's files (src, ci/mypy.ini) not checked"
    result = runner.run(spec, targets, tmp_path, 120)
    assert [(r.path, r.code) for r in result.raw] == [("src/a.py", "assignment")]


def test_the_static_phase_runs_mypy_and_ruff_on_the_targets_tox_names(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "pyproject.toml": "[tool.mypy]\n[tool.ruff.lint]\nselect = ['F']\n",
            "tox.ini": "[testenv]\ncommands =\n    types: mypy pkg\n    lint: ruff check pkg\n",
            "pkg/a.py": 'x: int = "a"\n',
            "tests/t.py": 'import os\ny: int = "b"\n',
        },
    )
    added = (FileChange(path=p, status="added") for p in ("pkg/a.py", "tests/t.py"))
    out = run(scope_of(*added), discover(tmp_path), tmp_path)
    where = [(f.tool, f.location.path) for f in out.findings if f.location]
    assert where == [("mypy", "pkg/a.py")]
    outside = "1 changed file(s) outside {}'s targets (pkg, tox.ini [testenv] commands)"
    assert outside.format("mypy") in out.notes and outside.format("ruff") in out.notes
