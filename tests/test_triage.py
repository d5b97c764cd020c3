"""Phase 3 Job A: toolchain discovery from real config files in a directory."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import write

from verify_dag.models.toolchain import Command, Toolchain
from verify_dag.phases.triage import discover


def one(tc: Toolchain, kind: str, tool: str | None = None) -> Command:
    found = [c for c in tc.commands if c.kind == kind and (tool is None or c.tool == tool)]
    assert found, f"no {kind} command in {tc}"
    return found[0]


def argvs(tc: Toolchain, kind: str) -> list[tuple[str, ...]]:
    return [c.argv for c in tc.commands if c.kind == kind]


def test_pyproject_configures_pytest_ruff_mypy(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "pyproject.toml": "[tool.pytest.ini_options]\naddopts='-q'\n[tool.ruff]\n"
            "line-length=100\n[tool.mypy]\nstrict=true\n",
            "pkg/__init__.py": "",
        },
    )
    tc = discover(tmp_path)
    test = one(tc, "test")
    assert (test.argv, test.tool, test.exists) == (("pytest",), "pytest", True)
    assert "[tool.pytest.ini_options]" in test.source
    lint = one(tc, "lint", "ruff")
    assert lint.exists and lint.source == "pyproject.toml [tool.ruff]"
    mypy = one(tc, "typecheck", "mypy")
    assert mypy.exists and mypy.source == "pyproject.toml [tool.mypy]"


def test_optional_dependencies_are_signals(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "pyproject.toml": '[project]\nname="x"\n[project.optional-dependencies]\n'
            'dev=["pytest>=8", "mypy==1.10"]\n',
            "x.py": "",
        },
    )
    tc = discover(tmp_path)
    assert one(tc, "test").tool == "pytest"
    assert "dependencies (mypy)" in one(tc, "typecheck", "mypy").source


def test_python_files_alone_get_ruff_but_no_mypy_or_pytest(tmp_path: Path) -> None:
    write(tmp_path, {"script.py": "print(1)\n"})
    tc = discover(tmp_path)
    assert one(tc, "lint").source == "Python files (ruff default rules)"
    assert argvs(tc, "typecheck") == [] and tc.test is None
    assert "test: no test command discovered" in tc.notes


def test_tests_directory_selects_pytest(tmp_path: Path) -> None:
    write(tmp_path, {"mod.py": "", "tests/test_mod.py": "def test_x(): pass\n"})
    assert one(discover(tmp_path), "test").tool == "pytest"


def test_setup_cfg_sections(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "setup.cfg": "[tool:pytest]\ntestpaths=tests\n[mypy]\nstrict=True\n"
            "[flake8]\nmax-line-length=100\n",
            "a.py": "",
        },
    )
    tc = discover(tmp_path)
    assert one(tc, "test").source == "setup.cfg [tool:pytest]"
    assert one(tc, "typecheck").source == "setup.cfg [mypy]"
    flake8 = [c for c in tc.commands if c.source == "setup.cfg [flake8]"]
    assert flake8 and flake8[0].kind == "lint" and flake8[0].tool is None


def test_tox_ini_commands_and_pytest_section(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "tox.ini": "[tox]\nenvlist=py311\n[testenv]\ncommands =\n    pytest {posargs}\n"
            "[testenv:lint]\ncommands = flake8 src\n",
            "src/a.py": "",
        },
    )
    tc = discover(tmp_path)
    assert one(tc, "test").source == "tox.ini [testenv] commands"
    assert ("flake8", "src") in argvs(tc, "lint")


def test_tox_non_pytest_command_is_the_test_command(tmp_path: Path) -> None:
    write(tmp_path, {"tox.ini": "[testenv]\ncommands = python -m unittest discover\n"})
    test = one(discover(tmp_path), "test")
    assert test.argv == ("python", "-m", "unittest", "discover") and test.tool is None
    assert test.exists  # unittest is importable by our interpreter


def test_ini_files(tmp_path: Path) -> None:
    write(
        tmp_path, {"pytest.ini": "[pytest]\n", "mypy.ini": "[mypy]\n", "ruff.toml": "", "a.py": ""}
    )
    tc = discover(tmp_path)
    assert one(tc, "test").source == "pytest.ini"
    assert one(tc, "typecheck").source == "mypy.ini"
    assert one(tc, "lint").source == "ruff.toml"


def test_makefile_targets(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "Makefile": ".PHONY: test lint build\n"
            "test:\n\t./run-tests.sh\n"
            "lint:\n\tshellcheck *.sh\n"
            "build: deps\n\tcc -o app app.c\n"
            "typecheck:\n\t@echo none\n"
        },
    )
    tc = discover(tmp_path)
    assert one(tc, "test").argv == ("make", "test")
    assert one(tc, "test").source == "Makefile target test"
    assert argvs(tc, "lint") == [("make", "lint")]
    assert argvs(tc, "build") == [("make", "build")]
    assert argvs(tc, "typecheck") == [("make", "typecheck")]


def test_makefile_wrapping_ruff_and_mypy_is_not_run_twice(tmp_path: Path) -> None:
    write(tmp_path, {"Makefile": "lint:\n\truff check .\n\tmypy src\n", "src/a.py": ""})
    tc = discover(tmp_path)
    assert argvs(tc, "lint") == [("ruff", "check")]
    assert one(tc, "typecheck").tool == "mypy"  # the recipe says the project uses mypy
    assert any("make lint" in n and "already run directly" in n for n in tc.notes)


def test_package_json_scripts(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "package.json": json.dumps(
                {
                    "scripts": {
                        "test": "jest",
                        "lint": "eslint .",
                        "build": "tsc -p .",
                        "typecheck": "tsc --noEmit",
                        "start": "node index.js",
                    }
                }
            )
        },
    )
    tc = discover(tmp_path)
    assert one(tc, "test").argv == ("npm", "test")
    assert one(tc, "test").source == "package.json scripts.test"
    assert argvs(tc, "lint") == [("npm", "run", "lint")]
    assert argvs(tc, "build") == [("npm", "run", "build")]
    assert argvs(tc, "typecheck") == [("npm", "run", "typecheck")]
    assert any("node_modules is absent" in n for n in tc.notes)


def test_package_json_placeholder_test_is_not_a_suite(tmp_path: Path) -> None:
    placeholder = 'echo "Error: no test specified" && exit 1'
    write(tmp_path, {"package.json": json.dumps({"scripts": {"test": placeholder}})})
    tc = discover(tmp_path)
    assert tc.test is None
    assert any("placeholder" in n for n in tc.notes)


def test_cargo_toml(tmp_path: Path) -> None:
    write(tmp_path, {"Cargo.toml": '[package]\nname="x"\nversion="0.1.0"\n'})
    tc = discover(tmp_path)
    assert one(tc, "test").argv == ("cargo", "test")
    assert argvs(tc, "build") == [("cargo", "build")]
    assert argvs(tc, "lint") == [("cargo", "clippy", "--message-format=short")]
    assert all(c.source == "Cargo.toml" for c in tc.commands)


def test_go_mod(tmp_path: Path) -> None:
    write(tmp_path, {"go.mod": "module example.com/x\n\ngo 1.22\n"})
    tc = discover(tmp_path)
    assert one(tc, "test").argv == ("go", "test", "./...")
    assert argvs(tc, "build") == [("go", "build", "./...")]
    assert argvs(tc, "lint") == [("go", "vet", "./...")]


def test_github_workflow_run_lines(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            ".github/workflows/ci.yml": """\
name: ci
on: [push]
jobs:
  test:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
      - run: pip install -e .[dev]
      - name: lint
        run: |
          ruff check .
          golangci-lint run ./...
      - run: "mypy src"
      - run: echo $HOME | tee out.txt
      - run: python -m pytest -x
