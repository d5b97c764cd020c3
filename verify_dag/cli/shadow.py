"""``verify-dag shadow REPORT.json``: shadow verification of findings. See docs/shadow.md.

Pre-flight on the client: read the report, normalise its findings into claims, halt above 50,
mark the unanchored UNVERIFIABLE, select the 2-3 highest-stakes claims (or all). Then up to three
rounds, each a chord of one verifier task per claim on the embedded worker or a broker's workers;
the merge rules and the guards decide what a next round re-dispatches. The gate is the exit code.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from verify_dag import exitcodes
from verify_dag.cli import args as cli_args
from verify_dag.errors import UsageError

if TYPE_CHECKING:  # the parser is built on every call, before Celery or pydantic is needed
    from verify_dag.shadow.models import RoundResult, ShadowJob

HELP = "re-derive a report's key claims independently: PASS, WARN or FAIL"
# Seconds to wait for one round: each verifier stops at its budget; the rest is queueing.
ROUND_WAIT = 3600.0


def add_parsers(sub: Any) -> None:
    """``sub`` is the subparsers action of the top-level parser."""
    from verify_dag.phases.claims.budget import DEFAULT_BUDGET

    s = sub.add_parser(
        "shadow",
        help=HELP,
        epilog=exitcodes.SHADOW.help(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    s.set_defaults(handler=cmd_shadow)
    s.add_argument(
        "report",
        metavar="REPORT.json",
        help="a verify JSON v1 report, or a findings document (schemas/findings.schema.json)",
    )
    s.add_argument(
        "--repo",
        metavar="PATH",
        default=".",
        help="the repository the findings are about (default: the current directory)",
    )
    s.add_argument(
        "--ref",
        metavar="REF",
        help="verify at this commit (default: the work tree as it is now, uncommitted "
        "changes included)",
    )
    s.add_argument(
        "--all",
        action="store_true",
        dest="everything",
        help="verify every anchored claim, not only the 2-3 highest-stakes ones",
    )
    s.add_argument(
        "--claims",
        metavar="ID,ID",
        help="only these claims (ids as in the report: VI-3, or a findings id)",
    )
    s.add_argument(
        "--budget",
        type=cli_args.seconds(86400),
        default=DEFAULT_BUDGET,
        metavar="SECONDS",
        help=f"time each claim's verifier may take (default {DEFAULT_BUDGET:g})",
    )
    s.add_argument("--format", choices=["text", "json"], default="text")
    cli_args.add_broker(s)
    cli_args.add_store(s)  # with a broker: where the repository's bundle goes for the workers
    cli_args.add_no_sandbox(s)


def _commit(repo: str, ref: str | None) -> tuple[str, str]:
    """The commit verified and how the result names it."""
    from verify_dag import git

    if ref is not None:
        sha = git.verify_commit(repo, git.check_ref(ref, "--ref"))
        if sha is None:
            raise UsageError(f"--ref: {ref!r} does not name a commit of {repo}")
        return sha, f"{ref} ({sha[:12]})"
    head = git.head(repo)
    snap = git.snapshot_worktree(repo, head)
    if snap == head:
        return head, f"the work tree (clean, HEAD {head[:12]})"
    return snap, f"the work tree (uncommitted changes over HEAD {head[:12]}, snapshot {snap[:12]})"


def _resolved(repo: str, candidates: list[Any], source: str) -> list[Any]:
    """The candidates with each claim's ref as a full SHA; a ref the repository does not have
    is a usage error (the wrong --repo, or a commit not fetched)."""
    import dataclasses

    from verify_dag import git

    shas: dict[str, str] = {}
    for ref in sorted({c.claim.ref for c in candidates if c.claim.ref}):
        sha = git.verify_commit(repo, ref)
        if sha is None:
            raise UsageError(
                f"{source}: ref {ref} is not a commit of {repo}",
                hint="wrong --repo, or fetch it first",
            )
        shas[ref] = sha
    return [
        dataclasses.replace(c, claim=c.claim.model_copy(update={"ref": shas[c.claim.ref]}))
        if c.claim.ref
        else c
        for c in candidates
    ]


def cmd_shadow(args: argparse.Namespace) -> int:
    from celery import uuid

    from verify_dag import git
    from verify_dag.shadow import inputs, preflight, render, select
    from verify_dag.shadow.models import ShadowJob
    from verify_dag.tasks.app import configure

    findings = inputs.load(args.report)
    repo = str(git.toplevel(args.repo))
    if not git.has_commits(repo):
        raise UsageError(f"{repo} has no commits to verify claims against")
    only = tuple(i.strip() for i in (args.claims or "").split(",") if i.strip())
    if args.claims is not None and not only:
        raise UsageError("--claims: no claim ids given")
    candidates = _resolved(repo, preflight.normalise(findings, only), args.report)
    chosen = select.select(candidates, args.everything)
    commit, label = _commit(repo, args.ref)
    configure(args.broker)
    job = ShadowJob(
        run_id=uuid(),
        repo=repo,
        commit=commit,
        label=label,
        goal=findings.goal,
        surface=findings.surface,
        budget=args.budget,
        store=cli_args.store_dir(args.store),
        no_sandbox=args.no_sandbox,
    )
    result = (
        _rounds(job, [c for c in candidates if c.claim.id in chosen], args.format == "json")
        if chosen
        else None
    )
    doc = render.document(
        source=args.report,
        findings=findings,
        candidates=candidates,
        selected=chosen,
        everything=args.everything,
        job=job,
        result=result,
    )
    sys.stdout.write(render.to_json(doc) if args.format == "json" else render.text(doc))
    return exitcodes.SHADOW.code(doc["gate"])


def _rounds(job: ShadowJob, chosen: list[Any], json_output: bool) -> RoundResult:
    """Round 1 dispatches the selected claims; each later round what the merge sends back."""
    from verify_dag import client
    from verify_dag.shadow import merge, run
    from verify_dag.shadow.models import Dispatch, RoundResult
    from verify_dag.tasks import workflow

    if not client.embedded():
        job = run.pin(job)  # workers on other hosts read the commit from the store's bundle
    progress = client.Progress(client.progress_stream(json_output))
    claims = {c.claim.id: c.claim for c in chosen}
    dispatches = [Dispatch(claim=c.claim) for c in chosen]
    result: RoundResult | None = None
    for round_no in range(1, merge.MAX_ROUNDS + 1):
        built = workflow.shadow_round(job, dispatches, round_no, result.verdicts if result else ())
        raw = client.run_plan(built, timeout=ROUND_WAIT, progress=progress)
        result = RoundResult.model_validate(raw)
        dispatches = [
            Dispatch(
                claim=claims[r.claim_id], round=round_no + 1, outside=r.outside, narrow=r.narrow
            )
            for r in result.redispatch
        ]
        if not dispatches:
            break
    assert result is not None
    return result
