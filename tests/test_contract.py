"""The contract verifier (docs/contract.md): CONTRACT parsing, `gates run`, the vacuity rule, the
scope check, model judgement, every verdict and exit code, the JSON form, bad input."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import CLI, Repo, run_cli, running
from fakes import logged_calls
from jsonschema import Draft202012Validator

from verify_dag import jsonschemas
from verify_dag.cli import main
from verify_dag.contract_tool import render
from verify_dag.contract_tool.gates_run import CriterionCheck, rewrite
from verify_dag.errors import ContractError
from verify_dag.reviewers.contract import oracle, parse, scope
from verify_dag.reviewers.contract.verify import verify_contract

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = "schemas/contract-verdict.schema.json"

CALC = "def reconcile(xs):\n    return sum(xs)\n"
CALC_FIXED = "def reconcile(xs):\n    return sum(xs) if xs else 0\n"
TESTS = (
    "import sys\nsys.path.insert(0, 'src')\nfrom inv import reconcile\n\n\n"
    "def test_one():\n    assert reconcile([1]) == 1\n"
)
TESTS_MORE = TESTS + "\n\ndef test_empty():\n    assert reconcile([]) == 0\n"
CHECK_EMPTY = "python3 -m pytest -q -p no:cacheprovider tests/test_inv.py"


def contract(
    criteria: str,
    *,
    scope_: str = "- src/**\n- tests/**",
    clarifications: str = "",
    extra: str = "",
) -> str:
    return (
        f"# Contract\n\n## REQUEST\nMake `reconcile()` handle empty lists.\n\n"
        f"## ACCEPTANCE CRITERIA\n{criteria}\n{extra}\n## FILE SCOPE\n{scope_}\n\n"
        f"## CLARIFICATIONS\n{clarifications}\n"
    )


# A cheap oracle that observes the artifact (src/inv.py defines reconcile) and can fail.
CHECK_FIX = "grep -q 'if xs else 0' src/inv.py"
GOOD = contract(
    f"1. `reconcile()` returns 0 for an empty list\n   CHECK: {CHECK_FIX}\n"
    "   EXPECT: 0\n   EVIDENCE: pending\n"
)


@pytest.fixture(autouse=True)
def _no_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in list(os.environ):
        if key.startswith(("VERIFY_DAG_BACKEND", "VERIFY_DAG_MODEL", "FAKE_MODEL_")) or key in (
            "VERIFY_DAG_CONFIG",
            "XDG_CONFIG_HOME",
            "VERIFY_DAG_CONTRACT",
        ):
            monkeypatch.delenv(key)


@pytest.fixture
def project(repo: Repo) -> Repo:
    """base: reconcile() and one test; HEAD: the fix and a test for the empty list."""
    repo.write("src/inv.py", CALC)
    repo.write("tests/test_inv.py", TESTS)
    repo.commit("base")
    repo.git("tag", "base")
    repo.write("src/inv.py", CALC_FIXED)
    repo.write("tests/test_inv.py", TESTS_MORE)
    repo.commit("fix")
    return repo


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, cwd=cwd, env={**os.environ, "PYTHONPATH": str(ROOT)})


def write_contract(repo: Repo, text: str, name: str = "CONTRACT.md") -> Path:
    path = repo.path.parent / name  # outside the repository: not part of any diff
    path.write_text(text, encoding="utf-8")
    return path


def gates(repo: Repo, path: Path) -> None:
    assert main(["gates", "run", str(path), "--repo", str(repo.path)]) in (0, 1)


def verdict_lines(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith("VERIFY \u2014 VERDICT:")]


def validate(doc: dict[str, object]) -> None:
    errors = sorted(jsonschemas.validator(SCHEMA).iter_errors(doc), key=str)
    assert not errors, errors[0].message


# --- the format --------------------------------------------------------------------------------

FULL = """# Contract: invoices

## REQUEST
Reconcile invoices against payments.

## ACCEPTANCE CRITERIA
1. Invoices reconcile
   against payments of the same month
   CHECK: `pytest -q tests/test_invoices.py`
   EXPECT: exit 0
   EXPECT: output contains "passed"
   EVIDENCE: pending
2) The CLI prints a summary
   - **CHECK:** python -m invoices --summary
3. Errors are readable

ABANDON: 3 \u2014 needs a product decision

## FILE SCOPE
- `src/invoices/**`
- tests/test_invoices.py   # the new tests

