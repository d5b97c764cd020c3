"""Which anchored claims go to the verifier wave: the 2-3 highest-stakes ones, or all.

Stakes are a deterministic score, the sum of three parts (the claims preferred are those
that are decision-driving, expressed with high-confidence language, or hard to re-derive):

- decision-driving, 0-3: ``decision: true`` in a findings document, or severity 9-10: 3;
  severity 7-8 (what fails a verify run at its default ``--fail-on``): 2; severity 4-6: 1;
- high-confidence language, 0 or 2: "confident", "certain", "clearly", "obviously", "must be",
  "definitely", "undoubtedly" or a stated probability of 80 % or more, in the title or the
  description, or a ``confidence`` of 0.8 or more;
- hard to re-derive from a single artifact, 0-2: judgement, "unused" and "untested" claims
  (they need the whole repository, or judgement): 2; a failing test (the test and the code it
  runs): 1; a static finding or a line count (one file): 0.

Ties go to the higher severity, then to the earlier finding. The two best are selected, and the
third when its own score is at least STAKES_FLOOR; ``--all`` selects every anchored claim.
"""

from __future__ import annotations

import re

from verify_dag.shadow.preflight import Candidate

WAVE = 3
STAKES_FLOOR = 3
_CONFIDENT = re.compile(
    r"\b(?:confident|confidently|certain|certainly|clearly|obvious|obviously|must\s+be|"
    r"definitely|undoubtedly)\b|\b(?:[89]\d(?:\.\d+)?|100)\s*%",
    re.IGNORECASE,
)
_HARD = {"judgement": 2, "unused": 2, "untested": 2, "test": 1, "static": 0, "size": 0}


def confident(c: Candidate) -> bool:
    r = c.record
    return bool(_CONFIDENT.search(f"{r.title}\n{r.reasoning}")) or (
        r.confidence is not None and r.confidence >= 0.8
    )


def decision(c: Candidate) -> int:
    severity = c.record.severity or 0
    if c.record.decision or severity >= 9:
        return 3
    return 2 if severity >= 7 else 1 if severity >= 4 else 0


def score(c: Candidate) -> int:
    return decision(c) + (2 if confident(c) else 0) + _HARD[c.claim.kind]


def select(candidates: list[Candidate], everything: bool = False) -> list[str]:
    """The ids of the claims to verify, highest stakes first."""
    anchored = [c for c in candidates if c.unanchored is None]
    if everything:
        return [c.claim.id for c in anchored]
    ranked = sorted(
        enumerate(anchored), key=lambda p: (-score(p[1]), -(p[1].record.severity or 0), p[0])
    )
    chosen = [c for _, c in ranked[:WAVE]]
    if len(chosen) == WAVE and score(chosen[-1]) < STAKES_FLOOR:
        chosen.pop()
    return [c.claim.id for c in chosen]
