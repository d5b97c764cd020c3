"""Interactive triage (Phase 9) at a terminal, with questionary (prompt_toolkit): keyboard only,
fits 80 columns.

Every issue is presented, most severe first, in batches of up to four: its fix options, Explain
and Skip, and "Stop" (the person's "skip the rest", the only way to end early). Explain shows the
issue again with more context and asks again with the same options.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from verify_dag.fixes.explain import explain
from verify_dag.models.fixes import FixOption, Proposals
from verify_dag.models.report import ReportIssue
from verify_dag.report.markdown_text import location_text

BATCH = 4
WIDTH = 78
_EXPLAIN, _SKIP, _STOP = "explain", "skip", "stop"


@dataclass(frozen=True)
class Decision:
    issue: ReportIssue
    option: FixOption | None  # None: skipped
    stopped: bool = False  # never presented: the person stopped before it


def triage(
    repo: Path, issues: Sequence[ReportIssue], proposals: dict[str, Proposals], out: TextIO
) -> list[Decision]:
    decisions: list[Decision] = []
    batches = [issues[n : n + BATCH] for n in range(0, len(issues), BATCH)]
    stopped = False
    for b, batch in enumerate(batches, start=1):
        if stopped:
            decisions += [Decision(i, None, stopped=True) for i in batch]
            continue
        ids = f"{batch[0].id}..{batch[-1].id}" if len(batch) > 1 else batch[0].id
        out.write(f"\n=== Triage, batch {b} of {len(batches)}: {ids} ===\n")
        for issue in batch:
            if stopped:
                decisions.append(Decision(issue, None, stopped=True))
                continue
            got = _one(repo, issue, proposals[issue.id], out)
            stopped = got == _STOP
            decisions.append(Decision(issue, got if isinstance(got, FixOption) else None))
    return decisions


def _one(repo: Path, issue: ReportIssue, props: Proposals, out: TextIO) -> FixOption | str:
    out.write("\n" + present(issue, props))
    out.flush()
    level = 0
    while True:
        answer = _select(f"{issue.id}: what now?", _choices(props))
        if answer is None:  # Ctrl-C / Ctrl-D: the person stops
            return _STOP
        if isinstance(answer, FixOption):
            return answer
        if answer != _EXPLAIN:
            return str(answer)
        level += 1
        out.write("\n" + explain(repo, issue, props.options, level))
        out.flush()


def present(issue: ReportIssue, props: Proposals) -> str:
    sources = ", ".join(issue.sources)
    head = (
        f"[{issue.id}] {issue.title} — {issue.description.rstrip('.')}. Found at "
        f"{location_text(issue.location)} by: {sources} (severity {issue.severity})"
    )
    lines = textwrap.wrap(head, WIDTH)
    for n, o in enumerate(props.options, start=1):
        lines += textwrap.wrap(
            f"Fix {n}: {o.label} ({o.origin}) — {o.description}",
            WIDTH,
            subsequent_indent="    ",
        )
    if not props.options:
        why = "; ".join(props.notes) or "nothing proposed one"
        lines += textwrap.wrap(f"No fix option: {why}", WIDTH, subsequent_indent="    ")
    return "\n".join(lines) + "\n"


def _choices(props: Proposals) -> list[Any]:
    import questionary

    out = [
        questionary.Choice(title=_fit(f"Fix {n}: {o.label}"), value=o)
        for n, o in enumerate(props.options, start=1)
    ]
    out += [
        questionary.Choice(title="Explain — get the full picture before deciding", value=_EXPLAIN),
        questionary.Choice(title="Skip — accept it, not fixed in this change set", value=_SKIP),
        questionary.Choice(title="Stop — skip the rest", value=_STOP),
    ]
    return out


def _fit(text: str, width: int = 70) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _select(message: str, choices: list[Any]) -> Any:
    import questionary

    return questionary.select(message, choices=choices, instruction="(arrows, Enter)").ask()


CODEX_BLOCKED = (
    "Codex review was BLOCKED ({reason}). Continue without Codex review, or stop to resolve?"
)


def continue_without_codex(reason: str, out: TextIO) -> bool:
    """004 7a: with codex-reviewer BLOCKED, the person decides whether the run goes on without
    the independent second engine's review. True: continue; Stop or Ctrl-C: False."""
    import questionary

    out.write("\n" + textwrap.fill(CODEX_BLOCKED.format(reason=reason), WIDTH) + "\n")
    out.flush()
    answer = _select(
        "Codex review was BLOCKED: what now?",
        [
            questionary.Choice(title="Continue without Codex review", value=True),
            questionary.Choice(title="Stop to resolve", value=False),
        ],
    )
    return answer is True


EXERCISER_BLOCKED = (
    "The exerciser was BLOCKED ({reason}). Give a command that exercises the change (one bash "
    "line, run in the verified checkout and sandboxed like --completion; it passes when it exits "
    "0), or leave it empty to keep the exerciser BLOCKED."
)


def exercise_help(reason: str, out: TextIO, problem: str | None = None) -> str | None:
    """004 7c, in interactive mode: the exerciser hit a barrier, so the person is asked for the
    help it lacked. The exerciser here runs commands, not a conversation, so the help it can take
    is a command; None when the person gives none (empty, or Ctrl-C)."""
    import questionary

    if problem is None:
        out.write("\n" + textwrap.fill(EXERCISER_BLOCKED.format(reason=reason), WIDTH) + "\n")
    else:
        out.write(f"That command cannot run: {problem}\n")
    out.flush()
    answer = questionary.text("Command to exercise the change:").ask()
    return (answer.strip() or None) if isinstance(answer, str) else None


def confirm(message: str) -> bool:
    import questionary

    return bool(questionary.confirm(message, default=True).ask())


def ask_yes_no(message: str) -> bool:
    """A yes/no question whose default is no (touching files outside the verified scope)."""
    import questionary

    return bool(questionary.confirm(message, default=False).ask())