## CLARIFICATIONS
- The skip in tests/test_invoices.py is allowed.
"""


def test_parse_the_documented_example() -> None:
    c = parse.parse(FULL)
    assert c.request == "Reconcile invoices against payments."
    first, second, third = c.criteria
    assert first.number == 1
    assert first.text == "Invoices reconcile against payments of the same month"
    assert first.check is not None and first.check.value == "pytest -q tests/test_invoices.py"
    assert [e.value for e in first.expect] == ["exit 0", 'output contains "passed"']
    assert first.evidence is not None and (first.evidence.value, first.evidence.line) == (
        "pending",
        12,
    )
    assert second.check is not None and second.check.prefix == "   - **CHECK:**"
    assert second.evidence is None and second.last_line == 14
    assert third.check is None and not third.problems
    assert c.scope == ("src/invoices/**", "tests/test_invoices.py") and c.scope_declared
    assert c.clarifications.startswith("- The skip")
    assert c.abandoned(3) is not None and c.abandoned(3).reason == "needs a product decision"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("## ACCEPTANCE CRITERIA\n1. x\n", "lacks its REQUEST section"),
        ("## REQUEST\nDo it.\n", "lacks its ACCEPTANCE CRITERIA section"),
        ("## REQUEST\n\n## ACCEPTANCE CRITERIA\n1. x\n", "REQUEST section is empty"),
        ("## REQUEST\nDo it.\n## ACCEPTANCE CRITERIA\nnothing numbered\n", "no numbered criteria"),
        (
            "## REQUEST\nDo it.\n## ACCEPTANCE CRITERIA\n1. a\n1. b\n",
            "duplicate criterion number 1",
        ),
        (
            "## REQUEST\nDo it.\n## ACCEPTANCE CRITERIA\n1. a\nABANDON: 7 \u2014 no\n",
            "names criterion 7, which does not exist",
        ),
        ("## REQUEST\nDo it.\n## ACCEPTANCE CRITERIA\n1. a\nABANDON: soon\n", "malformed ABANDON"),
    ],
)
def test_parse_errors(text: str, reason: str) -> None:
    with pytest.raises(ContractError, match=reason):
        parse.parse(text)


def test_malformed_oracles_are_problems_not_errors() -> None:
    c = parse.parse(
        "## REQUEST\nx\n## ACCEPTANCE CRITERIA\n1. a\n   EXPECT: 0\n"
        "2. b\n   CHECK: true\n   CHECK: false\n3. c\n   EVIDENCE: MET trust me\n"
    )
    assert [cr.problems for cr in c.criteria] == [
        ("EXPECT without a CHECK command",),
        ("more than one CHECK line",),
        ("EVIDENCE without a CHECK command: only `gates run` writes evidence",),
    ]


@pytest.mark.parametrize(
    ("lines", "exit_code", "contains", "problem"),
    [
        ((), 0, (), None),
        (("0",), 0, (), None),
        (("3",), 3, (), None),
        (("exit 1",), 1, (), None),
        (('output contains "ok"',), 0, ("ok",), None),
        (('exit 2; output contains "x"',), 2, ("x",), None),
        (("3 passed",), 0, ("3 passed",), None),
        (('"quoted text"',), 0, ("quoted text",), None),
        (("exit one",), 0, (), "unrecognised EXPECT clause"),
    ],
)
def test_expect_forms(
    lines: tuple[str, ...], exit_code: int, contains: tuple[str, ...], problem: str | None
) -> None:
    expect, found = oracle.parse_expect(lines)
    if problem:
        assert found is not None and problem in found
    else:
        assert found is None and (expect.exit_code, expect.contains) == (exit_code, contains)


# --- the vacuity rule ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("check", "expect", "why"),
    [
        ("echo ok", (), "cannot fail: it runs only echo"),
        ("true", (), "cannot fail"),
        (":", (), "cannot fail"),
        ("exit 0", (), "cannot fail"),
        ("echo ok", ("ok",), "cannot fail"),
        ("printf '%s' done && true", (), "cannot fail"),
        ("pytest -q || true", (), "`|| true` forces exit 0"),
        ("pytest -q || :", (), "`|| :` forces exit 0"),
        ("pytest -q || echo failed", (), "forces exit 0"),
        ("pytest -q; echo done", (), "its exit status is that of `echo done`"),
        ("pytest -q; exit 0", (), "its exit status is that of `exit 0`"),
        ("pytest -q | tee log.txt", (), "ending the pipe"),
        ("pytest -q; echo 3 passed", ("passed",), 'prints its own expected output "passed"'),
    ],
)
def test_vacuous_oracles(check: str, expect: tuple[str, ...], why: str) -> None:
    parsed, _ = oracle.parse_expect(expect)
    reason = oracle.vacuity(check, parsed)
    assert reason is not None and why in reason


@pytest.mark.parametrize(
    ("check", "expect"),
    [
        ("pytest -q", ()),
        ("pytest -q && echo ok", ()),
        ("pytest -q; exit", ()),
        ("pytest -q || true", ('output contains "passed"',)),
        ("pytest -q; echo done", ('output contains "passed"',)),
        ("grep -q reconcile src/inv.py", ()),
        ("test -f 'unbalanced", ()),
    ],
)
def test_oracles_that_can_fail(check: str, expect: tuple[str, ...]) -> None:
    parsed, _ = oracle.parse_expect(expect)
    assert oracle.vacuity(check, parsed) is None


def test_an_oracle_must_observe_the_named_artifact() -> None:
    files = {"tests/test_inv.py": "from inv import reconcile\n", "tests/test_other.py": "x = 1\n"}
    crit = "`reconcile()` returns 0 for src/inv.py's empty lists"
    assert oracle.unobserved(crit, "grep -q reconcile src/inv.py", files.get) is None
    assert oracle.unobserved(crit, "pytest tests/test_inv.py::test_x", files.get) is None
    why = oracle.unobserved(crit, "pytest tests/test_other.py", files.get)
    assert why is not None and "does not observe `reconcile()`, `src/inv.py`" in why
    # A criterion that names no artifact is judged by the other rules only.
    assert oracle.unobserved("invoices reconcile", "pytest", files.get) is None
    assert oracle.artifacts("works with and/or without e.g. flags") == []


CALC_TESTS = (
    "from calc import add, diff, sub\n\n\ndef test_add():\n    assert add(2, 2) == 4\n\n\n"
    "def test_sub():\n    assert sub(3, 1) == 2\n\n\ndef test_diff():\n    assert diff(5, 3)\n\n\n"
    "def halve_then_check(x):\n    return sub(x, x // 2)\n\n\n"
    "def test_via_helper():\n    assert halve_then_check(4) == 2\n"
)
CALC_SRC = (
    "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n\n\n"
    "def diff(a, b):\n    return abs(sub(a, b))\n"
)


@pytest.mark.parametrize(
    ("check", "observes"),
    [
        ("pytest tests/test_calc.py::test_add", False),
        ("pytest -q tests/test_calc.py -k test_add", False),
        ("pytest tests/test_calc.py::test_sub", True),
        ("pytest tests/test_calc.py -k sub", True),
        ("pytest tests/test_calc.py::test_via_helper", True),  # the helper it calls
        ("pytest tests/test_calc.py::test_diff", True),  # diff() in src/calc.py calls sub()
        ("pytest tests/test_calc.py", True),  # the whole file runs
        ("pytest tests/test_calc.py -k 'add or sub'", True),  # an expression: the file
    ],
)
def test_a_selected_test_must_itself_observe_the_named_artifact(check: str, observes: bool) -> None:
    """002: "Read the CHECK: and confirm it observes the artifact the criterion names. A vacuous
    oracle ... is NOT-MET — reason vacuous oracle". A CHECK that runs `test_add` for a criterion
    about `sub()` observes `add`, not `sub`, though its file also tests `sub`: the selected
    test's body, and what it calls, decide; not the file."""
    files = {"tests/test_calc.py": CALC_TESTS, "src/calc.py": CALC_SRC}
    why = oracle.unobserved("`sub()` subtracts its second argument", check, files.get)
    if observes:
        assert why is None
    else:
        assert why == f"`{check}` does not observe `sub()` named by the criterion"


