"""Every command's exit codes, one table each: what the command returns and what its help says.

The codes are a contract with the scripts and CI jobs that read them, so each one is written
once, here; the commands return them by name and print their ``--help`` epilogs from the same
rows. How an error becomes its code is ``cli/exits.py``'s business. Nothing heavy is imported:
every command's parser is built on every call.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from verify_dag.errors import EXIT_ERROR, EXIT_INCOMPLETE, EXIT_ISSUES, EXIT_OK, EXIT_USAGE

# Continuation lines of a row's meaning line up under its first word.
_INDENT = " " * 5


@dataclass(frozen=True)
class Code:
    code: int
    means: str  # as the help prints it; a newline starts an indented continuation line
    name: str = ""  # the word the command returns it for (PASS, CONFORME, ...); "" for none


@dataclass(frozen=True)
class Table:
    rows: tuple[Code, ...]
    heading: str = "exit codes:"
    footer: str = ""  # a line after the rows
    # Codes from worst to best, for a command that reports the worst of several runs.
    worst_first: tuple[int, ...] = ()

    def code(self, name: str) -> int:
        """The code of the row named ``name``; KeyError for a name no row has."""
        for row in self.rows:
            if row.name == name:
                return row.code
        raise KeyError(name)

    def name(self, code: int) -> str:
        return next((r.name for r in self.rows if r.code == code and r.name), "")

    def worst(self, codes: Iterable[int]) -> int:
        """The worst of ``codes`` by ``worst_first``; the best code when there are none."""
        seen = set(codes)
        return next((c for c in self.worst_first if c in seen), self.worst_first[-1])

    def help(self) -> str:
        """The table as the command's ``--help`` epilog prints it."""
        lines = [self.heading]
        lines += [f"  {r.code}  {r.means.replace(chr(10), chr(10) + _INDENT)}" for r in self.rows]
        return "\n".join([*lines, *([self.footer] if self.footer else []), ""])


_USAGE = "usage error"

VERIFY = Table(
    (
        Code(
            EXIT_OK,
            "no issue at or above --fail-on (with --new-only: none the change introduced),\n"
            "changed-line coverage at or above --fail-under when given, and every check of the\n"
            "depth's composition ran (or --allow-incomplete)",
            "pass",
        ),
        Code(
            EXIT_ISSUES,
            "issues at or above --fail-on, or coverage below --fail-under",
            "issues found",
        ),
        Code(EXIT_USAGE, _USAGE),
        Code(EXIT_ERROR, "the verification itself errored or was blocked"),
        Code(
            EXIT_INCOMPLETE,
            "no issue fails the run, but checks of the composition did not run (NOT_RUN or\n"
            "BLOCKED: no model backend, no way to exercise the change, ...); --allow-incomplete\n"
            "(or allow-incomplete = true in [tool.verify-dag]) makes it 0",
            "incomplete",
        ),
    )
)

SHADOW = Table(
    (
        Code(EXIT_OK, "PASS: every verified claim was confirmed", "PASS"),
        Code(EXIT_ISSUES, "FAIL: a claim was refuted; do not forward the findings", "FAIL"),
        Code(
            EXIT_USAGE,
            "usage error: bad flags, a missing or malformed report, not a git repository, an "
            "unknown ref",
        ),
        Code(EXIT_ERROR, "the verification itself errored (no worker answered, an internal error)"),
        Code(
            4,
            "WARN: a claim is stale, unverifiable or unverified (composition, echo chamber); "
            "forward\nonly with its caveats",
            "WARN",
        ),
        Code(
            5,
            "halted: more than 50 claims; scope the investigation first (--claims=ID,...)",
            "halted",
        ),
    )
)

CONTRACT = Table(
    (
        Code(
            EXIT_OK,
            "CONFORME: every criterion MET, no out-of-scope file, no unwaived floor finding",
            "CONFORME",
        ),
        Code(EXIT_ISSUES, "ECARTS(n): n gaps the developer can close", "ECARTS"),
        Code(EXIT_USAGE, "usage error: bad flags"),
        Code(
            EXIT_ERROR,
            "ERROR(<reason>): the contract is missing, unreadable or lacks REQUEST / ACCEPTANCE\n"
            "CRITERIA, the range is bad, or the verification itself failed",
        ),
        Code(4, "ABANDONED(n): no gap left but n abandonments stand; a human decides", "ABANDONED"),
    )
)

GATES = Table(
    (
        Code(EXIT_OK, "every CHECK met its EXPECT (or no criterion has a CHECK)"),
        Code(EXIT_ISSUES, "at least one CHECK did not"),
        Code(
            EXIT_USAGE,
            "usage error: bad flags, a missing or malformed contract, not a git repository",
        ),
        Code(
            EXIT_ERROR,
            "the run itself failed (git, the contract changed meanwhile, it could not be written)",
        ),
    )
)

# floor-guard's exit 2 means findings, so its usage errors (and every other error) exit 3.
FLOOR_GUARD = Table(
    (
        Code(0, "clean, or every finding waived by the contract's CLARIFICATIONS", "clean"),
        Code(2, "at least one finding not waived", "findings"),
        Code(
            3,
            "usage error: bad arguments, an unknown BASE, a pathspec matching no file, not a git\n"
            "repository, a missing or malformed --contract",
            "error",
        ),
    ),
    heading="exit codes (docs/contract.md):",
)

ARBITER = Table(
    (
        Code(0, "a verdict on stdout: VERIFIED, VERIFIED_WITH_CONCERNS or REJECTED", "verdict"),
        Code(
            3,
            "usage or environment error (argument count, a malformed hash, an unreadable file)",
            "input",
        ),
        Code(4, "AUDIT_UNAVAILABLE (verdict on stdout): escalate, never approve", "unavailable"),
    )
)

FLEET = Table(
    (
        Code(
            EXIT_OK, "every repository passed, or was reused, with no issue at or above --fail-on"
        ),
        Code(EXIT_ISSUES, "some repository has issues at or above --fail-on"),
        Code(EXIT_USAGE, "usage error (bad flags, a missing or invalid fleet file)"),
        Code(
            EXIT_ERROR,
            "some repository's audit errored or was blocked (its head could not be read included)",
        ),
        Code(
            EXIT_INCOMPLETE,
            "nothing at --fail-on and no error, but some repository's checks did not run",
        ),
    ),
    footer=(
        "fleet beat exits with the worst code of its audits (3, 2, 1, 4, 0) once --runs are done."
    ),
    worst_first=(EXIT_ERROR, EXIT_USAGE, EXIT_ISSUES, EXIT_INCOMPLETE, EXIT_OK),
)

COMPLETION = Table(
    (
        Code(EXIT_OK, "pass: the completion command exited 0"),
        Code(
            EXIT_ISSUES,
            "fail: it exited non-zero, timed out, or was skipped because the criterion is invalid",
        ),
        Code(
            EXIT_USAGE,
            "usage error: bad flags or RUN_ID, no run directory, no parsed_scope.json in it,\n"
            "no --mode with nobody attached to answer the mode gate",
        ),
        Code(
            EXIT_ERROR,
            "the verification itself errored: a step failed, no worker answered, the run was busy",
        ),
    )
)
