"""Phase 9 on the client, after the report (docs/fixes.md): interactive triage or auto-fix, then
plan, backup, apply, (auto-fix) re-check, and a completion summary. Nothing is committed and, in
interactive mode, verify is not re-run.

The client is where the repository is: the workers' proposals (patches against the verified
commit) are applied here, each only if ``git apply --check`` accepts it on the current files.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TextIO

from verify_dag import git
from verify_dag.fixes import backup, compose, plan, recheck
from verify_dag.fixes.interactive import Decision
from verify_dag.fixes.plan import Step
from verify_dag.models.fixes import FixJob, FixOption, Proposals
from verify_dag.models.report import FixRecord, Report, ReportIssue
from verify_dag.models.request import VerifyRequest


@dataclass(frozen=True)
class Context:
    request: VerifyRequest  # as the client built it: the local repository's top
    shipped: VerifyRequest  # as it was sent (a fleet's workers find the commit through it)
    report: Report
    timeout: float
    out: TextIO  # where the person reads: stdout, or stderr when stdout carries the report
    # The commits the run compared (ReportResult): fixes are proposed against, and checked on,
    # what was verified, which for a staged or unstaged change is a snapshot, not HEAD.
    verified: str | None = None
    compared: str | None = None

    def commit(self) -> str | None:
        """The verified commit; a report from a worker that does not say it falls back on HEAD,
        which is the verified commit only outside the staged and unstaged scopes."""
        if self.verified:
            return self.verified
        if self.report.scope.mode in ("staged", "unstaged"):
            return None
        return self.report.scope.head_sha

    def staged(self) -> bool:
        """Whether the fixes go to the index as well as the work tree: a staged change's do."""
        return self.report.scope.mode == "staged"


# 004 7c's barriers: an exerciser BLOCKED for one of these asks the person for help in
# interactive mode (any other BLOCKED, a gate that could not be checked say, is reported as is).
BARRIERS = (
    "LOGIN_REQUIRED",
    "UNCLEAR_FEATURE",
    "NO_EXERCISE_STRATEGY",
    "NO_ENGINEER_SKILL",
    "SERVICE_UNAVAILABLE",
)


@dataclass(frozen=True)
class Finished:
    """What Phase 9 leaves: the report whose verdict stands (the run's, or the re-run's when the
    person helped the exerciser past a barrier), that report with its ``fixes``, and the request
    it was run with (the store keeps the fixed report under it)."""

    verified: Report
    fixed: Report
    shipped: VerifyRequest


def wanted(request: VerifyRequest) -> bool:
    return request.mode != "report-only" and request.unattended is None


def run(ctx: Context) -> Finished:
    """Phase 9 on the run's report: the barrier questions of interactive mode (004 7a, 7c),
    then triage or auto-fix."""
    if wanted(ctx.request) and ctx.request.mode == "interactive":
        stop = _codex_blocked(ctx)
        if stop is not None:
            return Finished(ctx.report, stop, ctx.shipped)
        ctx = _exerciser_barrier(ctx)
    return Finished(ctx.report, _fix(ctx), ctx.shipped)


def _fix(ctx: Context) -> Report:
    """The report with its ``fixes``: what Phase 9 did with each issue."""
    from verify_dag import client

    report, req = ctx.report, ctx.request
    if not wanted(req) or not report.issues:
        if wanted(req):
            ctx.out.write("No issues: nothing to triage or fix.\n")
        return report
    records: dict[str, FixRecord] = {}
    if req.mode == "auto-fix":
        chosen = [i for i in report.issues if i.severity >= req.auto_fix_threshold]
        for i in report.issues:
            if i.severity < req.auto_fix_threshold:
                why = (
                    f"severity {i.severity} is below --auto-fix-threshold={req.auto_fix_threshold}"
                )
                records[i.id] = _record(i, "not-acted-on", evidence=why)
    else:
        chosen = list(report.issues)
    commit = ctx.commit()
    if commit is None:
        for i in chosen:
            records[i.id] = _record(i, "fix", evidence="the run verified no commit to fix")
        return _done(ctx, records)
    ctx.out.write(f"Proposing fixes for {len(chosen)} issue(s)...\n")
    ctx.out.flush()
    job = FixJob(run_id=report.run.id, request=ctx.shipped, commit=commit)
    proposals = {p.issue: p for p in client.fix_options(job, chosen, timeout=ctx.timeout)}
    repo = Path(req.repo)
    decisions = _decide(ctx, repo, chosen, proposals)
    steps: list[Step] = []
    for d in decisions:
        if d.option is None:
            records[d.issue.id] = _unchosen(ctx, d, proposals[d.issue.id])
            continue
        outside = [f for f in d.option.files if _outside(ctx, repo, commit, f)]
        if outside and not _may_touch(ctx, d.issue, outside):
            why = f"{', '.join(outside)} changed outside the verified scope; left as it is"
            records[d.issue.id] = _record(d.issue, "fix", d.option, evidence=why)
            continue
        steps.append(Step(d.issue, d.option))
    if req.mode == "interactive":
        ctx.out.write(_summary_table(report.issues, decisions))
    _apply(ctx, repo, plan.ordered(steps), records)
    return _done(ctx, records)


