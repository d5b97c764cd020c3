"""testenv: real venvs built by real pip from local paths (no network), cached in tmp dirs."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from conftest import make_repo, venv_by_hand, write

from verify_dag.models.findings import SkillOutcome
from verify_dag.models.scope import FileChange, Scope
from verify_dag.models.toolchain import Command, Toolchain
from verify_dag.phases import tester, triage
from verify_dag.phases.tester import env as testenv
from verify_dag.phases.tester.coverage import CoverageData
from verify_dag.phases.tester.env import base as testenv_base
from verify_dag.phases.tester.env import plan as testenv_plan
from verify_dag.phases.tester.env import seal

PYTEST = Toolchain(
    commands=(
        Command(
            kind="test", argv=("pytest",), source="tests directory", exists=True, tool="pytest"
        ),
    )
)
NPM = Toolchain(
    commands=(
        Command(kind="test", argv=("npm", "test"), source="package.json scripts.test", exists=True),
    )
)
TINYPKG = {
    "vendor/tinypkg/pyproject.toml": '[build-system]\nrequires = ["setuptools>=61"]\n'
    'build-backend = "setuptools.build_meta"\n\n'
    '[project]\nname = "verify-dag-tinypkg"\nversion = "0.1"\n',
    "vendor/tinypkg/verify_dag_tinypkg/__init__.py": "def double(x):\n    return 2 * x\n",
    "requirements-test.txt": "./vendor/tinypkg\n",
    "tests/test_tiny.py": "import pytest\nimport verify_dag_tinypkg as t\n\n"
    "def test_double():\n    assert t.double(2) == 4\n\n"
    "@pytest.mark.parametrize('n', [0, 1, 5])\n"
    "def test_many(n):\n    assert t.double(n) == n + n\n\n"
    "def test_wrong():\n    assert t.double(3) == 7\n\n"
    "@pytest.mark.skip(reason='later')\ndef test_later():\n    pass\n",
}


def whole(*paths: str) -> Scope:
    return Scope(
        mode="branch",
        new_commit="0" * 40,
        included=tuple(FileChange(path=p, status="added") for p in paths),
    )


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, list[testenv_base.Env]]:
    """A repository whose tests need a package declared only in its requirements file, and the
    envs two concurrent provisionings of it returned, on top of a half-built env left behind."""
    repo = write(tmp_path_factory.mktemp("tiny"), TINYPKG)
    cache = tmp_path_factory.mktemp("cache")
    plan = testenv_plan.read(repo)
    assert plan is not None
    half = cache / "envs" / testenv_plan.key(repo, plan)[:24]
    (half / "bin").mkdir(parents=True)
    (half / "bin" / "python").write_text("a run that died here", encoding="utf-8")
    return repo, cache, provisioned_at_once(repo, cache, 2)


def provisioned_at_once(
    repo: Path, cache: Path, phases: int, timeout: float | None = None
) -> list[testenv_base.Env]:
    """What ``phases`` threads provisioning ``repo``'s env at the same moment got (each waited
    for up to ``timeout`` seconds)."""
    envs: list[testenv_base.Env] = []
    threads = [
        threading.Thread(target=lambda: envs.append(testenv.provision(repo, PYTEST, cache)))
        for _ in range(phases)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout)
    return envs


def junit_counts(path: Path) -> str:
    suite = ET.parse(path).getroot()
    suite = suite if suite.tag == "testsuite" else suite.find("testsuite")  # type: ignore[assignment]
    assert suite is not None
    tests, failures, errors, skipped = (
        int(suite.get(k, "0")) for k in ("tests", "failures", "errors", "skipped")
    )
    return (
        f"{tests - failures - errors - skipped} passed, {failures} failed, {errors} errors, "
        f"{skipped} skipped (pytest junit)"
    )


def test_one_build_under_the_lock_and_a_half_built_env_is_replaced(
    tiny: tuple[Path, Path, list[testenv_base.Env]],
) -> None:
    repo, cache, envs = tiny
    assert [e.error for e in envs] == [None, None]
    assert sorted(e.reused for e in envs) == [False, True]  # the second waited and reused
    first, second = envs
    assert first.key == second.key and first.python == second.python
    assert first.source == "requirements-test.txt" and not first.project
    assert first.python is not None and first.python.parent.parent.parent == cache / "envs"
    # The stale interpreter of the dead run is gone: the env was rebuilt, not reused.
    out = subprocess.run(
        [str(first.python), "-c", "import verify_dag_tinypkg, pytest, coverage"],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    # pip ran in a copy: no build files next to the vendored sources in the checkout.
    assert sorted(p.name for p in (repo / "vendor/tinypkg").iterdir()) == [
        "pyproject.toml",
        "verify_dag_tinypkg",
    ]


def test_a_cached_env_written_after_its_build_is_rebuilt_not_used(tmp_path: Path) -> None:
    """The seal: whatever wrote into a cached env after its build (a test that escaped a
    sandbox this host could not give), the next run finds out and rebuilds, with a note."""
    repo = write(tmp_path / "repo", TINYPKG)
    cache = tmp_path / "cache"
    built = testenv.provision(repo, PYTEST, cache)
    assert built.error is None and built.python is not None and not built.reused
    again = testenv.provision(repo, PYTEST, cache)
    assert again.reused and again.notes == ()
    site = testenv_base.purelib(built.python)
    assert site is not None
    target = site / "_pytest" / "python.py"
    with target.open("a", encoding="utf-8") as fh:
        fh.write("\n# planted\n")
    (site / "planted.pth").write_text("import os\n", encoding="utf-8")
    rebuilt = testenv.provision(repo, PYTEST, cache)
    assert rebuilt.error is None and not rebuilt.reused
    assert rebuilt.notes == (
        "the cached env was rebuilt: added "
        f"{(site / 'planted.pth').relative_to(built.python.parent.parent).as_posix()}; changed "
        f"{target.relative_to(built.python.parent.parent).as_posix()}",
    )
    assert "# planted" not in target.read_text(encoding="utf-8")
    assert not (site / "planted.pth").exists()
    assert testenv.provision(repo, PYTEST, cache).reused


def test_phases_asking_for_a_finished_env_at_once_share_one_walk_of_its_seal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run's tester, static analysis and probes ask for the cached env at the same moment: the
    first walk of its seal answers all three (a shared lock lets them in together), where an
    exclusive lock made them walk ten thousand files one after another."""
    repo = write(tmp_path / "repo", TINYPKG)
    cache = tmp_path / "cache"
    assert not testenv.provision(repo, PYTEST, cache).reused
    walks: list[str] = []
    waiting = threading.Semaphore(0)
    real_walk, real_check = seal._walk, seal._Check

    class Counted(real_check):  # type: ignore[misc,valid-type]
        def __init__(self) -> None:
            super().__init__()
            wait = self.done.wait

            def counted(timeout: float | None = None) -> bool:
                waiting.release()
                return wait(timeout)

            self.done.wait = counted

    def walk(root: Path, skip: frozenset[str]) -> Any:
        walks.append(str(root))
        if len(walks) == 1:
            # The first walk goes on once the two other phases wait for its answer (or 20 s
            # pass: then they were kept out, and walk on their own after it).
            for _ in range(2):
                waiting.acquire(timeout=10)
        return real_walk(root, skip)

    monkeypatch.setattr(seal, "_Check", Counted)
    monkeypatch.setattr(seal, "_walk", walk)
    got = provisioned_at_once(repo, cache, 3, timeout=60)
    assert [(e.error, e.reused) for e in got] == [(None, True)] * 3
    assert len(walks) == 1, walks
    # A later ask walks again: the shared answer was the one walk under way, not a memory.
    assert testenv.provision(repo, PYTEST, cache).reused and len(walks) == 2


