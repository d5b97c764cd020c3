"""Phase 9's models (docs/fixes.md): what a worker proposes for an issue, and what became of it.

Workers propose; only the client, where the repository is, applies. A proposal is a patch against
the verified commit, so it travels as text and is checked against the user's current files with
``git apply --check`` before anything is written.
"""

from __future__ import annotations

from verify_dag.models.base import Frozen
from verify_dag.models.report import FixRecord, Origin, ReportIssue
from verify_dag.models.request import VerifyRequest


class FixOption(Frozen):
    label: str  # short, for a menu line
    description: str  # the specific action, with file:line
    origin: Origin
    patch: str  # a unified diff with a/ b/ prefixes, against the verified commit
    files: tuple[str, ...]  # the paths the patch touches
    # The tool says the fix may change behaviour (ruff's "unsafe"): offered to a person, never
    # taken by auto-fix.
    unsafe: bool = False


class Proposals(Frozen):
    """The fix options for one issue, and why there are none (or fewer) when that is so."""

    issue: str  # its VI id
    options: tuple[FixOption, ...] = ()
    notes: tuple[str, ...] = ()


class FixJob(Frozen):
    """What a propose task needs: the run as it was shipped (to find the repository on this
    worker) and the commit it verified."""

    run_id: str
    request: VerifyRequest
    commit: str


__all__ = ["FixJob", "FixOption", "FixRecord", "Origin", "Proposals", "ReportIssue"]
