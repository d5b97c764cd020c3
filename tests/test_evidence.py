"""The evidence bundle: per-test results from the tester's one pytest run, the inventory, the
security gates' status, the canonical hash, and where the report task stores it."""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from verify_dag import evidence, jsonschemas, store
from verify_dag.models import (
    EngineerContext,
    GateResult,
    RunState,
    Scope,
    SkillOutcome,
    VerifyRequest,
)
from verify_dag.models.source import parse_source
from verify_dag.models.toolchain import Command, Toolchain
from verify_dag.phases import tester
from verify_dag.phases.tester import records

PYTEST = Toolchain(
    commands=(
        Command(
            kind="test", argv=("pytest",), source="tests directory", exists=True, tool="pytest"
        ),
    )
)

SUITE = """\
import pytest

def test_pass(record_property):
    record_property("requirements", "REQ-001, REQ-002 REQ-001")

def test_fail():
    assert 0

@pytest.mark.skip(reason="needs a browser at {root}/ui")
def test_skip():
    pass

@pytest.mark.xfail(reason="known bug")
def test_xfail():
    assert 0

@pytest.mark.xfail(reason="fixed already")
def test_xpass():
    pass

@pytest.mark.xfail(reason="must fail", strict=True)
def test_xpass_strict():
    pass

@pytest.fixture
def broken():
    yield
    raise RuntimeError("teardown")

def test_teardown_after_failure(broken):
    assert 0

def test_teardown_only(broken):
    pass

class TestReq:
    @pytest.mark.parametrize("v", ["REQ-003", "ünï"])
    def test_param(self, v):
        pass
"""


def run_suite(root: Path, text: str) -> SkillOutcome:
    (root / "tests").mkdir(parents=True, exist_ok=True)
    (root / "tests" / "test_suite.py").write_text(text, encoding="utf-8")
    scope = Scope(mode="branch", new_commit="0" * 40)
    return tester.run(scope, PYTEST, root, 60)


def test_tester_records_every_test_once_with_its_outcome(tmp_path: Path) -> None:
    root = tmp_path / "checkout"
    out = run_suite(root, SUITE.replace("{root}", str(root.resolve())))
    suite = out.evidence
    assert suite is not None and suite.per_test and suite.runner == "pytest"
    outcomes = {c.nodeid: c.outcome for c in suite.tests}
    assert outcomes == {
        "tests/test_suite.py::test_pass": "passed",
        "tests/test_suite.py::test_fail": "failed",
        "tests/test_suite.py::test_skip": "skipped",
        "tests/test_suite.py::test_xfail": "xfailed",
        "tests/test_suite.py::test_xpass": "passed",  # a non-strict xpass passes
        "tests/test_suite.py::test_xpass_strict": "failed",
        # pytest writes two testcases for a failure plus a teardown error: the failure stands
        "tests/test_suite.py::test_teardown_after_failure": "failed",
        "tests/test_suite.py::test_teardown_only": "error",
        "tests/test_suite.py::TestReq::test_param[REQ-003]": "passed",
        # pytest's own node id: it escapes non-ASCII parameter ids
        "tests/test_suite.py::TestReq::test_param[\\xfcn\\xef]": "passed",
    }
    assert suite.counts.model_dump() == {
        "total": 10,
        "passed": 4,
        "failed": 3,
        "error": 1,
        "skipped": 1,
        "xfailed": 1,
    }
    by_id = {c.nodeid: c for c in suite.tests}
    assert by_id["tests/test_suite.py::test_pass"].requirements == ("REQ-001", "REQ-002")
    assert by_id["tests/test_suite.py::test_xfail"].reason == "known bug"
    # The declared reason is kept, the worker's checkout path is not.
    assert by_id["tests/test_suite.py::test_skip"].reason == "needs a browser at ui"
    assert suite.returncode == 1 and not suite.truncated
    assert suite.runner_version == importlib.metadata.version("pytest")
    assert suite.inventory.runner == f"pytest {suite.runner_version}"
    # The findings come from the same single run.
    assert out.status == "FAILED" and len(out.findings) == 5  # one per junit testcase