def test_same_counts_as_a_venv_built_by_hand(
    tiny: tuple[Path, Path, list[testenv_base.Env]], tmp_path: Path
) -> None:
    repo, cache, _ = tiny
    assert importlib.util.find_spec("verify_dag_tinypkg") is None  # not in our interpreter
    venv = tmp_path / "by-hand"
    venv_by_hand(venv, "pytest", "-r", "requirements-test.txt", cwd=repo)
    shutil.rmtree(repo / "vendor/tinypkg/build", ignore_errors=True)
    for info in (repo / "vendor/tinypkg").glob("*.egg-info"):
        shutil.rmtree(info)
    by_hand = subprocess.run(
        [
            str(venv / "bin/python"),
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            f"--junitxml={tmp_path / 'junit.xml'}",
        ],
        cwd=repo,
        capture_output=True,
        text=True,
    )
    assert by_hand.returncode == 1, by_hand.stdout
    outcome, data = tester.run_with_coverage(
        whole("tests/test_tiny.py"), PYTEST, repo, 120, cache_dir=cache
    )
    assert outcome.status == "FAILED"
    assert outcome.notes == (
        junit_counts(tmp_path / "junit.xml") + "; env from requirements-test.txt (cached)"
    )
    assert outcome.notes.startswith("4 passed, 1 failed, 0 errors, 1 skipped")
    (finding,) = outcome.findings
    assert finding.nodeid == "tests/test_tiny.py::test_wrong"
    assert data is not None and [f.path for f in data.files] == ["tests/test_tiny.py"]


def test_the_key_follows_declared_files_local_packages_and_python(tmp_path: Path) -> None:
    repo = write(tmp_path / "r", TINYPKG)
    plan = testenv_plan.read(repo)
    assert plan is not None and plan.hashed == ("requirements-test.txt", "vendor/tinypkg")
    key = testenv_plan.key(repo, plan)
    assert testenv_plan.key(repo, plan) == key
    (repo / "README.md").write_text("not a declaring file\n", encoding="utf-8")
    assert testenv_plan.key(repo, plan) == key
    (repo / "vendor/tinypkg/verify_dag_tinypkg/__init__.py").write_text("X = 1\n", "utf-8")
    assert testenv_plan.key(repo, plan) != key  # the local package changed: a different env


