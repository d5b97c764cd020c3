"""hatch projects: their envs built by hatch itself (``hatch env show --json``, ``hatch env
create``), the suite run as ``hatch test`` or the env's script runs it. Real hatch, uv and
pytest on real repositories in tmp_path; the by-hand run is ``hatch test`` itself."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from conftest import make_repo

from verify_dag.models.scope import Scope
from verify_dag.phases import tester, triage

OURS = f"{sys.version_info.major}.{sys.version_info.minor}"
PYPROJECT = (
    '[build-system]\nrequires = ["hatchling"]\nbuild-backend = "hatchling.build"\n\n'
    '[project]\nname = "verify-dag-hx"\nversion = "0.1"\n\n'
    '[tool.hatch.build.targets.wheel]\npackages = ["src/hx"]\n\n'
)
HATCH_TEST = (
    "[tool.hatch.envs.hatch-test]\n"
    'extra-dependencies = ["iniconfig"]\n'
    'default-args = ["tests/unit"]\n\n'
    '[tool.hatch.envs.hatch-test.env-vars]\nHX_MODE = "matrix"\n\n'
    # A matrix over this Python and one this host lacks: hatch test runs the one it can.
    f'[[tool.hatch.envs.hatch-test.matrix]]\npython = ["{OURS}", "3.99"]\n'
)
UNIT = (
    "import os\n\nimport hx\n\n\n"
    "def test_version():\n    assert hx.X == 1\n\n\n"
    "def test_extra_dependency():\n    import iniconfig  # noqa: F401\n\n\n"
    "def test_env_vars():\n    assert os.environ['HX_MODE'] == 'matrix'\n\n\n"
    "def test_fails():\n    assert hx.X == 2\n"
)


def _project(root: Path, hatch: str) -> Path:
    repo = make_repo(root)
    repo.write("pyproject.toml", PYPROJECT + hatch)
    repo.write("src/hx/__init__.py", "X = 1\n")
    repo.write("tests/unit/test_unit.py", UNIT)
    # Not in hatch test's default-args: never part of the run.
    repo.write("tests/integration/test_service.py", "def test_service():\n    raise OSError\n")
    repo.commit("hatch project")
    return repo.path


def _whole() -> Scope:
    return Scope(mode="all", new_commit="0" * 40)


def _by_hand(repo: Path, tmp_path: Path, *argv: str) -> str:
    """hatch itself, as a maintainer runs it, with a data directory of its own."""
    (tmp_path / "hatch-config.toml").touch()
    env = {
        **os.environ,
        "HATCH_DATA_DIR": str(tmp_path / "hatch-data"),
        "HATCH_CACHE_DIR": str(tmp_path / "hatch-cache"),
        "HATCH_CONFIG": str(tmp_path / "hatch-config.toml"),
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]]),
    }
    out = subprocess.run(
        [sys.executable, "-m", "hatch", *argv], cwd=repo, env=env, capture_output=True, text=True
    )
    found = re.findall(r"^=+ (.+) in [\d.]+s", out.stdout, re.MULTILINE)
    assert found, out.stdout + out.stderr
    return found[-1]


def test_hatch_test_runs_in_the_matrix_env_for_this_python(tmp_path: Path) -> None:
    repo = _project(tmp_path / "repo", HATCH_TEST)
    outcome, _ = tester.run_with_coverage(
        _whole(), triage.discover(repo), repo, 600, cache_dir=tmp_path / "cache"
    )
    name = f"hatch-test.py{OURS}"
    assert outcome.env is not None and (outcome.env.builder, outcome.env.name) == ("hatch", name)
    assert outcome.notes.startswith("3 passed, 1 failed, 0 errors, 0 skipped"), outcome.notes
    assert outcome.reason == (
        f"test command discovered: pytest -p no:randomly tests/unit (hatch env {name} commands)"
    )
    (failed,) = outcome.findings
    assert failed.nodeid == "tests/unit/test_unit.py::test_fails"
    assert _by_hand(repo, tmp_path, "test", "--python", OURS) == "1 failed, 3 passed"


def test_a_hatch_script_that_runs_pytest(tmp_path: Path) -> None:
    """No hatch-test: the env whose script runs pytest (`hatch run test`) is the suite's."""
    scripts = (
        '[tool.hatch.envs.default]\ndependencies = ["pytest", "iniconfig"]\n\n'
        '[tool.hatch.envs.default.env-vars]\nHX_MODE = "matrix"\n\n'
        '[tool.hatch.envs.default.scripts]\ntest = "pytest {args:tests/unit}"\n\n'
        '[tool.hatch.envs.lint]\ndetached = true\ndependencies = ["ruff"]\n'
        '[tool.hatch.envs.lint.scripts]\ncheck = "ruff check ."\n'
    )
    repo = _project(tmp_path / "repo", scripts)
    toolchain = triage.discover(repo)
    outcome, _ = tester.run_with_coverage(
        _whole(), toolchain, repo, 600, cache_dir=tmp_path / "cache"
    )
    assert outcome.env is not None and outcome.env.name == "default", outcome.notes
    assert outcome.notes.startswith("3 passed, 1 failed"), outcome.notes
    assert "pytest tests/unit (hatch env default commands)" in outcome.reason
    # The lint env's script is a command line triage reads, as tox's commands are.
    assert any(c.source == "hatch env lint scripts.check" for c in toolchain.of("lint"))
    assert _by_hand(repo, tmp_path, "run", "test") == "1 failed, 3 passed"


