"""The structure docs/architecture.md's layout promises, checked with the project's own tools.

ruff (format and lint) and mypy run here, so the README's one test command covers them. mypy reads
the package as it is installed, because verify_dag.tasks lives in the top-level tasks/ directory
(a setuptools package-dir mapping) and mypy does not follow that mapping in a source tree.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
import typing
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import TypeGuard

import pytest
from conftest import calc_base, make_repo

ROOT = Path(__file__).resolve().parent.parent
SOURCES = {"verify_dag": ROOT / "verify_dag", "verify_dag.tasks": ROOT / "tasks"}
# The verification tools may use the pipeline; the pipeline never imports them.
TOOLS = ("arbiter", "completion", "contract_tool", "shadow", "fleet")
# The only modules of verify_dag/ that reach the Celery side: the commands, their one client, and
# the app where `celery -A verify_dag` finds it.
CELERY_CLIENTS = ("verify_dag.cli", "verify_dag.client", "verify_dag.celery")
LONG = 400
_BUILT = shutil.ignore_patterns("__pycache__", "*.egg-info")


def _run(
    *argv: str, cwd: Path = ROOT, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=600, check=False
    )


def _modules() -> Iterator[tuple[str, Path]]:
    for package, root in SOURCES.items():
        for path in sorted(root.rglob("*.py")):
            rel = path.relative_to(root).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            name = ".".join([package, *parts])
            if package == "verify_dag" and name.startswith("verify_dag.tasks"):
                continue
            yield name, path


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    """Every module of ours that ``name`` imports, at the top, in a function or for typing."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    is_package = path.name == "__init__.py"
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = name.split(".") if is_package else name.split(".")[:-1]
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            # A submodule named in the import list is the dependency, not its package.
            targets = [
                f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names
            ]
        else:
            continue
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                out.add(target)
    return out