""",
            "src/a.py": "",
        },
    )
    tc = discover(tmp_path)
    test = one(tc, "test")
    assert test.tool == "pytest" and ".github/workflows/ci.yml run" in test.source
    assert one(tc, "typecheck").source == ".github/workflows/ci.yml run"
    assert argvs(tc, "lint") == [("ruff", "check"), ("golangci-lint", "run", "./...")]


def test_gitlab_ci_script(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            ".gitlab-ci.yml": """\
test:
  script:
  - npm ci
  - npm test
lint:
  script: ["eslint src"]
"""
        },
    )
    tc = discover(tmp_path)
    assert one(tc, "test").argv == ("npm", "test")
    assert one(tc, "test").source == ".gitlab-ci.yml script"
    assert argvs(tc, "lint") == [("eslint", "src")]


def test_missing_executable_is_not_runnable_and_noted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(
        tmp_path,
        {
            "Makefile": "lint:\n\tflake8\n",
            "go.mod": "module x\n",
            "pyproject.toml": "[tool.mypy]\n",
            "tests/test_a.py": "",
        },
    )
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    tc = discover(tmp_path)
    make = next(c for c in tc.commands if c.argv == ("make", "lint"))
    go = next(c for c in tc.commands if c.argv == ("go", "vet", "./..."))
    assert not make.exists and not go.exists
    assert any("make lint (Makefile target lint) is not runnable here" in n for n in tc.notes)
    # The tools verify-dag ships run on its own interpreter, whatever PATH says.
    assert one(tc, "test", "pytest").exists
    assert one(tc, "lint", "ruff").exists
    assert one(tc, "typecheck", "mypy").exists


def test_precedence_pytest_over_make_and_npm(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "Makefile": "test:\n\tpytest\n",
            "tests/test_a.py": "",
            "package.json": json.dumps({"scripts": {"test": "jest"}}),
        },
    )
    tc = discover(tmp_path)
    assert argvs(tc, "test") == [("pytest",)]
    assert any(n.startswith("test: also found npm test") for n in tc.notes)


def test_invalid_config_is_a_note_not_a_crash(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "pyproject.toml": "[tool.ruff\n",
            "package.json": "{nope",
            "setup.cfg": "no section header\n",
            "a.py": "",
        },
    )
    tc = discover(tmp_path)
    assert {n.split(" ")[0] for n in tc.notes} >= {"pyproject.toml", "package.json", "setup.cfg"}
    assert one(tc, "lint").tool == "ruff"


def test_empty_directory(tmp_path: Path) -> None:
    tc = discover(tmp_path)
    assert tc.commands == () and tc.notes == ("test: no test command discovered",)


def test_engineer_commands_come_first_and_are_checked(tmp_path: Path) -> None:
    from verify_dag.models import EngineerContext

    (tmp_path / "Makefile").write_text("test:\n\techo make-test\n")
    eng = EngineerContext(
        skill_dir=".claude/skills/x-engineer",
        build_commands=("make dist",),
        lint_commands=("no-such-linter-xyz --check",),
        test_commands=("make test",),
    )
    tc = discover(tmp_path, eng)
    build = tc.of("build")
    assert build[0].argv == ("make", "dist") and build[0].source.startswith("engineer skill")
    lint = [c for c in tc.of("lint") if c.argv[0] == "no-such-linter-xyz"]
    assert lint and lint[0].exists is False
    assert any("no-such-linter-xyz" in n for n in tc.notes)
    assert tc.test is not None and tc.test.argv == ("make", "test")


def test_tox_mypy_invocations_in_any_env_give_mypy_their_targets(tmp_path: Path) -> None:
    """attrs: tox runs mypy on typing examples and the stubs, under factor conditions."""
    write(
        tmp_path,
        {
            "pyproject.toml": "[tool.mypy]\npretty = true\n",
            "tox.ini": "[testenv]\ncommands =\n    tests: pytest {posargs}\n"
            "    mypy: mypy typing-examples\n    mypy: mypy src/a/__init__.pyi\n",
            "src/a/__init__.pyi": "",
        },
    )
    mypy = one(discover(tmp_path), "typecheck", "mypy")
    assert mypy.argv == ("mypy", "typing-examples", "src/a/__init__.pyi")
    assert mypy.source == "tox.ini [testenv] commands"


def test_makefile_ruff_and_stubtest_lines_are_kept_with_their_targets(tmp_path: Path) -> None:
    """more-itertools: `make check` runs ruff on two directories and stubtest on two
    modules; mypy is only configured in setup.cfg. Options that only shape output go."""
    write(
        tmp_path,
        {
            "Makefile": "all: check\n\ncheck:\n\truff format --check .\n"
            "\truff check pkg tests --select E,F --output-format=concise --fix\n"
            "\tstubtest pkg.more pkg.recipes\n",
            "setup.cfg": "[mypy]\nstrict = true\n",
            "pkg/__init__.py": "",
        },
    )
    tc = discover(tmp_path)
    ruff = one(tc, "lint", "ruff")
    assert ruff.argv == ("ruff", "check", "--select=E,F", "pkg", "tests")
    assert ruff.source == "Makefile target check"
    mypy = one(tc, "typecheck", "mypy")
    assert (mypy.argv, mypy.source) == (("stubtest", "pkg.more", "pkg.recipes"), ruff.source)


def test_several_mypy_command_lines_merge_to_shared_options_and_all_targets(
    tmp_path: Path,
) -> None:
    write(
        tmp_path,
        {
            ".github/workflows/ci.yml": "jobs:\n  t:\n    steps:\n"
            "      - run: python -m mypy --strict --html-report out src\n"
            "      - run: uv run mypy --strict --warn-unreachable -p tools\n",
            "Makefile": "lint:\n\tstubtest pkg\n",
            "src/a.py": "",
        },
    )
    mypy = one(discover(tmp_path), "typecheck", "mypy")
    # mypy's own lines count before stubtest's; the report and the option only one sets go.
    assert mypy.argv == ("mypy", "--strict", "-p", "tools", "src")
    assert mypy.source == ".github/workflows/ci.yml run"


def test_a_mypy_line_without_targets_leaves_the_configuration_to_decide(
    tmp_path: Path,
) -> None:
    write(
        tmp_path,
        {
            "pyproject.toml": '[tool.mypy]\nfiles = ["src"]\n',
            "tox.ini": "[testenv:types]\ncommands = mypy --strict\n\tmypy --strict tests\n",
            "src/a.py": "",
        },
    )
    assert one(discover(tmp_path), "typecheck", "mypy").argv == ("mypy", "--strict")


def test_lines_needing_a_shell_or_checking_nothing_are_not_targets(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "pyproject.toml": "[tool.mypy]\n[tool.ruff]\n",
            "Makefile": "lint:\n\tmypy $(SOURCES)\n\tmypy --version\n\truff format src\n"
            "\truff check src -\n\truff check src\n",
            "a.py": "",
        },
    )
    tc = discover(tmp_path)
    assert one(tc, "typecheck", "mypy").argv == ("mypy",)
    # Only the line that checks files names ruff's targets (`-` is stdin).
    assert one(tc, "lint", "ruff").argv == ("ruff", "check", "src")


def test_pre_commit_hooks_give_options_and_with_pass_filenames_false_targets(
    tmp_path: Path,
) -> None:
    write(
        tmp_path,
        {
            ".pre-commit-config.yaml": "repos:\n"
            "- repo: https://github.com/astral-sh/ruff-pre-commit\n  rev: v0.6.9\n  hooks:\n"
            "  - id: ruff\n    args: [--fix, --select, I]\n"
            "- repo: local\n  hooks:\n  - id: types\n    name: types\n    language: system\n"
            "    entry: python -m mypy --strict\n    args: [src]\n    pass_filenames: false\n",
            "src/a.py": "",
        },
    )
    tc = discover(tmp_path)
    ruff = one(tc, "lint", "ruff")
    # pre-commit hands ruff the changed files: its rules count, no targets.
    assert ruff.argv == ("ruff", "check", "--select=I")
    assert ruff.source == ".pre-commit-config.yaml hook ruff"
    mypy = one(tc, "typecheck", "mypy")
    assert (mypy.argv, mypy.source) == (
        ("mypy", "--strict", "src"),
        ".pre-commit-config.yaml hook types",
    )


def test_makefile_targets_that_ci_runs_are_read_for_tool_lines(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            ".github/workflows/ci.yml": "jobs:\n  t:\n    steps:\n"
            "      - run: make -j2 requirements types\n",
            "Makefile": "requirements:\n\tpip install -r r.txt\n"
            "types: stubs\n\tmypy src\nstubs:\n\tmypy typings\nother:\n\tmypy other\n",
            "src/a.py": "",
        },
    )
    mypy = one(discover(tmp_path), "typecheck", "mypy")
    assert mypy.argv == ("mypy", "src", "typings")  # `other` is never run
    assert mypy.source == "Makefile target types; Makefile target stubs"


ZIPP_LIKE = """\
[project]
name = "zipp"
[project.optional-dependencies]
test = ["pytest >= 6, != 8.1.*"]
type = ["pytest-mypy"]

