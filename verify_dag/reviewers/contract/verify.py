"""``verify_contract``: the contract verifier (docs/contract.md) as one function, report-only.

Reads the contract (never writes it), the diff, the EVIDENCE lines ``gates run`` wrote; runs the
floor guard over the diff, the scope check, the ``--test`` command when given, and a model
backend for criteria without an oracle. Returns the verdict; it never raises for bad input (that
is an ERROR verdict), so a pipeline phase can call it as is.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from verify_dag import backends, git, processes
from verify_dag.backends import BackendsConfig
from verify_dag.errors import VerifyDagError
from verify_dag.phases.gates import excerpt
from verify_dag.reviewers.contract import diffparse, diffrange, floor, judge, oracle, parse, scope
from verify_dag.reviewers.contract.diffrange import DiffRange
from verify_dag.reviewers.contract.models import (
    ContractVerdict,
    CriterionResult,
    DiffInfo,
    FloorReport,
    Gaps,
    OracleReport,
    Proof,
    Ran,
    TestRun,
)
from verify_dag.reviewers.contract.parse import Contract, Criterion
from verify_dag.sandbox import Policy

DEFAULT_TEST_TIMEOUT = 1800.0
TEST_CAP = 1_000_000
MAX_DIR_FILES = 50  # files read when a CHECK names a directory
MAX_READ = 2_000_000  # characters read for one named path


@dataclass
class _Run:
    repo: Path
    contract: Contract
    shown: str
    rng: DiffRange
    test: TestRun | None
    config: BackendsConfig | None
    read: set[str] = field(default_factory=set)
    model_calls: int = 0
    backend_name: str = ""
    _diff: str | None = None

    def file_text(self, path: str) -> str | None:
        """What a CHECK reaches through ``path`` at the verified commit: a file, or a
        directory's files (capped); None when it is neither."""
        content = git.read_file(self.repo, self.rng.new, path)
        if content is not None:
            self.read.add(path)
            return content[:MAX_READ]
        files = git.ls_tree(self.repo, self.rng.new, [path.rstrip("/") or "."])[:MAX_DIR_FILES]
        parts: list[str] = []
        for name in files:
            text = git.read_file(self.repo, self.rng.new, name)
            if text is not None:
                self.read.add(name)
                parts.append(text)
            if sum(map(len, parts)) > MAX_READ:
                break
        return "\n".join(parts)[:MAX_READ] if files else None

    def diff(self) -> str:
        if self._diff is None:
            self._diff = git.unified_diff(self.repo, self.rng.old, self.rng.new, context=3)
        return self._diff


def verify_contract(
    repo: Path,
    contract_path: Path,
    diff: str,
    *,
    test: str | None = None,
    test_timeout: float = DEFAULT_TEST_TIMEOUT,
    config: BackendsConfig | None = None,
    shown_path: str | None = None,
    text: str | None = None,
) -> ContractVerdict:
    """The verdict on the diff ``diff`` (``A..B``, ``A...B`` or ``A`` against the work tree) of
    the repository at ``repo`` against the contract at ``contract_path``.

    ``config`` is the model backend configuration (default: read as the rest of verify-dag reads
    it); ``shown_path`` is how the contract is named in the output (default: as given); ``text``
    is the contract's content when the caller already read it (a worker on another host gets the
    text, not the file), else it is read from ``contract_path``.
    """
    shown = shown_path or str(contract_path)
    try:
        contract = parse.read(contract_path) if text is None else parse.parse(text)
        return _verify(repo, contract_path, contract, diff, test, test_timeout, config, shown)
    except VerifyDagError as exc:
        return ContractVerdict(verdict="ERROR", error=exc.message, contract=shown)


