"""The mode gate: before every run, full or quick (docs/completion.md "Modes").

The specification fires the question before step 0 of every run, "무조건" (unconditionally), with
each option's expected time and dispatch count, and forbids the orchestrator to decide on its own
("메인 자가 판단 금지": no guess that time, budget or context is short). So ``--mode`` is the
answer given in advance and nothing is asked; with a person at a terminal the question is asked;
with nobody attached there is nobody to ask and no mode may be guessed, so the command refuses
(a usage error, exit 2) and says to pass ``--mode``.
"""

from __future__ import annotations

import sys
import textwrap
from typing import TextIO

from verify_dag import attended
from verify_dag.completion.models import Mode, ModeChoice
from verify_dag.errors import UsageError

QUESTION = "Mode for this run: how should it proceed?"
# Short titles: the answer is echoed after the question, and both fit one 80-column line. The
# expected time and dispatch count are in the explanation above the question and in each
# choice's description.
CHOICES: tuple[tuple[Mode, str, str], ...] = (
    (
        "full",
        "full (recommended)",
        "4 dispatches (3 when an unchanged parsed_scope.json skips step 1); expected time: "
        "the criterion's run (at most 30 s) plus a few seconds",
    ),
    (
        "quick",
        "quick (only when short of time)",
        "1 dispatch; expected time: the criterion's run (at most 30 s) plus a few seconds",
    ),
)
EXPLAIN = (
    "full runs the specified pipeline as it is: extract, execute, classify and report, each a "
    "task of its own with its row in dispatches.jsonl; accuracy and completeness first. "
    "Dispatches: 4 (3 when an unchanged parsed_scope.json skips step 1). Expected time: the "
    "criterion's run (at most 30 s) plus a few seconds. quick does the same four steps in one "
    "task with one row, writing the same artifacts and report sections: a coarser audit trail, "
    "counted as quick in the report's mode usage. Dispatches: 1. Expected time: the same, a "
    "little less."
)
WIDTH = 78


def choose(given: Mode | None) -> ModeChoice:
    """The run's mode: ``given`` (``--mode``) as is, else the person's answer; with nobody to
    ask, a UsageError: the mode is never guessed."""
    if given is not None:
        return ModeChoice(mode=given, chosen_by="given")
    why = attended.nobody()
    if why is not None:
        raise UsageError(
            f"the mode gate asks full or quick before every run, and there is {why} to "
            "answer: pass --mode=full (recommended) or --mode=quick",
        )
    return ModeChoice(mode=ask(sys.stdout), chosen_by="asked")


def ask(out: TextIO) -> Mode:
    """Ask at the terminal. Ctrl-C there ends the command like any interrupt (exit 130), before
    anything is written: a run whose mode nobody chose does not start."""
    import questionary

    out.write("\n" + textwrap.fill(EXPLAIN, WIDTH) + "\n")
    out.flush()
    choices = [
        questionary.Choice(title=title, value=mode, description=description)
        for mode, title, description in CHOICES
    ]
    # unsafe_ask: Ctrl-C raises KeyboardInterrupt rather than answering None.
    answer = questionary.select(
        QUESTION, choices=choices, instruction="(arrows, Enter)"
    ).unsafe_ask()
    if answer not in ("full", "quick"):  # no answer: treated as the interrupt it is
        raise KeyboardInterrupt
    mode: Mode = answer
    return mode
