"""Claims checked by searching the repository at the verified commit (``git grep -w -F``).

- "unused": every whole-word occurrence of the name that is neither the cited line nor a
  definition of it (``def``/``class``/``function``/``const``/... name, ``name =``) is a use. None:
  CONFIRMED. Any: REFUTED, with the uses as the corrected finding. A name used elsewhere for
  something else counts as a use too: the search refutes rather than confirms on a doubt. Local
  variables and parameters are searched in their own file only.
- "untested": a whole-word occurrence in a test file (``tests/``, ``test_*.py``, ``*_test.go``,
  ``*.spec.ts``, ...) is a test that references it: REFUTED; none: CONFIRMED. Only direct
  references count: a test that reaches the name through a caller does not.
- the composition-boundary read of the guards: who outside the cited file refers to the
  definition enclosing the cited line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from verify_dag import git
from verify_dag.phases.claims.anchors import Anchor, Where, short
from verify_dag.phases.claims.budget import Budget
from verify_dag.phases.claims.models import Claim, ClaimVerdict

SHOWN = 5  # references named in a verdict
_DEF_WORDS = r"(?:def|class|function|func|fn|let|const|var|type|interface|struct|enum)"
_DEFINITION = re.compile(
    rf"^\s*(?:export\s+)?(?:pub\s+)?(?:async\s+)?{_DEF_WORDS}\s+"
    r"(?P<name>[A-Za-z_$][\w$]*)"
)
_TEST_DIR = re.compile(r"(?:^|/)(?:tests?|specs?|__tests__|testing)/")
_TEST_FILE = re.compile(
    r"(?:^|/)(?:test_[^/]*\.py|[^/]*_test\.(?:py|go)|conftest\.py|"
    r"[^/]*\.(?:test|spec)\.[cm]?[jt]sx?|[^/]*Tests?\.(?:java|kt|cs))$"
)


@dataclass(frozen=True)
class Hit:
    path: str
    line: int
    text: str

    def ref(self) -> str:
        return f"{self.path}:{self.line}"


def is_test_path(path: str) -> bool:
    return bool(_TEST_DIR.search(path) or _TEST_FILE.search(path))


def _grep(where: Where, name: str, budget: Budget, paths: tuple[str, ...] = ()) -> list[Hit]:
    found = git.grep_word(
        where.repo, where.commit, name, paths, timeout=budget.limit(git.GIT_TIMEOUT)
    )
    return [Hit(p, n, t) for p, n, t in found]


def _defines(text: str, name: str) -> bool:
    m = _DEFINITION.match(text)
    if m is not None and m["name"] == name:
        return True
    return re.match(rf"^\s*{re.escape(name)}\s*(?::[^=]*)?=(?!=)", text) is not None


def _verdict(
    claim: Claim,
    where: Where,
    verdict: str,
    pointer: str,
    detail: str,
    corrected: str | None = None,
) -> ClaimVerdict:
    return ClaimVerdict.model_validate(
        {
            "claim_id": claim.id,
            "verdict": verdict,
            "evidence_pointer": pointer,
            "evidence_base": "independent-rederivation",
            "method": "search",
            "detail": detail,
            "corrected": corrected,
        }
    )


def _listing(hits: list[Hit]) -> str:
    more = f" and {len(hits) - SHOWN} more" if len(hits) > SHOWN else ""
    return ", ".join(h.ref() for h in hits[:SHOWN]) + more


def unused(claim: Claim, anchor: Anchor, where: Where, budget: Budget) -> ClaimVerdict:
    name = claim.symbol or ""
    local = (claim.path,) if claim.local and claim.path else ()
    hits = _grep(where, name, budget, local)
    command = f"git grep -w {name}" + (f" -- {claim.path}" if local else "")
    if not hits:
        return _verdict(
            claim,
            where,
            "REFUTED",
            f"{command}@{short(where.commit)}",
            f"{command}: `{name}` appears nowhere in {where.label}",
            corrected=f"`{name}` does not exist in {where.label}",
        )
    first, last = anchor.line, anchor.end_line or anchor.line

    def cited(h: Hit) -> bool:
        return (
            h.path == claim.path
            and first is not None
            and last is not None
            and first <= h.line <= last
        )

    defs = [h for h in hits if cited(h) or _defines(h.text, name)]
    uses = [h for h in hits if h not in defs]
    if uses:
        return _verdict(
            claim,
            where,
            "REFUTED",
            f"{uses[0].ref()}@{short(where.commit)}",
            f"{command}: {len(uses)} use(s) of `{name}` besides its definition: {_listing(uses)}",
            corrected=f"`{name}` is used: {_listing(uses)}",
        )
    where_def = _listing(defs)
    return _verdict(
        claim,
        where,
        "CONFIRMED",
        f"{command}@{short(where.commit)}",
        f"{command}: `{name}` occurs only where it is defined ({where_def})",
    )


def untested(claim: Claim, where: Where, budget: Budget) -> ClaimVerdict:
    name = claim.symbol or ""
    hits = [h for h in _grep(where, name, budget) if is_test_path(h.path)]
    command = f"git grep -w {name}"
    if hits:
        return _verdict(
            claim,
            where,
            "REFUTED",
            f"{hits[0].ref()}@{short(where.commit)}",
            f"{command}: {len(hits)} reference(s) in test files: {_listing(hits)}",
            corrected=f"`{name}` is referenced by tests: {_listing(hits)}",
        )
    budget.limit()
    tests = sum(1 for p in git.ls_tree(where.repo, where.commit) if is_test_path(p))
    return _verdict(
        claim,
        where,
        "CONFIRMED",
        f"{command}@{short(where.commit)}",
        f"{command}: no test file references `{name}` ({tests} test file(s) in "
        f"{where.label}; direct references only)",
    )


def enclosing(text: str, line: int | None) -> list[str]:
    """The definition the cited line belongs to (the nearest one at or above it), or the
    file's top-level definitions when no line is cited."""
    rows = text.splitlines()
    if line is None:
        tops = [m["name"] for r in rows if (m := _DEFINITION.match(r)) and not r[:1].isspace()]
        return tops[:3]
    for row in reversed(rows[:line]):
        m = _DEFINITION.match(row)
        if m is not None:
            return [m["name"]]
    return []


def boundary(
    claim: Claim, anchor: Anchor, where: Where, budget: Budget
) -> tuple[bool, tuple[str, ...]]:
    """(read, references): who outside the cited file refers to the definition around the
    cited line. Not read when no definition can be found there."""
    names = enclosing(anchor.text or "", anchor.line)
    if not names or claim.path is None:
        return False, ()
    refs = [h.ref() for name in names for h in _grep(where, name, budget) if h.path != claim.path]
    return True, tuple(dict.fromkeys(refs))[:10]
