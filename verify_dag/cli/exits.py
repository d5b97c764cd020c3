"""The one table from errors to exit codes, used by every command.

An error that ends a command is one line on stderr and an exit code: the error's own for most
(verify_dag/errors.py: 2 usage, 3 the verification itself failed), never a traceback unless
VERIFY_DAG_DEBUG asks for one. The codes are documented in README "Exit codes" and docs/report.md;
the tools whose specifications fix other codes have their rules here, each documented in the
tool's docs/*.md.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import NoReturn

from verify_dag.errors import EXIT_ERROR, EXIT_USAGE, ContractError, VerifyDagError
from verify_dag.exitcodes import FLOOR_GUARD

EXIT_INTERRUPTED = 130
# floor-guard's exit 2 means findings, so its usage errors (and every other error) exit 3.
EXIT_FLOOR_USAGE = FLOOR_GUARD.code("error")
# Not a command of the command line: one audit of `fleet beat`, which outlives a failed night.
FLEET_AUDIT = "fleet audit"


@dataclass(frozen=True)
class Rule:
    command: str | None  # the command it applies to; None: every command
    errors: tuple[type[BaseException], ...]
    code: int | None  # None: the error's own exit_code
    says: Callable[[BaseException], str]  # the one line on stderr
    traceback_on_debug: bool = False  # an internal error: VERIFY_DAG_DEBUG re-raises it


def _line(exc: BaseException) -> str:
    return exc.line() if isinstance(exc, VerifyDagError) else str(exc)


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _internal(exc: BaseException) -> str:
    return f"verify-dag: internal error: {type(exc).__name__}: {exc}"


@cache
def rules() -> tuple[Rule, ...]:
    """The table, first match wins. Built when an error is mapped: the tools' error classes are
    not imported on every call."""
    from verify_dag.arbiter import EXIT_UNAVAILABLE, InputError, Unavailable

    return (
        # The arbiter's own codes (docs/arbiter.md): 3 input, 4 AUDIT_UNAVAILABLE, its lines
        # folded to one. An arbiter that broke has no verdict to give: escalate, never approve.
        Rule("arbiter", (InputError, Unavailable), None, lambda e: _one_line(_line(e))),
        Rule(
            "arbiter",
            (Exception,),
            EXIT_UNAVAILABLE,
            lambda e: _one_line(
                f"verify-dag: AUDIT_UNAVAILABLE: internal error: {type(e).__name__}: {e}"
            ),
            traceback_on_debug=True,
        ),
        # floor-guard (docs/contract.md): 0 clean, 2 findings, 3 any error.
        Rule("floor-guard", (VerifyDagError,), EXIT_FLOOR_USAGE, _line),
        # gates (docs/gates.md): a missing or malformed contract is a usage error, not a failed run.
        Rule("gates", (ContractError,), EXIT_USAGE, _line),
        # fleet beat (docs/fleet.md): a failed audit is reported and the schedule goes on, so an
        # internal error there is no traceback even with VERIFY_DAG_DEBUG.
        Rule(
            FLEET_AUDIT,
            (Exception,),
            EXIT_ERROR,
            lambda e: f"verify-dag: fleet audit failed: {type(e).__name__}: {e}",
        ),
        Rule(None, (VerifyDagError,), None, _line),
        Rule(None, (KeyboardInterrupt,), EXIT_INTERRUPTED, lambda _: "verify-dag: interrupted"),
        Rule(None, (Exception,), EXIT_ERROR, _internal, traceback_on_debug=True),
    )


def run(command: str | None, body: Callable[[], int]) -> int:
    """Run ``command``'s body and return its exit code, or the one of the error that ended it."""
    try:
        return body()
    except KeyboardInterrupt as exc:
        # The children run in sessions of their own: the terminal's Ctrl-C reached only us.
        from verify_dag import processes  # here, not at the top: every command's start pays for it

        processes.kill_children()
        return report(command, exc)
    except Exception as exc:  # noqa: BLE001  # the one place for them all
        return report(command, exc)


def report(command: str | None, exc: BaseException) -> int:
    """Say ``exc`` in one line on stderr and return its exit code, by the first matching rule."""
    rule = next(r for r in rules() if r.command in (None, command) and isinstance(exc, r.errors))
    if rule.traceback_on_debug and os.environ.get("VERIFY_DAG_DEBUG"):
        raise exc
    print(rule.says(exc), file=sys.stderr, flush=True)
    if rule.code is not None:
        return rule.code
    assert isinstance(exc, VerifyDagError)  # the rules without a code match only these
    return exc.exit_code


# Python's own exit status when flushing stdout or stderr fails at exit (a reader gone early).
EXIT_FLUSH_FAILED = 120


def leave(code: int) -> NoReturn:
    """End the process with ``code`` as Python's own exit would, less its teardown: after a
    ``verify`` (about 900 modules and their objects) freeing everything one by one took 0.3 s
    of CPU, for a process that is about to end anyway. mypy's fast exit does the same.

    What a normal exit does first is done here, in its order: the threads that are not daemons
    are waited for (and what ``threading`` runs at exit, such as an executor finishing its
    queued work), every exit function runs (logging's flush, the finalizers of temporary
    directories), and the standard streams are flushed. Where this Python lacks the hooks for
    the first two, the exit is Python's own."""
    shutdown = getattr(threading, "_shutdown", None)
    exit_functions = getattr(atexit, "_run_exitfuncs", None)
    if shutdown is None or exit_functions is None:
        sys.exit(code)
    shutdown()
    exit_functions()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        os._exit(EXIT_FLUSH_FAILED)
    os._exit(code)
