"""The verification arbiter (``verify-dag arbiter``, docs/arbiter.md): scores an evidence bundle
(:mod:`verify_dag.evidence`) against a frozen test plan and prints one verdict JSON.

The rubric is deterministic (:mod:`~verify_dag.arbiter.rubric`); the model arm
(:mod:`~verify_dag.arbiter.model_arm`, ``claude`` unless AUDIT_CLAUDE_BIN names another CLI) may
only add concerns, and a missing one is AUDIT_UNAVAILABLE, never a rubric-only approval. Exit
codes: 0 a verdict, 3 a usage or environment error (:class:`InputError`), 4 AUDIT_UNAVAILABLE
(:class:`Unavailable`): the caller must escalate, never approve. docs/arbiter.md is the
user-facing description.
"""

from __future__ import annotations

from verify_dag.errors import VerifyDagError
from verify_dag.exitcodes import ARBITER

RUBRIC_VERSION = "1.2.0"
VERDICT_SCHEMA = "schemas/verdict.schema.json"
PLAN_SCHEMA = "schemas/test_plan.schema.json"
EXIT_VERDICT = ARBITER.code("verdict")
EXIT_INPUT = ARBITER.code("input")
EXIT_UNAVAILABLE = ARBITER.code("unavailable")


class InputError(VerifyDagError):
    """Wrong argv, a malformed tuple field, an unreadable input file: exit 3."""

    exit_code = EXIT_INPUT


class Unavailable(VerifyDagError):
    """No verdict can be trusted (the model arm failed, security evidence is required but
    missing, the verdict would not validate): exit 4, AUDIT_UNAVAILABLE."""

    exit_code = EXIT_UNAVAILABLE

    def line(self) -> str:
        return f"verify-dag: AUDIT_UNAVAILABLE: {self.message}"
