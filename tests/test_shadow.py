"""verify-dag shadow (docs/shadow.md) on real repositories: claims normalised, selected and
re-derived as a chord on the embedded worker; every verdict, the guards, the gate and the CLI's
exit codes; the model arm through the fake claude CLI; the exerciser on the same verifiers."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import BRANCH, Repo, make_repo, run_cli
from fakes import logged_calls
from jsonschema import Draft202012Validator

from verify_dag import git
from verify_dag.cli import main
from verify_dag.models import Finding, Location, RunState, Scope, SkillOutcome, VerifyRequest
from verify_dag.models.source import parse_source
from verify_dag.phases.claims.models import ClaimVerdict
from verify_dag.phases.exerciser import reproduce
from verify_dag.shadow import inputs, merge, preflight, run, select
from verify_dag.shadow.models import ShadowJob

ROOT = Path(__file__).resolve().parent.parent
SHADOW_SCHEMA = json.loads((ROOT / "schemas/shadow.schema.json").read_text(encoding="utf-8"))
FINDINGS_SCHEMA = json.loads((ROOT / "schemas/findings.schema.json").read_text(encoding="utf-8"))
GOLDEN = json.loads((ROOT / "tests/golden/light_branch.json").read_text(encoding="utf-8"))

CALC = (
    "import os\n\n\ndef add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    unused = 1\n"
    "    return a * b + 1\n\n\ndef helper_x():\n    return 2\n"
)
TESTS = (
    "from calc import add, mul\n\n\ndef test_add():\n    assert add(2, 2) == 4\n\n\n"
    "def test_mul():\n    assert mul(3, 4) == 12\n"
)
PYPROJECT = '[tool.pytest.ini_options]\ntestpaths = ["tests"]\npythonpath = ["src"]\n'


@pytest.fixture
def calc(tmp_path: Path) -> Repo:
    repo = make_repo(tmp_path / "calc")
    repo.write("pyproject.toml", PYPROJECT)
    repo.write("src/calc.py", CALC)
    repo.write("tests/test_calc.py", TESTS)
    repo.commit("calc")
    return repo


@pytest.fixture(autouse=True)
def _no_model(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for var in ("VERIFY_DAG_BACKEND", "VERIFY_DAG_BACKEND_COMMAND", "VERIFY_DAG_CONFIG"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))


def findings_file(tmp_path: Path, findings: list[dict[str, Any]], **top: Any) -> Path:
    doc = {"findings": findings, **top}
    Draft202012Validator(FINDINGS_SCHEMA).validate(doc)
    path = tmp_path / f"findings-{len(list(tmp_path.glob('findings-*')))}.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def v1_file(tmp_path: Path, head: str, issues: list[dict[str, Any]], mode: str = "branch") -> Path:
    """A verify JSON v1 report (the golden one, with these issues and this head)."""
    doc = copy.deepcopy(GOLDEN)
    doc["issues"] = issues
    doc["scope"]["headSha"] = head
    doc["scope"]["mode"] = doc["overall"]["mode"] = mode
    if mode != "branch":
        doc["scope"]["baseRef"] = doc["scope"]["mergeBase"] = None
    path = tmp_path / f"report-{len(list(tmp_path.glob('report-*')))}.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def issue(
    n: int,
    title: str,
    path: str | None,
    line: int | None,
    sources: list[str],
    severity: int = 7,
    description: str = "d",
) -> dict[str, Any]:
    loc = None if path is None else {"path": path, **({"line": line} if line else {})}
    return {
        "id": f"VI-{n}",
        "severity": severity,
        "title": title,
        "sources": sources,
        "location": loc,
        "description": description,
        "class": "correctness",
    }


def shadow(
    repo: Repo, report: Path, *flags: str, capsys: pytest.CaptureFixture[str]
) -> tuple[int, dict[str, Any]]:
    rc = main(["shadow", str(report), f"--repo={repo.path}", "--format=json", *flags])
    doc: dict[str, Any] = json.loads(capsys.readouterr().out)
    Draft202012Validator(SHADOW_SCHEMA).validate(doc)
    return rc, doc


def by_id(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["claim_id"]: c for c in doc["claims"]}


# --- the verdicts, through the chord on the embedded worker ---------------------------------


def test_a_file_that_never_existed_is_refuted(
    calc: Repo, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = findings_file(
        tmp_path,
        [{"id": "F-1", "title": "Division by zero in mean()", "location": "src/stats.py:3"}],
    )
    rc, doc = shadow(calc, report, capsys=capsys)
    claim = by_id(doc)["F-1"]
    assert rc == 1 and doc["gate"] == "FAIL"
    assert claim["verdict"] == "REFUTED" and claim["method"] == "anchor"
    assert claim["tags"] == ["[was: confident, now: refuted]"]
    assert "src/stats.py does not exist" in claim["detail"]
    assert "no commit of its history ever had it" in claim["detail"]
    assert claim["evidence_pointer"] == f"src/stats.py@{calc.head()[:12]}"
    assert claim["evidence_base"] == "artifact-internal"
    assert claim["claim"] == ("[F-1] src/stats.py :: Division by zero in mean() :: src/stats.py:3")


def test_every_refutation_by_anchor_carries_its_corrected_finding(
    calc: Repo, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """003: "On `REFUTED` or `STALE`, the verifier also emits a corrected or updated finding",
    and "`REFUTED` → replace the claim with the verifier's corrected finding". A claim refuted
    by its anchor alone (no such file, no such line) says what is there instead: `corrected`
    is never null where the note says the claim was replaced by it."""
    first = calc.head()
    calc.write("src/calc.py", CALC + "\n\ndef sub(a, b):\n    return a - b\n")
    calc.commit("sub")
    report = findings_file(
        tmp_path,
        [
            {"id": "missing", "title": "mean divides by zero", "location": "src/stats.py:3"},
            {"id": "outside", "title": "leaks a key", "location": "../secrets.py:1"},
            {"id": "beyond", "title": "mul overflows", "location": "src/calc.py:99"},
        ],
    )
    at_ref = findings_file(
        tmp_path,
        [{"id": "never", "title": "mul overflows", "location": "src/calc.py:99"}],
        ref=first,
    )
    _, doc = shadow(calc, report, "--all", capsys=capsys)
    _, again = shadow(calc, at_ref, "--all", capsys=capsys)
    claims = {**by_id(doc), **by_id(again)}
    label = doc["repository"]["ref"]
    assert {k: (c["verdict"], c["method"], c["corrected"]) for k, c in claims.items()} == {
        "missing": ("REFUTED", "anchor", f"src/stats.py does not exist in {label}"),
        "outside": (
            "REFUTED",
            "anchor",
            "../secrets.py is not a file of this repository: nothing there to support the claim",
        ),
        "beyond": ("REFUTED", "anchor", f"src/calc.py has only 18 lines in {label}"),
        "never": (
            "REFUTED",
            "anchor",
            f"src/calc.py had only 14 lines at {first[:12]}: there was no line 99",
        ),
    }
    assert all(c["note"].startswith("replaced by the corrected finding") for c in claims.values())


def test_a_line_changed_since_the_claim_is_stale(
    calc: Repo, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A branch-scope report's head is the claims' ref; the line was edited since (here, in the
    work tree, which is what shadow verifies by default). ruff, run again, reports F841 there
    for another variable: the claim about `unused` no longer holds, and the updated finding
    says what ruff reports now."""
    report = v1_file(
        tmp_path,
        calc.head(),
        [
            issue(
                1,
                "ruff F841: Local variable `unused` is assigned to but never used",
                "src/calc.py",
                9,
                ["static-analysis"],
            )
        ],
    )
    calc.write("src/calc.py", CALC.replace("    unused = 1\n", "    product = a * b\n"))
    rc, doc = shadow(calc, report, capsys=capsys)
    claim = by_id(doc)["VI-1"]
    assert rc == 4 and doc["gate"] == "WARN"
    assert claim["verdict"] == "STALE" and claim["tags"] == ["[was true, now stale]"]
    assert "line 9 of src/calc.py changed since the claim's ref" in claim["detail"]
    assert "was 'unused = 1', now 'product = a * b'" in claim["detail"]
    assert "re-ran ruff on src/calc.py: the claimed F841 is not at line(s) 9" in claim["detail"]
    assert claim["corrected"] == (
        f"ruff reports F841 in src/calc.py in {doc['repository']['ref']} at line 9: "
        "Local variable `product` is assigned to but never used"
    )
    assert doc["repository"]["ref"].startswith("the work tree (uncommitted changes")
    # --ref verifies a commit instead: at HEAD the line is still what the report saw.
    rc, doc = shadow(calc, report, "--ref=HEAD", capsys=capsys)
    assert rc == 0 and by_id(doc)["VI-1"]["verdict"] == "CONFIRMED"


