"""Linters at the versions a project's pre-commit config pins, on the files its hooks are handed:
the config read, the pinned versions really installed by uv, and static findings filtered."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from conftest import write

from verify_dag.models.scope import FileChange, Scope
from verify_dag.models.toolchain import Toolchain
from verify_dag.phases import static
from verify_dag.phases.tester.env import tools as testenv_tools
from verify_dag.phases.triage import discover, invocations
from verify_dag.tools import pinned

CONFIG = """\
files: ^(src|tests)/
repos:
  - repo: https://github.com/astral-sh/ruff-pre-commit
    rev: v0.6.9
    hooks:
      - id: ruff
        args: [--fix]
      - id: ruff-format
  - repo: https://github.com/pre-commit/mirrors-mypy
    rev: 'v1.11.2'
    hooks:
      - id: mypy
        files: ^src/
        exclude: ^src/generated/
        additional_dependencies: [iniconfig==2.0.0]
  - repo: https://github.com/PyCQA/autoflake
    rev: v2.3.1
    hooks:
      - id: autoflake
"""


def test_the_pins_and_where_each_hook_applies(tmp_path: Path) -> None:
    write(tmp_path, {".pre-commit-config.yaml": CONFIG})
    pins = pinned.read(tmp_path)
    assert sorted(pins) == ["mypy", "ruff"]  # autoflake is no PyPI mirror of ours
    assert pins["ruff"].requirement == "ruff==0.6.9"
    assert (pins["mypy"].requirement, pins["mypy"].extra) == ("mypy==1.11.2", ("iniconfig==2.0.0",))
    mypy = pins["mypy"]
    assert mypy.applies("src/pkg/mod.py")
    assert not mypy.applies("tests/test_mod.py")  # the hook's files
    assert not mypy.applies("src/generated/out.py")  # the hook's exclude
    assert not pins["ruff"].applies("docs/conf.py")  # the config's top-level files
    assert pins["ruff"].applies("tests/test_mod.py")


def test_a_mirror_is_known_whatever_the_case_of_its_url(tmp_path: Path) -> None:
    """The pins and triage's reading of the hooks come from one parse of the config, so they
    agree on which hooks are mirrors: GitHub's names are case-insensitive."""
    write(tmp_path, {".pre-commit-config.yaml": CONFIG.replace("astral-sh", "Astral-SH")})
    assert pinned.read(tmp_path)["ruff"].requirement == "ruff==0.6.9"
    lines = invocations.read_precommit(tmp_path)
    assert [(x.tool, x.argv) for x in lines] == [
        ("ruff", ("ruff", "check")),  # --fix is no option of the check
        ("mypy", ("mypy", "--ignore-missing-imports")),  # the mirror's default args
    ]


def test_unreadable_or_absent_configs_pin_nothing(tmp_path: Path) -> None:
    assert pinned.read(tmp_path) == {}
    write(tmp_path, {".pre-commit-config.yaml": "repos: [\n"})
    assert pinned.read(tmp_path) == {}


def test_the_pinned_versions_are_installed_over_the_projects_env(tmp_path: Path) -> None:
    write(tmp_path / "repo", {".pre-commit-config.yaml": CONFIG})
    pins = list(pinned.read(tmp_path / "repo").values())
    built = testenv_tools.build(pins, None, tmp_path / "cache")
    assert built.error is None and built.python is not None, built.error
    versions = (
        subprocess.run(
            [str(built.python), "-m", "ruff", "--version"], capture_output=True, text=True
        ).stdout
        + subprocess.run(
            [str(built.python), "-m", "mypy", "--version"], capture_output=True, text=True
        ).stdout
    )
    assert "ruff 0.6.9" in versions and "mypy 1.11.2" in versions, versions
    again = testenv_tools.build(pins, None, tmp_path / "cache")
    assert again.python == built.python  # cached by what it holds