# --- FILE SCOPE ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "globs", "inside"),
    [
        ("src/a.py", ["src/**"], True),
        ("src/deep/a.py", ["src/**"], True),
        ("src/a.py", ["src"], True),
        ("src/a.py", ["src/"], True),
        ("srcx/a.py", ["src"], False),
        ("src/deep/a.py", ["src/*.py"], False),
        ("src/a.py", ["src/*.py"], True),
        ("a.md", ["*.md"], True),
        ("docs/a.md", ["*.md"], False),
        ("docs/a.md", ["**/*.md"], True),
        ("a.md", ["**/*.md"], True),
        ("src/a1.py", ["./src/a[0-9].py"], True),
        ("src/ab.py", ["src/a[!b].py"], False),
        ("file with space.txt", ["file with space.txt"], True),
    ],
)
def test_scope_globs(path: str, globs: list[str], inside: bool) -> None:
    assert scope.matches(path, globs) is inside


# --- gates run -------------------------------------------------------------------------------


def test_gates_run_rewrites_only_evidence_lines(project: Repo) -> None:
    text = contract(
        f"1. `reconcile()` handles []\n   CHECK: {CHECK_EMPTY}\n   EVIDENCE: pending\n"
        "2. A failing check\n   - CHECK: grep -q nothing-like-this src/inv.py\n"
        "   - **EVIDENCE:** MET (stale)\n"
        "3. No evidence line yet\n   CHECK: test -f src/inv.py\n   EXPECT: exit 0\n"
        "4. Judgement only\n"
    )
    path = write_contract(project, text.replace("\n", "\r\n"))
    proc = cli("gates", "run", str(path), cwd=project.path)
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout.splitlines()[-1].startswith("GATES: 3 checked, 2 MET, 1 NOT-MET")
    raw = path.read_bytes()
    assert b"\n" not in raw.replace(b"\r\n", b"")  # CRLF kept
    before, after = text.split("\n"), raw.decode("utf-8").split("\r\n")
    # Every other line is unchanged and in place; criterion 3 got an EVIDENCE line.
    assert [ln for ln in after if "EVIDENCE" not in ln] == [
        ln for ln in before if "EVIDENCE" not in ln
    ]
    first, second, third = [ln for ln in after if "EVIDENCE" in ln]
    assert first.startswith(f"   EVIDENCE: MET \u2014 `{CHECK_EMPTY}`: exit 0 (expected 0)")
    assert second.startswith(
        "   - **EVIDENCE:** NOT-MET \u2014 `grep -q nothing-like-this "
        "src/inv.py`: exit 1 (expected 0)"
    )
    assert third == "   EVIDENCE: MET \u2014 `test -f src/inv.py`: exit 0 (expected 0); no output"
    assert after.index(third) == after.index("   EXPECT: exit 0") + 1