def _verify(
    repo: Path,
    contract_path: Path,
    contract: Contract,
    diff: str,
    test: str | None,
    test_timeout: float,
    config: BackendsConfig | None,
    shown: str,
) -> ContractVerdict:
    top = git.toplevel(repo)
    rng = diffrange.resolve(top, diff)
    deltas = git.changed_paths(top, rng.old, rng.new)
    diffs = diffparse.parse(git.unified_diff(top, rng.old, rng.new))
    found = floor.scan(diffs, deltas, floor.sources(top, rng.old, rng.new, diffs))
    floor_report = floor.report(found, contract.clarifications)
    touched = scope.touched(deltas)
    scope_result = scope.check(
        touched, contract.scope, contract.scope_declared, exempt=_inside(top, contract_path)
    )
    test_run = _run_test(top, rng.new, test, test_timeout) if test else None
    run = _Run(top, contract, shown, rng, test_run, config, read={shown, *touched})
    results = tuple(_criterion(run, c) for c in contract.criteria)
    gaps = Gaps(
        notMet=sum(r.status == "NOT-MET" for r in results),
        unverifiable=sum(r.status == "UNVERIFIABLE" for r in results),
        outOfScope=len(scope_result.outOfScope),
        floor=floor_report.gaps,
        test=int(test_run is not None and not test_run.passed),
    )
    abandoned = tuple(r.number for r in results if r.status == "ABANDONED")
    if gaps.total:
        verdict, count = "ECARTS", gaps.total
    elif abandoned:
        verdict, count = "ABANDONED", len(abandoned)
    else:
        verdict, count = "CONFORME", None
    return ContractVerdict(
        verdict=verdict,
        count=count,
        contract=shown,
        diff=DiffInfo(range=rng.spec, base=rng.old, head=rng.new, workTree=rng.work_tree),
        request=contract.request,
        criteria=results,
        abandoned=abandoned,
        scope=scope_result,
        floor=floor_report,
        test=test_run,
        gaps=gaps,
        proof=_proof(run, floor_report, len(results)),
    )


def _inside(top: Path, path: Path) -> list[str]:
    try:
        return [path.resolve().relative_to(top).as_posix()]
    except ValueError:
        return []


def _run_test(top: Path, commit: str, command: str, timeout: float) -> TestRun:
    with git.worktree(top, commit) as checkout:
        res = processes.run(
            ["bash", "-c", command],
            cwd=checkout,
            env=processes.scrubbed_env(),
            timeout=timeout,
            cap=TEST_CAP,
            sandbox=Policy(),
        )
    output = excerpt(res.stdout + res.stderr, 300, tail=True)
    return TestRun(
        command=command,
        exitCode=None if res.timed_out else res.returncode,
        passed=res.returncode == 0 and not res.timed_out,
        timedOut=res.timed_out,
        output=output,
    )


def _test_result(test: TestRun) -> str:
    if test.timedOut:
        return "timed out (failed)"
    return f"exit {test.exitCode} ({'passed' if test.passed else 'failed'})"


def _proof(run: _Run, report: FloorReport, checked: int) -> Proof:
    rng = run.rng
    target = "work tree" if rng.work_tree else rng.new[:12]
    ran = [
        Ran(
            command=f"floor-guard {rng.old[:12]}..{target}",
            result=f"{report.findings} finding(s) ({report.waived} waived)"
            if report.rows
            else "clean",
        )
    ]
    if run.test is not None:
        ran.append(Ran(command=run.test.command, result=_test_result(run.test)))
    if run.model_calls:
        ran.append(
            Ran(
                command=f"model backend {run.backend_name}",
                result=f"{run.model_calls} criteria judged",
            )
        )
    return Proof(
        filesRead=len(run.read), ran=tuple(ran), checked=checked, total=len(run.contract.criteria)
    )


# --- one criterion ---------------------------------------------------------------------------


def _criterion(run: _Run, c: Criterion) -> CriterionResult:
    abandon = run.contract.abandoned(c.number)
    if abandon is not None:
        return CriterionResult(
            number=c.number,
            text=c.text,
            status="ABANDONED",
            source="abandon",
            evidence=abandon.reason,
        )
    if c.check is not None or c.problems or c.evidence is not None:
        return _by_oracle(run, c)
    return _by_model(run, c)


