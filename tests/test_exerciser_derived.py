"""The exercise derived from the project's own declarations when it declares none
(docs/gates.md, "Without a VERIFICATION.md"): console scripts run with --help, changed modules
imported with their doctests, and the specification's severity 9 finding only when nothing can
be derived."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from conftest import Repo

from verify_dag import resultcache, workspace
from verify_dag.models import FileChange, LineRange, RunState, Scope, VerifyRequest
from verify_dag.models.source import parse_source
from verify_dag.phases import engineer, exerciser, triage
from verify_dag.phases.debugger import signatures
from verify_dag.phases.debugger.exercise import diagnose
from verify_dag.phases.exerciser import strategy
from verify_dag.phases.tester import env as testenv

CLI = """import argparse


def main():
    parser = argparse.ArgumentParser(prog="shop")
    sub = parser.add_subparsers(dest="cmd")
    sub.add_parser("list")
    sub.add_parser("checkout", help="pay for the cart")
    parser.parse_args()
    return 0
"""
MONEY = '''def cents(amount):
    """Whole cents.

    >>> cents(1.5)
    150
    """
    return round(amount * 100)
'''


def state(repo: Repo, sha: str, *changes: FileChange, merge_base: str | None = None) -> RunState:
    return RunState(
        run_id="r",
        request=VerifyRequest(source=parse_source(str(repo.path))),
        scope=Scope(
            mode="branch", new_commit=sha, head_sha=sha, included=changes, merge_base=merge_base
        ),
        engineer=engineer.run(str(repo.path), sha),
    )


def changed(path: str, *lines: int) -> FileChange:
    return FileChange(
        path=path, status="modified", lines=tuple(LineRange(start=n, end=n) for n in lines)
    )


def test_a_console_script_runs_with_help_and_so_does_its_changed_subcommand(repo: Repo) -> None:
    """004 7c: "Determine exercise strategy based on change type". With no VERIFICATION.md,
    the project's console script whose code changed is run with --help, and the subcommand the
    changed line adds too; the report says what was exercised, and it is PASSED. A script whose
    ``main(args=sys.argv)`` binds sys.argv at import (pygmentize) sees its own argv there, as
    under its installed wrapper: the probe's arguments made it exit 2 on a clean release. A
    subcommand defined in one script's own module is not tried on another script."""
    repo.write(
        "pyproject.toml",
        '[project]\nname = "shop"\nversion = "1"\n[project.scripts]\nshop = "shop.cli:main"\n'
        'tool = "shop.tool:main"\n'
        '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n',
    )
    repo.write("shop/__init__.py", "")
    repo.write("shop/cli.py", CLI)
    repo.write(
        "shop/tool.py",
        # Its own --help, read after parsing, as pygmentize's: argparse's would exit first.
        "import argparse\nimport sys\n\n\ndef main(args=sys.argv):\n"
        "    parser = argparse.ArgumentParser(prog='tool', add_help=False)\n"
        "    parser.add_argument('-h', '--help', action='store_true')\n"
        "    parser.parse_args(args[1:])\n    return 0\n",
    )
    sha = repo.commit()
    out = exerciser.run(state(repo, sha, changed("shop/cli.py", 8), changed("shop/tool.py", 6)))
    assert out.status == "PASSED", out.notes
    assert "PASSED: 5 derived exercise(s) succeeded" in out.notes
    assert "shop --help: ok" in out.notes and "shop checkout --help: ok" in out.notes
    # checkout is shop's: its module is shop's own, not tool's.
    assert "tool --help: ok" in out.notes and "tool checkout" not in out.notes
    assert "import shop.cli: ok" in out.notes  # the project runs no doctests
    assert not out.findings


def test_changed_modules_are_imported_and_a_failing_doctest_fails_the_exercise(
    repo: Repo,
) -> None:
    """An importable package whose project runs its doctests (pytest's --doctest-modules):
    every changed module is imported in the run's env and its doctests run; a doctest that
    fails is a finding and the exerciser is FAILED."""
    repo.write("pytest.ini", "[pytest]\naddopts = --doctest-modules\n")
    repo.write("shop/__init__.py", "")
    repo.write("shop/money.py", MONEY)
    sha = repo.commit()
    ok = exerciser.run(state(repo, sha, changed("shop/money.py", 7)))
    assert ok.status == "PASSED", ok.notes
    assert "import shop.money (and its doctests): ok (1 doctest example(s))" in ok.notes
    repo.write("shop/money.py", MONEY.replace("    150", "    151"))
    sha = repo.commit()
    bad = exerciser.run(state(repo, sha, changed("shop/money.py", 5)))
    assert bad.status == "FAILED"
    (finding,) = bad.findings
    assert finding.title == "Derived exercise failed: import shop.money (and its doctests)"
    assert finding.severity == 8 and "Got: 150" in finding.description


