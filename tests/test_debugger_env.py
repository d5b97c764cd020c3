"""The debugger builds the merge base's env the way the verified commit's was built: real tox
(with tox-uv), real pip and uv, real repositories in tmp_path."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from conftest import Repo, by_failure, make_repo

from verify_dag import git
from verify_dag.models import RunState, VerifyRequest
from verify_dag.phases import debugger, scope, tester, triage

PY = f"py{sys.version_info.major}{sys.version_info.minor}"
PYPROJECT = (
    '[build-system]\nrequires = ["setuptools>=61"]\nbuild-backend = "setuptools.build_meta"\n\n'
    '[project]\nname = "verify-dag-calc"\nversion = "1.0"\n\n'
    '[tool.setuptools.packages.find]\nwhere = ["src"]\n'
)
TESTS = (
    "from calc import add\n\n\n"
    "def test_ok():\n    assert add(1, 1) == 2\n\n\n"
    "def test_old_bug():\n    assert add(2, 2) == 5\n"
)


def _state(repo: Repo) -> RunState:
    """Scope and tester as the DAG runs them, and the state the debugger receives."""
    request = VerifyRequest.model_validate(
        {"repo": str(repo.path), "scope": "branch", "base": "base"}
    )
    sc = scope.run(request)
    with git.worktree(request.repo, sc.new_commit) as wt:
        toolchain = triage.discover(wt)
        tested = tester.run(sc, toolchain, wt, 600)
    return RunState(run_id="t", request=request, scope=sc, toolchain=toolchain, outcomes=(tested,))


def _attrs_like(tmp_path: Path, base_deps: str = "pytest") -> Repo:
    """attrs 23.1.0 -> 23.2.0 in small: the base's env for this Python is `pyXY` with its own
    pip install_command, the head's is `pyXY-tests`, which the base does not declare."""
    repo = make_repo(tmp_path / "repo")
    repo.write("pyproject.toml", PYPROJECT)
    repo.write("src/calc/__init__.py", "def add(a, b):\n    return a + b\n")
    repo.write("tests/test_calc.py", TESTS)
    repo.write(
        "tox.ini",
        f"[tox]\nenvlist = {PY}\n\n[testenv]\ndeps = {base_deps}\ncommands = pytest {{posargs}}\n\n"
        f"[testenv:{PY}]\n"
        "install_command = python -Im pip install --no-compile {opts} {packages}\n",
    )
    repo.commit("base")
    repo.git("tag", "base")
    repo.write(
        "tox.ini",
        f"[tox]\nenv_list = {PY}-tests\n\n[testenv]\ndeps =\n    tests: pytest\n"
        "commands =\n    tests: pytest {posargs}\n",
    )
    repo.write("tests/test_calc.py", TESTS + "\n\ndef test_new():\n    assert add(0, 0) == 1\n")
    repo.commit("head")
    return repo


def test_the_base_env_is_built_like_the_heads(tmp_path: Path) -> None:
    """The head's suite ran in tox env pyXY-tests; the base declares no such env, so tox builds
    its own pyXY there, whose pip install_command is honoured (tox's own virtualenv runner:
    tox-uv's venvs have no pip). Every failure is then determined."""
    state = _state(_attrs_like(tmp_path))
    (tested,) = state.outcomes
    assert tested.env is not None and (tested.env.builder, tested.env.name) == (
        "tox",
        f"{PY}-tests",
    )
    assert tested.notes.startswith("1 passed, 2 failed"), tested.notes
    out = debugger.run(state)
    got = by_failure(out)
    old, new = got["tests/test_calc.py::test_old_bug"], got["tests/test_calc.py::test_new"]
    assert old.pre_existing == "yes", old.evidence
    assert new.pre_existing == "no", new.evidence
    assert f"through tox env {PY}" in old.command
    assert out.notes.startswith("2 failures: 1 pre-existing, 1 new;"), out.notes
    assert f"tox declares no env '{PY}-tests' here: built '{PY}'" in out.notes
    assert "declares a pip install_command: built without tox-uv" in out.notes


def test_a_base_env_that_cannot_be_built_is_said_once(tmp_path: Path) -> None:
    state = _state(_attrs_like(tmp_path, base_deps="pytest\n    verify-dag-no-such-package-xyz"))
    out = debugger.run(state)
    diagnoses = out.diagnoses
    assert [d.pre_existing for d in diagnoses] == ["undetermined", "undetermined"]
    for d in diagnoses:
        assert d.evidence == (
            "the merge base's test environment could not be built (see the notes)"
        ), d.evidence
    assert out.notes.count("could not be built from tox env") == 1, out.notes
    assert "verify-dag-no-such-package-xyz" in out.notes


def test_tox_builds_the_env_asked_for_when_it_lists_it() -> None:
    from verify_dag.phases.tester.env.toxchoice import ToxEnv, choose

    envs = [ToxEnv(PY, "pytest", PY), ToxEnv(f"{PY}-tests", "pytest -x", PY)]
    assert choose(envs).env == envs[0]
    assert choose(envs, want=f"{PY}-tests") == type(choose(envs))(envs[1])
    other = choose(envs, want="py39-gone")
    assert other.env == envs[0]
    assert other.notes == (f"tox declares no env 'py39-gone' here: built '{PY}', its own choice",)


@pytest.mark.parametrize(
    ("command", "pip"),
    [
        ("python -Im pip install --no-compile '{packages}'", True),
        ("python -I -m pip install '{opts}' '{packages}'", True),
        ("/env/bin/pip install {packages}", True),
        ("/work/.venv/bin/uv pip install '{packages}'", False),
        ("uv pip install {packages}", False),
        ("", False),
    ],
)
def test_which_install_commands_need_pip(command: str, pip: bool) -> None:
    from verify_dag.phases.tester.env.toxchoice import ToxEnv

    assert ToxEnv("py", "pytest", "", install_command=command).installs_with_pip is pip


def test_the_base_env_has_a_directory_of_its_own_beside_the_heads(tmp_path: Path) -> None:
    """Head and base declare the same tox env: the base's is built beside the head's, not over
    it, so the next run's suite finds the head's package still installed (one directory for
    both had the two commits' packages replace each other in every such run)."""
    repo = make_repo(tmp_path / "repo")
    repo.write("pyproject.toml", PYPROJECT)
    repo.write("src/calc/__init__.py", "def add(a, b):\n    return a + b\n")
    repo.write("tests/test_calc.py", TESTS)
    repo.write(
        "tox.ini", f"[tox]\nenv_list = {PY}\n\n[testenv]\ndeps = pytest\ncommands = pytest\n"
    )
    repo.commit("base")
    repo.git("tag", "base")
    repo.write("src/calc/__init__.py", "def add(a, b):\n    return b + a\n")
    repo.commit("head")
    state = _state(repo)
    out = debugger.run(state)
    assert by_failure(out)["tests/test_calc.py::test_old_bug"].pre_existing == "yes", out.notes
    tox_dirs = sorted(p.name for p in (tmp_path / "home/.cache/verify-dag/tox").iterdir())
    head_dir, base_dir = [n for n in tox_dirs if not n.endswith((".lock", "-tools"))]
    assert base_dir == f"{head_dir}-base"
    installed = tmp_path / "home/.cache/verify-dag/tox" / head_dir / "verify-dag-installed.json"
    assert installed.read_text(encoding="utf-8").count(repo.git("rev-parse", "HEAD").strip()) == 2