def test_a_hatch_script_that_runs_unittest_runs_as_declared(tmp_path: Path) -> None:
    """mkdocs' shape: a matrix env whose test script runs unittest; it runs in that env as
    declared, and its result is unittest's own summary."""
    unittest_env = (
        '[tool.hatch.envs.test]\ndependencies = ["iniconfig"]\n'
        "[tool.hatch.envs.test.scripts]\n"
        "test = 'python -m unittest discover -s tests/unit -p \"test_*.py\"'\n\n"
        f'[[tool.hatch.envs.test.matrix]]\npython = ["3.99", "{OURS}"]\ntype = ["default"]\n'
    )
    repo = _project(tmp_path / "repo", unittest_env)
    (repo / "tests/unit/test_unit.py").write_text(
        "import unittest\n\nimport hx\n\n\nclass T(unittest.TestCase):\n"
        "    def test_ok(self):\n        import iniconfig  # noqa: F401\n\n"
        "    def test_fails(self):\n        self.assertEqual(hx.X, 2)\n",
        encoding="utf-8",
    )
    outcome, _ = tester.run_with_coverage(
        _whole(), triage.discover(repo), repo, 600, cache_dir=tmp_path / "cache"
    )
    assert outcome.env is not None and outcome.env.name == f"test.py{OURS}-default"
    assert outcome.status == "FAILED", outcome.notes
    assert "unittest: Ran 2 tests, FAILED (failures=1)" in outcome.notes, outcome.notes


def test_env_plugins_a_project_requires_go_in_a_hatch_of_its_own(tmp_path: Path) -> None:
    """hatch installs `[tool.hatch.env] requires` into its own environment first: never
    verify-dag's (read-only to the build, and shared by every project), a venv of its own."""
    import importlib.util

    plugin = "hatch-requirements-txt"
    assert importlib.util.find_spec("hatch_requirements_txt") is None
    repo = _project(
        tmp_path / "repo", f'[tool.hatch.env]\nrequires = ["{plugin}"]\n\n' + HATCH_TEST
    )
    outcome, _ = tester.run_with_coverage(
        _whole(), triage.discover(repo), repo, 600, cache_dir=tmp_path / "cache"
    )
    assert outcome.notes.startswith("3 passed, 1 failed"), [f.description for f in outcome.findings]
    assert importlib.util.find_spec("hatch_requirements_txt") is None
    (tool,) = (tmp_path / "cache" / "hatch").glob("tool-*/lib/python*/site-packages")
    assert list(tool.glob("hatch_requirements_txt*")), list(tool.iterdir())
