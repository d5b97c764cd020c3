"""Every command's exit codes come from one table (verify_dag/exitcodes.py): the values are a
contract with the scripts that read them, and each command's --help prints the same rows."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from verify_dag import exitcodes
from verify_dag.cli import build_parser, exits

ROOT = Path(__file__).resolve().parent.parent
# The contract: command -> {code: its word or meaning's first words}.
PINNED = {
    "VERIFY": {0: "pass", 1: "issues found", 2: "", 3: "", 4: "incomplete"},
    "SHADOW": {0: "PASS", 1: "FAIL", 2: "", 3: "", 4: "WARN", 5: "halted"},
    "CONTRACT": {0: "CONFORME", 1: "ECARTS", 2: "", 3: "", 4: "ABANDONED"},
    "GATES": {0: "", 1: "", 2: "", 3: ""},
    "FLOOR_GUARD": {0: "clean", 2: "findings", 3: "error"},
    "ARBITER": {0: "verdict", 3: "input", 4: "unavailable"},
    "FLEET": {0: "", 1: "", 2: "", 3: "", 4: ""},
    "COMPLETION": {0: "", 1: "", 2: "", 3: ""},
}


@pytest.mark.parametrize("table", sorted(PINNED))
def test_every_commands_codes_keep_their_values(table: str) -> None:
    rows = getattr(exitcodes, table).rows
    assert {r.code: r.name for r in rows} == PINNED[table]
    assert [r.code for r in rows] == sorted(r.code for r in rows)  # the help lists them in order


def test_the_help_epilogs_print_the_tables() -> None:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    commands: dict[str, argparse.ArgumentParser] = sub.choices  # type: ignore[assignment]
    for name, table in (
        ("verify", exitcodes.VERIFY),
        ("shadow", exitcodes.SHADOW),
        ("contract", exitcodes.CONTRACT),
        ("completion", exitcodes.COMPLETION),
        ("fleet", exitcodes.FLEET),
    ):
        assert table.help() in (commands[name].epilog or ""), name
    assert parser.epilog == exitcodes.VERIFY.help()


def test_the_worst_of_a_fleets_codes() -> None:
    worst = exitcodes.FLEET.worst
    assert (worst([0, 4, 1]), worst([2, 1]), worst([0, 3, 2]), worst([])) == (1, 2, 3, 0)


# (page, the heading of the section that holds a command's table of exit codes, its table)
DOCUMENTED = (
    ("README.md", "## Exit codes", "VERIFY"),
    ("docs/report.md", "## Exit codes of `verify-dag verify`", "VERIFY"),
    ("docs/shadow.md", "## Exit codes", "SHADOW"),
    ("docs/contract.md", "## `verify-dag gates run CONTRACT`", "GATES"),
    ("docs/contract.md", "### Exit codes", "CONTRACT"),
    ("docs/contract.md", "### Output and exit codes", "FLOOR_GUARD"),
    ("docs/arbiter.md", "## Arguments and exit codes", "ARBITER"),
    ("docs/fleet.md", "## Exit codes", "FLEET"),
    ("docs/completion.md", "## Exit codes", "COMPLETION"),
)


@pytest.mark.parametrize(("page", "heading", "table"), DOCUMENTED)
def test_the_docs_tables_list_the_codes(page: str, heading: str, table: str) -> None:
    text = (ROOT / page).read_text(encoding="utf-8")
    assert f"\n{heading}\n" in text, (page, heading)
    section = re.split(r"\n#", text.split(f"\n{heading}\n", 1)[1], maxsplit=1)[0]
    rows = {int(m) for m in re.findall(r"^\| (\d+) \|", section, flags=re.M)}
    # Any command interrupted by Ctrl-C exits 130 (cli/exits.py); a page may say so too.
    rows.discard(exits.EXIT_INTERRUPTED)
    assert sorted(rows) == [r.code for r in getattr(exitcodes, table).rows], (page, heading)