def test_a_project_that_runs_no_doctests_has_its_modules_imported_only(repo: Repo) -> None:
    """A docstring's examples in a project that never runs them as doctests are documentation,
    often not written to pass (tomlkit 0.15.2's fail 18 of 41 as written): running them would
    make verify-dag's own false alarm of a clean release. The changed module is imported, and
    the notes say the doctests were not run."""
    repo.write("shop/__init__.py", "")
    repo.write("shop/money.py", MONEY.replace("    150", "    151"))  # a failing example
    sha = repo.commit()
    out = exerciser.run(state(repo, sha, changed("shop/money.py", 7)))
    assert out.status == "PASSED", out.notes
    assert "import shop.money: ok" in out.notes and "doctest" not in out.notes.split(";")[0]
    assert not out.findings
    repo.write("setup.cfg", "[tool:pytest]\naddopts = --doctest-modules\n")
    sha = repo.commit()
    declared = exerciser.run(state(repo, sha, changed("shop/money.py", 7)))
    assert declared.status == "FAILED"  # declared, the same example is the project's own check
    assert "import shop.money (and its doctests): FAIL" in declared.notes


def test_a_probe_that_fails_at_the_merge_base_too_is_no_check_of_the_change(
    repo: Repo,
) -> None:
    """The corpus' false alarms: findpython's Windows-only module (at the base it fails on
    ``import _winreg``, at the head on ``assert sys.platform == "win32"``), execnet's scripts
    that read their argv at import, semver's doctests that need the project's pytest fixtures.
    Each failing probe runs again at the merge base, and one that fails there too says nothing
    of the change: told, not a finding. One the change breaks stays a finding, and a change
    whose every probe fails at the base as here is no pass."""
    repo.write("shop/__init__.py", "")
    repo.write("shop/winreg.py", "import _winreg\n\nVERSION = 1\n")
    repo.write("shop/cart.py", "TOTAL = 1\n")
    base = repo.commit("base")
    repo.write("shop/winreg.py", "import sys\n\nassert sys.platform == 'win32'\nVERSION = 2\n")
    repo.write("shop/cart.py", "TOTAL = 2\n")
    head = repo.commit("both changed")
    both = (changed("shop/winreg.py", 4), changed("shop/cart.py", 1))
    out = exerciser.run(state(repo, head, *both, merge_base=base))
    assert out.status == "PASSED", out.notes
    assert out.notes.startswith(
        "PASSED: 1 of 2 derived exercise(s) succeeded; 1 fail at the merge base too"
    )
    assert (
        "import shop.winreg: exited 1, and fails at the merge base too (AssertionError here; "
        "ModuleNotFoundError: No module named '_winreg' there): no check of this change"
        in out.notes
    )
    assert "import shop.cart: ok" in out.notes and not out.findings
    # Without a base to look at, the failure is reported as before, and why is said.
    alone = exerciser.run(state(repo, head, *both))
    assert alone.status == "FAILED" and len(alone.findings) == 1
    assert "the failures were not looked at the merge base: a whole-file scope" in alone.notes
    # Only the module of another platform changed: nothing shows the change working.
    only = exerciser.run(state(repo, head, changed("shop/winreg.py", 4), merge_base=base))
    assert only.status == "BLOCKED" and not only.findings
    assert only.notes.startswith("NO_EXERCISE_STRATEGY: every exercise derived from the")
    # The change breaks a module that imports at the base: the change's failure.
    repo.write("shop/cart.py", "TOTAL = 1 / 0\n")
    broken = repo.commit("cart broken")
    bad = exerciser.run(state(repo, broken, *both, merge_base=base))
    assert bad.status == "FAILED"
    (finding,) = bad.findings
    assert finding.title == "Derived exercise failed: import shop.cart"
    assert "ZeroDivisionError" in finding.description
    assert "1 fail at the merge base too" in bad.notes
    # The debugger answers from the exerciser's own run at the base: new, nothing run again;
    # without that run, undetermined.
    new = diagnose(
        state(repo, broken, *both, merge_base=base), signatures(list(bad.findings)), base, "", set()
    )
    assert new[finding.title].pre_existing == "no", new
    assert new[finding.title].command == f"import shop.cart  (the derived exercise at {base})"
    (unlooked,) = alone.findings
    said = diagnose(state(repo, head, *both), signatures(list(alone.findings)), base, "", set())
    assert said[unlooked.title].pre_existing == "undetermined", said


