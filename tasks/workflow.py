"""All chain and chord building, and nowhere else.

The DAG (docs/verify.md, "Phase order")::

    scope -> engineer -> triage
      -> chord([test, static -> chord([review.<skill> ...], reviews), probe], collect)
      -> exerciser -> debugger -> report

Static analysis runs beside the suite, and the judgement reviewers, which read its summary, after
it: the run takes as long as the longer of the two branches, not their sum. The probes of an
exercise derived from the project's declarations need nothing the suite or the reviewers make,
so they run beside them too (``probe``), and the exerciser judges their results. The reviewers' own
fan-in is a chord too (``reviews`` flattens their outcomes into one list): a plain group at the
end of a chain inside a chord header makes Celery join it with a 0.5 s poll, a chord does not
(measured on the memory and Redis backends, Celery 5.7). The debugger comes after the exerciser:
it fires on tester and exerciser failures alike, and the exerciser does not read the debugger's
diagnoses.

Every signature gets an explicit task id up front so a client can follow the run phase by phase
(and a redelivered task keeps its id, which is what idempotency is keyed on). The run id is the
root task's id.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from celery import chain, chord, signature, uuid

from verify_dag import skills
from verify_dag.completion.models import CompletionJob
from verify_dag.models import RunState, VerifyRequest
from verify_dag.models.fixes import FixJob
from verify_dag.models.report import ReportIssue
from verify_dag.phases.claims.models import ClaimVerdict
from verify_dag.shadow.models import Dispatch, ShadowJob
from verify_dag.tasks import stash
from verify_dag.tasks.app import app


@dataclass(frozen=True)
class PhaseRef:
    label: str  # what the progress display shows
    task_id: str


@dataclass(frozen=True)
class Expected:
    """What a verify run's report must say of itself before the client believes it: the result
    store can be written by more than the run's own report task (a worker of another run, or
    repository code that reached the result backend)."""

    repo: str  # the repository as the report names it: the request source's ``shown``
    head: str | None  # the HEAD the client saw; None for a URL (the scope phase resolves it)
    store: str | None  # the report store the run writes to (the request's), read if it is lost


@dataclass(frozen=True)
class Plan:
    run_id: str
    canvas: Any  # celery.canvas.Signature; celery ships no types
    phases: tuple[PhaseRef, ...]
    final_id: str
    expect: Expected | None = None  # verify runs only; completion and shadow results differ
    # The id of the record client.announce left in the result backend; None when none was left.
    sentinel: str | None = None
    # A verify run's request as it was shipped (with a local repository's snapshot and bundle):
    # what Phase 9's workers read the verified commit from.
    request: VerifyRequest | None = None
    # What the client writes to the result backend before it sends the canvas, as (key, value):
    # the run's first state, which the scope task is given a reference to (tasks/stash.py).
    records: tuple[tuple[str, Any], ...] = ()


def _due(gate: skills.Gate, request: VerifyRequest) -> bool:
    if gate == "needs-plan":
        return bool(request.plan_text)
    if gate == "needs-contract":
        return request.contract_text is not None
    return True


def header_tasks(request: VerifyRequest) -> list[str]:
    """The tasks whose outcomes the run collects: the tester, then one task per review-queue
    skill of the depth's composition that the request makes due, in the registry's order
    (verify_dag/skills.py). Triage-gated skills get their task too: it reads triage's decision
    when it runs. The reviewers (all but the first) run after static analysis."""
    names = ["verify_dag.test"]
    for skill in skills.SKILLS.values():
        gate = skill.gates.get(request.depth)
        if skill.queue != "review" or gate is None or not _due(gate, request):
            continue
        # One task fills the light slot, on the worker where Codex either is or is not on PATH.
        slot = gate in ("if-codex", "if-no-codex")
        task = f"verify_dag.review.{skills.LIGHT_SLOT if slot else skill.name}"
        if task not in names:
            names.append(task)
    return names


def plan(request: VerifyRequest, run_id: str | None = None) -> Plan:
    run_id = run_id or uuid()
    first = RunState(run_id=run_id, request=request)
    key, state = stash.initial(first)
    phases: list[PhaseRef] = []

    def sig(name: str, *args: Any, label: str, task_id: str | None = None, **kwargs: Any) -> Any:
        tid = task_id or uuid()
        phases.append(PhaseRef(label, tid))
        phase = name.removeprefix("verify_dag.")
        return signature(name, args=args, kwargs=kwargs, app=app).set(
            task_id=tid,
            # Flower shows these instead of the full state; they never carry a secret.
            # repo and phase first: Flower's narrow Args column cuts the end, not them.
            argsrepr=f"repo={request.source.shown} phase={phase} run={run_id}",
            kwargsrepr="{}",
        )

    scope = sig("verify_dag.scope", state, label="scope", task_id=run_id)
    engineer = sig("verify_dag.engineer", label="engineer skill")
    triage = sig("verify_dag.triage", label="triage")
    test, *review_names = header_tasks(request)
    tester = sig(test, label="test")
    static = sig("verify_dag.static", label="static analysis")
    static_id = phases[-1].task_id
    reviews = [
        sig(name, label=name.removeprefix("verify_dag.").replace("review.", "review: "))
        for name in review_names
    ]
    # static, then its reviewers; the chain's result is the reviewers' outcomes, flattened.
    analysis = (
        chain(static, chord(reviews, sig("verify_dag.reviews", label="reviews")))
        if (reviews)
        else static
    )
    # Last in the header: on a pool narrower than the header, the suite and static analysis
    # are taken first.
    probe = sig("verify_dag.probe", label="probes")
    collect = sig("verify_dag.collect", label="collect", context_id=static_id)
    exerciser = sig("verify_dag.exerciser", label="exerciser")
    debugger = sig("verify_dag.debugger", label="debugger")
    report = sig("verify_dag.report", label="report")
    canvas = chain(
        scope,
        engineer,
        triage,
        chord([tester, analysis, probe], collect),
        exerciser,
        debugger,
        report,
    )
    head = request.snapshot.head if request.snapshot is not None else None
    if request.head is not None and head is not None:
        head = request.head  # --head: the range's end, resolved to a commit by the client
    expect = Expected(repo=request.source.shown, head=head, store=request.store)
    return Plan(
        run_id=run_id,
        canvas=canvas,
        phases=tuple(phases),
        final_id=phases[-1].task_id,
        expect=expect,
        request=request,
        records=((key, first.model_dump(mode="json")),),
    )


# verify-dag completion (docs/completion.md): four steps, each its own task; only execute runs a
# process.
COMPLETION_STEPS = ("extract", "execute", "classify", "report")


def completion_plan(job: CompletionJob, *, extract: bool = True) -> Plan:
    """The completion verifier's chain: extract -> execute -> classify -> report, without
    extract on an iteration whose parsed_scope.json is unchanged; ``mode=quick`` is one task.
    Each task passes the job on; the last returns the outcome."""
    if job.mode == "quick":
        names = ["quick"]
    else:
        names = [s for s in COMPLETION_STEPS if extract or s != "extract"]
    phases = tuple(PhaseRef(f"completion {name}", uuid()) for name in names)
    first = (job.model_dump(mode="json"),)
    sigs = [
        signature(f"verify_dag.completion.{name}", args=first if n == 0 else (), app=app).set(
            task_id=ref.task_id,
            # The criterion itself never shows in Flower: it is the run's input, not a name.
            argsrepr=f"run={job.run_id} iteration={job.iteration} step={name}",
            kwargsrepr="{}",
        )
        for n, (name, ref) in enumerate(zip(names, phases, strict=True))
    ]
    return Plan(run_id=job.run_id, canvas=chain(*sigs), phases=phases, final_id=phases[-1].task_id)


# verify-dag shadow (docs/shadow.md): one round is a chord of one verifier task per dispatched
# claim, merged by verify_dag.shadow.merge; the client runs at most three rounds. The claim task's
# name is its route (Claim.route), so each can be routed to the queue of its resource class.


def shadow_round(
    job: ShadowJob,
    dispatches: Sequence[Dispatch],
    round_no: int,
    previous: Sequence[ClaimVerdict] = (),
) -> Plan:
    """The chord of round ``round_no``; its final task returns a ``RoundResult``."""
    refs = [PhaseRef(f"shadow {d.claim.id}", uuid()) for d in dispatches]
    merge_ref = PhaseRef(f"shadow merge {round_no}", uuid())
    shown = f"run={job.run_id} round={round_no}"
    header = [
        signature(
            f"verify_dag.shadow.{d.claim.route()}",
            args=(job.model_dump(mode="json"), d.model_dump(mode="json")),
            app=app,
        ).set(task_id=ref.task_id, argsrepr=f"{shown} claim={d.claim.id}", kwargsrepr="{}")
        for d, ref in zip(dispatches, refs, strict=True)
    ]
    body = signature(
        "verify_dag.shadow.merge",
        kwargs={
            "job": job.model_dump(mode="json"),
            "previous": [v.model_dump(mode="json") for v in previous],
            "round_no": round_no,
        },
        app=app,
    ).set(task_id=merge_ref.task_id, argsrepr=shown, kwargsrepr="{}")
    return Plan(
        run_id=job.run_id,
        canvas=chord(header, body),
        phases=(*refs, merge_ref),
        final_id=merge_ref.task_id,
    )


# Phase 9 (docs/fixes.md): a chord of one propose task per issue, gathered in report order.


def fix_plan(job: FixJob, issues: Sequence[ReportIssue]) -> Plan:
    """The chord that proposes fixes for ``issues``; its final task returns their Proposals."""
    refs = [PhaseRef(f"fix {i.id}", uuid()) for i in issues]
    gather = PhaseRef("fix options", uuid())
    shown = f"repo={job.request.source.shown} phase=fix"
    # The job holds the run's request (a plan, a contract...): each task gets a reference to it.
    key, job_ref = stash.reference(job.run_id, "fix-job")
    header = [
        signature(
            "verify_dag.fix.propose",
            args=(job_ref, i.model_dump(mode="json")),
            app=app,
        ).set(
            task_id=ref.task_id,
            argsrepr=f"{shown} issue={i.id} run={job.run_id}",
            kwargsrepr="{}",
        )
        for i, ref in zip(issues, refs, strict=True)
    ]
    body = signature("verify_dag.fix.gather", kwargs={"run_id": job.run_id}, app=app).set(
        task_id=gather.task_id, argsrepr=f"{shown} run={job.run_id}", kwargsrepr="{}"
    )
    return Plan(
        run_id=job.run_id,
        canvas=chord(header, body),
        phases=(*refs, gather),
        final_id=gather.task_id,
        records=((key, job.model_dump(mode="json")),),
    )