def test_what_is_installed_follows_the_declarations(tmp_path: Path) -> None:
    def plan(files: dict[str, str]) -> tuple[tuple[str, ...], tuple[str, ...], str | None, str]:
        root = write(tmp_path / str(len(list(tmp_path.iterdir()))), files)
        found = testenv_plan.read(root)
        assert found is not None
        return found.requirements, found.groups, found.project, found.source

    project = '[project]\nname = "p"\nversion = "1"\n'
    extras = project + '[project.optional-dependencies]\ndocs = ["x"]\ndev = ["y"]\ntest = ["z"]\n'
    assert plan({"pyproject.toml": extras}) == ((), (), ".[test]", "pyproject.toml .[test]")
    assert plan({"pyproject.toml": project}) == ((), (), ".", "pyproject.toml .")
    assert plan(
        {"requirements/test.txt": "a\n", "requirements.txt": "b\n", "requirements-dev.txt": "c\n"}
    )[:2] == (("requirements/test.txt", "requirements.txt"), ())
    assert plan({"requirements-dev.txt": "-e .[dev]\n", "pyproject.toml": extras})[2] is None
    groups = project + '[dependency-groups]\ntest = ["a", {include-group = "x"}]\nx = ["b"]\n'
    assert plan({"pyproject.toml": groups}) == (
        (),
        ("test",),
        ".",
        "pyproject.toml [dependency-groups] test, pyproject.toml .",
    )
    # A tox.ini is tox's to read (env/tox.py): the plan takes nothing from it.
    tox = "[testenv]\ndeps =\n    pytest-mock\n"
    assert plan({"tox.ini": tox, "setup.py": ""}) == ((), (), ".", "setup.py .")
    assert plan({"requirements.txt": "b\n"})[0] == ("requirements.txt",)
    # Nothing to install: no venv, the suite runs on our interpreter as before.
    bare = write(
        tmp_path / "bare",
        {
            "pyproject.toml": "[tool.pytest.ini_options]\n",
            "tests/test_x.py": "def test_x():\n    pass\n",
        },
    )
    assert testenv_plan.read(bare) is None
    assert testenv.provision(bare, PYTEST, tmp_path / "cache") == testenv_base.Env()
    assert not (tmp_path / "cache").exists()