def test_doctests_failing_at_the_merge_base_too_are_no_check_but_a_new_failing_one_is(
    repo: Repo,
) -> None:
    """Where the module imports on both sides and only its doctests fail, the examples are
    compared: those failing at the base too (semver's, which need the project's fixtures) say
    nothing of the change; one that fails only here is the change's."""
    repo.write("pytest.ini", "[pytest]\naddopts = --doctest-modules\n")
    repo.write("shop/__init__.py", "")
    broken = MONEY.replace("    150", "    151")  # an example that never passed
    repo.write("shop/money.py", broken)
    base = repo.commit("base")
    repo.write("shop/money.py", broken + "\nRATE = 2\n")
    head = repo.commit("unrelated")
    out = exerciser.run(state(repo, head, changed("shop/money.py", 9), merge_base=base))
    assert out.status == "BLOCKED" and not out.findings, out.notes
    assert "import shop.money (and its doctests): exited 1, and fails at the merge base too" in (
        out.notes
    )
    second = (
        '\n\ndef dollars(cents):\n    """\n    >>> dollars(150)\n    2\n    """\n'
        "    return cents // 100\n"
    )
    repo.write("shop/money.py", broken + second)
    worse = repo.commit("a second example, failing")
    bad = exerciser.run(state(repo, worse, changed("shop/money.py", 12), merge_base=base))
    assert bad.status == "FAILED"
    (finding,) = bad.findings
    assert finding.title == "Derived exercise failed: import shop.money (and its doctests)"


def test_when_nothing_can_be_derived_it_is_the_specifications_severity_9_finding(
    repo: Repo,
) -> None:
    """004 7c: "If you cannot determine HOW to exercise the change, that is severity 9-10". A
    changed script that is neither a console script nor a module of a package is such a change."""
    repo.write("tool.py", "print('hi')\n")
    sha = repo.commit()
    out = exerciser.run(state(repo, sha, changed("tool.py", 1)))
    assert out.status == "BLOCKED"
    assert out.notes.startswith("NO_EXERCISE_STRATEGY: no START, EXERCISE or exerciser gate")
    assert "no console script or importable module of the project covers" in out.notes
    (finding,) = out.findings
    assert (finding.title, finding.severity) == ("Cannot determine how to exercise the change", 9)


def test_a_change_to_no_code_has_nothing_to_exercise(repo: Repo) -> None:
    """Documentation and tests alone: there is nothing to exercise, and no finding is made of
    it (a severity 9 for a new test would be a false alarm); the exerciser stays BLOCKED (an
    exercise that did not happen is never PASSED)."""
    repo.write("README.md", "# shop\n")
    repo.write("tests/test_shop.py", "def test_x():\n    pass\n")
    sha = repo.commit()
    out = exerciser.run(state(repo, sha, changed("README.md", 1), changed("tests/test_shop.py", 1)))
    assert out.status == "BLOCKED" and not out.findings
    assert "the change touches no code" in out.notes


def test_what_counts_as_a_module_and_a_subcommand(tmp_path: Path) -> None:
    for path in ("pkg/__init__.py", "pkg/sub/__init__.py", "src/lib/__init__.py"):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text("")
    names = {
        p: strategy.module_name(tmp_path, p)
        for p in (
            "pkg/a.py",
            "pkg/sub/b.py",
            "pkg/__init__.py",
            "pkg/__main__.py",
            "nopkg/c.py",
            "top.py",
            "src/lib/d.py",
            "src/single.py",
            "pkg/tests/test_a.py",
            "setup.py",
        )
    }
    assert names == {
        "pkg/a.py": "pkg.a",
        "pkg/sub/b.py": "pkg.sub.b",
        "pkg/__init__.py": "pkg",
        "pkg/__main__.py": None,
        "nopkg/c.py": None,
        "top.py": None,
        "src/lib/d.py": "lib.d",
        "src/single.py": "single",
        "pkg/tests/test_a.py": None,
        "setup.py": None,
    }
    (tmp_path / "pkg/cli.py").write_text(
        "@cli.command()\ndef make_cart():\n    pass\n\n"
        '@cli.command("pay")\ndef p():\n    pass\n\nsub.add_parser("list")\n'
    )
    scope = Scope(mode="all", new_commit="x", included=(changed("pkg/cli.py", 1, 5, 9),))
    assert strategy.subcommands(tmp_path, scope, ["pkg/cli.py"]) == ["make-cart", "pay", "list"]