def test_rewrite_is_pure_and_idempotent() -> None:
    text = contract("1. a\n   CHECK: true\n   EVIDENCE: pending\n2. b\n   CHECK: false\n")
    parsed = parse.parse(text)
    outcomes = [
        CriterionCheck(1, "MET", "`true`: exit 0"),
        CriterionCheck(2, "NOT-MET", "`false`: exit 1"),
    ]
    once = rewrite(text, parsed, outcomes)
    assert "   EVIDENCE: MET \u2014 `true`: exit 0" in once
    assert "   CHECK: false\n   EVIDENCE: NOT-MET \u2014 `false`: exit 1\n" in once
    assert rewrite(once, parse.parse(once), outcomes) == once


def test_gates_run_isolation_time_limit_and_secrets(
    project: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_API_TOKEN", "s3cr3t-value-123")
    project.write("untracked.txt", "here\n")  # the work tree as it is, untracked files too
    path = write_contract(
        project,
        contract(
            "1. writes stay in the checkout\n   CHECK: touch created.txt && test -f untracked.txt\n"
            '2. no secrets\n   CHECK: test -z "$MY_API_TOKEN"\n'
            "3. slow\n   CHECK: sleep 5\n"
            "4. bad expectation\n   CHECK: true\n   EXPECT: exit one\n"
        ),
    )
    code = main(["gates", "run", str(path), "--repo", str(project.path), "--timeout", "1"])
    assert code == 1
    evidence = [ln.strip() for ln in path.read_text().splitlines() if "EVIDENCE:" in ln]
    assert evidence[0].startswith("EVIDENCE: MET") and evidence[1].startswith("EVIDENCE: MET")
    assert "timed out (1s budget)" in evidence[2] and evidence[2].startswith("EVIDENCE: NOT-MET")
    assert "malformed oracle: unrecognised EXPECT clause" in evidence[3]
    assert not (project.path / "created.txt").exists()


def test_gates_run_never_overwrites_a_contract_edited_meanwhile(project: Repo) -> None:
    """Someone edits the contract while its checks run (a check itself cannot: it runs in a
    sandbox that sees only its throwaway checkout)."""
    path = write_contract(project, "")
    text = contract("1. takes a while\n   CHECK: sleep 30.4545\n   EVIDENCE: pending\n")
    path.write_text(text)
    proc = subprocess.Popen(
        [*CLI, "gates", "run", str(path)],
        cwd=project.path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        deadline = time.monotonic() + 60
        while not running("sleep 30.4545"):
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.05)
        with path.open("a") as fh:
            fh.write("<!-- x -->\n")
        for pid in running("sleep 30.4545"):  # the check may end now: the edit is in
            # A process listed a moment ago (the shell that runs the check, say) may be gone.
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 3
    assert "changed while its checks ran; EVIDENCE not written" in stderr
    assert path.read_text() == text + "<!-- x -->\n"


@pytest.mark.parametrize(
    ("make", "code", "needle"),
    [
        ("missing", 2, "contract not found"),
        ("no-request", 2, "lacks its REQUEST section"),
        ("not-a-repo", 2, "not a git repository"),
    ],
)
def test_gates_run_bad_input(
    project: Repo, tmp_path: Path, make: str, code: int, needle: str
) -> None:
    path = tmp_path / "c.md"
    if make == "no-request":
        path.write_text("## ACCEPTANCE CRITERIA\n1. a\n   CHECK: true\n")
    elif make == "not-a-repo":
        path.write_text(GOOD)
    cwd = tmp_path if make == "not-a-repo" else project.path
    proc = cli("gates", "run", str(path), cwd=cwd)
    assert proc.returncode == code
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("verify-dag: error: ")
    assert needle in proc.stderr and "Traceback" not in proc.stderr


def test_gates_run_with_nothing_to_run(project: Repo) -> None:
    path = write_contract(project, contract("1. judgement only\n"))
    proc = cli("gates", "run", str(path), cwd=project.path)
    assert (proc.returncode, proc.stdout) == (
        0,
        "GATES: nothing to run: no criterion has a CHECK line\n",
    )


# --- verdicts --------------------------------------------------------------------------------


def test_conforme(project: Repo) -> None:
    path = write_contract(project, GOOD)
    gates(project, path)
    proc = cli("contract", f"--contract={path}", "--diff=base..HEAD", cwd=project.path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "VERIFY \u2014 VERDICT: CONFORME"
    assert lines[1] == f"CONTRACT: {path}"
    assert lines[2] == "CRITERIA:"
    assert lines[3].startswith(
        "  1. `reconcile()` returns 0 for an empty list \u2014 MET \u2014 EVIDENCE: MET \u2014 "
    )
    assert lines[4:] == [
        "SCOPE: in-scope 2 files; out-of-scope: none",
        "FLOOR: clean",
        "PROOF: read 3 files, ran floor-guard "
        f"{project.git('rev-parse', 'base')[:12]}..{project.head()[:12]} \u2192 "
        "clean, checked 1/1 criteria",
    ]
    assert proc.stderr == ""


def test_echo_ok_is_a_vacuous_oracle(project: Repo) -> None:
    path = write_contract(
        project, contract("1. invoices reconcile\n   CHECK: echo ok\n   EVIDENCE: pending\n")
    )
    gates(project, path)
    assert "EVIDENCE: MET" in path.read_text()  # the oracle passed...
    proc = cli("contract", f"--contract={path}", "--diff=base..HEAD", cwd=project.path)
    assert proc.returncode == 1
    assert verdict_lines(proc.stdout) == ["VERIFY \u2014 VERDICT: ECARTS(1)"]
    assert (
        "  1. invoices reconcile \u2014 NOT-MET \u2014 expected an oracle that observes the "
        "criterion / actual vacuous oracle: `echo ok` cannot fail: it runs only echo \u2014 "
        f"{path}:8"
    ) in proc.stdout.splitlines()  # ...but proves nothing


def test_pending_and_red_evidence_are_not_met(project: Repo) -> None:
    path = write_contract(
        project,
        contract(
            f"1. `reconcile()` pending\n   CHECK: {CHECK_EMPTY}\n   EVIDENCE: pending\n"
            f"2. `reconcile()` red\n   CHECK: {CHECK_EMPTY}\n   EVIDENCE: NOT-MET \u2014 exit 1\n"
            f"3. `reconcile()` no line\n   CHECK: {CHECK_EMPTY}\n"
            f"4. `reconcile()` odd\n   CHECK: {CHECK_EMPTY}\n   EVIDENCE: looks fine\n"
        ),
    )
    verdict = verify_contract(project.path, path, "base..HEAD")
    assert verdict.verdict == "ECARTS" and verdict.count == 4
    actual = [c.actual for c in verdict.criteria]
    assert actual[0] is not None and actual[0].startswith("EVIDENCE: pending (the oracle has not")
    assert actual[1] == "EVIDENCE: NOT-MET \u2014 exit 1"
    assert actual[2] is not None and actual[2].startswith("no EVIDENCE line")
    assert actual[3] == "unrecognised EVIDENCE value 'looks fine'"
    assert all(c.expected == "exit 0" for c in verdict.criteria)


def test_a_diff_that_adds_pytest_skip(project: Repo) -> None:
    project.write(
        "tests/test_inv.py",
        TESTS_MORE.replace(
            "def test_one():\n", "def test_one():\n    pytest.skip('flaky')\n"
        ).replace("import sys\n", "import sys\nimport pytest\n"),
    )
    project.commit("skip")
    path = write_contract(project, GOOD)
    gates(project, path)
    proc = cli("contract", f"--contract={path}", "--diff=base..HEAD", cwd=project.path)
    assert proc.returncode == 1
    lines = proc.stdout.splitlines()
    assert verdict_lines(proc.stdout) == ["VERIFY \u2014 VERDICT: ECARTS(1)"]
    floor_at = lines.index("FLOOR: 1 finding(s) (0 waived) \u2014")
    assert lines[floor_at + 1] == "  FLOOR SKIP tests/test_inv.py:8 pytest.skip('flaky')"
    assert lines[floor_at + 2].startswith("PROOF: ") and "1 finding(s) (0 waived)" in lines[-1]


@pytest.mark.parametrize(
    ("tests", "rows"),
    [
        # test_one loses its assertion; test_empty's and test_two's pay for nothing.
        (
            TESTS_MORE.replace("    assert reconcile([1]) == 1\n", "    reconcile([1])\n")
            + "\n\ndef test_two():\n    assert reconcile([2]) == 2\n",
            ["  FLOOR ASSERT_REMOVED tests/test_inv.py:7 assert reconcile([1]) == 1"],
        ),
        # test_one renamed, its assertion intact: no finding.
        (TESTS_MORE.replace("def test_one():", "def test_single_invoice():"), []),
    ],
    ids=["assertion removed, a test added", "test renamed"],
)
def test_the_floor_guard_judges_each_test_of_the_work_tree(
    project: Repo, tests: str, rows: list[str]
) -> None:
    path = write_contract(project, GOOD)
    gates(project, path)
    project.write("tests/test_inv.py", tests)  # uncommitted: the work tree is the diff's new side
    verdict = verify_contract(project.path, path, "base")
    assert verdict.diff is not None and verdict.diff.workTree
    assert verdict.verdict == ("ECARTS" if rows else "CONFORME"), render.text(verdict)
    assert verdict.floor is not None and render.floor_line(verdict.floor)[1:] == rows


def test_a_waived_skip_is_not_a_gap(project: Repo) -> None:
    project.write(
        "tests/test_inv.py",
        TESTS_MORE.replace(
            "def test_one():\n", "def test_one():\n    pytest.skip('flaky')\n"
        ).replace("import sys\n", "import sys\nimport pytest\n"),
    )
    project.commit("skip")
    sentence = "The skip of test_one in tests/test_inv.py is allowed until the fixture lands."
    path = write_contract(
        project,
        contract(
            GOOD.split("## ACCEPTANCE CRITERIA\n")[1].split("\n## FILE SCOPE")[0],
            clarifications=f"- {sentence}",
        ),
    )
    gates(project, path)
    verdict = verify_contract(project.path, path, "base..HEAD")
    assert verdict.verdict == "CONFORME", render.text(verdict)
    assert render.floor_line(verdict.floor) == [  # type: ignore[arg-type]
        "FLOOR: 1 finding(s) (1 waived) \u2014",
        f"  WAIVED SKIP tests/test_inv.py:8 pytest.skip('flaky') \u2014 \"{sentence}\"",
    ]


def test_an_out_of_scope_file(project: Repo) -> None:
    project.write("setup.py", "# unrelated\n")
    project.write("docs/notes.md", "notes\n")
    project.commit("extra")
    path = write_contract(project, GOOD)
    gates(project, path)
    verdict = verify_contract(project.path, path, "base..HEAD")
    assert (verdict.verdict, verdict.count) == ("ECARTS", 2)
    assert verdict.scope is not None and verdict.scope.outOfScope == ("docs/notes.md", "setup.py")
    assert "SCOPE: in-scope 2 files; out-of-scope: docs/notes.md, setup.py" in render.text(verdict)


def test_no_file_scope_means_nothing_is_in_scope(project: Repo) -> None:
    text = GOOD.split("## FILE SCOPE")[0]
    path = write_contract(project, text)
    gates(project, path)
    verdict = verify_contract(project.path, path, "base..HEAD")
    assert verdict.scope is not None and not verdict.scope.declared
    assert verdict.scope.outOfScope == ("src/inv.py", "tests/test_inv.py")


def test_an_abandonment_alone_is_abandoned(project: Repo) -> None:
    path = write_contract(
        project,
        GOOD.replace(
            "## FILE SCOPE",
            "2. Invoices export to CSV\n\n"
            "ABANDON: 2 \u2014 the export API is not "
            "available yet\n\n## FILE SCOPE",
        ),
    )
    gates(project, path)
    proc = cli("contract", f"--contract={path}", "--diff=base..HEAD", cwd=project.path)
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert verdict_lines(proc.stdout) == ["VERIFY \u2014 VERDICT: ABANDONED(1)"]
    assert (
        "  2. Invoices export to CSV \u2014 ABANDONED \u2014 the export API is not available yet"
    ) in proc.stdout.splitlines()


def test_gaps_come_before_abandonments(project: Repo) -> None:
    path = write_contract(
        project,
        GOOD.replace(
            "## FILE SCOPE", "2. Export\n3. Readable\n\nABANDON: 2 \u2014 later\n\n## FILE SCOPE"
        ),
    )
    gates(project, path)
    verdict = verify_contract(project.path, path, "base..HEAD")
    assert (verdict.verdict, verdict.count, verdict.abandoned) == ("ECARTS", 1, (2,))
    text = render.text(verdict)
    assert "  2. Export \u2014 ABANDONED \u2014 later" in text  # surfaced in the same report
    assert (
        "  3. Readable \u2014 UNVERIFIABLE \u2014 no oracle and no model backend configured" in text
    )


def test_a_failing_test_command_is_a_gap(project: Repo) -> None:
    path = write_contract(project, GOOD)
    gates(project, path)
    passed = verify_contract(project.path, path, "base..HEAD", test=CHECK_EMPTY)
    assert passed.verdict == "CONFORME" and passed.test is not None and passed.test.passed
    failed = verify_contract(project.path, path, "base..HEAD", test="echo broken >&2; exit 5")
    assert (failed.verdict, failed.count) == ("ECARTS", 1)
    assert failed.gaps is not None and failed.gaps.test == 1
    assert "; echo broken >&2; exit 5 \u2192 exit 5 (failed), checked" in render.text(failed)


def test_a_single_ref_diffs_the_work_tree(project: Repo) -> None:
    path = write_contract(project, GOOD)
    gates(project, path)
    project.write("scratch.txt", "uncommitted\n")
    verdict = verify_contract(project.path, path, "HEAD")
    assert verdict.diff is not None and verdict.diff.workTree
    assert verdict.scope is not None and verdict.scope.outOfScope == ("scratch.txt",)
    assert "floor-guard " in render.text(verdict) and "..work tree" in render.text(verdict)


def test_the_contract_itself_is_never_out_of_scope(project: Repo) -> None:
    path = project.write("CONTRACT.md", GOOD)
    gates(project, path)
    verdict = verify_contract(project.path, path, "base")
    assert verdict.verdict == "CONFORME", render.text(verdict)


# --- model judgement -------------------------------------------------------------------------


JUDGED = contract("1. Errors are readable\n")


@pytest.mark.parametrize(
    ("reply", "status", "verdict", "needle"),
    [
        (
            '{"status": "MET", "reason": "the message names the file", "location": "src/inv.py:2"}',
            "MET",
            "CONFORME",
            "model judgement (claude (model sonnet)): the message names the file "
            "\u2014 src/inv.py:2",
        ),
        (
            "NOT-MET \u2014 the error is a bare KeyError",
            "NOT-MET",
            "ECARTS",
            "expected the criterion to hold / actual model judgement (claude (model sonnet)): the "
            "error is a bare KeyError",
        ),
        ("It looks fine to me overall.", "UNVERIFIABLE", "ECARTS", "gave no verdict"),
    ],
)
def test_a_criterion_without_oracle_is_judged_by_the_model(
    project: Repo,
    fake_claude: Path,
    monkeypatch: pytest.MonkeyPatch,
    reply: str,
    status: str,
    verdict: str,
    needle: str,
) -> None:
    monkeypatch.setenv("FAKE_MODEL_REPLY", reply)
    path = write_contract(project, JUDGED)
    proc = cli("contract", f"--contract={path}", "--diff=base..HEAD", cwd=project.path)
    assert verdict_lines(proc.stdout) == [
        f"VERIFY \u2014 VERDICT: {verdict if verdict == 'CONFORME' else 'ECARTS(1)'}"
    ]
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("  1. "))
    assert line.startswith(f"  1. Errors are readable \u2014 {status} \u2014 ") and needle in line
    assert "model backend claude (model sonnet) \u2192 1 criteria judged" in proc.stdout
    (call,) = logged_calls(fake_claude)
    assert "CRITERION 1:\nErrors are readable" in call["prompt"]
    assert "+    return sum(xs) if xs else 0" in call["prompt"]  # the diff
    assert "Make `reconcile()` handle empty lists." in call["prompt"]


@pytest.mark.parametrize(
    ("said", "location"),
    [
        ("the error handling part", None),
        ("src/inv.py:2", "src/inv.py:2"),
        ("`src/inv.py:2`", "src/inv.py:2"),
        ("src/nowhere.py:2", None),
        ("src/inv.py:999", None),
    ],
)
def test_a_model_judged_not_met_is_located_at_file_line_or_nowhere(
    project: Repo,
    fake_claude: Path,
    monkeypatch: pytest.MonkeyPatch,
    said: str,
    location: str | None,
) -> None:
    """002: "NOT-MET — expected vs actual, located at file:line", and the report line is
    "<criterion> — NOT-MET — expected <…> / actual <…> — <file:line>". A model's prose ("the
    error handling part"), a file the verified commit lacks or a line past its end is no
    file:line: the location is null, and the reason says what the model gave."""
    reply = {"status": "NOT-MET", "reason": "the error is a bare KeyError", "location": said}
    monkeypatch.setenv("FAKE_MODEL_REPLY", json.dumps(reply))
    verdict = verify_contract(project.path, write_contract(project, JUDGED), "base..HEAD")
    (c,) = verdict.criteria
    assert (c.status, c.location) == ("NOT-MET", location)
    if location is None:
        assert c.evidence.endswith(
            f"(its location {said!r} is not a file:line of the verified commit)"
        )
    else:
        assert c.evidence.endswith(f" \u2014 {location}")


def test_a_failing_backend_leaves_the_criterion_unverifiable(
    project: Repo, fake_claude: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_MODEL_MODE", "auth")
    verdict = verify_contract(project.path, write_contract(project, JUDGED), "base..HEAD")
    (c,) = verdict.criteria
    assert (c.status, c.source) == ("UNVERIFIABLE", "model")
    assert "model backend claude (model sonnet) auth" in c.evidence


def test_unverifiable_without_a_backend(project: Repo) -> None:
    verdict = verify_contract(project.path, write_contract(project, JUDGED), "base..HEAD")
    (c,) = verdict.criteria
    assert (c.status, c.source, verdict.verdict) == ("UNVERIFIABLE", "none", "ECARTS")
    assert c.evidence.startswith("no oracle and no model backend configured")


# --- errors and exit codes -------------------------------------------------------------------


def assert_error(proc: subprocess.CompletedProcess[str], contract_arg: str, reason: str) -> None:
    assert proc.returncode == 3, proc.stderr
    assert proc.stdout.splitlines()[1] == f"CONTRACT: {contract_arg}"
    head = proc.stdout.splitlines()[0]
    assert head.startswith("VERIFY \u2014 VERDICT: ERROR(") and reason in head
    assert len(proc.stdout.splitlines()) == 2
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("verify-dag: error: ")
    assert reason in proc.stderr and "Traceback" not in proc.stderr


def test_a_missing_contract_is_error(project: Repo) -> None:
    proc = cli("contract", "--contract=nope.md", "--diff=base..HEAD", cwd=project.path)
    assert_error(proc, "nope.md", "contract not found: nope.md")


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("## ACCEPTANCE CRITERIA\n1. a\n", "contract lacks its REQUEST section"),
        ("## REQUEST\nx\n", "contract lacks its ACCEPTANCE CRITERIA section"),
    ],
)
def test_a_contract_without_its_sections_is_error(project: Repo, text: str, reason: str) -> None:
    path = write_contract(project, text)
    proc = cli("contract", f"--contract={path}", "--diff=base..HEAD", cwd=project.path)
    assert_error(proc, str(path), reason)