[tool.pytest-enabler.mypy]
# Disabled due to jaraco/skeleton#143
"""


def test_mypy_turned_off_through_pytest_enabler_is_not_run(tmp_path: Path) -> None:
    # jaraco's skeleton: mypy is configured, runs only as pytest-mypy, and pytest-enabler's
    # empty table turns that off. Its maintainers' runs check no types; neither does this one.
    write(tmp_path, {"pyproject.toml": ZIPP_LIKE, "mypy.ini": "[mypy]\nstrict = True\n"})
    write(tmp_path, {"zipp/__init__.py": "", "tests/test_zipp.py": "def test_x(): pass\n"})
    tc = discover(tmp_path)
    assert argvs(tc, "typecheck") == []
    assert (
        "typecheck: mypy is configured (mypy.ini) but runs only as pytest-mypy, which "
        "pyproject.toml [tool.pytest-enabler.mypy] turns off; not run"
    ) in tc.notes


@pytest.mark.parametrize(
    "extra",
    [
        # pytest-enabler passes --mypy: the plugin runs, and so does mypy here.
        {"pyproject.toml": ZIPP_LIKE + 'addopts = "--mypy"\n'},
        # A command line of the project's own runs mypy all the same.
        {"tox.ini": "[testenv:typing]\ncommands = mypy zipp\n"},
    ],
)
def test_mypy_runs_where_the_project_still_runs_it(tmp_path: Path, extra: dict[str, str]) -> None:
    write(tmp_path, {"pyproject.toml": ZIPP_LIKE, "mypy.ini": "[mypy]\n", "zipp/__init__.py": ""})
    write(tmp_path, extra)
    assert one(discover(tmp_path), "typecheck", "mypy").exists
