"""Run one judgement skill through a model backend: prompt, invoke, parse, and say what happened.

Every way a model call can fail ends in an outcome that says so (NOT_RUN, or BLOCKED where
codex-reviewer's own statuses say so; docs/report.md), never in COMPLETED with zero findings.
"""

from __future__ import annotations

import json
import os
import re
import socket
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from verify_dag import backends, git, processes, resultcache, skills, workspace
from verify_dag.backends import budget
from verify_dag.backends.parse import ParsedReply, Unparseable, parse_reply
from verify_dag.errors import VerifyDagError
from verify_dag.models import Finding, GateResult, RunState, SkillOutcome
from verify_dag.models.findings import Status, TokenUsage
from verify_dag.phases import gates
from verify_dag.reviewers import prompts

# comment-review's 5-6 band is a deliberate floor, not an assessment (docs/report.md, "Severities
# and classes").
COMMENT_FLOOR, COMMENT_CAP = 5, 6
PLAN_SEVERITY = 8
_DIFF_CAP = 200_000  # characters of branch diff handed to plan completeness


def backends_config(state: RunState) -> backends.BackendsConfig:
    """The model-backend settings of the verified commit (its pyproject table, the user's file)."""
    repo = Path(state.request.repo)
    if state.scope is None or (repo / "pyproject.toml").is_file():
        return backends.load_config(repo, os.environ)
    # A worker's bare copy of the repository has no files: its table comes from the commit.
    text = git.read_file(repo, state.scope.new_commit, "pyproject.toml")
    if text is None:
        return backends.load_config(None, os.environ)
    with tempfile.TemporaryDirectory(prefix="verify-dag-config-") as scratch:
        Path(scratch, "pyproject.toml").write_text(text, encoding="utf-8")
        return backends.load_config(Path(scratch), os.environ)


def _not_run(skill: str, reason: str, notes: str) -> SkillOutcome:
    return SkillOutcome(skill=skill, status="NOT_RUN", reason=reason, notes=notes)


def _normalise(skill: str, findings: list[Finding]) -> list[Finding]:
    if skill == "comment-review":
        return [
            f.model_copy(
                update={
                    "severity": min(max(f.severity, COMMENT_FLOOR), COMMENT_CAP),
                    "issue_class": skills.SKILLS[skill].issue_class,
                }
            )
            for f in findings
        ]
    if skill == "plan-completeness":
        # At most one finding, severity 8, no location: what its prompt asks for.
        return [
            f.model_copy(
                update={
                    "severity": PLAN_SEVERITY,
                    "location": None,
                    "issue_class": skills.SKILLS[skill].issue_class,
                }
            )
            for f in findings[:1]
        ]
    return findings


# The statuses a reply may report about itself (codex-reviewer's prompt offers all four), longest
# first so SKIPPED_UNSUPPORTED_SCOPE is not read as SKIPPED plus a reason "_UNSUPPORTED_SCOPE".
_SELF_STATUS = re.compile(
    r"(?i)^(SKIPPED_UNSUPPORTED_SCOPE|PATCH_CONSTRUCTION_FAILED|SKIPPED|BLOCKED)\b[\s:—-]*(.*)$"
)


def _located(state: RunState, outcome: SkillOutcome) -> SkillOutcome:
    """``outcome`` with every finding's location naming a file of the verified commit, or none:
    a model's prose ("somewhere in the mean function") or a path outside the repository is not
    a location, and the report must never present it as one (docs/report.md, "Locations")."""
    located = [f for f in outcome.findings if f.location is not None]
    if not located or state.scope is None:
        return outcome
    files = set(git.ls_tree(state.request.repo, state.scope.new_commit))

    def checked(f: Finding) -> Finding:
        if f.location is None:
            return f
        path = f.location.path.removeprefix("./")
        if path not in files:
            return f.model_copy(update={"location": None})
        return f.model_copy(update={"location": f.location.model_copy(update={"path": path})})

    return outcome.model_copy(update={"findings": tuple(checked(f) for f in outcome.findings)})


def _judged(state: RunState, outcome: SkillOutcome) -> SkillOutcome:
    """The custom review gates the reviewer judged on GATE lines, kept only for gates
    VERIFICATION.md declares without a CHECK command, under the declared rule's own words; a
    FAIL is a severity 9 finding with the reviewer's evidence (docs/gates.md)."""
    if not outcome.gates:
        return outcome
    eng = state.engineer
    rules = gates.judged_by_reviewers(eng.verification_md if eng is not None else None)
    kept: dict[str, GateResult] = {}
    for g in outcome.gates:
        rule = gates.declared_rule(g.rule, rules)
        if rule is not None and rule not in kept:
            kept[rule] = g.model_copy(update={"rule": rule})
    failed = [
        Finding(
            title=title,
            severity=severity,
            description=g.evidence or f"{outcome.skill} judged the gate FAIL",
            source=outcome.skill,
            issue_class="correctness",
        )
        for g in kept.values()
        if g.status == "FAIL"
        for title, severity in [gates.failure(g)]
    ]
    return outcome.model_copy(
        update={"gates": tuple(kept.values()), "findings": (*outcome.findings, *failed)}
    )