@pytest.mark.parametrize(
    ("spec", "reason"),
    [
        ("base..nope", "bad diff range 'base..nope': unknown revision 'nope'"),
        ("-x..HEAD", "invalid revision '-x'"),
        ("", "bad diff range '': empty"),
    ],
)
def test_a_bad_range_is_error(project: Repo, spec: str, reason: str) -> None:
    path = write_contract(project, GOOD)
    proc = cli("contract", f"--contract={path}", f"--diff={spec}", cwd=project.path)
    assert_error(proc, str(path), reason)


def test_outside_a_repository_is_error(tmp_path: Path) -> None:
    path = tmp_path / "c.md"
    path.write_text(GOOD)
    proc = cli("contract", f"--contract={path}", "--diff=HEAD", cwd=tmp_path)
    assert_error(proc, str(path), "not a git repository")


def test_usage_errors_exit_2(project: Repo) -> None:
    proc = cli("contract", "--contract=c.md", cwd=project.path)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith("verify-dag: error: ") and "--diff" in proc.stderr
    proc = cli("contract", "--contract=c.md", "--diff=HEAD", "--format=xml", cwd=project.path)
    assert proc.returncode == 2 and "invalid choice" in proc.stderr


def test_verify_contract_takes_the_text_a_worker_was_sent(project: Repo) -> None:
    text = GOOD.replace("EVIDENCE: pending", "EVIDENCE: MET \u2014 exit 0")
    verdict = verify_contract(project.path, Path("elsewhere/CONTRACT.md"), "base..HEAD", text=text)
    assert (verdict.verdict, verdict.contract) == ("CONFORME", "elsewhere/CONTRACT.md")


