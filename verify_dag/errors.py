"""Errors raised where they happen and mapped to exit codes in one place (``cli/exits.py``)."""

from __future__ import annotations

# Documented exit codes (README "Exit codes", docs/report.md).
EXIT_OK = 0
EXIT_ISSUES = 1
EXIT_USAGE = 2
EXIT_ERROR = 3
# verify: no issue fails the gates, but checks of the depth's composition did not run (NOT_RUN or
# BLOCKED); --allow-incomplete makes it 0 (docs/report.md, "Exit codes").
EXIT_INCOMPLETE = 4


class VerifyDagError(Exception):
    """Base class: carries a one-line message that is safe to print as is."""

    exit_code = EXIT_ERROR

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def line(self) -> str:
        if self.hint:
            return f"verify-dag: error: {self.message} ({self.hint})"
        return f"verify-dag: error: {self.message}"


class UsageError(VerifyDagError):
    """Bad arguments or input the user can fix: exit 2."""

    exit_code = EXIT_USAGE


class FatalError(VerifyDagError):
    """The verification itself could not proceed: exit 3."""

    exit_code = EXIT_ERROR


class CalledProcessError(FatalError):
    """A command that had to succeed (mostly git) did not."""

    def __init__(self, argv: list[str], returncode: int, stderr: str) -> None:
        first = stderr.strip().splitlines()[0] if stderr.strip() else "no output"
        super().__init__(f"{' '.join(argv[:3])} ... exited {returncode}: {first}")
        self.argv = argv
        self.returncode = returncode
        self.stderr = stderr


class ContractError(FatalError):
    """A CONTRACT file (docs/contract.md) is missing, unreadable or lacks a required section:
    verdict ERROR. Here rather than beside the parser so that mapping an error to its exit code
    imports no reviewer."""