def test_truncated_bundle_keeps_counts_of_every_test(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(records, "MAX_TESTS", 2)
    out = run_suite(
        tmp_path,
        "import pytest\n@pytest.mark.parametrize('n', range(5))\ndef test_n(n):\n    pass\n",
    )
    assert out.evidence is not None and out.evidence.truncated
    assert len(out.evidence.tests) == 2 and out.evidence.counts.total == 5


def test_non_pytest_runner_gives_only_an_exit_status(tmp_path: Path) -> None:
    tc = Toolchain(commands=(Command(kind="test", argv=("true",), source="Makefile", exists=True),))
    out = tester.run(Scope(mode="branch", new_commit="0" * 40), tc, tmp_path, 30)
    assert out.status == "PASSED" and out.evidence is not None
    assert (out.evidence.per_test, out.evidence.returncode, out.evidence.tests) == (False, 0, ())
    assert evidence.runner_version(out.evidence) == f"verify-dag/{evidence.version()} true"


@pytest.mark.parametrize(
    ("value", "tier", "source"),
    [
        (None, 0, "default (no VERIFY_DAG_INVENTORY_TIER)"),
        ("2", 2, "VERIFY_DAG_INVENTORY_TIER"),
        ("7", 0, "default (VERIFY_DAG_INVENTORY_TIER='7' is not one of 0, 1, 2)"),
    ],
)
def test_inventory_tier_is_what_the_operator_declares(
    monkeypatch: pytest.MonkeyPatch, value: str | None, tier: int, source: str
) -> None:
    if value is None:
        monkeypatch.delenv(records.TIER_ENV, raising=False)
    else:
        monkeypatch.setenv(records.TIER_ENV, value)
    inv = records.inventory("pytest 9", "own interpreter")
    assert (inv.tier, inv.tier_source) == (tier, source)


def test_canonical_bytes_and_hash() -> None:
    bundle = {"b": [1, {"z": "ü", "a": None}], "a": "x", "bundle_hash": "0" * 64}
    raw = evidence.canonical_bytes(bundle)
    assert raw == '{"a":"x","b":[1,{"a":null,"z":"ü"}]}'.encode()
    assert evidence.bundle_hash(bundle) == hashlib.sha256(raw).hexdigest()
    # The hash field itself is outside the hash; every other byte is inside it.
    assert evidence.bundle_hash({**bundle, "bundle_hash": "1" * 64}) == evidence.bundle_hash(bundle)
    assert evidence.bundle_hash({**bundle, "a": "y"}) != evidence.bundle_hash(bundle)


def test_sanitize_redacts_secrets_and_scratch_paths(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_API_TOKEN", "s3cr3t-value-123")
    text = (
        "token s3cr3t-value-123 in /tmp/verify-dag-wt-abc_12/tree/src/a.py and "
        "/var/tmp/verify-dag-test-x9/run-env/bin/python\n   next"
    )
    assert records.sanitize(text) == (
        "token [REDACTED] in <checkout>/src/a.py and <checkout>/run-env/bin/python next"
    )
    assert len(records.sanitize("x" * 1000)) == records.REASON_MAX


VERIFICATION = """\
## Exerciser Gates
- G_SECURE: bandit finds nothing
  CHECK: true
- G_SECRETS_SCAN (advisory): no secrets in the tree
  CHECK: true
- Saved records reload
  CHECK: true
"""


def state_with(
    gates: dict[str, str] | None,
    md: str | None = VERIFICATION,
    tester_out: SkillOutcome | None = None,
) -> RunState:
    results = tuple(
        GateResult(
            kind="exerciser",
            rule=rule,
            status=status,
            evidence="`true`: exit 0 in /tmp/verify-dag-wt-q1/tree",
            checker="exerciser",
        )
        for rule, status in (gates or {}).items()
    )
    outcomes: list[SkillOutcome] = [tester_out] if tester_out else []
    if gates is not None:
        outcomes.append(SkillOutcome(skill="exerciser", status="PASSED", gates=results))
    return RunState(
        run_id="run-1",
        request=VerifyRequest(source=parse_source("/r")),
        scope=Scope(mode="branch", new_commit="a" * 40, head_sha="a" * 40),
        engineer=EngineerContext(verification_md=md),
        outcomes=tuple(outcomes),
    )


SECURE = "G_SECURE: bandit finds nothing"
SECRETS = "G_SECRETS_SCAN (advisory): no secrets in the tree"


@pytest.mark.parametrize(
    ("observed", "status"),
    [
        ({SECURE: "PASS", SECRETS: "PASS"}, "passed"),
        ({SECURE: "FAIL", SECRETS: "PASS"}, "failed"),
        ({SECURE: "PASS", SECRETS: "FAIL"}, "advisory"),  # an advisory gate's findings
        ({SECURE: "BLOCKED", SECRETS: "FAIL"}, "blocked"),
        ({SECURE: "FAIL", SECRETS: "BLOCKED"}, "failed"),  # a strict failure outranks the rest
        ({SECURE: "PASS"}, "blocked"),  # declared, never checked
        (None, "blocked"),  # the exerciser never reported
    ],
)
def test_security_status_from_the_configured_gates(
    observed: dict[str, str] | None, status: str
) -> None:
    got = evidence.security_status(state_with(observed))
    assert got["configured"] and got["status"] == status
    assert [(g["name"], g["mode"]) for g in got["gates"]] == [
        ("G_SECURE", "strict"),
        ("G_SECRETS_SCAN", "advisory"),
    ]
    assert all("/tmp/" not in g["evidence"] for g in got["gates"])


@pytest.mark.parametrize(
    "md",
    [
        None,
        "## Exerciser Gates\n- Saved records reload\n  CHECK: true\n",
        "## Notes\n- G_SECURE: not a gate outside a gates section\n",
    ],
)
def test_no_security_gate_is_not_configured_never_a_pass(md: str | None) -> None:
    got = evidence.security_status(state_with({}, md))
    assert got == {
        "configured": False,
        "status": "not_configured",
        "gates": [],
        "reason": got["reason"],
    }
    assert "no security gate is declared" in got["reason"]


def test_build_hashes_and_validates_the_bundle(tmp_path: Path) -> None:
    out = run_suite(tmp_path, "def test_ok():\n    pass\n")
    bundle = evidence.build(state_with({SECURE: "PASS", SECRETS: "PASS"}, tester_out=out))
    assert bundle is not None
    evidence.validate(bundle)
    assert bundle["bundle_hash"] == evidence.bundle_hash(bundle)
    assert bundle["results"][0]["tests"] == [
        {"nodeid": "tests/test_suite.py::test_ok", "outcome": "passed"}
    ]
    assert bundle["security_status"]["status"] == "passed"
    assert bundle["runner_version"].startswith("verify-dag/")
    assert str(tmp_path) not in json.dumps(bundle)


def test_no_tester_outcome_no_bundle_and_a_blocked_suite_says_so() -> None:
    assert evidence.build(state_with(None, None)) is None
    blocked = SkillOutcome(skill="tester", status="BLOCKED", notes="tests could not run: x")
    bundle = evidence.build(state_with(None, None, tester_out=blocked))
    assert bundle is not None and bundle["inventory"] is None
    assert bundle["results"][0]["status"] == "BLOCKED" and bundle["results"][0]["tests"] == []
    evidence.validate(bundle)


def test_store_keeps_the_bundle_next_to_the_report(tmp_path: Path) -> None:
    request = VerifyRequest(source=parse_source("/r"), store=str(tmp_path / "runs"))
    bundle: dict[str, Any] = {"a": "ü", "bundle_hash": "0" * 64}
    got = store.record_evidence("run-1", request, bundle)
    path = tmp_path / "runs" / "run-1" / store.EVIDENCE_JSON
    assert got == {"evidence": str(path)}
    assert json.loads(path.read_text(encoding="utf-8")) == bundle
    assert store.record_evidence("run-1", request, None) == {}
    (tmp_path / "file").write_text("")
    broken = VerifyRequest(source=parse_source("/r"), store=str(tmp_path / "file"))
    assert (
        "evidence bundle not stored" in store.record_evidence("run-1", broken, bundle)["storeError"]
    )


@pytest.mark.parametrize(
    "path", [evidence.SCHEMA_PATH, "schemas/verdict.schema.json", "schemas/test_plan.schema.json"]
)
def test_shipped_schemas_are_valid_schemas(path: str) -> None:
    Draft202012Validator.check_schema(jsonschemas.load(path))