def _settled(state: RunState, outcome: SkillOutcome) -> SkillOutcome:
    """A reviewer's outcome checked against the repository: its locations, its gate verdicts."""
    return _judged(state, _located(state, outcome))


def _outcome(skill: str, reason: str, parsed: ParsedReply) -> SkillOutcome:
    said = _SELF_STATUS.match((parsed.status or "").strip())
    if said is not None:
        token, why = said.group(1).upper(), said.group(2).strip()
        if token == "SKIPPED":
            why = why or "the skill reported SKIPPED"
            return SkillOutcome(skill=skill, status="SKIPPED", ran=False, reason=why, notes=why)
        if token == "SKIPPED_UNSUPPORTED_SCOPE":
            notes = f"{token}: {why}" if why else token
            return SkillOutcome(skill=skill, status="SKIPPED", ran=False, reason=token, notes=notes)
        # BLOCKED, or a review that could not rebuild the exact diff: either way no review
        # happened, and the report's statuses for codex-reviewer leave BLOCKED for that.
        notes = (
            (why or "the skill reported BLOCKED")
            if token == "BLOCKED"
            else (f"{token}: {why}" if why else token)
        )
        return SkillOutcome(skill=skill, status="BLOCKED", reason=reason, notes=notes)
    findings = _normalise(skill, list(parsed.findings))
    notes = f"Found {len(findings)} item{'s' if len(findings) != 1 else ''}"
    judged = tuple(
        GateResult(
            kind="review",
            rule=g.rule,
            status=g.status,
            evidence=gates.cap(processes.redact(g.evidence)),
            checker=skill,
        )
        for g in parsed.gates
    )
    return SkillOutcome(
        skill=skill,
        status="COMPLETED",
        reason=reason,
        notes=notes,
        findings=tuple(findings),
        gates=judged,
        reaffirmed=tuple(parsed.reaffirmed),
        reopened=tuple(parsed.reopened),
        deferred=tuple(parsed.deferred),
    )


def _ask(
    skill: str,
    reason: str,
    backend: backends.Backend,
    prompt: str,
    cwd: Path,
    limits: Sequence[budget.Limit] = (),
    blocked_when_unavailable: bool = False,
) -> SkillOutcome:
    """Ask ``backend`` (or the result cache) and read the reply; the outcome carries what the
    call cost (``usage``), whatever came of it."""
    entry = _reply_key(skill, backend, prompt, cwd)
    text = resultcache.get(_REPLY, entry, "reply") if entry is not None else None
    fresh = not isinstance(text, str)
    usage = TokenUsage(
        backend=backend.kind, model=backend.model, input_tokens=0, output_tokens=0, cached=True
    )
    if not isinstance(text, str):
        held = budget.hold(limits, budget.estimate(prompt, backend.max_output_tokens))
        if isinstance(held, str):
            return _not_run(skill, reason, held)
        reply = backends.invoke(backend, prompt, cwd=cwd)
        budget.settle(held, reply.usage)
        usage = reply.usage or usage.model_copy(update={"cached": False})
        if reply.status != "ok":
            # A missing CLI or missing auth is BLOCKED for codex-reviewer (its report statuses);
            # a time-out, quota or empty reply is NOT_RUN for everyone.
            unavailable = reply.status in {"missing", "auth"}
            status: Status = "BLOCKED" if blocked_when_unavailable and unavailable else "NOT_RUN"
            failed = SkillOutcome(
                skill=skill, status=status, reason=reason, notes=f"{reply.status}: {reply.reason}"
            )
            return failed.model_copy(update={"usage": usage})
        text = reply.text
    return _read(skill, reason, prompt, text, entry if fresh else None).model_copy(
        update={"usage": usage}
    )


def _read(skill: str, reason: str, prompt: str, text: str, store: str | None) -> SkillOutcome:
    """The outcome of a reply; a reply that reads is kept under ``store``, its cache entry."""
    if _echoes(prompt, text):
        # The prompt holds an example finding; a command that parrots it back did not review.
        return _not_run(skill, reason, "unparseable reply: the backend echoed the prompt back")
    try:
        parsed = parse_reply(text, skill)
    except Unparseable as exc:
        return _not_run(skill, reason, f"unparseable reply: {exc}")
    if store is not None:
        resultcache.put(_REPLY, store, text)
    return _outcome(skill, reason, parsed)


_REPLY = "reply"


def _reply_key(skill: str, backend: backends.Backend, prompt: str, cwd: Path) -> str | None:
    """A reply's entry in the result cache: the prompt, the backend (kind, its parameters: a
    command template, or an API's address and reply allowance), model, effort and the tree the
    model may read in ``cwd``; None when ``cwd`` is not a git checkout (a diff-only workspace is
    keyed by the prompt, which holds its whole diff)."""
    tree = git.rev_parse(cwd, "HEAD^{tree}") if (cwd / ".git").exists() else "diff-only"
    if tree is None:
        return None
    return resultcache.key(
        resultcache.host_key(),
        _REPLY,
        skill,
        backend.kind,
        json.dumps(list(backend.parameters())),
        backend.model or "",
        backend.effort or "",
        tree,
        prompt,
    )