def test_verify_contract_never_raises_for_bad_input(tmp_path: Path) -> None:
    verdict = verify_contract(tmp_path, tmp_path / "missing.md", "HEAD")
    assert (verdict.verdict, verdict.contract) == ("ERROR", str(tmp_path / "missing.md"))
    assert (
        render.text(verdict).splitlines()[0]
        == f"VERIFY \u2014 VERDICT: ERROR(contract not found: {tmp_path / 'missing.md'})"
    )


# --- JSON ------------------------------------------------------------------------------------


def test_the_schema_is_valid_and_shipped() -> None:
    schema = json.loads((ROOT / SCHEMA).read_text())
    Draft202012Validator.check_schema(schema)
    assert jsonschemas.load(SCHEMA) == schema


def test_json_form_of_every_verdict(project: Repo) -> None:
    good = write_contract(project, GOOD, "good.md")
    vacuous = write_contract(project, contract("1. x\n   CHECK: echo ok\n"), "vacuous.md")
    abandoned = write_contract(
        project,
        GOOD.replace("## FILE SCOPE", "2. y\nABANDON: 2 \u2014 later\n## FILE SCOPE"),
        "abandoned.md",
    )
    for path in (good, vacuous, abandoned):
        gates(project, path)
    expected = {
        good: ("CONFORME", None, 0),
        vacuous: ("ECARTS", 1, 1),
        abandoned: ("ABANDONED", 1, 4),
        project.path / "missing.md": ("ERROR", None, 3),
    }
    for path, (name, count, code) in expected.items():
        proc = cli(
            "contract", f"--contract={path}", "--diff=base..HEAD", "--format=json", cwd=project.path
        )
        assert proc.returncode == code, proc.stderr
        doc = json.loads(proc.stdout)
        validate(doc)
        assert (doc["verdict"], doc["count"]) == (name, count)
        assert (
            doc["line"]
            == verdict_lines(render.text(verify_contract(project.path, path, "base..HEAD")))[0]
        )
    doc = json.loads(
        cli(
            "contract",
            f"--contract={vacuous}",
            "--diff=base..HEAD",
            "--format=json",
            cwd=project.path,
        ).stdout
    )
    (criterion,) = doc["criteria"]
    assert criterion["oracle"]["vacuous"] == "`echo ok` cannot fail: it runs only echo"
    assert doc["gaps"] == {
        "notMet": 1,
        "unverifiable": 0,
        "outOfScope": 0,
        "floor": 0,
        "test": 0,
        "total": 1,
    }
    assert doc["floor"] == {"status": "clean", "findings": 0, "waived": 0, "rows": []}
    assert doc["proof"]["checked"] == doc["proof"]["total"] == 1


def test_the_schema_rejects_a_mute_pass() -> None:
    doc: dict[str, Any] = {
        "schema": "verify-dag/contract-verdict/v1",
        "line": "VERIFY \u2014 VERDICT: CONFORME",
        "verdict": "CONFORME",
        "count": None,
        "error": None,
        "contract": "c.md",
        "diff": None,
        "request": None,
        "criteria": [],
        "abandoned": [],
        "scope": None,
        "floor": None,
        "test": None,
        "gaps": None,
        "proof": None,
    }
    assert list(jsonschemas.validator(SCHEMA).iter_errors(doc))