def _codex_blocked(ctx: Context) -> Report | None:
    """004 7a, in interactive mode: codex-reviewer BLOCKED is asked about before anything else
    ("Continue without Codex review, or stop to resolve?"). The DAG has run by then, so
    stopping ends the run at its report: no triage, no fix, and the run's note says why."""
    blocked = next(
        (
            r
            for r in ctx.report.skill_results
            if r.skill == "codex-reviewer" and r.status == "BLOCKED"
        ),
        None,
    )
    if blocked is None:
        return None
    from verify_dag.fixes import interactive

    reason = blocked.notes or "no reason given"
    if interactive.continue_without_codex(reason, ctx.out):
        return None
    note = (
        f"interactive stopped before triage: Codex review was BLOCKED ({reason}) and the "
        "person chose to stop and resolve it"
    )
    ctx.out.write(f"\nStopped: {note}.\n")
    ctx.out.flush()
    run = ctx.report.run.model_copy(update={"note": note})
    return ctx.report.model_copy(update={"run": run})


def _exerciser_barrier(ctx: Context) -> Context:
    """004 7c, interactive mode: "If BLOCKED with LOGIN_REQUIRED, UNCLEAR_FEATURE,
    NO_EXERCISE_STRATEGY, NO_ENGINEER_SKILL, or SERVICE_UNAVAILABLE: use AskUserQuestion to get
    help from the user, re-invoke exerciser with the user's response, if still blocked, record as
    final BLOCKED status." The help is a command the exerciser runs as a completion criterion;
    the run is verified again with it (report-only: the other checks' results come back from
    the result cache) and that run's report is the one whose verdict stands. A run that brought
    its own --completion is not asked: the exerciser already had the command it was given."""
    blocked = next(
        (
            r
            for r in ctx.report.skill_results
            if r.skill == "exerciser"
            and r.status == "BLOCKED"
            and (r.notes or "").split(":", 1)[0] in BARRIERS
        ),
        None,
    )
    if blocked is None or ctx.request.completion is not None:
        return ctx
    from verify_dag import client, store
    from verify_dag.fixes import interactive
    from verify_dag.phases.exerciser.criterion import problems, validate
    from verify_dag.report.formats import DEFAULT

    reason = blocked.notes or "no reason given"
    problem = None
    while True:
        command = interactive.exercise_help(reason, ctx.out, problem)
        errors = validate(command) if command is not None else []
        if not errors:
            break
        problem = problems(errors)
    if command is None:
        ctx.out.write("No command given: the exerciser stays BLOCKED.\n")
        ctx.out.flush()
        return ctx
    ctx.out.write(f"Verifying again, the exerciser running `{command}`...\n")
    ctx.out.flush()
    again = ctx.request.model_copy(
        update={
            "completion": command,
            "mode": "report-only",
            "format": DEFAULT,
            "output": None,
            "submitted": store.now(),
        }
    )
    sent = client.submit(again)
    result = client.report_result(client.collect(sent, timeout=ctx.timeout))
    ctx.out.write("\n" + result.markdown)
    ctx.out.flush()
    return replace(
        ctx,
        request=ctx.request.model_copy(update={"completion": command}),
        shipped=sent.request or again,
        report=result.report,
        verified=result.verified_commit,
        compared=result.compared_commit,
    )


def _decide(
    ctx: Context, repo: Path, issues: Sequence[ReportIssue], proposals: dict[str, Proposals]
) -> list[Decision]:
    if ctx.request.mode == "interactive":
        from verify_dag.fixes import interactive

        return interactive.triage(repo, issues, proposals, ctx.out)
    # auto-fix: the first option a tool does not call unsafe: the tool's own fix where there is
    # one, else the model's first.
    return [
        Decision(i, next((o for o in proposals[i.id].options if not o.unsafe), None))
        for i in issues
    ]


def _outside(ctx: Context, repo: Path, commit: str, path: str) -> bool:
    """Whether ``path`` changed outside what was verified: in the work tree, or, for a staged
    change whose fixes are staged too, in the index."""
    if git.worktree_differs(repo, commit, path):
        return True
    return ctx.staged() and git.index_differs(repo, commit, path)


def _may_touch(ctx: Context, issue: ReportIssue, outside: list[str]) -> bool:
    if ctx.request.mode != "interactive":
        return False
    from verify_dag.fixes.interactive import ask_yes_no

    return ask_yes_no(
        f"{issue.id}'s fix touches {', '.join(outside)}, which changed outside the verified "
        "scope. Touch it anyway?"
    )


