"""The mode gate: before every run, full or quick (docs/completion.md "Modes").

The specification has the person asked before each run, ahead of step 0, and forbids picking the
mode on a guess (short of time, of budget, ...). So ``--mode`` is the answer given in advance and
nothing is asked; with a person at a terminal the question is asked; with nobody attached no
prompt may block the run, so it runs full, the recommended mode, and its records say it was not
asked and why.
"""

from __future__ import annotations

import sys
import textwrap
from typing import TextIO

from verify_dag import attended
from verify_dag.completion.models import Mode, ModeChoice

QUESTION = "Mode for this run: how should it proceed?"
# Short titles: the answer is echoed after the question, and both fit one 80-column line.
CHOICES: tuple[tuple[Mode, str], ...] = (
    ("full", "full (recommended)"),
    ("quick", "quick (only when short of time)"),
)
EXPLAIN = (
    "full runs the specified pipeline as it is: extract, execute, classify and report, each a "
    "task of its own with its row in dispatches.jsonl; accuracy and completeness first. quick "
    "does the same four steps in one task with one row, writing the same artifacts and report "
    "sections: a coarser audit trail, counted as quick in the report's mode usage."
)
WIDTH = 78


def choose(given: Mode | None) -> ModeChoice:
    """The run's mode: ``given`` (``--mode``) as is, else the person's answer, else full."""
    if given is not None:
        return ModeChoice(mode=given, chosen_by="given")
    why = attended.nobody()
    if why is not None:
        return ModeChoice(mode="full", chosen_by="unattended", unattended=why)
    return ModeChoice(mode=ask(sys.stdout), chosen_by="asked")


def ask(out: TextIO) -> Mode:
    """Ask at the terminal. Ctrl-C there ends the command like any interrupt (exit 130), before
    anything is written: a run whose mode nobody chose does not start."""
    import questionary

    out.write("\n" + textwrap.fill(EXPLAIN, WIDTH) + "\n")
    out.flush()
    choices = [questionary.Choice(title=title, value=mode) for mode, title in CHOICES]
    # unsafe_ask: Ctrl-C raises KeyboardInterrupt rather than answering None.
    answer = questionary.select(
        QUESTION, choices=choices, instruction="(arrows, Enter)"
    ).unsafe_ask()
    if answer not in ("full", "quick"):  # no answer: treated as the interrupt it is
        raise KeyboardInterrupt
    mode: Mode = answer
    return mode