def test_a_static_claim_on_a_changed_line_that_still_holds_is_confirmed(
    calc: Repo, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """003: "`STALE` → the claim was true at some prior point but no longer holds", and each
    verifier "re-derives the verdict independently using tool calls only". The cited import
    line's text changed since the report, but ruff still reports the same F401 there: the
    claim holds, so it is CONFIRMED, never called STALE for the edit alone."""
    calc.write("src/calc.py", CALC.replace("import os\n", "import os  # the file system\n"))
    calc.commit("comment")
    report = v1_file(
        tmp_path,
        calc.git("rev-parse", "HEAD^"),
        [issue(1, "ruff F401: `os` imported but unused", "src/calc.py", 1, ["static-analysis"])],
    )
    rc, doc = shadow(calc, report, "--ref=HEAD", capsys=capsys)
    claim = by_id(doc)["VI-1"]
    assert claim["verdict"] == "CONFIRMED", claim["detail"]
    assert "line 1 of src/calc.py changed since the claim's ref" in claim["detail"]
    assert "F401 still at line 1: `os` imported but unused" in claim["detail"]
    assert rc == 0 and doc["gate"] == "PASS"


def test_moved_but_unchanged_lines_are_followed(
    calc: Repo, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first = calc.head()
    calc.write("src/calc.py", '"""Arithmetic."""\n\n' + CALC)
    calc.commit("docstring")
    report = findings_file(
        tmp_path,
        [
            {
                "id": "lint",
                "title": "ruff F841: Local variable `unused` is assigned to but never used",
                "tool": "ruff",
                "rule": "F841",
                "location": {"path": "src/calc.py", "line": 9},
            },
            {"id": "gone", "title": "mul has an off-by-one", "location": "src/calc.py:40"},
        ],
        ref=first,
    )
    rc, doc = shadow(calc, report, "--all", capsys=capsys)
    lint, gone = by_id(doc)["lint"], by_id(doc)["gone"]
    assert lint["verdict"] == "CONFIRMED", lint["detail"]
    assert "F841 at line 11" in lint["detail"] and "now at line 11" in lint["detail"]
    assert lint["ref"] == first
    assert gone["verdict"] == "REFUTED" and "in the claim's own ref" in gone["detail"]
    assert rc == 1


def test_deleted_since_is_stale_without_a_ref(
    calc: Repo, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    calc.write("src/old.py", "x = 1\n")
    calc.commit("old")
    calc.git("rm", "-q", "src/old.py")
    calc.commit("drop old")
    report = findings_file(tmp_path, [{"title": "x is wrong", "location": "src/old.py:1"}])
    rc, doc = shadow(calc, report, capsys=capsys)
    claim = by_id(doc)["C1"]
    assert claim["verdict"] == "STALE" and "the last commit to touch it" in claim["detail"]
    assert claim["corrected"] == f"src/old.py no longer exists in {doc['repository']['ref']}"
    assert rc == 4


def test_a_real_verify_report_reproduces(
    scenario: Repo, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The acceptance scenario's own v1 report: its ruff finding and its failing test are
    re-derived (ruff re-run, the one test re-run with pytest)."""
    out = tmp_path / "verify.json"
    main(["verify", str(scenario.path), *BRANCH, "--format=json", f"--output={out}"])
    capsys.readouterr()
    rc, doc = shadow(scenario, out, "--all", capsys=capsys)
    got = {c["original"].split(":")[0]: c for c in doc["claims"]}
    lint, test = got["ruff F841"], got["Test failed"]
    assert lint["verdict"] == "CONFIRMED" and lint["method"] == "static"
    assert lint["detail"].startswith("re-ran ruff on src/calc.py: F841 at line 9")
    assert lint["evidence_base"] == "artifact-internal"  # scope guard: the rule is its referent
    assert test["verdict"] == "CONFIRMED" and test["method"] == "test"
    assert "1 failed" in test["detail"] and test["evidence_base"] == "independent-rederivation"
    assert test["claim"] == (
        f"[{test['claim_id']}] tests/test_calc.py::test_mul :: fails "
        "when run :: tests/test_calc.py:8"
    )
    assert doc["input"]["shape"] == "verify-report-v1" and doc["rounds"] == 1
    assert rc in (0, 4)  # a judgement finding of the report, if any, stays unverifiable


def test_a_claim_with_no_anchor_is_unverifiable_at_once(
    calc: Repo, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = findings_file(tmp_path, [{"title": "The code base is clearly unmaintainable"}])
    rc, doc = shadow(calc, report, capsys=capsys)
    claim = doc["claims"][0]
    assert rc == 4 and doc["gate"] == "WARN"
    assert claim["verdict"] == "UNVERIFIABLE" and claim["verifier_verdict"] is None
    assert claim["evidence_ref"] is None and claim["tags"] == ["[needs-human-review]"]
    assert claim["note"].startswith("not anchored: no concrete evidence_ref")
    assert doc["rounds"] == 0 and doc["selection"]["verified"] == 0  # nothing dispatched
    assert claim["predicate"] == "The code base is unmaintainable"  # confidence stripped


def test_budget_exhausted_is_redispatched_then_escalated(
    calc: Repo, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    calc.write(
        "tests/test_slow.py",
        "import time\n\n\ndef test_slow():\n    time.sleep(30)\n    assert False\n",
    )
    calc.commit("slow")
    report = findings_file(
        tmp_path,
        [
            {
                "title": "Test failed: tests/test_slow.py::test_slow",
                "nodeid": "tests/test_slow.py::test_slow",
            }
        ],
    )
    start = time.monotonic()
    rc, doc = shadow(calc, report, "--budget=1.5", capsys=capsys)
    assert time.monotonic() - start < 20
    claim = doc["claims"][0]
    assert rc == 4 and doc["rounds"] == 3
    assert claim["verdict"] == "UNVERIFIABLE" and claim["stop_reason"] == "budget-exhausted"
    assert claim["tags"] == ["[budget-exhausted]", "[needs-human-review]", "[loop-cap-reached]"]
    assert claim["escalated"] and claim["round"] == 3
    assert "budget" in claim["detail"]


def test_more_than_50_claims_halt(
    calc: Repo, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    many = [{"title": f"claim {n}", "location": f"src/calc.py:{n % 9 + 1}"} for n in range(51)]
    report = findings_file(tmp_path, many)
    rc = main(["shadow", str(report), f"--repo={calc.path}"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == preflight.EXIT_SCALE == 5
    assert err == [
        "verify-dag: error: 51 claims exceed the limit of 50: scope the investigation "
        "first (verify fewer files, or name the claims to check with "
        "--claims=ID,ID,...)"
    ]
    # Scoped with --claims, it runs.
    rc, doc = shadow(calc, report, "--claims=C1,C2", capsys=capsys)
    assert [c["claim_id"] for c in doc["claims"]] == ["C1", "C2"]


def test_selection_two_or_three_or_all(
    calc: Repo, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    low = [
        {
            "id": f"L{n}",
            "title": f"ruff E501: line too long ({n})",
            "tool": "ruff",
            "rule": "E501",
            "location": {"path": "src/calc.py", "line": n},
            "severity": 2,
        }
        for n in (1, 2, 3)
    ]
    report = findings_file(
        tmp_path,
        [
            *low,
            {
                "id": "T",
                "title": "Test failed: tests/test_calc.py::test_mul",
                "nodeid": "tests/test_calc.py::test_mul",
                "severity": 9,
            },
            {
                "id": "H",
                "title": "`helper_x` is never called",
                "location": "src/calc.py:13",
                "description": "I am certain nothing calls it.",
            },
        ],
    )
    rc, doc = shadow(calc, report, capsys=capsys)
    picked = [c["claim_id"] for c in doc["claims"] if c["selected"]]
    # T: 3 + 0 + 1 = 4; H: 0 + 2 + 2 = 4; each E501: 0. The third is below the floor.
    assert picked == ["T", "H"] and doc["selection"] == {
        "mode": "stakes",
        "verified": 2,
        "total": 5,
    }
    assert {c["verdict"] for c in doc["claims"] if not c["selected"]} == {"NOT_SELECTED"}
    assert rc == 0 and doc["gate"] == "PASS"
    rc, doc = shadow(calc, report, "--all", capsys=capsys)
    assert doc["selection"]["verified"] == 5 and not any(
        c["verdict"] == "NOT_SELECTED" for c in doc["claims"]
    )
    assert {c["claim_id"]: c["verdict"] for c in doc["claims"]}["L1"] == "REFUTED"


def test_selection_scoring_is_deterministic() -> None:
    def cand(n: int, title: str, severity: int | None = None, **kw: Any) -> preflight.Candidate:
        return preflight.candidate(
            inputs.Record(id=f"C{n}", title=title, severity=severity, path="a.py", line=1, **kw)
        )

    a = cand(1, "ruff E501: too long", 9, tool="ruff", rule="E501")  # 3 + 0 + 0
    b = cand(2, "Race in the cache", 5)  # 1 + 0 + 2
    c = cand(3, "Race in the queue", 5, reasoning="this must be a bug")  # 1 + 2 + 2
    d = cand(4, "Test failed: t.py::x", 7, nodeid="t.py::x")  # 2 + 0 + 1
    assert [select.score(x) for x in (a, b, c, d)] == [3, 3, 5, 3]
    # Ties (3) go to the higher severity, then the earlier finding.
    assert select.select([a, b, c, d]) == ["C3", "C1", "C4"]
    weak = cand(5, "ruff E501: too long", 1, tool="ruff", rule="E501")  # 0
    assert select.select([a, c, weak]) == ["C3", "C1"]
    assert select.select([a, c, weak], everything=True) == ["C1", "C3", "C5"]
    assert select.confident(cand(6, "x", confidence=0.85))
    assert select.confident(cand(7, "x", reasoning="about 90% sure"))


# --- normalisation ---------------------------------------------------------------------------


def test_claims_never_carry_the_reasoning() -> None:
    found = inputs.parse(
        {
            "findings": [
                {
                    "id": "R1",
                    "title": "Clearly, `parse_row` is unused",
                    "location": "src/io.py:7",
                    "severity": 9,
                    "confidence": "certain",
                    "description": "SECRET-REASONING",
                }
            ]
        }
    )
    (c,) = preflight.normalise(found)
    assert c.claim.kind == "unused" and c.claim.symbol == "parse_row"
    assert "SECRET-REASONING" not in c.claim.model_dump_json()
    assert "Clearly" not in c.claim.model_dump_json()
    assert c.claim.text() == (
        "[R1] `parse_row` :: is not referenced anywhere but its definition :: src/io.py:7"
    )


@pytest.mark.parametrize(
    ("title", "kind", "field", "value"),
    [
        ("ruff F401: `os` imported but unused", "static", "rule", "F401"),
        ("Test failed: tests/t.py::test_x[a-b]", "test", "nodeid", "tests/t.py::test_x[a-b]"),
        ("`os` imported but unused", "unused", "symbol", "os"),
        ("unused function `load_all`", "unused", "symbol", "load_all"),
        ("No tests cover `parse_row`", "untested", "symbol", "parse_row"),
        ("calc.mul_all is not tested", "untested", "symbol", "mul_all"),
        ("src/calc.py exceeds 300 lines", "size", "limit", 300),
        ("The function is unused", "judgement", "kind", "judgement"),  # not code: judgement
    ],
)
def test_kinds(title: str, kind: str, field: str, value: object) -> None:
    record = inputs.Record(
        id="X",
        title=title,
        path="src/calc.py",
        line=2,
        sources=("static-analysis",) if title.startswith("ruff") else (),
    )
    claim = preflight.candidate(record).claim
    assert claim.kind == kind and getattr(claim, field) == value


def test_evidence_refs() -> None:
    assert inputs.split_ref("src/a.py:3-5") == ("src/a.py", 3, 5)
    assert inputs.split_ref("src/a.py:3:7") == ("src/a.py", 3, None)
    assert inputs.split_ref("src/a.py#L3-L9") == ("src/a.py", 3, 9)
    assert inputs.split_ref("pyproject.toml#tool.ruff") == ("pyproject.toml", None, None)
    for other in ("GET /users", "1a2b3c4d", "https://example.com/x", "refs/heads/main"):
        assert inputs.split_ref(other) == (None, None, None)
    # An endpoint is a concrete anchor, but no file: only the model arm could weigh it.
    (c,) = preflight.normalise(
        inputs.parse(
            {"findings": [{"title": "GET /users leaks emails", "evidence_ref": "GET /users"}]}
        )
    )
    assert c.unanchored is None and c.claim.path is None and c.claim.route() == "judge"


# --- guards, merge rules and the gate (pure) --------------------------------------------------


def verdict(cid: str, v: str, base: str = "artifact-internal", **kw: Any) -> ClaimVerdict:
    return ClaimVerdict.model_validate(
        {
            "claim_id": cid,
            "verdict": v,
            "evidence_pointer": "a.py:1@x",
            "evidence_base": base,
            "method": "model",
            "detail": "d",
            "artifact": "a.py",
            **kw,
        }
    )


def test_composition_axis_guard() -> None:
    cases = {
        "C1": verdict("C1", "CONFIRMED", boundary_checked=True, boundary=("b.py:3",)),
        "C2": verdict("C2", "CONFIRMED", artifact="c.py", boundary_checked=True),
        "C3": verdict("C3", "CONFIRMED", artifact="d.py"),  # no boundary read could be made
        "C4": verdict("C4", "CONFIRMED", artifact="e.py", scope_guard="external referent: x"),
        "C5": verdict("C5", "REFUTED", artifact="f.py"),  # exempt: a refutation halts anyway
        "C6": verdict("C6", "CONFIRMED", "independent-rederivation", artifact="g.py"),
    }
    got = {s.claim_id: (s.verdict, s.tags) for s in merge.settle(cases, 1).settled}
    assert got["C1"] == (
        "UNVERIFIED-COMPOSITION",
        ("[needs-human-review: composition boundary unchecked]",),
    )
    assert got["C2"][0] == "CONFIRMED"
    assert got["C3"][0] == "UNVERIFIED-COMPOSITION"
    assert got["C4"][0] == got["C6"][0] == "CONFIRMED"
    assert got["C5"] == ("REFUTED", ("[was: confident, now: refuted]",))
    assert merge.gate(v for v, _ in got.values()) == "FAIL"


def test_echo_chamber_guard_redispatches_then_hits_the_cap() -> None:
    same = {
        "C1": verdict("C1", "CONFIRMED", boundary_checked=True),
        "C2": verdict("C2", "REFUTED"),
        "C3": verdict("C3", "CONFIRMED", "independent-rederivation"),
    }
    first = merge.settle(same, 1)
    got = {s.claim_id: s for s in first.settled}
    # The refutation makes two verifiers on a.py; the confirmation resting on it is flagged,
    # the refutation itself stays REFUTED (exempt) and so the gate stays FAIL.
    assert got["C1"].verdict == "UNVERIFIED-ECHO-CHAMBER"
    assert "[needs-human-review: echo-chamber suspected]" in got["C1"].tags
    assert got["C2"].verdict == "REFUTED" and got["C2"].tags == ("[was: confident, now: refuted]",)
    assert got["C3"].verdict == "CONFIRMED"
    assert merge.gate(s.verdict for s in first.settled) == "FAIL"
    assert [(r.claim_id, r.outside) for r in first.redispatch] == [("C1", "a.py")]
    # The re-dispatched verifier read outside the artifact: the group is resolved.
    resolved = merge.settle(
        {**same, "C1": verdict("C1", "CONFIRMED", "independent-rederivation", round=2)}, 2
    )
    assert {s.claim_id: s.verdict for s in resolved.settled} == {
        "C1": "CONFIRMED",
        "C2": "REFUTED",
        "C3": "CONFIRMED",
    }
    assert resolved.redispatch == ()
    capped = {s.claim_id: s for s in merge.settle(same, 3).settled}
    assert capped["C1"].tags[:2] == (
        "[needs-human-review: echo-chamber suspected]",
        "[loop-cap-reached]",
    )
    assert capped["C1"].escalated and merge.settle(same, 3).redispatch == ()


@pytest.mark.parametrize("round_no", [1, merge.MAX_ROUNDS])
def test_refutations_on_one_artifact_stay_refuted(round_no: int) -> None:
    """The echo-chamber guard never relabels a REFUTED: two refutations resting on one file
    are still two refutations, nothing is re-dispatched or escalated, and the gate FAILs."""
    both = {"C1": verdict("C1", "REFUTED"), "C2": verdict("C2", "REFUTED")}
    result = merge.settle(both, round_no)
    assert [(s.claim_id, s.verdict, s.tags, s.escalated) for s in result.settled] == [
        ("C1", "REFUTED", ("[was: confident, now: refuted]",), False),
        ("C2", "REFUTED", ("[was: confident, now: refuted]",), False),
    ]
    assert result.redispatch == ()
    assert merge.gate(s.verdict for s in result.settled) == "FAIL"


@pytest.mark.parametrize("other", ["CONFIRMED", "STALE"])
def test_echo_chamber_guard_flags_what_rests_on_one_artifact(other: str) -> None:
    """CONFIRMED and STALE verdicts that only re-read the same file are echo-chamber suspects
    whatever they concluded; a different artifact or an outside read is not."""
    group = {
        "C1": verdict("C1", "CONFIRMED", boundary_checked=True),
        "C2": verdict("C2", other, boundary_checked=True),
        "C3": verdict("C3", "CONFIRMED", artifact="b.py", boundary_checked=True),
        "C4": verdict("C4", "CONFIRMED", "independent-rederivation"),
    }
    result = merge.settle(group, 1)
    got = {s.claim_id: s.verdict for s in result.settled}
    assert got == {
        "C1": "UNVERIFIED-ECHO-CHAMBER",
        "C2": "UNVERIFIED-ECHO-CHAMBER",
        "C3": "CONFIRMED",
        "C4": "CONFIRMED",
    }
    assert [(r.claim_id, r.outside) for r in result.redispatch] == [("C1", "a.py")]
    assert merge.gate(got.values()) == "WARN"


def test_gate_verdicts() -> None:
    assert merge.gate(["CONFIRMED", "CONFIRMED"]) == "PASS"
    assert merge.gate([]) == "PASS"
    for warn in ("STALE", "UNVERIFIABLE", "UNVERIFIED-COMPOSITION", "UNVERIFIED-ECHO-CHAMBER"):
        assert merge.gate(["CONFIRMED", warn]) == "WARN"
    assert merge.gate(["STALE", "REFUTED"]) == "FAIL"


# --- the model arm, with the fake claude CLI -----------------------------------------------


def reply(monkeypatch: pytest.MonkeyPatch, cid: str, **kw: Any) -> None:
    monkeypatch.setenv(
        "FAKE_MODEL_REPLY",
        json.dumps(
            {
                "claim_id": cid,
                "verdict": "CONFIRMED",
                "evidence_pointer": "src/calc.py:9",
                "evidence_base": "artifact-internal",
                "files_read": ["src/calc.py"],
                **kw,
            }
        ),
    )


def test_model_arm_judges_without_the_reasoning(
    calc: Repo,
    tmp_path: Path,
    fake_claude: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    calc.write("src/app.py", "from calc import mul\n\nprint(mul(2, 3))\n")
    calc.commit("app")
    report = findings_file(
        tmp_path,
        [
            {
                "id": "J1",
                "title": "mul is clearly off by one",
                "location": "src/calc.py:9",
                "description": "SECRET-REASONING: it adds 1",
                "confidence": 0.95,
            }
        ],
        goal="ship the multiplication fix",
        surface=["src/"],
    )
    reply(monkeypatch, "J1")
    rc, doc = shadow(calc, report, capsys=capsys)
    claim = by_id(doc)["J1"]
    # An artifact-internal CONFIRMED with callers outside the file: composition unchecked.
    assert claim["verifier_verdict"] == "CONFIRMED" and claim["method"] == "model"
    assert claim["verdict"] == "UNVERIFIED-COMPOSITION"
    assert claim["boundary"] == [
        "src/app.py:1",
        "src/app.py:3",
        "tests/test_calc.py:1",
        "tests/test_calc.py:9",
    ]
    assert rc == 4
    (call,) = logged_calls(fake_claude)
    assert call["name"] == "claude" and "-p" in call["argv"]
    prompt = call["prompt"]
    assert "[J1] src/calc.py :: mul is off by one :: src/calc.py:9" in prompt
    assert "ship the multiplication fix" in prompt and "- src/" in prompt
    assert "SECRET-REASONING" not in prompt and "clearly" not in prompt and "0.95" not in prompt
    assert not call["cwd"].startswith(str(calc.path))  # a throwaway checkout
    # An independent re-derivation is confirmed as is.
    reply(
        monkeypatch,
        "J1",
        evidence_base="independent-rederivation",
        files_read=["src/calc.py", "src/app.py"],
    )
    rc, doc = shadow(calc, report, capsys=capsys)
    assert rc == 0 and by_id(doc)["J1"]["verdict"] == "CONFIRMED"


def test_an_echo_redispatch_asks_the_model_to_read_outside(calc: Repo) -> None:
    from verify_dag.phases.claims import verifiers
    from verify_dag.shadow import model_arm

    claim = preflight.candidate(
        inputs.Record(id="J1", title="I am sure mul is wrong", path="src/calc.py", line=9)
    ).claim
    where = verifiers.Surface(
        repo=calc.path, commit=calc.head(), label="HEAD", paths=("src/", "tests/"), goal="ship it"
    )
    first = model_arm.prompt(claim, where, 60, None)
    again = model_arm.prompt(claim, where, 60, "src/calc.py")
    assert "[J1] src/calc.py :: mul is wrong :: src/calc.py:9" in first
    assert "- src/\n- tests/" in first and "re-dispatch" not in first
    assert "Read at least one upstream caller and one downstream consumer outside it" in " ".join(
        again.split()
    )


@pytest.mark.parametrize(
    ("answer", "rc", "gate", "merged", "rounds"),
    [
        # Refutations are exempt from the echo-chamber guard: the gate FAILs (exit 1).
        ("REFUTED", 1, "FAIL", "REFUTED", 1),
        # Confirmations are not: re-dispatched to read outside, escalated at the cap (exit 4).
        ("CONFIRMED", 4, "WARN", "UNVERIFIED-ECHO-CHAMBER", 3),
    ],
)
def test_two_model_verdicts_on_one_file(
    calc: Repo,
    tmp_path: Path,
    fake_claude: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    answer: str,
    rc: int,
    gate: str,
    merged: str,
    rounds: int,
) -> None:
    def answer_for(cid: str, line: int) -> dict[str, Any]:
        return {
            "prompt": f"[{cid}] src/calc.py ::",
            "reply": json.dumps(
                {
                    "claim_id": cid,
                    "verdict": answer,
                    "evidence_pointer": f"src/calc.py:{line}",
                    "evidence_base": "artifact-internal",
                    "files_read": ["src/calc.py"],
                    "corrected": "it does not",
                }
            ),
        }

    replies = tmp_path / "replies.json"
    replies.write_text(json.dumps([answer_for("J1", 9), answer_for("J2", 5)]), encoding="utf-8")
    monkeypatch.setenv("FAKE_MODEL_REPLIES", str(replies))
    report = findings_file(
        tmp_path,
        [
            {"id": "J1", "title": "mul is off by one", "location": "src/calc.py:9"},
            {"id": "J2", "title": "add loses precision", "location": "src/calc.py:5"},
        ],
    )
    got_rc, doc = shadow(calc, report, "--all", capsys=capsys)
    claims_ = by_id(doc)
    assert [claims_[c]["verifier_verdict"] for c in ("J1", "J2")] == [answer, answer]
    assert [claims_[c]["evidence_base"] for c in ("J1", "J2")] == ["artifact-internal"] * 2
    assert [claims_[c]["verdict"] for c in ("J1", "J2")] == [merged, merged]
    assert (got_rc, doc["gate"], doc["rounds"]) == (rc, gate, rounds)
    if answer == "REFUTED":
        assert all(
            claims_[c]["tags"] == ["[was: confident, now: refuted]"] and not claims_[c]["escalated"]
            for c in ("J1", "J2")
        )
        assert len(logged_calls(fake_claude)) == 2  # nothing re-dispatched
    else:
        assert "[loop-cap-reached]" in claims_["J1"]["tags"] and claims_["J1"]["escalated"]


@pytest.mark.parametrize(
    ("mode", "answer", "expected"),
    [
        ("garbage", None, "the model's reply is not JSON"),
        ("findings", {"evidence_pointer": "src/nowhere.py:1"}, "the model cited src/nowhere.py"),
        ("findings", {"claim_id": "OTHER"}, "the model answered for claim 'OTHER'"),
        ("auth", None, "model backend auth"),
    ],
)
def test_model_arm_failures_are_unverifiable(
    calc: Repo,
    tmp_path: Path,
    fake_claude: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    mode: str,
    answer: dict[str, Any] | None,
    expected: str,
) -> None:
    monkeypatch.setenv("FAKE_MODEL_MODE", mode)
    reply(monkeypatch, "J1", **(answer or {}))
    report = findings_file(
        tmp_path, [{"id": "J1", "title": "mul is off by one", "location": "src/calc.py:9"}]
    )
    rc, doc = shadow(calc, report, capsys=capsys)
    claim = by_id(doc)["J1"]
    assert rc == 4 and claim["verdict"] == "UNVERIFIABLE" and expected in claim["detail"]


def test_model_time_out_is_budget_exhausted(
    calc: Repo,
    tmp_path: Path,
    fake_claude: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("FAKE_MODEL_MODE", "hang")
    report = findings_file(
        tmp_path, [{"id": "J1", "title": "mul is off by one", "location": "src/calc.py:9"}]
    )
    rc, doc = shadow(calc, report, "--budget=1", capsys=capsys)
    claim = by_id(doc)["J1"]
    assert claim["stop_reason"] == "budget-exhausted" and claim["escalated"]
    assert "model backend timeout" in claim["detail"] and rc == 4


def test_without_a_model_judgement_is_unverifiable(
    calc: Repo, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = findings_file(
        tmp_path, [{"id": "J1", "title": "mul is off by one", "location": "src/calc.py:9"}]
    )
    rc, doc = shadow(calc, report, "--format=json", capsys=capsys)
    claim = by_id(doc)["J1"]
    assert claim["verdict"] == "UNVERIFIABLE" and claim["method"] == "none"
    assert claim["detail"].startswith("needs judgement: no model backend configured")
    assert rc == 4


# --- the exerciser verifies reported issues with the same verifiers ------------------------


def test_the_exerciser_uses_the_claim_verifiers(calc: Repo) -> None:
    sha = calc.head()
    reviewer = SkillOutcome(
        skill="reviewer",
        status="COMPLETED",
        findings=(
            Finding(
                title="`helper_x` is never called",
                severity=5,
                description="d",
                source="reviewer",
                issue_class="correctness",
                location=Location(path="src/calc.py", line=13),
            ),
            Finding(
                title="`add` is unused",
                severity=5,
                description="d",
                source="reviewer",
                issue_class="correctness",
                location=Location(path="src/calc.py", line=4),
            ),
        ),
    )
    state = RunState(
        run_id="r",
        request=VerifyRequest(source=parse_source(str(calc.path))),
        scope=Scope(mode="all", new_commit=sha, head_sha=sha),
        outcomes=(reviewer,),
    )
    with git.worktree(str(calc.path), sha) as wt:
        out, note = reproduce.verify_issues(state, wt, {})
    got = {v.title: (v.status, v.evidence) for v in out}
    assert got["`helper_x` is never called"][0] == "CONFIRMED"
    assert got["`add` is unused"][0] == "NOT_REPRODUCED"
    assert "tests/test_calc.py:1" in got["`add` is unused"][1]
    assert note == "verified 2 of 2 reported issue(s) (1 CONFIRMED, 1 NOT_REPRODUCED)"


# --- with a broker: the repository travels as a bundle --------------------------------------


def test_broker_jobs_carry_a_bundle(
    calc: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VERIFY_DAG_MIRRORS", str(tmp_path / "mirrors"))
    snap = git.snapshot_worktree(str(calc.path), calc.head())
    job = ShadowJob(
        run_id="0b1c2d3e-0000-4000-8000-000000000000",
        repo=str(calc.path),
        commit=snap,
        label="HEAD",
        goal="g",
        budget=10,
        store=str(tmp_path / "st"),
    )
    pinned = run.pin(job)
    assert pinned.bundle and Path(pinned.bundle).is_file()
    copy_ = run.repository(pinned.model_copy(update={"repo": "/elsewhere/on/the/client"}))
    assert copy_ != calc.path and git.verify_commit(copy_, snap) == snap


# --- the CLI as a subprocess: exit codes, one stderr line, never a traceback -------------------


def cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FAKE_MODEL")}
    return run_cli("shadow", *args, cwd=cwd, env=env)


def test_cli_exit_codes(calc: Repo, tmp_path: Path) -> None:
    ok = findings_file(
        tmp_path, [{"title": "`helper_x` is never called", "location": "src/calc.py:13"}]
    )
    warn = findings_file(tmp_path, [{"title": "no anchor here"}])
    fail = findings_file(tmp_path, [{"title": "bug", "location": "src/nope.py:1"}])
    scale = findings_file(tmp_path, [{"title": f"c{n}", "location": "a.py"} for n in range(51)])
    bad_json = tmp_path / "bad.json"
    bad_json.write_text('{"findings": [', encoding="utf-8")
    bad_shape = tmp_path / "shape.json"
    bad_shape.write_text(
        json.dumps({"findings": [{"title": "x", "location": {"path": "a.py", "line": 0}}]})
    )
    expected = [
        ((str(ok),), 0, "SHADOW GATE: PASS"),
        ((str(warn),), 4, "SHADOW GATE: WARN"),
        ((str(fail),), 1, "SHADOW GATE: FAIL"),
        ((str(scale),), 5, "verify-dag: error: 51 claims exceed the limit of 50"),
        ((str(tmp_path / "missing.json"),), 2, "verify-dag: error: "),
        ((str(bad_json),), 2, "verify-dag: error: "),
        (
            (str(bad_shape),),
            2,
            "not a findings document (schemas/findings.schema.json) at $.findings[0].location",
        ),
        ((str(ok), "--ref=no-such-ref"), 2, "--ref: 'no-such-ref' does not name a commit"),
        ((str(ok), "--budget=0"), 2, "--budget"),
    ]
    for args, code, text in expected:
        res = cli(*args, cwd=calc.path)
        assert res.returncode == code, (args, res.stdout, res.stderr)
        assert "Traceback" not in res.stderr
        if code in (2, 5):
            assert len(res.stderr.strip().splitlines()) == 1 and text in res.stderr, res.stderr
            assert res.stdout == ""
        else:
            assert res.stdout.startswith(text), res.stdout
    outside = cli(str(ok), cwd=tmp_path)
    assert outside.returncode == 2 and "not a git repository" in outside.stderr
    help_text = cli("--help").stdout
    assert "4  WARN" in help_text and "5  halted" in help_text


def test_text_output_shows_the_merge_annotations(
    calc: Repo, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = findings_file(
        tmp_path,
        [
            {"id": "U", "title": "`add` is unused", "location": "src/calc.py:4", "severity": 9},
            {"id": "N", "title": "the design is clearly wrong"},
        ],
    )
    assert main(["shadow", str(report), f"--repo={calc.path}"]) == 1
    out = capsys.readouterr().out
    assert out.startswith(
        "SHADOW GATE: FAIL: 1 refuted, 1 unverifiable (1 of 2 claim(s) verified in 1 round(s))\n"
    )
    assert "  REFUTED [was: confident, now: refuted]: replaced by the corrected finding" in out
    assert "  original: `add` is unused\n" in out
    assert "  corrected: `add` is used: tests/test_calc.py:1, tests/test_calc.py:5" in out
    assert "Unanchored claims (UNVERIFIABLE [needs-human-review], not dispatched):" in out


def test_schemas_are_valid() -> None:
    Draft202012Validator.check_schema(SHADOW_SCHEMA)
    Draft202012Validator.check_schema(FINDINGS_SCHEMA)
    # The reviewers' own reply format is a findings document.
    Draft202012Validator(FINDINGS_SCHEMA).validate(
        {
            "findings": [
                {
                    "title": "t",
                    "severity": 7,
                    "location": "src/calc.py:5",
                    "category": "correctness",
                    "description": "d",
                }
            ]
        }
    )


def test_a_missing_dependency_claim_is_not_refuted_by_a_re_run(
    calc: Repo, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """mypy's import-not-found finding sits on whatever changed line its cascade touched: a
    re-run that finds no import-not-found at that line proves nothing either way."""
    report = findings_file(
        tmp_path,
        [
            {
                "id": "dep",
                "title": 'mypy import-not-found: Cannot find module "missing_lib"',
                "tool": "mypy",
                "rule": "import-not-found",
                "location": {"path": "src/calc.py", "line": 9},
            }
        ],
    )
    _, doc = shadow(calc, report, "--all", capsys=capsys)
    dep = by_id(doc)["dep"]
    assert dep["verdict"] == "UNVERIFIABLE", dep["detail"]
    assert "lacks a dependency" in dep["detail"]


def test_a_test_re_run_without_pytest_is_not_evidence(calc: Repo, tmp_path: Path) -> None:
    """An interpreter with no pytest exits 1 ("No module named pytest"), as a failing test
    does: only pytest's own summary line confirms a failure."""
    from verify_dag.phases.claims import verifiers
    from verify_dag.phases.claims.budget import Budget

    bare = calc.path / ".bare"  # inside the checkout: the sandbox shows the tests nothing else
    subprocess.run(["python3", "-m", "venv", "--without-pip", str(bare)], check=True)
    claim = preflight.candidate(
        inputs.Record(
            id="T1",
            title="Test failed: tests/test_calc.py::test_mul",
            nodeid="tests/test_calc.py::test_mul",
        )
    ).claim
    where = verifiers.Surface(
        repo=calc.path,
        commit=calc.head(),
        label="HEAD",
        workdir=calc.path,
        python=str(bare / "bin" / "python"),
    )
    verdict = verifiers.verify(claim, where, Budget(60))
    assert verdict.verdict == "UNVERIFIABLE", verdict.detail
    assert "No module named pytest" in verdict.detail
    # The same claim with an interpreter that has pytest re-derives the failure.
    verdict = verifiers.verify(
        claim,
        verifiers.Surface(repo=calc.path, commit=calc.head(), label="HEAD", workdir=calc.path),
        Budget(60),
    )
    assert verdict.verdict == "CONFIRMED" and "1 failed" in verdict.detail