def _apply(ctx: Context, repo: Path, steps: list[Step], records: dict[str, FixRecord]) -> None:
    commit = ctx.commit()
    if not steps or commit is None:
        return
    run_id = ctx.report.run.id
    if ctx.staged():
        composed = compose.compose_staged(repo, commit, steps)
    else:
        composed = compose.compose(repo, commit, steps)
    text = plan.render(run_id, steps, composed.failed)
    where = plan.write(ctx.request.store, run_id, text)
    ctx.out.write(f"\n{text}\nThe plan is in {where}\n")
    for s in steps:
        if s.issue.id in composed.failed:
            records[s.issue.id] = _record(
                s.issue, "fix", s.option, evidence=composed.failed[s.issue.id]
            )
    if not composed.applied:
        return
    if ctx.request.mode == "interactive":
        from verify_dag.fixes.interactive import confirm

        if not confirm(f"Apply the {len(composed.applied)} fix(es) in this order?"):
            for s in composed.applied:
                records[s.issue.id] = _record(
                    s.issue, "fix", s.option, evidence="the plan was not approved"
                )
            return
    ref = backup.keep(repo, run_id)
    ctx.out.write(f"Backup of the work tree and index: {ref}\n")
    backup.note_touched(repo, run_id, list(composed.texts), staged=list(composed.staged))
    compose.write(repo, composed.texts)
    git.stage_texts(repo, composed.staged)
    evidence = "applied; verify was not re-run (run verify-dag verify again)"
    for s in composed.applied:
        records[s.issue.id] = _record(s.issue, "fix", s.option, True, "not-checked", evidence)
    if ctx.request.mode == "auto-fix":
        _recheck(ctx, repo, commit, composed, records)


def _recheck(
    ctx: Context, repo: Path, commit: str, composed: compose.Composed, records: dict[str, FixRecord]
) -> None:
    from verify_dag import client

    old = recheck.old_side(repo, ctx.report, ctx.compared)
    if old is None:
        why = f"applied; a {ctx.report.scope.mode} scope has no base to re-check the fixes against"
        for s in composed.applied:
            records[s.issue.id] = _record(s.issue, "fix", s.option, True, "not-checked", why)
        return
    fixed = git.commit_files(
        repo, commit, composed.texts, f"verify-dag: fixes of run {ctx.report.run.id}"
    )
    ctx.out.write("Re-checking the fixed files (a report-only run of the fixed change)...\n")
    ctx.out.flush()
    rq = recheck.request_for(ctx.request, old, fixed)
    after = client.report_result(client.run_plan(rq, timeout=ctx.timeout)).report
    outcomes = recheck.judge(ctx.report, after, composed.applied, composed.texts)
    for s in reversed(composed.applied):
        o = outcomes[s.issue.id]
        applied = True
        if o.revert:
            _undo(ctx, repo, commit, s)
            applied = False
        records[s.issue.id] = _record(s.issue, "fix", s.option, applied, o.verified, o.evidence)


def _undo(ctx: Context, repo: Path, commit: str, s: Step) -> None:
    undone = compose.undo(repo, commit, s)
    unstaged = compose.undo(repo, commit, s, start=git.index_text) if ctx.staged() else {}
    if undone is None or unstaged is None:  # tangled with another fix: back to the backup
        backup.restore_paths(repo, ctx.report.run.id, list(s.option.files))
        return
    compose.write(repo, undone)
    git.stage_texts(repo, unstaged)


def _unchosen(ctx: Context, d: Decision, props: Proposals) -> FixRecord:
    if ctx.request.mode == "auto-fix":
        unsafe = [o.label for o in props.options if o.unsafe]
        why = "; ".join([*props.notes, *(f"{u}: only a person may choose it" for u in unsafe)])
        return _record(d.issue, "fix", evidence=f"no fix option: {why or 'none proposed'}")
    if d.stopped:
        return _record(d.issue, "skip", evidence="not presented: the person stopped the triage")
    return _record(d.issue, "skip", evidence="skipped by the person")


def _record(
    issue: ReportIssue,
    decision: str,
    o: FixOption | None = None,
    applied: bool = False,
    verified: str = "not-attempted",
    evidence: str = "",
) -> FixRecord:
    return FixRecord.model_validate(
        {
            "issue": issue.id,
            "decision": decision,
            "option": o.label if o else None,
            "origin": o.origin if o else None,
            "files": o.files if o else (),
            "applied": applied,
            "verified": verified,
            "evidence": evidence,
        }
    )


def _summary_table(issues: Sequence[ReportIssue], decisions: Sequence[Decision]) -> str:
    by_id = {d.issue.id: d for d in decisions}
    lines = ["", "Decisions:", f"  {'Issue':<7} {'Sev':>3}  Decision"]
    for i in issues:
        d = by_id.get(i.id)
        said = (
            f"fix: {d.option.label}"
            if d is not None and d.option is not None
            else "not presented (stopped)"
            if d is not None and d.stopped
            else "skip"
        )
        lines.append(f"  {i.id:<7} {i.severity:>3}  {said[:64]}")
    return "\n".join(lines) + "\n"


def _done(ctx: Context, records: dict[str, FixRecord]) -> Report:
    order = [i.id for i in ctx.report.issues]
    fixes = tuple(records[i] for i in order if i in records)
    final = ctx.report.model_copy(update={"fixes": fixes})
    from verify_dag.report.markdown_sections import fixes as section

    ctx.out.write("\n" + "\n".join(section(final)))
    ctx.out.flush()
    return final


def out_stream(document_on_stdout: bool) -> TextIO:
    return sys.stderr if document_on_stdout else sys.stdout