def _by_oracle(run: _Run, c: Criterion) -> CriterionResult:
    expect, problem = oracle.parse_expect(tuple(e.value for e in c.expect))
    problems = [*c.problems, *([problem] if problem else [])]
    check = c.check.value if c.check is not None else ""
    evidence = c.evidence.value if c.evidence is not None else None
    anchor = c.evidence or c.check
    where = f"{run.shown}:{anchor.line if anchor else c.line}"
    vacuous = None
    if not problems and check:
        vacuous = oracle.vacuity(check, expect) or oracle.unobserved(c.text, check, run.file_text)
    info = OracleReport(
        check=check,
        expect=oracle.describe_expect(expect),
        evidence=evidence,
        checkLine=c.check.line if c.check else c.line,
        evidenceLine=c.evidence.line if c.evidence else None,
        vacuous=vacuous,
    )

    def not_met(expected: str, actual: str, location: str) -> CriterionResult:
        return CriterionResult(
            number=c.number,
            text=c.text,
            status="NOT-MET",
            source="oracle",
            evidence=f"expected {expected} / actual {actual} \u2014 {location}",
            expected=expected,
            actual=actual,
            location=location,
            oracle=info,
        )

    if problems:
        return not_met("a well-formed oracle", "malformed oracle: " + "; ".join(problems), where)
    state = _evidence_state(evidence)
    shown_evidence = f"EVIDENCE: {evidence}" if evidence else "no EVIDENCE line"
    if state == "pending":
        return not_met(
            info.expect,
            f"{shown_evidence} (the oracle has not run: run `verify-dag gates run`)",
            where,
        )
    if state != "MET":
        actual = (
            shown_evidence if state == "NOT-MET" else f"unrecognised EVIDENCE value {evidence!r}"
        )
        return not_met(info.expect, actual, where)
    if vacuous is not None:
        return not_met(
            "an oracle that observes the criterion",
            f"vacuous oracle: {vacuous}",
            f"{run.shown}:{info.checkLine}",
        )
    return CriterionResult(
        number=c.number,
        text=c.text,
        status="MET",
        source="oracle",
        evidence=f"{shown_evidence} ({where})",
        location=where,
        oracle=info,
    )


def _evidence_state(value: str | None) -> str:
    text = (value or "").strip().lstrip("*").upper()
    if not text or text.startswith("PENDING"):
        return "pending"
    if text.startswith(("NOT-MET", "NOT MET", "NOT_MET")):
        return "NOT-MET"
    if text == "MET" or text.startswith(("MET ", "MET\u2014", "MET:", "MET-", "MET\u2013")):
        return "MET"
    return "unknown"


def _by_model(run: _Run, c: Criterion) -> CriterionResult:
    how = "set VERIFY_DAG_BACKEND=claude or codex, or VERIFY_DAG_BACKEND_COMMAND"
    if run.config is None:
        run.config = backends.load_config(run.repo)
    backend = backends.resolve(run.config, judge.SKILL)
    if backend is not None:
        run.model_calls += 1
        run.backend_name = backend.describe()
        test = (
            f"`{run.test.command}` \u2192 {_test_result(run.test)}; output: {run.test.output}"
            if run.test
            else None
        )
        text = judge.prompt(
            run.contract.request,
            c.number,
            c.text,
            run.diff(),
            f"{run.rng.old[:12]}..{run.rng.new[:12]}",
            test,
        )
        verdict = judge.judge(backend, text, cwd=run.repo)
    else:
        verdict = judge.judge(None, "", cwd=run.repo, how=how)
    location, said = _located(run, verdict.location)
    reason = verdict.reason + said
    at = f" \u2014 {location}" if location else ""
    if verdict.status == "NOT-MET":
        return CriterionResult(
            number=c.number,
            text=c.text,
            status="NOT-MET",
            source="model",
            evidence=f"expected the criterion to hold / actual {reason}{at}",
            expected="the criterion to hold",
            actual=reason,
            location=location,
        )
    return CriterionResult(
        number=c.number,
        text=c.text,
        status=verdict.status,
        source="model" if backend is not None else "none",
        evidence=reason + at,
        location=location,
    )


_FILE_LINE = re.compile(r"(?P<path>[^\s:]+):(?P<line>\d+)(?:-(?P<end>\d+))?")


def _located(run: _Run, said: str | None) -> tuple[str | None, str]:
    """A model's location as the specification's grammar has it, ``file:line`` of a file of the
    verified commit, or None; and, when it gave something else (prose, a path the commit does
    not have, a line past the end), that said in the reason instead."""
    if said is None:
        return None, ""
    m = _FILE_LINE.fullmatch(said.strip().strip("`"))
    text = git.read_file(run.repo, run.rng.new, m["path"]) if m else None
    if m is not None and text is not None and 0 < int(m["line"]) <= text.count("\n") + 1:
        return f"{m['path']}:{m['line']}", ""
    return None, f" (its location {said!r} is not a file:line of the verified commit)"
