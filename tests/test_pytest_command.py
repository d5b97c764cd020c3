"""A repository's declared pytest command: found by triage in real config files, and the
arguments the tester keeps from it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import write

from verify_dag.models.toolchain import EngineerContext
from verify_dag.phases.tester import pytest_command
from verify_dag.phases.triage import discover


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (("pytest",), ()),
        (("py.test", "-x"), ("-x",)),
        ((".venv/bin/pytest", "tests"), ("tests",)),
        (
            ("python", "-m", "pytest", "-q", "tests", "-k", "test_a"),
            ("-q", "tests", "-k", "test_a"),
        ),
        (("python3.11", "-m", "pytest", "t"), ("t",)),
        (("uv", "run", "pytest", "-m", "not slow"), ("-m", "not slow")),
        (("coverage", "run", "--branch", "-m", "pytest", "tests/unit"), ("tests/unit",)),
        (("python", "-m", "coverage", "run", "-m", "pytest"), ()),
        (("coverage", "run", "script.py"), None),
        (("python", "-m", "unittest"), None),
        (("make", "test"), None),
        (("npm", "test"), None),
    ],
)
def test_pytest_invocations_are_recognised(
    argv: tuple[str, ...], expected: tuple[str, ...] | None
) -> None:
    assert pytest_command.args(argv) == expected


def test_selection_keeps_what_selects_and_drops_what_would_break_the_run() -> None:
    kept, dropped = pytest_command.selection(
        (
            "-q",
            "--cov",
            "src",
            "tests/unit",
            "-k",
            "a or b",
            "-m",
            "not slow",
            "-p",
            "no:warnings",
            "-o",
            "xfail_strict=true",
            "--ignore=tests/x",
            "-x",
            "--cov-report=xml",
            "-n",
            "4",
            "-nauto",
            "--lf",
            "--sw",
            "-p",
            "no:junitxml",
            "--junitxml",
            "out.xml",
            "--rootdir=sub",
            "--collect-only",
            "--pdb",
            "--",
            "-weird-node-id",
        )
    )
    assert kept == (
        "-q",
        "tests/unit",
        "-k",
        "a or b",
        "-m",
        "not slow",
        "-p",
        "no:warnings",
        "-o",
        "xfail_strict=true",
        "--ignore=tests/x",
        "-x",
        "--",
        "-weird-node-id",
    )
    assert [text for text, _ in dropped] == [
        "--cov src",
        "--cov-report=xml",
        "-n 4",
        "-nauto",
        "--lf",
        "--sw",
        "-p no:junitxml",
        "--junitxml out.xml",
        "--rootdir=sub",
        "--collect-only",
        "--pdb",
    ]
    # `--cov` followed by an option takes no value: the option stays.
    assert pytest_command.selection(("--cov", "-x")) == (
        ("-x",),
        (("--cov", pytest_command._COVERAGE),),
    )


def test_tox_substitutions_are_resolved_or_left_out_with_their_option(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "tox.ini": (
                "[testenv]\ncommands =\n    pip install -e .\n"
                "    pytest --basetemp {envtmpdir} -p no:randomly \\\n"
                "        {posargs:{toxinidir}/tests -k 'not slow'}\n"
            ),
            "a.py": "",
        },
    )
    test = discover(tmp_path).test
    assert test is not None and test.tool == "pytest"
    # A value left behind would become --basetemp's: pytest empties that directory.
    assert test.argv == ("pytest", "-p", "no:randomly", "./tests", "-k", "not slow")
    assert test.source == "tox.ini [testenv] commands"


def test_tox_envpython_runs_pytest_as_python_m_pytest(tmp_path: Path) -> None:
    write(
        tmp_path,
        {"tox.ini": "[testenv]\ncommands = {envpython} -m pytest tests/unit\n", "a.py": ""},
    )
    test = discover(tmp_path).test
    assert test is not None and test.tool == "pytest"
    assert test.argv == ("python", "-m", "pytest", "tests/unit")


def test_the_default_testenv_outranks_named_ones_and_the_rest_are_noted(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "tox.ini": "[testenv:integration]\ncommands = pytest tests/integration\n"
            "[testenv]\ncommands = pytest {posargs} tests/unit\n",
            ".github/workflows/ci.yml": "jobs:\n  t:\n    steps:\n"
            "      - run: python -m pytest -x\n",
            "a.py": "",
        },
    )
    tc = discover(tmp_path)
    assert tc.test is not None and tc.test.argv == ("pytest", "tests/unit")
    assert [c.argv for c in tc.of("test")] == [("pytest", "tests/unit")]
    assert (
        "test: also found pytest tests/integration (tox.ini [testenv:integration] commands);"
        " using pytest tests/unit"
    ) in tc.notes
    assert any(n.startswith("test: also found python -m pytest -x (.github") for n in tc.notes)


def test_engineer_skill_pytest_command_is_the_pytest_command(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "tests/test_a.py": "",
            "Makefile": "test:\n\tpytest tests\n",
            "package.json": json.dumps({"scripts": {"test": "jest"}}),
        },
    )
    eng = EngineerContext(
        skill_dir=".claude/skills/x-engineer",
        test_commands=("python -m pytest -q tests -k test_a",),
    )
    tc = discover(tmp_path, eng)
    assert [(c.argv, c.tool) for c in tc.of("test")] == [
        (("python", "-m", "pytest", "-q", "tests", "-k", "test_a"), "pytest")
    ]
    assert tc.test is not None and tc.test.source == "engineer skill (.claude/skills/x-engineer)"
    assert any(
        n.startswith("test: also found pytest tests (Makefile target test)") for n in tc.notes
    )
    assert any(n.startswith("test: also found npm test") for n in tc.notes)


def test_a_pytest_line_that_needs_a_shell_falls_back_to_bare_pytest(tmp_path: Path) -> None:
    write(tmp_path, {"Makefile": "test:\n\tpytest $(PYTEST_ARGS) | tee log\n", "tests/t.py": ""})
    tc = discover(tmp_path)
    assert tc.test is not None and tc.test.argv == ("pytest",)
    assert tc.test.source.startswith("Makefile target test")  # where pytest was seen
    assert any("needs a shell; its pytest arguments are not used" in n for n in tc.notes)


@pytest.mark.parametrize(
    ("declared", "expected"),
    [
        (("-q", "tests/unit", "-k", "fast", "-m", "not slow"), ()),
        (
            ("-p", "myplugin", "-o", "python_files=check_*.py", "tests"),
            ("-p", "myplugin", "-o", "python_files=check_*.py"),
        ),
        (
            ("-Werror", "--strict-markers", "--import-mode=importlib", "-c", "ci.ini", "--cov=src"),
            ("-Werror", "--strict-markers", "--import-mode=importlib", "-c", "ci.ini"),
        ),
        (("-p", "no:junitxml", "--", "-p", "x"), ()),
    ],
)
def test_config_options_are_what_a_single_rerun_needs(
    declared: tuple[str, ...], expected: tuple[str, ...]
) -> None:
    assert pytest_command.config_options(declared) == expected