def test_a_tox_project_runs_the_probes_through_tox(repo: Repo, tmp_path: Path) -> None:
    """tox reads each line of an env's commands as a command of its own: the probes reach it
    as one line each, and all of them in one run of tox (with its set_env), each still judged
    on its own."""
    repo.write(
        "tox.ini",
        "[tox]\nenv_list = py\n\n[testenv]\nskip_install = true\ndeps = pytest\n"
        "set_env =\n    SHOP_FROM_TOX = yes\ncommands = pytest --doctest-modules\n",
    )
    repo.write("shop/__init__.py", "")
    repo.write("shop/money.py", MONEY)
    repo.write(
        "shop/env.py",
        "import os\n\nassert os.environ['SHOP_FROM_TOX'] == 'yes'\n",
    )
    repo.write("shop/broken.py", "raise RuntimeError('broken at import')\n")
    sha = repo.commit()
    run = state(repo, sha, *(changed(f"shop/{m}.py", 1) for m in ("money", "env", "broken")))
    run = run.model_copy(update={"toolchain": triage.discover(repo.path)})
    out = exerciser.run(run)
    assert out.status == "FAILED", out.notes
    assert "import shop.money (and its doctests): ok (1 doctest example(s))" in out.notes
    assert "import shop.env (and its doctests): ok (no doctests)" in out.notes
    (finding,) = out.findings
    assert finding.title == "Derived exercise failed: import shop.broken (and its doctests)"
    assert "broken at import" in finding.description
    # The probes run beside the suite in its checkout: their bytecode goes where the suite's
    # does (the run's prefix), never into the checkout, which holds what was committed.
    tree = workspace.ensure("r", repo.path, sha)
    assert not list(tree.rglob("__pycache__"))
    assert list((tree.parent / "pycache").rglob("money*.pyc"))


