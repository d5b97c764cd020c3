"""The corpus's cases, each read by hand from the package's own declarations.

The oracle of a case is what its maintainers run for tests on this interpreter (CPython 3.11):
the tox env tox would pick for it, the nox test session, or, for projects that declare no
runner, the dependency group or extra meant for tests and plain pytest. ``source`` says where
each was read. Where a declared command carries options that do not change the counts
(coverage reports, ``--junitxml``, a ``diff-cover`` step), they are left out and ``source``
says so. Dependency groups are spelled out by hand (include-groups resolved) so the oracle
does not depend on any installer's PEP 735 support.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Case:
    name: str
    package: str
    old: str
    new: str
    shape: str
    vcs_version: bool = False  # version from git tags: see make_corpus's docstring
    # pip install arguments for the oracle's venv, run in the checkout ("." is the project).
    oracle_install: tuple[str, ...] = ()
    # The declared test command, run in the checkout with the venv's bin first on PATH.
    oracle_command: tuple[str, ...] = ("python", "-m", "pytest")
    # Environment the declaration sets (tox set_env / setenv).
    oracle_env: dict[str, str] = field(default_factory=dict)
    source: str = ""
    # The type checker as the project declares it (pinned version, its extra deps, its
    # command), for checking verify-dag's severity 7+ findings; empty where nothing is declared.
    # --no-pretty and --show-error-codes only change how mypy prints, not what it reports.
    static_install: tuple[str, ...] = ()
    static_command: tuple[str, ...] = ()
    static_source: str = ""


CASES: list[Case] = [
    Case(
        "iniconfig",
        "iniconfig",
        "2.3.0",
        "2.3.1",
        "setuptools-scm, PEP 735 group, [tool.mypy] strict",
        vcs_version=True,
        oracle_install=(".", "pytest>=8.4.2", "pytest-xdist>=3.8"),
        source="pyproject [dependency-groups] dev; no runner declared; testpaths=testing",
        static_install=("mypy==2.4.0", "pytest==7.2.0", "tomli"),
        static_command=("mypy", "--no-pretty", "--show-error-codes", "src", "testing"),
        static_source=".pre-commit-config.yaml mirrors-mypy rev v2.4.0, additional_dependencies, "
        "all python files",
    ),
    Case(
        "platformdirs",
        "platformdirs",
        "4.14.4",
        "4.14.5",
        "hatch-vcs, tox.toml dependency_groups",
        vcs_version=True,
        oracle_install=(
            ".",
            "appdirs==1.4.4",
            "covdefaults>=2.3",
            "diff-cover>=10.2",
            "pytest>=9.0.2",
            "pytest-cov>=7",
            "pytest-mock>=3.15.1",
        ),
        oracle_command=("python", "-m", "pytest", "--durations", "10", "tests"),
        source="tox.toml env_run_base (env 3.11): dependency_groups test; cov options and "
        "diff-cover step left out",
    ),
    Case(
        "filelock",
        "filelock",
        "4.2.8",
        "4.2.9",
        "hatch-vcs, tox.toml set_env + commands_pre (env 3.15 only)",
        vcs_version=True,
        oracle_install=(
            ".",
            "covdefaults>=2.3",
            "diff-cover>=10.2",
            "pytest>=9.0.3",
            "pytest-asyncio>=1.3",
            "pytest-cov>=7.1",
            "pytest-mock>=3.15.1",
            "pytest-randomly>=3.16",
            "pytest-timeout>=2.4",
            "virtualenv>=21.2",
        ),
        oracle_command=("python", "-m", "pytest", "--durations", "10", "tests"),
        oracle_env={"PYTHONPATH": "tasks"},
        source="tox.toml env_run_base (env 3.11): dependency_groups test, "
        "set_env PYTHONPATH=tasks; commands_pre belongs to env 3.15, which tox skips here; "
        "cov options left out",
    ),
    Case(
        "more-itertools",
        "more-itertools",
        "11.2.0",
        "11.2.1",
        "flit, tox.ini unittest runner",
        oracle_install=(".",),
        oracle_command=("python", "-m", "unittest", "-v"),
        source="tox.ini [testenv]: commands = {envpython} -m unittest -v; no deps",
    ),
    Case(
        "tomlkit",
        "tomlkit",
        "0.15.1",
        "0.15.2",
        "poetry-core, PEP 735 group, [tool.mypy] files",
        oracle_install=(".", "pytest~=7.2", "pytest-cov~=4.0", "PyYAML~=6.0"),
        oracle_command=("python", "-m", "pytest", "-q", "tests"),
        source="pyproject [dependency-groups] dev, its test part (pre-commit, mypy, Sphinx, furo "
        "left out); no runner declared",
        static_install=(".", "mypy==1.19.1", "pytest~=7.2", "PyYAML~=6.0"),
        static_command=("mypy", "--no-pretty", "--show-error-codes"),
        static_source="[dependency-groups] dev pins mypy==1.19.1; [tool.mypy] files = tomlkit, "
        "tests",
    ),
    Case(
        "findpython",
        "findpython",
        "0.8.0",
        "0.9.0",
        "pdm-backend (scm version), PEP 735 group, pdm script",
        vcs_version=True,
        oracle_install=(".", "pytest"),
        oracle_command=("python", "-m", "pytest", "tests"),
        source="[dependency-groups] tests; [tool.pdm.scripts] test = pytest tests",
    ),
    Case(
        "markupsafe",
        "markupsafe",
        "3.0.3",
        "3.0.4",
        "setup.py C extension, [tool.tox] in pyproject, mypy files, tox typing env (mypy+pyright)",
        oracle_install=(".", "pytest"),
        oracle_command=("python", "-m", "pytest", "-v", "--tb=short"),
        source="[tool.tox] env_run_base: dependency_groups tests (pytest-run-parallel only on "
        ">=3.13); --basetemp left out",
        static_install=(".", "mypy", "pyright", "pytest"),
        static_command=("mypy", "--no-pretty", "--show-error-codes"),
        static_source="[tool.tox.env.typing]: dependency_groups typing, commands mypy "
        "([tool.mypy] files)",
    ),
    Case(
        "attrs",
        "attrs",
        "25.4.0",
        "26.1.0",
        "hatch-vcs, tox factor-conditional groups/commands, tox pyright env",
        vcs_version=True,
        oracle_install=(
            ".",
            "cloudpickle",
            "hypothesis",
            "pympler",
            "pytest",
            "pytest-xdist[psutil]",
        ),
        oracle_command=("python", "-m", "pytest", "-n", "auto"),
        source="tox.ini [testenv] py311-tests: dependency_groups tests, commands pytest -n auto",
        static_install=(
            ".",
            "mypy",
            "cloudpickle",
            "hypothesis",
            "pympler",
            "pytest",
            "pytest-xdist[psutil]",
        ),
        static_command=("mypy", "--no-pretty", "--show-error-codes", "typing-examples"),
        static_source="tox.ini mypy factor: commands mypy typing-examples (and the .pyi stubs)",
    ),
    Case(
        "pluggy",
        "pluggy",
        "1.6.0",
        "1.7.0",
        "setuptools-scm, tox factor deps and setenv",
        vcs_version=True,
        oracle_install=(".", "pytest>=8", "pytest-benchmark", "coverage"),
        oracle_command=("python", "-m", "pytest"),
        oracle_env={"_PYTEST_SETUP_SKIP_PLUGGY_DEP": "1"},
        source="tox.ini [testenv] py311: dependency_groups testing, setenv; [pytest] in tox.ini",
        static_install=("mypy==2.4.0", "pytest"),
        static_command=("mypy", "--no-pretty", "--show-error-codes", "src", "testing"),
        static_source=".pre-commit-config.yaml mirrors-mypy rev v2.4.0, files ^(src/|testing/), "
        "deps pytest",
    ),
    Case(
        "pyproject-hooks",
        "pyproject-hooks",
        "1.3.0",
        "1.3.3",
        "flit, noxfile test session",
        oracle_install=("-r", "dev-requirements.txt", "."),
        oracle_command=("python", "-m", "pytest"),
        source="noxfile.py session test: install -r dev-requirements.txt, install ., run pytest",
    ),
    Case(
        "semver",
        "semver",
        "3.1.1",
        "3.1.2",
        "setuptools, tox skip_install, tox mypy env",
        oracle_install=("pytest", "pytest-cov", "setuptools>=70", "setuptools-scm"),
        oracle_command=("python", "-m", "pytest"),
        oracle_env={"PIP_DISABLE_PIP_VERSION_CHECK": "1"},
        source="tox.ini [testenv] (skip_install = true): deps, commands pytest",
        static_install=("mypy",),
        static_command=("mypy", "--no-pretty", "--show-error-codes", "src"),
        static_source="tox.ini [testenv:mypy]: deps mypy, commands mypy src (skip_install "
        "inherited)",
    ),
    Case(
        "execnet",
        "execnet",
        "2.1.1",
        "2.1.2",
        "hatch-vcs, tox usedevelop, mypy files",
        vcs_version=True,
        oracle_install=("-e", ".", "pytest", "pytest-timeout"),
        oracle_command=("python", "-m", "pytest", "testing"),
        oracle_env={"PYTHONWARNDEFAULTENCODING": "1"},
        source="tox.ini [testenv]: usedevelop, deps pytest pytest-timeout, setenv",
        static_install=(".", "mypy", "pytest"),
        static_command=("mypy", "--no-pretty", "--show-error-codes"),
        static_source="[tool.mypy] files = src, testing; no pinned version or deps declared in "
        "the sdist",
    ),
    Case(
        "packaging",
        "packaging",
        "26.3",
        "26.4",
        "flit, PEP 735 group, mypy files naming a file the sdist lacks",
        oracle_install=(
            ".",
            "coverage[toml]>=7.2.0",
            "hypothesis>=6.0.0",
            "pip>=21.1",
            "pretend",
            "pytest>=6.2.0",
            "tomli_w",
        ),
        oracle_command=("python", "-m", "pytest"),
        source="[dependency-groups] test; the noxfile is not in the sdist",
        static_install=(
            ".",
            "mypy",
            "coverage[toml]>=7.2.0",
            "hypothesis>=6.0.0",
            "pip>=21.1",
            "pretend",
            "pytest>=6.2.0",
            "tomli_w",
        ),
        static_command=("mypy", "--no-pretty", "--show-error-codes", "src", "tests"),
        static_source="[tool.mypy] files = src, tests, noxfile.py (noxfile.py is not in the "
        "sdist, so named without it); the test group for imports",
    ),
    Case(
        "click",
        "click",
        "8.1.7",
        "8.1.8",
        "flit, tox.ini with pinned requirements files, tox typing env (mypy, pyright)",
        oracle_install=(".", "-r", "requirements/tests.txt"),
        oracle_command=("python", "-m", "pytest", "-v", "--tb=short"),
        source="tox.ini [testenv]: deps -r requirements/tests.txt, package wheel, "
        "commands pytest -v --tb=short --basetemp={envtmpdir}",
        static_install=(".", "-r", "requirements/typing.txt"),
        static_command=("mypy", "--no-pretty", "--show-error-codes"),
        static_source="tox.ini [testenv:typing]: deps -r requirements/typing.txt, commands mypy "
        "([tool.mypy] files = src/click, tests/typing)",
    ),
    # Environment styles: hatch-only, nox-only, uv.lock with dependency groups, jaraco's, a
    # suite of thousands, a web framework's patch release.
    Case(
        "mkdocs",
        "mkdocs",
        "1.6.0",
        "1.6.1",
        "hatch only: matrix env test (python x type), a unittest script, features",
        oracle_install=(".[i18n]", "coverage"),
        oracle_command=("python", "-m", "unittest", "discover", "-s", "mkdocs", "-p", "*tests.py"),
        source="[tool.hatch.envs.test] (matrix py3.11-default): features i18n, dependencies "
        'coverage, script test = python -m unittest discover -s mkdocs -p "*tests.py"',
    ),
    Case(
        "hatch-vcs",
        "hatch-vcs",
        "0.4.0",
        "0.5.0",
        "hatch only: hatch.toml default env, a pytest script",
        oracle_install=(".", "coverage[toml]", "pytest"),
        oracle_command=("python", "-m", "pytest", "tests"),
        source="hatch.toml [envs.default]: dependencies coverage[toml], pytest; script "
        "test = pytest {args:tests}",
    ),
    Case(
        "python-ulid",
        "python-ulid",
        "2.7.0",
        "3.0.0",
        "hatch only: hatch.toml hatch-test env (hatch test), features, hatch-vcs",
        vcs_version=True,
        oracle_install=(
            ".[pydantic]",
            "freezegun==1.5.*",
            "coverage-enable-subprocess==1.0",
            "coverage[toml]~=7.11",
            "pytest~=9.0",
            "pytest-mock~=3.12",
            "pytest-randomly~=3.15",
            "pytest-rerunfailures~=14.0",
            "pytest-xdist[psutil]~=3.5",
        ),
        oracle_command=("python", "-m", "pytest", "-p", "no:randomly", "tests"),
        source="hatch.toml [envs.hatch-test]: extra-dependencies freezegun, features pydantic, "
        "over hatch test's own dependencies (hatch 1.18); hatch test runs pytest -p no:randomly "
        "tests",
    ),
    Case(
        "stamina",
        "stamina",
        "25.2.0",
        "26.1.0",
        "nox only: parametrized tests session, --group tests, hatch-vcs",
        vcs_version=True,
        oracle_install=(".", "coverage[toml]", "pytest>=9", "anyio", "dirty-equals"),
        oracle_command=("python", "-m", "pytest"),
        source="noxfile.py tests(opt_deps=[]): install . coverage[toml] --group tests, run "
        "coverage run -m pytest (coverage left out)",
    ),
    Case(
        "referencing",
        "referencing",
        "0.36.2",
        "0.37.0",
        "nox only: tests session from a pinned test-requirements.txt, hatch-vcs",
        vcs_version=True,
        oracle_install=(
            ".",
            "attrs==25.4.0",
            "iniconfig==2.1.0",
            "packaging==25.0",
            "pluggy==1.6.0",
            "pygments==2.19.2",
            "pytest==8.4.2",
            "pytest-subtests==0.14.2",
            "rpds-py==0.27.1",
        ),
        oracle_command=("python", "-m", "pytest", "referencing"),
        source="noxfile.py tests (uv backend): install -r test-requirements.txt, spelled out "
        "here since pip rejects its `referencing @ file:.` line; run pytest referencing",
    ),
    Case(
        "sqlparse",
        "sqlparse",
        "0.6.0",
        "0.6.1",
        "uv.lock with dependency groups, no runner (Makefile: uv run --group dev pytest)",
        oracle_install=(".", "pytest", "coverage"),
        oracle_command=("python", "-m", "pytest", "tests/"),
        source="Makefile test: uv run --group dev pytest tests/; the group's test part (pytest, "
        "coverage; ruff, build, sphinx, furo, hatch do not change what runs)",
    ),
    Case(
        "zipp",
        "zipp",
        "4.1.1",
        "4.1.2",
        "jaraco: pytest.ini --doctest-modules, pytest-enabler, checkdocs, ruff, mypy items",
        vcs_version=True,
        oracle_install=("-e", ".[test,check,cover,enabler,type]"),
        oracle_command=("python", "-m", "pytest"),
        oracle_env={"PYTHONWARNDEFAULTENCODING": "1"},
        source="tox.ini [testenv]: usedevelop, extras test check cover enabler type, setenv, "
        "commands pytest",
    ),
    Case(
        "pygments",
        "pygments",
        "2.19.1",
        "2.19.2",
        "thousands of tests (golden files), tox use_develop, pytest-randomly",
        oracle_install=(
            "-e",
            ".",
            "pytest ~= 8.2",
            "pytest-cov",
            "pytest-randomly",
            "wcag-contrast-ratio",
        ),
        oracle_command=("python", "-m", "pytest"),
        source="tox.ini [testenv]: use_develop, deps pytest~=8.2 pytest-cov pytest-randomly "
        "wcag-contrast-ratio, commands pytest",
    ),
    Case(
        "flask",
        "flask",
        "3.1.2",
        "3.1.3",
        "web framework patch: [tool.tox] uv-venv-lock-runner, uv.lock, group tests",
        oracle_install=(
            ".",
            "asgiref==3.11.0",
            "greenlet==3.3.1",
            "pytest==9.0.2",
            "python-dotenv==1.2.1",
            "blinker==1.9.0",
            "click==8.3.1",
            "itsdangerous==2.2.0",
            "jinja2==3.1.6",
            "markupsafe==3.0.3",
            "werkzeug==3.1.5",
        ),
        oracle_command=("python", "-m", "pytest", "-v", "--tb=short"),
        source="[tool.tox.env_run_base]: runner uv-venv-lock-runner, dependency_groups tests, "
        "commands pytest -v --tb=short --basetemp={env_tmp_dir}; versions as uv.lock pins them "
        "for Python 3.11 (the newest pytest fails to collect tests/test_cli.py)",
    ),
    Case(
        "attrs-23",
        "attrs",
        "23.1.0",
        "23.2.0",
        "the debugger's base env: the head's tox env py311-tests is not the base's py311, whose "
        "install_command is pip's",
        vcs_version=True,
        oracle_install=(".[tests]",),
        oracle_command=("python", "-m", "pytest", "-n", "auto"),
        source="tox.ini [testenv] (env py311-tests): package wheel, extras tests, commands "
        "pytest -n auto",
    ),
]
