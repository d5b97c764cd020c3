"""Custom gates: the VERIFICATION.md format parsed, and gates checked by really running them."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from verify_dag import processes
from verify_dag.phases import gates

PY = sys.executable

SAMPLE = """# Verification

## Exerciser Gates
- Saved records can be reloaded
  CHECK: curl -fsS http://127.0.0.1:8000/records/1
  EXPECT: exit 0; output contains "id"
- Plain prose gate with no CHECK
  (needs judgement), wrapped over two lines
1. Numbered gate
   CHECK: `grep -c x data.txt`
   EXPECT: exit 1; output matches /^0$/

## Review Gates
- Tenant queries remain scoped
- No TODO left in src
  CHECK: ! grep -rn TODO src

## App
START: python -m myapp --port 8000
HEALTH: curl -fsS http://127.0.0.1:8000/health
START_TIMEOUT: 45s
EXERCISE: curl -fsS -X POST http://127.0.0.1:8000/records -d '{"x":1}'
EXERCISE: curl -fsS http://127.0.0.1:8000/records
"""


def test_parse_sample() -> None:
    parsed = gates.parse(SAMPLE)
    assert [g.rule for g in parsed.exerciser] == [
        "Saved records can be reloaded",
        "Plain prose gate with no CHECK (needs judgement), wrapped over two lines",
        "Numbered gate",
    ]
    first, prose, numbered = parsed.exerciser
    assert first.check == "curl -fsS http://127.0.0.1:8000/records/1"
    assert first.expect == gates.Expect(exit_code=0, contains=("id",))
    assert prose.check is None and prose.problem is None
    assert numbered.check == "grep -c x data.txt"  # inline-code backticks stripped
    assert numbered.expect == gates.Expect(exit_code=1, matches=("^0$",))
    assert [(g.rule, g.check) for g in parsed.review] == [
        ("Tenant queries remain scoped", None),
        ("No TODO left in src", "! grep -rn TODO src"),
    ]
    assert parsed.start == "python -m myapp --port 8000"
    assert parsed.health == "curl -fsS http://127.0.0.1:8000/health"
    assert parsed.start_timeout == 45.0
    assert len(parsed.exercise) == 2


def test_parse_empty_and_unrelated_markdown() -> None:
    assert gates.parse("") == gates.ParsedGates()
    parsed = gates.parse("# Notes\n- not a gate\nCHECK: echo stray\n")
    assert parsed.exerciser == () and parsed.review == ()


@pytest.mark.parametrize(
    ("text", "expect"),
    [
        ("exit 3", gates.Expect(exit_code=3)),
        ('output contains "a; b"', gates.Expect(contains=("a; b",))),
        (r'output contains "say \"hi\""', gates.Expect(contains=('say "hi"',))),
        (r"output matches /^id: \d+$/", gates.Expect(matches=(r"^id: \d+$",))),
        (r"output matches /a\/b/", gates.Expect(matches=("a/b",))),
        (
            'exit 0; output contains "x"; output matches /y/',
            gates.Expect(contains=("x",), matches=("y",)),
        ),
        ('EXIT 2 ; Output Contains "z"', gates.Expect(exit_code=2, contains=("z",))),
    ],
)
def test_expect_forms(text: str, expect: gates.Expect) -> None:
    assert gates.parse_expect(text) == (expect, None)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("status 200", "unrecognised EXPECT clause"),
        ('output contains "unterminated', "unrecognised EXPECT clause"),
        ("output matches /([a-/", "invalid regex"),
    ],
)
def test_expect_errors(text: str, problem: str) -> None:
    _, found = gates.parse_expect(text)
    assert found is not None and problem in found


def test_malformed_gates_are_blocked(tmp_path: Path) -> None:
    parsed = gates.parse(
        "## Exerciser Gates\n- a\n  EXPECT: exit 0\n- b\n  CHECK: true\n"
        "  CHECK: false\n- c\n  CHECK: true\n  EXPECT: status ok\n"
    )
    results = [gates.check(g, tmp_path, processes.scrubbed_env()) for g in parsed.exerciser]
    assert [r.status for r in results] == ["BLOCKED"] * 3
    assert "EXPECT without a CHECK" in results[0].evidence
    assert "more than one CHECK" in results[1].evidence
    assert "unrecognised EXPECT clause" in results[2].evidence


def _gate(check: str | None, expect: str = "", kind: gates.GateKind = "exerciser") -> gates.Gate:
    text = f"## {kind.capitalize()} Gates\n- the rule\n"
    if check is not None:
        text += f"  CHECK: {check}\n"
    if expect:
        text += f"  EXPECT: {expect}\n"
    parsed = gates.parse(text)
    return (parsed.exerciser or parsed.review)[0]


def test_passing_gate(tmp_path: Path) -> None:
    (tmp_path / "data.txt").write_text('{"id": 42}\n', encoding="utf-8")
    gate = _gate("cat data.txt", r'exit 0; output contains "id"; output matches /"id": \d+/')
    result = gates.check(gate, tmp_path, processes.scrubbed_env())
    assert result.status == "PASS" and result.checker == "exerciser"
    assert result.kind == "exerciser" and result.rule == "the rule"
    assert 'output contains "id"' in result.evidence and '{"id": 42}' in result.evidence


def test_failing_gate_names_what_differed(tmp_path: Path) -> None:
    gate = _gate(f"{PY} -c \"print('nothing here'); raise SystemExit(3)\"", 'output contains "id"')
    result = gates.check(gate, tmp_path, processes.scrubbed_env())
    assert result.status == "FAIL"
    assert "exit 3 (expected 0)" in result.evidence
    assert 'output lacks "id"' in result.evidence and "nothing here" in result.evidence


def test_exit_code_expectation_and_stderr_counts_as_output(tmp_path: Path) -> None:
    gate = _gate("echo broken >&2; exit 4", 'exit 4; output contains "broken"')
    assert gates.check(gate, tmp_path, processes.scrubbed_env()).status == "PASS"


def test_timeout_is_a_failure(tmp_path: Path) -> None:
    result = gates.check(_gate("sleep 5"), tmp_path, processes.scrubbed_env(), timeout=0.5)
    assert result.status == "FAIL" and "timed out (0.5s budget)" in result.evidence


def test_review_gates(tmp_path: Path) -> None:
    prose = gates.check(_gate(None, kind="review"), tmp_path, processes.scrubbed_env())
    assert (prose.status, prose.checker) == ("NOT_CHECKED", "reviewer")
    checked = gates.check(_gate("true", kind="review"), tmp_path, processes.scrubbed_env())
    assert (checked.kind, checked.status, checked.checker) == ("review", "PASS", "exerciser")
    judgement = gates.check(_gate(None), tmp_path, processes.scrubbed_env())
    assert judgement.status == "BLOCKED" and "needs judgement" in judgement.evidence


def test_evidence_is_redacted_and_capped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SHOP_API_TOKEN", "s3cr3t-value-123")
    # The scrubbed environment does not carry the token; a command that prints it anyway
    # (read from a file, say) still must not reach the report.
    (tmp_path / "leak.txt").write_text("s3cr3t-value-123 " + "x" * 5000, encoding="utf-8")
    result = gates.check(
        _gate("cat leak.txt; echo $SHOP_API_TOKEN", 'output contains "zzz"'),
        tmp_path,
        processes.scrubbed_env(),
    )
    assert result.status == "FAIL"
    assert "s3cr3t" not in result.evidence and "[REDACTED]" in result.evidence
    assert len(result.evidence) <= gates.EVIDENCE_MAX
