"""Every command's exit codes come from one table (verify_dag/exitcodes.py): the values are a
contract with the scripts that read them, and each command's --help prints the same rows."""

from __future__ import annotations

import pytest

from verify_dag import exitcodes
from verify_dag.cli import build_parser

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
    commands = sub.choices  # type: ignore[attr-defined]
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