def _echoes(prompt: str, reply: str) -> bool:
    head = prompt.strip()[:300]
    return len(head) >= 100 and head in reply


@contextmanager
def _checkout(state: RunState) -> Iterator[Path]:
    assert state.scope is not None
    with workspace.checkout(state.run_id, state.request.repo, state.scope.new_commit) as path:
        yield path


def _ignored(outcome: SkillOutcome, state: RunState) -> SkillOutcome:
    """``outcome`` with a note for each key of the repository's ``[tool.verify-dag]`` that was
    ignored (a backend, a command template: the user chooses those), which a run with a backend
    of the user's would otherwise not mention."""
    notes = backends_config(state).notes
    if not notes:
        return outcome
    said = "; ".join(n for n in (outcome.notes, *notes) if n)
    return outcome.model_copy(update={"notes": said})


def _backend(state: RunState, skill: str, reason: str) -> backends.Backend | SkillOutcome:
    """The skill's backend, or the NOT_RUN outcome that says why there is none."""
    try:
        config = backends_config(state)
        backend = backends.resolve(config, skill)
    except VerifyDagError as exc:
        return _not_run(skill, reason, f"model backend configuration: {exc.message}")
    if backend is None:
        # Say what was ignored too (a command template the repository itself asked for, ...).
        ignored = "".join(f" ({note})" for note in config.notes)
        # Settings are read where the review task runs: on a fleet that is the review worker,
        # not the machine the run was submitted from, so say which host looked.
        return _not_run(
            skill,
            reason,
            f"no model backend configured{ignored} on {socket.gethostname()} (read "
            f"where the review task runs); {backends.how_to_configure()}",
        )
    return backend


def model_skill(state: RunState, skill: str, reason: str) -> SkillOutcome:
    """reviewer, comment-review, qa, ux-reviewer, visual-verify: the prompt, in a checkout."""
    backend = _backend(state, skill, reason)
    if isinstance(backend, SkillOutcome):
        return backend
    prompt = prompts.skill_prompt(state, skill)
    limits = budget.limits(state)
    with _checkout(state) as cwd:
        return _ignored(_settled(state, _ask(skill, reason, backend, prompt, cwd, limits)), state)


def plan_completeness(state: RunState, reason: str) -> SkillOutcome:
    skill = "plan-completeness"
    assert state.scope is not None
    backend = _backend(state, skill, reason)
    if isinstance(backend, SkillOutcome):
        return backend
    sc = state.scope
    paths = [p for f in sc.included for p in (f.path, f.old_path) if p]
    diff = git.patch(state.request.repo, sc.old_commit, sc.new_commit, paths)
    if len(diff) > _DIFF_CAP:
        diff = diff[:_DIFF_CAP] + f"\n[... diff truncated at {_DIFF_CAP} characters]\n"
    prompt = prompts.plan_prompt(state, diff)
    with _checkout(state) as cwd:
        asked = _ask(skill, reason, backend, prompt, cwd, budget.limits(state))
        return _ignored(asked, state)


def codex_reviewer(state: RunState, reason: str) -> SkillOutcome:
    """The independent second engine, on a diff-only workspace rebuilt from SCOPE_METADATA."""
    skill = "codex-reviewer"
    sc = state.scope
    assert sc is not None
    if sc.mode == "all":
        return SkillOutcome(
            skill=skill,
            status="SKIPPED",
            ran=False,
            reason="SKIPPED_UNSUPPORTED_SCOPE",
            notes="SKIPPED_UNSUPPORTED_SCOPE: Codex does not audit --scope=all",
        )
    try:
        backend = backends.resolve(backends_config(state), skill)
    except VerifyDagError as exc:
        return SkillOutcome(
            skill=skill,
            status="BLOCKED",
            reason=reason,
            notes=f"model backend configuration: {exc.message}",
        )
    if backend is None:
        return SkillOutcome(
            skill=skill, status="BLOCKED", reason=reason, notes="Codex CLI not found on PATH"
        )
    old_paths = [f.old_path or f.path for f in sc.included if f.status != "added"]
    new_paths = [f.path for f in sc.included if f.status != "deleted"]
    all_paths = sorted({*old_paths, *new_paths})
    want = git.patch(state.request.repo, sc.old_commit, sc.new_commit, all_paths)
    with git.diff_workspace(
        state.request.repo, sc.old_commit, sc.new_commit, old_paths, new_paths
    ) as (ws, got):
        # An empty patch for a non-empty scope means the paths did not survive the trip (a file
        # name that is not valid UTF-8, say): reviewing nothing would be a fake COMPLETED.
        if got != want or not want.strip():
            return SkillOutcome(
                skill=skill,
                status="BLOCKED",
                reason=reason,
                notes="PATCH_CONSTRUCTION_FAILED: the diff-only workspace does "
                "not reproduce the scoped diff exactly",
            )
        asked = _ask(
            skill,
            reason,
            backend,
            prompts.skill_prompt(state, skill),
            ws,
            budget.limits(state),
            blocked_when_unavailable=True,
        )
        return _settled(state, asked)
