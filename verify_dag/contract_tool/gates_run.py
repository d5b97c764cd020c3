"""``verify-dag gates run CONTRACT``: run each CHECK, compare with EXPECT, write EVIDENCE.

The only writer of a contract. Each CHECK runs as a custom gate (verify_dag.phases.gates: bash
through processes.run, time limit, capped output, an environment without secrets) from the top of a
throwaway checkout of the repository as it is now (a snapshot commit of the work tree, untracked
files included), in contract order. The outcome replaces the value of the criterion's EVIDENCE
line (one is inserted after its last CHECK/EXPECT line when it has none); no other line changes,
and the file is replaced atomically, only if nobody changed it while the checks ran.
"""

from __future__ import annotations

import re
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from verify_dag import files, git, processes
from verify_dag.errors import FatalError
from verify_dag.phases import gates
from verify_dag.reviewers.contract import oracle, parse
from verify_dag.reviewers.contract.parse import Contract, Criterion

DEFAULT_TIMEOUT = 120.0


@dataclass(frozen=True)
class CriterionCheck:
    number: int
    status: Literal["MET", "NOT-MET"]
    evidence: str

    @property
    def value(self) -> str:
        return " ".join(f"{self.status} \u2014 {self.evidence}".split())


def check_one(
    criterion: Criterion, cwd: Path, env: dict[str, str], timeout: float
) -> CriterionCheck | None:
    """Run one criterion's CHECK; None when it has none."""
    if criterion.check is None:
        return None
    expect, problem = oracle.parse_expect(tuple(e.value for e in criterion.expect))
    problems = [*criterion.problems, *([problem] if problem else [])]
    if problems:
        return CriterionCheck(
            criterion.number, "NOT-MET", "malformed oracle: " + "; ".join(problems)
        )
    gate = gates.Gate(
        kind="exerciser", rule=criterion.text, check=criterion.check.value, expect=expect
    )
    result = gates.check(gate, cwd, env, timeout)
    return CriterionCheck(
        criterion.number, "MET" if result.status == "PASS" else "NOT-MET", result.evidence
    )


def rewrite(text: str, contract: Contract, outcomes: Sequence[CriterionCheck]) -> str:
    """``text`` with each outcome written over its criterion's EVIDENCE value. Pure."""
    lines = text.split("\n")
    by_number = {o.number: o for o in outcomes}
    inserts: list[tuple[int, str]] = []
    for criterion in contract.criteria:
        outcome = by_number.get(criterion.number)
        if outcome is None:
            continue
        if criterion.evidence is not None:
            index = criterion.evidence.line - 1
            cr = "\r" if lines[index].endswith("\r") else ""
            lines[index] = f"{criterion.evidence.prefix} {outcome.value}{cr}"
        else:
            anchor = lines[criterion.last_line - 1]
            cr = "\r" if anchor.endswith("\r") else ""
            lead = re.match(r"\s*(?:[-*+]\s+)?", anchor)
            indent = lead.group(0) if lead else "   "
            inserts.append((criterion.last_line, f"{indent}EVIDENCE: {outcome.value}{cr}"))
    for index, line in sorted(inserts, reverse=True):
        lines.insert(index, line)
    return "\n".join(lines)


def write_atomic(path: Path, text: str) -> None:
    """Replace ``path``'s content (a symlink's target) in one rename, keeping its mode."""
    target = path.resolve()
    # Bytes as written: CRLF contracts stay CRLF.
    files.write_atomic(target, text.encode("utf-8"), mode=stat.S_IMODE(target.stat().st_mode))


def run(contract_path: Path, repo: Path, timeout: float = DEFAULT_TIMEOUT) -> list[CriterionCheck]:
    """Run every CHECK of the contract in ``repo`` and write the outcomes into the contract."""
    text = parse.read_text(contract_path)
    contract = parse.parse(text)
    todo = [c for c in contract.criteria if c.check is not None]
    if not todo:
        return []
    snapshot = git.snapshot_worktree(repo, git.head(repo))
    env = processes.scrubbed_env()
    outcomes: list[CriterionCheck] = []
    with git.worktree(repo, snapshot) as checkout:
        for criterion in todo:
            outcome = check_one(criterion, checkout, env, timeout)
            if outcome is not None:
                outcomes.append(outcome)
    new = rewrite(text, contract, outcomes)
    if parse.read_text(contract_path) != text:
        raise FatalError(
            f"{contract_path} changed while its checks ran; EVIDENCE not written",
            hint="run gates again",
        )
    if new != text:
        write_atomic(contract_path, new)
    return outcomes