def test_a_src_layout_project_is_installed_per_run_never_stale(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The project goes into each run's layer from the checkout, editable, in one install that
    needs no index: no dependencies, its build requirements already in the cached env (read by
    name, wherever the cache lives: from a cache outside $VERIFY_DAG_CACHE the layer saw no
    setuptools and fell back to an isolated build, 1.5 s a run), so the index's proxy is not
    started for it."""
    from verify_dag import processes

    editable: list[bool | None] = []
    run = processes.run

    def recording(argv: list[str], **kw: object) -> processes.Result:
        if "install" in argv and "-e" in argv:
            sandbox = kw.get("sandbox")
            editable.append(getattr(sandbox, "network", None))
        return run(argv, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(processes, "run", recording)
    repo = write(
        tmp_path / "proj",
        {
            "pyproject.toml": '[build-system]\nrequires = ["setuptools>=61"]\n'
            'build-backend = "setuptools.build_meta"\n\n'
            '[project]\nname = "verify-dag-srcpkg"\nversion = "0.1"\n\n'
            '[project.optional-dependencies]\ntest = ["iniconfig"]\n',
            "src/verify_dag_srcpkg/__init__.py": "def answer():\n    return 41\n",
            "tests/test_answer.py": "from verify_dag_srcpkg import answer\n\n"
            "def test_answer():\n    assert answer() == 42\n",
        },
    )
    cache = tmp_path / "cache"
    scope = whole("src/verify_dag_srcpkg/__init__.py")
    first, data = tester.run_with_coverage(scope, PYTEST, repo, 120, cache_dir=cache)
    assert first.status == "FAILED", first.findings
    assert first.notes.endswith("; env from pyproject.toml .[test]")
    # Measured on the checkout's own file, which the editable install imports.
    assert data is not None and data.files[0].path == "src/verify_dag_srcpkg/__init__.py"
    assert data.files[0].executed == (1, 2)
    (repo / "src/verify_dag_srcpkg/__init__.py").write_text(
        "def answer():\n    return 42\n", encoding="utf-8"
    )
    second, _ = tester.run_with_coverage(scope, PYTEST, repo, 120, cache_dir=cache)
    assert second.status == "PASSED", second.findings
    assert second.notes.endswith("(cached)")
    assert editable == [False, False]  # one install per run, each without the network
    # The cached env keeps the dependencies, never the project itself.
    (env_dir,) = (cache / "envs").glob("*/")
    check = subprocess.run(
        [
            str(env_dir / "bin/python"),
            "-c",
            "import iniconfig, importlib.util as u; print(u.find_spec('verify_dag_srcpkg'))",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert check.stdout.strip() == "None"


def test_provisioning_failure_is_a_blocked_environment_finding(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_API_TOKEN", "supersecret123")
    repo = write(
        tmp_path / "r",
        {
            "requirements-test.txt": "./vendor/supersecret123-missing\n",
            "tests/test_x.py": "def test_x():\n    pass\n",
        },
    )
    cache = tmp_path / "cache"
    outcome, data = tester.run_with_coverage(whole(), PYTEST, repo, 60, cache_dir=cache)
    assert data is None
    assert outcome.status == "BLOCKED" and outcome.skill == "tester"
    (finding,) = outcome.findings
    assert (finding.title, finding.severity, finding.issue_class) == (
        "Test environment could not be provisioned",
        10,
        "environment",
    )
    assert "pip install from requirements-test.txt failed" in finding.description
    assert "supersecret123" not in finding.description and "[REDACTED]" in finding.description
    # Nothing half-built is left to be reused.
    assert not [p for p in (cache / "envs").iterdir() if p.is_dir()]


def test_pip_keeps_network_settings_but_not_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    monkeypatch.setenv("PIP_INDEX_URL", "https://pypi.example/simple")
    monkeypatch.setenv("MY_API_TOKEN", "supersecret123")
    monkeypatch.setenv("PYTHONPATH", "/somewhere/of/ours")
    env = testenv_base.pip_env()
    assert env["HTTPS_PROXY"] == "http://proxy.example:3128"
    assert env["PIP_INDEX_URL"] == "https://pypi.example/simple"
    assert "MY_API_TOKEN" not in env and "PYTHONPATH" not in env
    assert testenv_base.redacted("GET https://bob:hunter22@pypi.example/simple failed") == (
        "GET https://[REDACTED]@pypi.example/simple failed"
    )


@pytest.mark.skipif(shutil.which("npm") is None, reason="npm is not installed")
def test_node_modules_cached_by_lockfile_and_linked(tmp_path: Path) -> None:
    package = (
        '{"name": "t", "version": "1.0.0", "scripts": '
        '{"test": "node -e \\"require(\'./index.js\')\\""}}\n'
    )
    lock = (
        '{"name": "t", "version": "1.0.0", "lockfileVersion": 3, "requires": true, '
        '"packages": {"": {"name": "t", "version": "1.0.0"}}}\n'
    )
    cache = tmp_path / "cache"
    envs = []
    for name in ("a", "b"):
        repo = write(
            tmp_path / name,
            {"package.json": package, "package-lock.json": lock, "index.js": "console.log('ok')\n"},
        )
        env = testenv.provision(repo, NPM, cache)
        assert env.error is None and env.python is None
        assert (repo / "node_modules").is_symlink()
        envs.append(env)
    assert [e.reused for e in envs] == [False, True] and envs[0].key == envs[1].key
    # A local file: dependency cannot be installed away from the worktree: npm runs there.
    repo = write(
        tmp_path / "c",
        {
            "package.json": '{"name": "c", "version": "1.0.0", '
            '"dependencies": {"d": "file:./d"}}\n',
            "d/package.json": '{"name": "d", "version": "1.0.0"}\n',
        },
    )
    env = testenv.provision(repo, NPM, cache)
    assert env.error is None, env.error
    assert env.notes == ("npm install ran in the worktree: node_modules not cached",)
    assert (repo / "node_modules" / "d").exists()


def test_a_nox_test_session_declares_the_env(tmp_path: Path) -> None:
    files = {k: v for k, v in TINYPKG.items() if k != "requirements-test.txt"}
    # referencing's shape: the session's pytest line names what it runs, as an absolute path
    # built in the noxfile, after its posargs, with variables of its own; the other test file
    # is not part of it (collected, it would fail on its import).
    files["tests/test_elsewhere.py"] = "import not_installed_anywhere\n"
    files["tests/test_vars.py"] = (
        "import os\n\ndef test_session_variables():\n    assert os.environ['NOX_SET'] == 'yes'\n"
    )
    files["noxfile.py"] = (
        "import pathlib\nimport nox\n\nHERE = pathlib.Path(__file__).parent\n\n\n"
        "@nox.session\ndef lint(session):\n    session.install('ruff')\n\n\n"
        "@nox.session(python=['3.11'])\ndef tests(session):\n"
        "    session.install('./vendor/tinypkg')\n"
        "    session.run('python', '-c', 'print(1)')\n"
        "    session.env['NOX_SET'] = 'yes'\n"
        "    session.run('pytest', *session.posargs, HERE / 'tests' / 'test_tiny.py',"
        " 'tests/test_vars.py')\n"
        # stamina's shape: the test session notifies a report session, whose venv nox makes
        # in the same run, after the test session's.
        "    session.notify('report')\n\n\n"
        "@nox.session\ndef report(session):\n    session.install('iniconfig')\n"
        "    session.run('pytest', 'tests/test_elsewhere.py')\n"
    )
    repo = write(tmp_path / "noxrepo", files)
    outcome, _ = tester.run_with_coverage(
        whole("tests/test_tiny.py"), PYTEST, repo, 300, cache_dir=tmp_path / "cache"
    )
    # The package exists only through the nox session's install: the suite ran in that env,
    # which nox built (the lint session was not chosen: it runs no tests), with the line its
    # test session runs (not the notified session's, not its python line), with its variables.
    assert outcome.notes.startswith("5 passed, 1 failed, 0 errors, 1 skipped"), outcome.notes
    assert outcome.notes.endswith("; env from nox session tests-3.11"), outcome.notes
    with testenv.runtime(repo, PYTEST, tmp_path / "cache") as env:
        pass
    assert env.commands == (("pytest", "tests/test_tiny.py", "tests/test_vars.py"),)
    assert ("NOX_SET", "yes") in env.variables


def test_tox_commands_select_the_same_tests_as_a_venv_built_by_hand(tmp_path: Path) -> None:
    """The audit's case: tox runs `pytest -q tests/unit`; the integration tests need a service
    and are not part of that run, so they must not be part of ours either."""
    repo = make_repo(tmp_path / "repo")
    for rel, text in TINYPKG.items():
        if rel.startswith("vendor/"):
            repo.write(rel, text)
    repo.write(
        "tox.ini",
        "[tox]\nenvlist = py\n\n[testenv]\ndeps =\n    pytest\n"
        "    {toxinidir}/vendor/tinypkg\n"
        "commands = pytest -q tests/unit {posargs}\n",
    )
    repo.write(
        "tests/unit/test_tiny.py",
        "import verify_dag_tinypkg as t\n\n"
        "def test_double():\n    assert t.double(2) == 4\n\n"
        "def test_zero():\n    assert t.double(0) == 0\n",
    )
    repo.write(
        "tests/integration/test_service.py",
        "def test_service():\n    raise ConnectionError('no service')\n",
    )
    repo.commit("tox-run unit tests")
    toolchain = triage.discover(repo.path)
    outcome, _ = tester.run_with_coverage(
        whole("tests/unit/test_tiny.py"), toolchain, repo.path, 300, cache_dir=tmp_path / "cache"
    )

    venv = tmp_path / "by-hand"
    venv_by_hand(venv, "pytest", "./vendor/tinypkg", cwd=repo.path)
    by_hand = subprocess.run(
        [
            str(venv / "bin/pytest"),
            "-q",
            "tests/unit",
            "-p",
            "no:cacheprovider",
            f"--junitxml={tmp_path / 'junit.xml'}",
        ],
        cwd=repo.path,
        capture_output=True,
        text=True,
    )
    assert by_hand.returncode == 0, by_hand.stdout
    assert outcome.status == "PASSED", outcome.findings
    assert outcome.notes == (junit_counts(tmp_path / "junit.xml") + "; env from tox env py")
    assert outcome.notes.startswith("2 passed, 0 failed, 0 errors, 0 skipped")
    assert outcome.reason == ("test command discovered: pytest -q tests/unit (tox env py commands)")


PY = f"py{sys.version_info.major}{sys.version_info.minor}"
HATCH_VCS = (
    '[build-system]\nrequires = ["hatchling", "hatch-vcs"]\nbuild-backend = "hatchling.build"\n\n'
    '[project]\nname = "verify-dag-vcs"\ndynamic = ["version"]\n\n'
    # No fallback version: the build fails unless it sees the repository's git tags.
    '[tool.hatch.version]\nsource = "vcs"\n\n'
    '[tool.hatch.build.targets.wheel]\npackages = ["src/verify_dag_vcs"]\n'
)
VCS_TEST = (
    "import importlib.metadata, os, pathlib\n\n"
    "def test_version():\n    assert importlib.metadata.version('verify-dag-vcs') == '1.2.3'\n"
)


def _tagged(repo_dir: Path, files: dict[str, str]) -> Path:
    repo = make_repo(repo_dir)
    for rel, text in {"src/verify_dag_vcs/__init__.py": "X = 1\n", **files}.items():
        repo.write(rel, text)
    repo.commit("release")
    repo.git("tag", "v1.2.3")
    return repo.path


def test_tox_builds_the_env_with_factor_deps_set_env_commands_pre_and_a_vcs_version(
    tmp_path: Path,
) -> None:
    """tox reads the declaration, tox builds the env and tox runs the suite: a factor-conditional
    dep, set_env and a commands_pre step all apply, and the package's version comes from git."""
    tox_ini = (
        f"[tox]\nenvlist = {PY}-{{cov,plain}}, lint\n\n"
        "[testenv]\ndeps =\n    pytest\n    cov: iniconfig\n"
        # A project's own PYTHONPATH: tox passes the tester's no more, its plugin still loads.
        "set_env =\n    VERIFY_DAG_FROM_TOX = yes\n    PYTHONPATH = {toxinidir}/src\n"
        "commands_pre = python -c \"open('{envtmpdir}/pre', 'w').write('done')\"\n"
        "commands = pytest {posargs}\n\n"
        "[testenv:lint]\ndeps = ruff\ncommands = ruff check .\n"
    )
    test = VCS_TEST + (
        "\ndef test_factor_dep():\n    import iniconfig  # noqa: F401\n\n"
        "def test_set_env():\n    assert os.environ['VERIFY_DAG_FROM_TOX'] == 'yes'\n\n"
        "def test_commands_pre_ran():\n"
        "    assert pathlib.Path(os.environ['TOX_ENV_DIR'], 'tmp', 'pre').read_text() == 'done'\n"
    )
    repo = _tagged(
        tmp_path / "repo",
        {"pyproject.toml": HATCH_VCS, "tox.ini": tox_ini, "tests/test_vcs.py": test},
    )
    toolchain = triage.discover(repo)
    outcome, data = tester.run_with_coverage(
        whole("tests/test_vcs.py"), toolchain, repo, 600, cache_dir=tmp_path / "cache"
    )
    assert outcome.status == "PASSED", outcome.findings
    assert outcome.notes.startswith("4 passed, 0 failed, 0 errors, 0 skipped"), outcome.notes
    assert outcome.notes.endswith(f"; env from tox env {PY}-cov"), outcome.notes
    assert data is not None  # coverage was measured inside tox's env
    # tox installed an sdist of the package: its lines ran from that copy, and qa says so.
    assert data.installed_copy == f"tox env {PY}-cov"


def test_tox_without_an_env_for_this_python_runs_the_test_env_on_it(tmp_path: Path) -> None:
    from verify_dag.phases.tester.env import toxchoice as testenv_tox

    repo = write(
        tmp_path / "r",
        {
            "tox.ini": "[tox]\nenvlist = py27-django, docs\n\n[testenv]\ncommands = pytest\n\n"
            "[testenv:docs]\ncommands = sphinx-build docs out\n"
        },
    )
    work = tmp_path / "tox-work"
    choice = testenv_tox.chosen(repo, work, deadline=1e12)
    assert choice.env is not None and choice.env.name == f"{PY}-django", choice
    assert "py27-django" in choice.notes[0]


def test_dependency_groups_and_a_vcs_version_without_tox(tmp_path: Path) -> None:
    """PEP 735 groups (include-group too) are installed by uv; the project's version is read
    from git while the env is built."""
    pyproject = HATCH_VCS + (
        '\n[dependency-groups]\ntest = ["pytest", {include-group = "extra"}]\n'
        'extra = ["iniconfig"]\n'
    )
    test = VCS_TEST + "\ndef test_group():\n    import iniconfig  # noqa: F401\n"
    repo = _tagged(tmp_path / "repo", {"pyproject.toml": pyproject, "tests/test_g.py": test})
    outcome, _ = tester.run_with_coverage(
        whole("tests/test_g.py"), PYTEST, repo, 600, cache_dir=tmp_path / "cache"
    )
    assert outcome.status == "PASSED", outcome.findings
    assert outcome.notes.startswith("2 passed, 0 failed"), outcome.notes
    assert "pyproject.toml [dependency-groups] test" in outcome.notes


def test_a_tox_env_that_runs_unittest_runs_as_declared(tmp_path: Path) -> None:
    """tox's own commands decide the suite: unittest, run by tox, with unittest's counts."""
    repo = make_repo(tmp_path / "repo")
    repo.write(
        "tox.ini",
        "[tox]\nenvlist = py\nskipsdist = true\n\n"
        "[testenv]\nskip_install = true\ncommands = python -m unittest discover -s tests -v\n",
    )
    repo.write(
        "tests/test_u.py",
        "import unittest\n\n\nclass T(unittest.TestCase):\n"
        "    def test_sub(self):\n        for i in range(3):\n"
        "            with self.subTest(i=i):\n                self.assertGreaterEqual(i, 0)\n\n"
        "    def test_two(self):\n        self.assertEqual(1 + 1, 2)\n\n"
        "    @unittest.skip('later')\n    def test_later(self):\n        pass\n",
    )
    repo.commit("unittest suite")
    outcome, data = tester.run_with_coverage(
        whole("tests/test_u.py"),
        triage.discover(repo.path),
        repo.path,
        300,
        cache_dir=tmp_path / "cache",
    )
    assert outcome.status == "PASSED", outcome.findings
    assert outcome.notes == (
        "tox run -e py exited 0; unittest: Ran 3 tests, OK (skipped=1); env from tox env py"
    ), outcome.notes
    assert data is None


def test_poetry_and_pdm_test_groups_are_installed(tmp_path: Path) -> None:
    """poetry's groups in poetry's own constraint language, read by poetry-core; pdm's legacy
    dev-dependencies; both become the env's requirements."""
    poetry = (
        '[build-system]\nrequires = ["poetry-core>=2"]\n'
        'build-backend = "poetry.core.masonry.api"\n\n'
        '[tool.poetry]\nname = "verify-dag-poetry"\nversion = "0.1.0"\ndescription = ""\n'
        'authors = ["x <x@example.com>"]\npackages = [{include = "vdpoetry"}]\n\n'
        '[tool.poetry.dependencies]\npython = "^3.9"\n\n'
        '[tool.poetry.group.test.dependencies]\npytest = "*"\niniconfig = "^2.0"\n'
    )
    repo = write(
        tmp_path / "poetry",
        {
            "pyproject.toml": poetry,
            "vdpoetry/__init__.py": "X = 1\n",
            "tests/test_p.py": "import iniconfig  # noqa: F401\n\ndef test_p():\n    pass\n",
        },
    )
    plan = testenv_plan.read(repo)
    assert plan is not None and plan.group_lines == ("pytest", "iniconfig (>=2.0,<3.0)")
    assert "pyproject.toml [tool.poetry.group.test]" in plan.source
    outcome, _ = tester.run_with_coverage(
        whole("tests/test_p.py"), PYTEST, repo, 600, cache_dir=tmp_path / "cache"
    )
    assert outcome.status == "PASSED", outcome.findings
    pdm = write(
        tmp_path / "pdm",
        {
            "pyproject.toml": '[tool.pdm.dev-dependencies]\ntest = ["pytest", "iniconfig>=2", '
            '"-e file:///${PROJECT_ROOT}/#egg=me"]\n'
        },
    )
    found = testenv_plan.read(pdm)
    assert found is not None and found.group_lines == ("pytest", "iniconfig>=2")


def test_a_tox_uv_lock_runner_env_keeps_coverage_through_its_sync(tmp_path: Path) -> None:
    """tox-uv's uv-venv-lock-runner syncs the env to uv.lock exactly when it is built: the suite
    then runs under coverage, with the locked packages, and a run syncs nothing
    (--skip-uv-sync)."""
    from verify_dag.phases.tester.env.base import uv_bin

    repo = make_repo(tmp_path / "repo")
    repo.write(
        "pyproject.toml",
        '[build-system]\nrequires = ["setuptools>=68"]\nbuild-backend = "setuptools.build_meta"\n\n'
        '[project]\nname = "verify-dag-locked"\nversion = "0.1"\nrequires-python = ">=3.9"\n\n'
        '[dependency-groups]\ntest = ["pytest", "iniconfig"]\n\n'
        "[tool.setuptools]\npackages = []\n",
    )
    repo.write(
        "tox.ini",
        "[tox]\nenvlist = py\n\n[testenv]\nrunner = uv-venv-lock-runner\n"
        # flask's shape: a wheel of the package, which tox-uv's sync reinstalls on every run
        # unless told not to sync (the env is read-only to the run).
        "package = wheel\ndependency_groups = test\ncommands = pytest {posargs}\n",
    )
    # The suite leaves pytest's cache at the env's root, as platformdirs' nested pytest runs do:
    # no change of the env that the next run would rebuild it for.
    repo.write(
        "tests/test_l.py",
        "import os, pathlib\nimport iniconfig  # noqa: F401\n\ndef test_l():\n"
        "    cache = pathlib.Path(os.environ['TOX_ENV_DIR'], '.pytest_cache', 'v', 'cache')\n"
        "    cache.mkdir(parents=True, exist_ok=True)\n"
        "    (cache / 'nodeids').write_text('[]')\n",
    )
    subprocess.run([uv_bin(), "lock", "-q"], cwd=repo.path, check=True, capture_output=True)
    repo.commit("locked")

    def run() -> tuple[SkillOutcome, CoverageData | None]:
        return tester.run_with_coverage(
            whole("tests/test_l.py"),
            triage.discover(repo.path),
            repo.path,
            600,
            cache_dir=tmp_path / "cache",
        )

    outcome, data = run()
    assert outcome.status == "PASSED", outcome.findings
    assert outcome.notes.startswith("1 passed, 0 failed"), outcome.notes
    assert data is not None  # coverage.py ran inside the synced env
    # A run through tox installs nothing (--skip-env-install) and leaves the env's seal whole:
    # the next run uses the env as built rather than rebuilding it.
    again, _ = run()
    assert again.status == "PASSED" and "rebuilt" not in again.notes, again.notes


def test_a_tox_toml_project_whose_package_env_wants_a_python_this_host_lacks(
    tmp_path: Path,
) -> None:
    """tox.toml names envs `env.NAME` in overrides (the tester's commands must replace the env's
    own), and a package env on a Python this host lacks is built on this one instead."""
    repo = make_repo(tmp_path / "repo")
    repo.write(
        "pyproject.toml",
        '[build-system]\nrequires = ["setuptools>=68"]\nbuild-backend = "setuptools.build_meta"\n\n'
        '[project]\nname = "verify-dag-toml"\nversion = "0.1"\n\n'
        "[tool.setuptools]\npackages = []\n",
    )
    repo.write(
        "tox.toml",
        f'env_list = ["{PY}"]\n\n[env_run_base]\ndeps = ["pytest"]\n'
        'set_env.FROM_TOX = "yes"\ncommands = [["pytest", "-q", "tests"], ["python", "-c", '
        '"raise SystemExit(3)"]]\n\n[env_pkg_base]\nbase_python = ["3.99"]\n',
    )
    repo.write(
        "tests/test_t.py",
        "import os\n\ndef test_t():\n    assert os.environ['FROM_TOX'] == 'yes'\n",
    )
    repo.commit("tox.toml")
    outcome, _ = tester.run_with_coverage(
        whole("tests/test_t.py"),
        triage.discover(repo.path),
        repo.path,
        600,
        cache_dir=tmp_path / "cache",
    )
    # The env's second command (exit 3) never ran: only the tester's pytest line did.
    assert outcome.status == "PASSED", outcome.findings
    assert outcome.notes.startswith("1 passed, 0 failed"), outcome.notes
    assert outcome.reason.endswith(f"(tox env {PY} commands)"), outcome.reason


def test_a_native_tool_tox_table_in_pyproject_runs_the_testers_commands(tmp_path: Path) -> None:
    """[tool.tox] in pyproject.toml: tox's overrides name its tables tool.tox.env.NAME."""
    repo = make_repo(tmp_path / "repo")
    repo.write(
        "pyproject.toml",
        '[build-system]\nrequires = ["setuptools>=68"]\nbuild-backend = "setuptools.build_meta"\n\n'
        '[project]\nname = "verify-dag-native"\nversion = "0.1"\n\n'
        "[tool.setuptools]\npackages = []\n\n"
        f'[tool.tox]\nenv_list = ["{PY}"]\n\n[tool.tox.env_run_base]\ndeps = ["pytest"]\n'
        'commands = [["pytest", "-q", "tests"], ["python", "-c", "raise SystemExit(3)"]]\n',
    )
    repo.write("tests/test_n.py", "def test_n():\n    pass\n")
    repo.commit("native tox table")
    outcome, _ = tester.run_with_coverage(
        whole("tests/test_n.py"),
        triage.discover(repo.path),
        repo.path,
        600,
        cache_dir=tmp_path / "cache",
    )
    assert outcome.status == "PASSED", outcome.findings
    assert outcome.notes.startswith("1 passed, 0 failed"), outcome.notes


def test_an_envs_bytecode_is_in_place_and_where_a_prefix_finds_it_after_each_build(
    tmp_path: Path,
) -> None:
    """compile_site compiles and copies: the prefix tree holds exactly the files, at exactly
    the paths, that a compile under PYTHONPYCACHEPREFIX writes; and again after a later build
    reinstalled a module (a tox env's package, the merge base's after the head's), copying
    only what changed."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = testenv_base.purelib(python)
    assert site is not None
    tree = venv / testenv_base.PYCACHE_TREE

    def mirrored() -> dict[Path, bytes]:
        return {p.relative_to(tree): p.read_bytes() for p in tree.rglob("*.pyc")}

    def expected(name: str) -> dict[Path, bytes]:
        """What compileall itself writes under a prefix."""
        prefix = tmp_path / name
        subprocess.run(
            [str(python), "-m", "compileall", "-q", str(site)],
            check=True,
            env={**os.environ, "PYTHONPYCACHEPREFIX": str(prefix)},
        )
        return {p.relative_to(prefix): p.read_bytes() for p in prefix.rglob("*.pyc")}

    write(site, {"pkg/__init__.py": "", "pkg/mod.py": "VALUE = 42\n", "top.py": "X = 1\n"})
    testenv_base.compile_site(python, deadline=time.monotonic() + 120)
    assert len(mirrored()) == 3 and mirrored() == expected("first")
    assert list(site.rglob("__pycache__/*.pyc"))  # and in place, for runs without a prefix
    (top,) = [p for p in tree.rglob("top.*.pyc")]
    kept = top.stat().st_mtime_ns

    # A reinstall: the package's directory replaced, its module changed, no bytecode.
    shutil.rmtree(site / "pkg")
    write(site, {"pkg/__init__.py": "", "pkg/mod.py": "VALUE = 43  # the base's\n"})
    testenv_base.compile_site(python, deadline=time.monotonic() + 120)
    assert mirrored() == expected("second")
    assert top.stat().st_mtime_ns == kept  # unchanged, not copied again


def _loaded_from_bytecode(prefix: Path, *modules: str) -> set[str]:
    """The modules of ``modules`` that a new interpreter, its bytecode going to ``prefix``,
    read compiled from there (``python -v`` says so) rather than compiling them again."""
    proc = subprocess.run(
        [sys.executable, "-v", "-c", f"import {', '.join(modules)}"],
        env={**os.environ, "PYTHONPYCACHEPREFIX": str(prefix)},
        capture_output=True,
        text=True,
        check=True,
    )
    found = set()
    for name in modules:
        spec = importlib.util.find_spec(name)
        assert spec is not None and spec.origin is not None
        source = Path(spec.origin)
        pyc = prefix / source.relative_to(source.anchor).with_suffix(
            f".{sys.implementation.cache_tag}.pyc"
        )
        if f"# code object from '{pyc}'" in proc.stderr:
            found.add(name)
    return found


def test_a_runs_bytecode_prefix_reads_the_interpreters_own_compiled_modules(
    tmp_path: Path,
) -> None:
    """Under a prefix Python reads bytecode from it alone: a run's prefix links in the
    interpreter's standard library and site-packages, compiled, so a suite on verify-dag's own
    interpreter does not compile them again. A bare prefix, for comparison, reads none."""
    modules = ("json.decoder", "email.parser", "pluggy", "_pytest.python")
    linked = testenv_base.pycache_prefix(testenv_base.Env(), tmp_path / "pycache")
    assert _loaded_from_bytecode(linked, *modules) == set(modules)
    bare = tmp_path / "bare"
    bare.mkdir()
    assert _loaded_from_bytecode(bare, *modules) == set()


def test_repository_code_cannot_write_the_interpreters_bytecode_tree(
    tmp_path: Path, sandbox_mode: str
) -> None:
    """The run's prefix is writable, the tree linked into it is not: a suite can neither plant
    a module's bytecode for later runs nor replace one."""
    from verify_dag import processes
    from verify_dag.phases.tester.env import bytecode
    from verify_dag.sandbox import Policy

    dest = testenv_base.pycache_prefix(testenv_base.Env(), tmp_path / "pycache")
    tree = bytecode.host_tree()
    assert tree is not None
    decoder = Path(importlib.util.find_spec("json.decoder").origin)  # type: ignore[union-attr,arg-type]
    tag = sys.implementation.cache_tag
    planted = dest / decoder.parent.relative_to("/") / f"planted.{tag}.pyc"
    replaced = dest / decoder.relative_to("/").with_suffix(f".{tag}.pyc")
    before = os.readlink(tree / replaced.relative_to(dest))
    script = (
        "import os, sys\n"
        "for target in sys.argv[1:]:\n"
        "    try:\n"
        "        with open(target + '.tmp', 'wb') as fh:\n"
        "            fh.write(b'evil')\n"
        "        os.replace(target + '.tmp', target)\n"
        "        print('wrote', target)\n"
        "    except OSError as exc:\n"
        "        print('refused', target, exc.errno)\n"
    )
    res = processes.run(
        [sys.executable, "-I", "-c", script, str(planted), str(replaced)],
        sandbox=Policy(writable=(dest,)),
        timeout=60,
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.count("refused") == 2, res.stdout
    assert not (tree / planted.relative_to(dest)).exists()
    assert os.readlink(tree / replaced.relative_to(dest)) == before


def test_the_bytecode_tree_stays_out_of_a_system_prefix(monkeypatch: pytest.MonkeyPatch) -> None:
    """Beside the interpreter only when it runs from a venv it may write; an interpreter
    installed in /usr (no venv) keeps its tree in verify-dag's cache instead."""
    from verify_dag.paths import cache_root
    from verify_dag.phases.tester.env import bytecode

    assert bytecode.location() == Path(sys.prefix) / bytecode.IN_VENV
    monkeypatch.setattr(sys, "prefix", sys.base_prefix)
    assert bytecode.location() == cache_root() / "bytecode"