def _graph() -> dict[str, set[str]]:
    mods = dict(_modules())
    known = set(mods)
    return {name: _imports(name, path, known) for name, path in mods.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []
    sys.setrecursionlimit(10_000)

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycle() -> None:
    assert _cycles(_graph()) == []


def test_the_pipeline_never_imports_the_verification_tools() -> None:
    tools = tuple(f"verify_dag.{t}" for t in TOOLS)
    allowed = (*tools, "verify_dag.cli", "verify_dag.tasks")
    wrong = {
        (name, dep)
        for name, deps in _graph().items()
        if not name.startswith(allowed)
        for dep in deps
        if dep.startswith(tools)
    }
    assert wrong == set()


def test_only_the_commands_and_the_client_reach_the_celery_side() -> None:
    wrong = {
        (name, dep)
        for name, deps in _graph().items()
        if not name.startswith(("verify_dag.tasks", *CELERY_CLIENTS))
        for dep in deps
        if dep.startswith("verify_dag.tasks")
    }
    assert wrong == set()


def test_long_modules_say_why() -> None:
    silent = []
    for name, path in _modules():
        lines = path.read_text(encoding="utf-8").splitlines()
        if len(lines) > LONG and not any(line.startswith("# Long module: ") for line in lines):
            silent.append(f"{name} ({len(lines)} lines)")
    assert silent == []


def test_every_package_directory_is_installed() -> None:
    listed = set(
        tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    )
    on_disk = {n for n, p in _modules() if p.name == "__init__.py"}
    assert on_disk == listed


def _need(tool: str) -> None:
    if _run(sys.executable, "-m", tool, "--version").returncode != 0:
        if os.environ.get("CI"):
            pytest.fail(f"{tool} is not installed")
        pytest.skip(f"{tool} is not installed")


def test_ruff_format_and_lint_are_clean() -> None:
    _need("ruff")
    fmt = _run(sys.executable, "-m", "ruff", "format", "--check", ".")
    assert fmt.returncode == 0, fmt.stdout + fmt.stderr
    lint = _run(sys.executable, "-m", "ruff", "check", "--output-format", "concise", ".")
    assert lint.returncode == 0, lint.stdout + lint.stderr


def test_mypy_is_clean_on_the_installed_package_and_on_the_tests(tmp_path: Path) -> None:
    _need("mypy")
    # Built from a copy of the working tree: setuptools reuses a checkout's build/ directory,
    # where modules deleted since the last build live on.
    source = tmp_path / "source"
    source.mkdir()
    for entry in ("pyproject.toml", "README.md", "verify_dag", "tasks", "schemas"):
        if (ROOT / entry).is_dir():
            shutil.copytree(ROOT / entry, source / entry, symlinks=True, ignore=_BUILT)
        else:
            shutil.copy2(ROOT / entry, source / entry)
    staged = tmp_path / "site"
    # uv (a dependency of verify-dag's) builds the wheel as pip would, in an isolated env of the
    # declared build requirements, and installs that env in a fraction of pip's time.
    install = _run(
        sys.executable, "-m", "uv", "pip", "install", "-q", "--no-deps",
        "--python", sys.executable, "--target", str(staged), str(source),
    )  # fmt: skip
    assert install.returncode == 0, install.stdout + install.stderr
    config = str(ROOT / "pyproject.toml")
    cache = str(ROOT / ".mypy_cache" / "installed")
    typed = _run(
        sys.executable, "-m", "mypy", "--config-file", config, "--cache-dir", cache,
        "-p", "verify_dag", cwd=staged,
    )  # fmt: skip
    # Name the checkout's files, not the staged copies, in what a failure says.
    said = typed.stdout.replace("verify_dag/tasks/", "tasks/")
    assert typed.returncode == 0, said + typed.stderr
    # The tests, less strictly: fixtures and helpers may leave parameters unannotated.
    tests = _run(
        sys.executable, "-m", "mypy", "--config-file", config, "--cache-dir", cache,
        "--explicit-package-bases", "--allow-untyped-defs", "--allow-incomplete-defs",
        "--allow-untyped-calls", "--no-warn-return-any",
        # The package was checked above, strictly; here it is only what the tests import.
        "--follow-imports", "silent", str(ROOT / "tests"), cwd=staged,
        env={**os.environ, "MYPYPATH": str(ROOT / "tests")},
    )  # fmt: skip
    assert tests.returncode == 0, tests.stdout + tests.stderr


_BUILDER_MEMBERS = {"declared", "runtime", "command_lines", "tool_env"}


def test_env_builders_are_one_module_each_behind_one_registry() -> None:
    """Adding an env builder is one module and its line in the registry: every module of
    tester/env defining a builder's functions is registered, once, and nothing outside env/
    imports a builder module (no phase treats one builder, tox say, as its own special case)."""
    from verify_dag.phases.tester.env import registry

    env_dir = ROOT / "verify_dag" / "phases" / "tester" / "env"
    defining = set()
    for path in sorted(env_dir.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
        names |= {
            a.asname or a.name for n in tree.body if isinstance(n, ast.ImportFrom) for a in n.names
        }
        if names >= _BUILDER_MEMBERS:
            defining.add(f"verify_dag.phases.tester.env.{path.stem}")
    registered = [b.__name__ for b in registry.BUILDERS]  # type: ignore[attr-defined]
    assert sorted(registered) == sorted(defining)
    assert len(registered) == len(set(registered)) == 4
    assert len({b.NAME for b in registry.BUILDERS}) == len(registered)
    known = {name for name, _ in _modules()}
    helpers = {f"verify_dag.phases.tester.env.{m}" for m in ("toxchoice", "toxlines")}
    for name, path in _modules():
        if name.startswith("verify_dag.phases.tester.env"):
            continue
        assert not (_imports(name, path, known) & (defining | helpers)), name


def _calls_run(tree: ast.AST) -> Iterator[ast.Call]:
    """Calls of the chokepoint, as ``processes.run(...)`` or a ``run`` imported from it."""
    imported = any(
        isinstance(n, ast.ImportFrom)
        and n.module == "verify_dag.processes"
        and any(a.name == "run" for a in n.names)
        for n in ast.walk(tree)
    )
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        if (isinstance(f, ast.Attribute) and f.attr == "run" and _is_chokepoint(f.value)) or (
            imported and isinstance(f, ast.Name) and f.id == "run"
        ):
            yield node


def _imports_chokepoint(node: ast.AST) -> TypeGuard[ast.Import | ast.ImportFrom]:
    if isinstance(node, ast.Import):
        return any(a.name == "verify_dag.processes" for a in node.names)
    if isinstance(node, ast.ImportFrom):
        return node.module == "verify_dag.processes" or (
            node.module == "verify_dag" and any(a.name == "processes" for a in node.names)
        )
    return False


def _is_chokepoint(node: ast.expr) -> bool:
    return (isinstance(node, ast.Name) and node.id == "processes") or (
        isinstance(node, ast.Attribute) and node.attr == "processes"
    )


def test_only_git_core_runs_git() -> None:
    """git's overrides (no hooks, filters, drivers, pager: verify_dag/git/core.py) cover a call
    only when it goes through git.core: no other module of verify_dag/git reaches the chokepoint,
    and no module elsewhere hands it a ``git`` command line."""
    wrong = []
    for name, path in _modules():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        if name.startswith("verify_dag.git"):
            if name == "verify_dag.git.core":
                continue
            uses = [n for n in ast.walk(tree) if _imports_chokepoint(n)]
            wrong += [f"{name}:{n.lineno} imports the chokepoint" for n in uses]
            continue
        for call in _calls_run(tree):
            argv = call.args[0] if call.args else None
            if isinstance(argv, ast.List | ast.Tuple) and any(
                isinstance(e, ast.Constant) and e.value == "git" for e in argv.elts[:1]
            ):
                wrong.append(f"{name}:{call.lineno} runs git")
    # Not caught here, and fine: `verify-dag config` runs `git --version` (by its path, beside
    # bwrap's and chromium's) to report the versions it finds; no repository is involved.
    assert wrong == []


# Where a run's repository argument is parsed: the edges that build runs, and a stored run's
# request from before the typed value existed.
_SOURCE_EDGES = {"verify_dag.cli.args", "verify_dag.fleet", "verify_dag.models.request"}


def test_the_repository_argument_is_parsed_once_at_the_edge() -> None:
    """A run's repository is a RepoSource from where it is built on: nothing downstream asks again
    whether a string is a URL (the answer depends on the files of the host that asks)."""
    parsed = set()
    for name, path in _modules():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                func = node.func
                called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                if called == "parse_source":
                    parsed.add(name)
                assert called != "is_url", f"{name}:{node.lineno} re-guesses a URL"
    assert parsed == _SOURCE_EDGES


def test_no_module_is_over_600_lines() -> None:
    """Past that a module holds more than one kind of thing; split it by kind."""
    long = [
        f"{name} ({n} lines)"
        for name, path in _modules()
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > 600
    ]
    assert long == []


_HISTORY = re.compile(r"\bissues? \d+\b", re.IGNORECASE)


def test_no_file_cites_an_issue_number() -> None:
    """Comments, docstrings and docs say what the code does and why; how it came to be is the
    history's to tell (git log), and an issue number means nothing to a reader of the file."""
    listed = _run("git", "ls-files", "-z").stdout.split("\0")
    cited = []
    for name in filter(None, listed):
        path = ROOT / name
        if path.name.startswith("CHANGELOG") or not path.is_file():
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue  # not text
        cited += [f"{name}: {m.group(0)}" for m in _HISTORY.finditer(text)]
    assert cited == []


def test_issue_classes_have_one_source() -> None:
    """models.findings.IssueClass is the one list of classes: the report schema's enum is its
    members in order, and every table keyed by class (a merge's precedence, GitLab's
    categories, a reply's category read as a class) covers each of them, so none of them meets
    a class it does not know."""
    from verify_dag.backends.parse import CATEGORY_CLASS
    from verify_dag.models.findings import ISSUE_CLASSES, IssueClass
    from verify_dag.report.dedup import CLASS_PRECEDENCE
    from verify_dag.report.gitlab import CATEGORY

    classes = list(typing.get_args(IssueClass))
    assert list(ISSUE_CLASSES) == classes
    schema = json.loads((ROOT / "schemas" / "report.v1.schema.json").read_text(encoding="utf-8"))
    assert schema["properties"]["issues"]["items"]["properties"]["class"]["enum"] == classes
    assert sorted(CLASS_PRECEDENCE) == sorted(classes)
    assert list(CATEGORY) == classes
    assert set(CATEGORY_CLASS.values()) <= set(classes)
    assert all(CATEGORY_CLASS[c] == c for c in classes)


def _spelled(names: set[str], outside: str) -> Counter[tuple[str, str]]:
    """(module under verify_dag/, name) -> how often ``names`` are string literals there, outside
    the ``outside`` package; pydantic's ``mode="json"`` is no output format."""
    package = ROOT / "verify_dag"
    found: Counter[tuple[str, str]] = Counter()
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package).as_posix()
        if rel.startswith(f"{outside}/"):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        mode = {
            id(k.value) for k in ast.walk(tree) if isinstance(k, ast.keyword) and k.arg == "mode"
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and node.value in names and id(node) not in mode:
                found[(rel, node.value)] += 1
    return found


# Where a registry tool's name may be spelled outside tools/: ruff's own fixes and rule
# documentation, which no other linter offers (fixes/), and a fix's origin in the report model.
_TOOL_NAMES_ALLOWED = {
    ("fixes/explain.py", "ruff"): 2,
    ("fixes/plan.py", "ruff"): 1,
    ("fixes/propose.py", "ruff"): 3,
    ("models/report.py", "ruff"): 1,
}


def test_a_linter_is_its_module_and_its_registry_line() -> None:
    """Everything verify-dag knows of a linter is its ToolSpec (tools/<name>.py) and its line in
    tools.REGISTRY: outside tools/, its names (the spec's, its programs', its package's) are
    spelled only where the allow-list says why."""
    from verify_dag.tools import REGISTRY

    names = {s.name for s in REGISTRY.values()}
    names |= {s.package for s in REGISTRY.values() if s.package is not None}
    names |= {p for s in REGISTRY.values() if s.declarations for p in s.declarations.programs}
    assert dict(_spelled(names, "tools")) == _TOOL_NAMES_ALLOWED


# Where an output format's name may be spelled outside report/, and why.
_FORMAT_NAMES_ALLOWED = {
    # Other programs' and other commands' own formats that share a word with ours: the model
    # CLI's and coverage's JSON output, the contract, shadow and fleet commands' --format, and
    # a file suffix the contract oracle reads.
    ("arbiter/model_arm.py", "json"): 1,
    ("phases/tester/coverage.py", "json"): 1,
    ("backends/invoke.py", "json"): 1,
    ("cli/contract.py", "json"): 2,
    ("cli/shadow.py", "json"): 3,
    ("cli/fleet.py", "json"): 1,
    ("cli/fleet.py", "markdown"): 3,
    ("reviewers/contract/oracle.py", "json"): 1,
    # The files a stored run keeps (report.json, report.md), named by kind.
    ("client.py", "markdown"): 1,
    ("fleet/summary.py", "json"): 3,
    ("fleet/summary.py", "markdown"): 3,
    # One format used by name: a stored run's JSON document is printed as it was stored, a fleet
    # audit keeps the JSON report, and a request's default (models sit below report/).
    ("cli/runs.py", "json"): 1,
    ("fleet/audit.py", "json"): 1,
    ("models/request.py", "markdown"): 1,
}


def test_an_output_format_is_its_module_and_its_formats_line() -> None:
    """Adding an output format is its renderer in report/ and its line in report.formats.FORMATS:
    outside report/ a format's name is spelled only where the allow-list says why."""
    from verify_dag.report.formats import FORMATS

    assert dict(_spelled(set(FORMATS), "report")) == _FORMAT_NAMES_ALLOWED


def test_the_command_line_starts_without_the_report_package() -> None:
    """Every command's parser lists the output formats; the renderers (pydantic, the models) are
    imported only when a report is rendered."""
    said = _run(
        sys.executable,
        "-c",
        "import sys, verify_dag.cli; verify_dag.cli.build_parser(); "
        "print(sorted(m for m in ('pydantic', 'verify_dag.models.report') if m in sys.modules))",
    )
    assert said.stdout.strip() == "[]", said.stderr


def test_the_client_starts_without_the_phases_or_the_secret_scanner() -> None:
    """What every command that submits a run imports before it knows the answer: not the
    exerciser (the completion models once reached it for a two-word Literal) and not
    detect-secrets (redaction loads it when a gate finds a token's shape)."""
    said = _run(
        sys.executable,
        "-c",
        "import sys, verify_dag.client, verify_dag.cli.verify; "
        "print(sorted(m for m in sys.modules if m.startswith(("
        "'verify_dag.phases.exerciser', 'detect_secrets', 'requests'))))",
    )
    assert said.stdout.strip() == "[]", said.stderr


def test_verify_checks_its_request_without_loading_the_reviewers(tmp_path: Path) -> None:
    """A comment-density setting in the environment is checked when the request is built, by
    the run settings: the reviewers' package (its backends, prompts, contract reviewer: 0.15 s)
    is the worker's to load, not every client's."""
    repo = calc_base(make_repo(tmp_path / "repo"))
    script = (
        "import sys\n"
        "from verify_dag.cli import build_parser\n"
        "from verify_dag.cli.verify_request import build_request\n"
        f"args = build_parser().parse_args(['verify', {str(repo.path)!r}, '--scope=branch',"
        " '--base=base'])\n"
        "print(build_request(args).comment_density)\n"
        "print(sorted(m for m in sys.modules if m.startswith('verify_dag.reviewers')))\n"
    )
    env = {**os.environ, "VERIFY_DAG_COMMENT_DENSITY": "15%"}
    said = _run(sys.executable, "-c", script, env=env)
    assert said.stdout.split("\n")[:2] == ["15%", "[]"], said.stderr
    # A bad value is still a usage error at the same place.
    bad = _run(sys.executable, "-c", script, env={**env, "VERIFY_DAG_COMMENT_DENSITY": "10"})
    assert "expected a fraction such as 0.1" in bad.stderr, bad.stdout + bad.stderr


_SHARED_MODULE = """
import os

import pytest


@pytest.fixture(scope="module")
def server():
    return os.getpid()


@pytest.mark.parametrize("i", range(6))
def test_uses_the_server(server, i):
    pass
"""


def test_a_module_sharing_a_fixture_runs_on_one_xdist_worker(tmp_path: Path) -> None:
    """The suite's own hook (tests/conftest.py) groups a module whose tests share a module or
    session fixture (a server, an installed hook), and xdist's loadgroup keeps the group on one
    worker: else each worker sets the fixture up again. A pytest/xdist pairing that drops the
    group (structured node ids) fails here, not as a slow CI run."""
    tests = ROOT / "tests"
    (tmp_path / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    (tmp_path / "conftest.py").write_text(
        "import importlib.util\nimport sys\n\n"
        f"sys.path.insert(0, {str(tests)!r})\n"
        "_spec = importlib.util.spec_from_file_location("
        f"'suite_conftest', {str(tests / 'conftest.py')!r})\n"
        "_suite = importlib.util.module_from_spec(_spec)\n"
        "_spec.loader.exec_module(_suite)\n"
        "pytest_collection_modifyitems = _suite.pytest_collection_modifyitems\n",
        encoding="utf-8",
    )
    (tmp_path / "test_shared.py").write_text(_SHARED_MODULE, encoding="utf-8")
    proc = _run(
        sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "2", "--dist",
        "loadgroup", "-v", cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    workers = re.findall(
        r"^\[(gw\d+)\].*PASSED test_shared\.py::test_uses_the_server", proc.stdout, re.M
    )
    assert len(workers) == 6 and len(set(workers)) == 1, proc.stdout
