"""Does the cited path (and line range) exist at the commit verified, and did it change since
the claim was made?

- The path is not inside the repository, or it never existed: REFUTED.
- The claim's own ref is known (a branch-scope verify report, a findings document's ``ref``):
  the cited lines are compared with that ref. Lines beyond the end of the file at that ref never
  existed: REFUTED. A file deleted since, or cited lines changed since: STALE, with the updated
  finding; but a static claim whose lines changed is re-derived first (its analyser re-run on
  the lines that replaced them), since changed text is not a fact that no longer holds.
  Unchanged lines that moved are followed to their new line numbers.
- The claim's ref is unknown: a missing file that some commit of the history had is STALE,
  otherwise REFUTED; a line beyond the end of the file is STALE when the file's previous version
  had it, otherwise REFUTED. (With ``history`` off, as in the exerciser, which verifies the very
  commit the findings were made on, both are REFUTED.)

An anchor that holds decides nothing: the claim's own verifier runs next at the (moved) lines.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from verify_dag import git
from verify_dag.phases.claims.budget import Budget
from verify_dag.phases.claims.models import Claim, ClaimVerdict, VerifierVerdict

LOCAL = "purely local: whether the cited file and lines exist"


@dataclass(frozen=True)
class Where:
    """The repository state a verifier reads: ``commit`` of ``repo``."""

    repo: Path
    commit: str
    label: str  # "the verified commit", "HEAD 1a2b3c4d5e6f", ...
    history: bool = True


@dataclass(frozen=True)
class Anchor:
    verdict: ClaimVerdict | None  # set when the anchor alone decides: REFUTED or STALE
    line: int | None = None  # the cited lines at the verified commit
    end_line: int | None = None
    text: str | None = None  # the cited file at the verified commit
    note: str = ""
    # The cited lines changed since the claim's ref, and the claim's analyser can say whether
    # it still holds there: the lines that replaced them (first, last), and what changed. The
    # static verifier re-derives before anything is called stale.
    changed: tuple[int, int] | None = None
    change: str = ""


def short(sha: str) -> str:
    return sha[:12]


def lines_of(text: str) -> int:
    return text.count("\n") + (1 if text and not text.endswith("\n") else 0)


def pointer(where: Where, path: str, line: int | None = None) -> str:
    return f"{path}:{line}@{short(where.commit)}" if line else f"{path}@{short(where.commit)}"


def check(claim: Claim, where: Where, budget: Budget) -> Anchor:
    path = claim.path
    if path is None:
        return Anchor(None, claim.line, claim.end_line)
    budget.limit()
    rel = PurePosixPath(path)
    if rel.is_absolute() or ".." in rel.parts or not path.strip():
        return _decide(
            claim,
            where,
            "REFUTED",
            f"{path} is not a path inside the repository",
            corrected=f"{path} is not a file of this repository: nothing there to support the "
            "claim",
        )
    now = git.read_file(where.repo, where.commit, path)
    first = claim.line
    last = max(claim.end_line or 0, claim.line or 0) or None
    ref = claim.ref if claim.ref and claim.ref != where.commit else None
    if ref is not None:
        then = git.read_file(where.repo, ref, path)
        if then is not None:
            return _against_ref(claim, where, ref, then, now)
        if now is None:
            return _decide(
                claim,
                where,
                "REFUTED",
                f"{path} does not exist in {where.label}, nor in the claim's own ref "
                f"{short(ref)}: it never existed where the claim was made",
                corrected=f"{path} does not exist, in {where.label} or at {short(ref)}",
            )
    if now is None:
        changed = git.last_change(where.repo, where.commit, path) if where.history else None
        if changed is not None:
            return _decide(
                claim,
                where,
                "STALE",
                f"{path} does not exist in {where.label}; the last commit to touch it "
                f"(deleting or moving it) was {short(changed)}",
                corrected=f"{path} no longer exists in {where.label}",
            )
        return _decide(
            claim,
            where,
            "REFUTED",
            f"{path} does not exist in {where.label}"
            + ("; no commit of its history ever had it" if where.history else ""),
            corrected=f"{path} does not exist in {where.label}",
        )
    size = lines_of(now)
    if last is not None and last > size:
        why = f"line {last} is beyond the end of {path} ({size} lines)"
        if where.history and _had_line(where, path, last):
            return _decide(
                claim,
                where,
                "STALE",
                f"{why} in {where.label}; the file's previous version had it",
                corrected=f"{path} now has only {size} lines",
            )
        return _decide(
            claim, where, "REFUTED", why, corrected=f"{path} has only {size} lines in {where.label}"
        )
    return Anchor(None, first, claim.end_line, now)


def _had_line(where: Where, path: str, line: int) -> bool:
    changed = git.last_change(where.repo, where.commit, path)
    before = git.read_file(where.repo, f"{changed}^", path) if changed else None
    return before is not None and line <= lines_of(before)


def _against_ref(claim: Claim, where: Where, ref: str, then: str, now: str | None) -> Anchor:
    path = claim.path
    assert path is not None
    first, last = claim.line, max(claim.end_line or 0, claim.line or 0) or None
    if last is not None and last > lines_of(then):
        return _decide(
            claim,
            where,
            "REFUTED",
            f"line {last} is beyond the end of {path} in the claim's own ref "
            f"{short(ref)} ({lines_of(then)} lines): it never existed",
            corrected=f"{path} had only {lines_of(then)} lines at {short(ref)}: there was no "
            f"line {last}",
        )
    if now is None:
        return _decide(
            claim,
            where,
            "STALE",
            f"{path} existed in the claim's ref {short(ref)} but not in {where.label}",
            corrected=f"{path} no longer exists in {where.label}",
        )
    if first is None or last is None:
        return Anchor(None, None, None, now)
    shift = 0
    for a, b, c, d in git.hunk_pairs(where.repo, ref, where.commit, path):
        if b and a <= last and a + b - 1 >= first:
            was = then.splitlines()[first - 1].strip() if first <= len(then.splitlines()) else ""
            new = now.splitlines()[c - 1].strip() if d and c <= len(now.splitlines()) else None
            became = f"now {new!r} at line {c}" if new is not None else "now deleted"
            change = (
                f"line {first} of {path} changed since the claim's ref {short(ref)}: "
                f"was {was!r}, {became}"
            )
            if d and claim.route() == "static":
                # The line's text changed, not necessarily the fact: STALE means "true at some
                # prior point but no longer holds", which only the analyser can tell.
                at = min(c + max(first - a, 0), c + d - 1)
                return Anchor(None, at, None, now, changed=(c, c + d - 1), change=change)
            return _decide(
                claim,
                where,
                "STALE",
                change,
                corrected=f"{path}:{first} as cited is gone in {where.label} "
                f"({became}); re-check the claim there",
            )
        if (a + b - 1 < first) if b else (a < first):
            shift += d - b
    moved = f"unchanged since {short(ref)}, now at line {first + shift}" if shift else ""
    end = claim.end_line + shift if claim.end_line else None
    return Anchor(None, first + shift, end, now, moved)


def _decide(
    claim: Claim, where: Where, verdict: VerifierVerdict, detail: str, corrected: str | None = None
) -> Anchor:
    path = claim.path or "?"
    return Anchor(
        ClaimVerdict(
            claim_id=claim.id,
            verdict=verdict,
            evidence_pointer=pointer(where, path, claim.line if verdict == "STALE" else None),
            evidence_base="artifact-internal",
            method="anchor",
            detail=detail,
            corrected=corrected,
            artifact=claim.path,
            scope_guard=LOCAL,
        )
    )