def test_the_same_probes_on_the_same_code_come_from_the_result_cache(
    repo: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As the suite's results: an unchanged tree gives the probes' results of the run that
    ran them, said in the report, without building the env to run them in; a changed file
    runs them again, and --no-cache always does."""
    repo.write("pytest.ini", "[pytest]\naddopts = --doctest-modules\n")
    repo.write("shop/__init__.py", "")
    repo.write("shop/money.py", MONEY)
    sha = repo.commit()
    run = state(repo, sha, changed("shop/money.py", 7))
    with resultcache.session() as first_hits:
        first = exerciser.run(run)
    runtime = testenv.runtime
    monkeypatch.setattr(testenv, "runtime", None)  # calling it would raise
    with resultcache.session() as again_hits:
        again = exerciser.run(run)
    monkeypatch.setattr(testenv, "runtime", runtime)
    assert first.status == again.status == "PASSED"
    assert first.notes == again.notes and first.findings == again.findings
    assert not first_hits
    assert [h.what for h in again_hits] == ["derived exercise"]
    with resultcache.session(enabled=False) as off_hits:
        assert exerciser.run(run).notes == first.notes
    assert not off_hits
    repo.write("shop/money.py", MONEY.replace("    150", "    151"))
    sha = repo.commit()
    with resultcache.session() as changed_hits:
        bad = exerciser.run(state(repo, sha, changed("shop/money.py", 5)))
    assert bad.status == "FAILED" and not changed_hits


def test_the_probes_run_beside_the_suite_once_and_the_exerciser_judges_them(
    repo: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The derived probes need nothing the suite makes, so they run beside it (the chord's
    ``probe`` task): this suite passes only if a probe imports the module while the suite is
    still running. The exerciser judges what they gave without running them again, and names
    the sandbox they ran in."""
    from conftest import BRANCH, verify_json

    from verify_dag import sandbox
    from verify_dag.phases.exerciser import probes

    batches: list[int] = []
    real = probes.batched

    def counted(*args: Any, **kwargs: Any) -> Any:
        batches.append(len(args[0]))
        return real(*args, **kwargs)

    monkeypatch.setattr(probes, "batched", counted)  # the embedded worker runs in this process
    repo.write("pytest.ini", "[pytest]\ntestpaths = tests\n")
    repo.write("shop/__init__.py", "")
    repo.write("shop/money.py", MONEY)
    repo.write("tests/test_money.py", "def test_nothing_yet():\n    pass\n")
    repo.commit("base")
    repo.git("tag", "base")
    # Imported by a probe (no pytest in that process), the module leaves a mark in the checkout.
    repo.write(
        "shop/money.py",
        "import sys\nfrom pathlib import Path\n\nif 'pytest' not in sys.modules:\n"
        "    Path('probed').touch()\n\n\n" + MONEY,
    )
    repo.write(
        "tests/test_money.py",
        "import time\nfrom pathlib import Path\n\nfrom shop.money import cents\n\n\n"
        "def test_a_probe_ran_while_the_suite_runs():\n"
        "    deadline = time.monotonic() + 60\n"
        "    while not Path('probed').exists():\n"
        "        assert time.monotonic() < deadline, 'no probe ran beside the suite'\n"
        "        time.sleep(0.05)\n"
        "    assert cents(1.5) == 150\n",
    )
    repo.commit("branch: money leaves a mark")
    _, doc = verify_json(repo, tmp_path, *BRANCH)
    tester = next(s for s in doc["skillResults"] if s["skill"] == "tester")
    assert tester["status"] == "PASSED", tester["notes"]
    ex = next(s for s in doc["skillResults"] if s["skill"] == "exerciser")
    assert ex["status"] == "PASSED", ex["notes"]
    assert "import shop.money: ok" in ex["notes"]
    assert "from the result cache" not in ex["notes"]  # this run's, not an earlier one's
    assert batches == [1]  # run once, beside the suite; the exerciser ran none
    (detail,) = [d for d in doc["skillDetails"] if d["skill"] == "exerciser"]
    assert detail["isolation"] == sandbox.mode()


def test_a_probe_run_through_tox_leaves_the_env_dirs_of_a_run_beside_it_alone(
    repo: Repo, tmp_path: Path
) -> None:
    """tox empties an env's tmp and log dirs as a run of it starts. The probes run through tox
    beside the suite's run of the same env, so theirs are a scratch of their own: the file the
    suite's run keeps in its env_tmp_dir is still there after the probes' run."""
    import threading

    from verify_dag import processes
    from verify_dag.phases.exerciser import probes

    repo.write(
        "tox.ini",
        "[tox]\nenv_list = py\n\n[testenv]\nskip_install = true\ndeps = pytest\n"
        "set_env =\n    SHOP_TMP = {env_tmp_dir}\ncommands = pytest\n",
    )
    repo.write("tests/test_ok.py", "def test_ok():\n    pass\n")
    repo.commit()
    keeps = (
        "import os, sys, time\nfrom pathlib import Path\n"
        "mine = Path(os.environ['SHOP_TMP'], 'mine')\nmine.write_text('kept')\n"
        "deadline = time.monotonic() + 60\n"
        "while not Path('go').exists() and time.monotonic() < deadline:\n"
        "    time.sleep(0.05)\n"
        "sys.exit(0 if mine.exists() else 3)\n"
    )
    with testenv.runtime(repo.path, triage.discover(repo.path)) as env:
        assert env.error is None and env.python is not None and env.runner is not None
        kept: list[processes.Result] = []

        def beside() -> None:
            kept.append(
                processes.run(
                    # tox reads each line as a command of its own: the script as one line.
                    env.command([str(env.python), "-c", probes.one_line(keeps)]),
                    cwd=repo.path,
                    timeout=120,
                    sandbox=env.policy(),
                )
            )

        suite = threading.Thread(target=beside)
        suite.start()
        mine = env.runner.work_dir / env.runner.name / "tmp" / "mine"
        deadline = time.monotonic() + 60
        while not mine.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        scratch = tmp_path / "scratch"
        scratch.mkdir()
        probe = processes.run(
            env.command([str(env.python), "-c", "open('go', 'w').close()"], scratch=scratch),
            cwd=repo.path,
            timeout=120,
            sandbox=env.policy(scratch),
        )
        suite.join(timeout=120)
    assert probe.returncode == 0, probe.stderr[-2000:]
    (res,) = kept
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