def test_findings_in_files_the_hook_excludes_are_not_reported(tmp_path: Path) -> None:
    bad = 'x: int = "changed"\n'
    write(
        tmp_path,
        {
            ".pre-commit-config.yaml": CONFIG,
            "pyproject.toml": "[tool.mypy]\nstrict = true\n",
            "src/pkg/__init__.py": bad,
            "tests/test_pkg.py": bad,
        },
    )
    toolchain = Toolchain(
        commands=tuple(c for c in discover(tmp_path).commands if c.tool == "mypy")
    )
    scope = Scope(
        mode="branch",
        new_commit="0" * 40,
        included=(
            FileChange(path="src/pkg/__init__.py", status="added"),
            FileChange(path="tests/test_pkg.py", status="added"),
        ),
    )
    out = static.run(scope, toolchain, tmp_path, 120)
    assert [f.location.path for f in out.findings if f.location] == ["src/pkg/__init__.py"]
    assert "1 in files its pre-commit hook excludes not reported" in out.notes, out.notes


def test_a_linter_a_tox_env_declares_is_provisioned_by_tox(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """flake8 is not installed here; the project's tox env `lint` declares it, at a pinned
    version: tox builds that env and flake8 runs from it, instead of "could not run"."""
    monkeypatch.setenv("VERIFY_DAG_CACHE", str(tmp_path / "cache"))
    repo = tmp_path / "repo"
    write(
        repo,
        {
            "tox.ini": "[tox]\nenvlist = py\n\n[testenv]\ncommands = pytest\n\n"
            "[testenv:lint]\nskip_install = true\ndeps = flake8==7.1.1\ncommands = flake8 src\n",
            "src/a.py": "import os\n",
        },
    )
    (flake8,) = [c for c in discover(repo).commands if c.argv[0] == "flake8"]
    assert not flake8.exists  # the premise: nothing here has flake8
    scope = Scope(
        mode="branch", new_commit="0" * 40, included=(FileChange(path="src/a.py", status="added"),)
    )
    out = static.run(scope, Toolchain(commands=(flake8,)), repo, 300)
    titles = [f.title for f in out.findings]
    assert any("F401" in t for t in titles), (titles, out.notes)
    assert not any("could not run" in t for t in titles)


FAKE_RUFF = """\
import json, os, sys

def main():
    # A stand-in for the ruff the project's tox env pins: it says which copy ran.
    target = sys.argv[-1]
    print(json.dumps([{"code": "X999", "message": "the tox env's ruff ran",
                       "filename": os.path.abspath(target), "location": {"row": 1, "column": 1}}]))
    return 1

if __name__ == "__main__":
    raise SystemExit(main())
"""


def test_ruff_a_named_tox_env_runs_comes_from_that_env(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ruff is installed here, but the project runs it from its tox env `lint`, which pins its
    own copy: that copy is the one that runs."""
    monkeypatch.setenv("VERIFY_DAG_CACHE", str(tmp_path / "cache"))
    repo = tmp_path / "repo"
    write(
        repo,
        {
            "tox.ini": "[tox]\nenvlist = py\n\n[testenv]\ncommands = pytest\n\n"
            "[testenv:lint]\nskip_install = true\ndeps = ./vendor/fakeruff\n"
            "commands = ruff check src\n",
            "vendor/fakeruff/pyproject.toml": '[build-system]\nrequires = ["setuptools>=68"]\n'
            'build-backend = "setuptools.build_meta"\n\n[project]\nname = "fake-ruff-pin"\n'
            'version = "0.0.1"\n\n[project.scripts]\nruff = "ruff.__main__:main"\n\n'
            '[tool.setuptools]\npackages = ["ruff"]\n',
            "vendor/fakeruff/ruff/__init__.py": "",
            "vendor/fakeruff/ruff/__main__.py": FAKE_RUFF,
            "src/a.py": "x = 1\n",
        },
    )
    (ruff,) = [c for c in discover(repo).commands if c.tool == "ruff"]
    assert ruff.exists and "[testenv:lint]" in ruff.source, ruff
    scope = Scope(
        mode="branch", new_commit="0" * 40, included=(FileChange(path="src/a.py", status="added"),)
    )
    out = static.run(scope, Toolchain(commands=(ruff,)), repo, 300)
    assert [f.title for f in out.findings] == ["ruff X999: the tox env's ruff ran"], out.notes
