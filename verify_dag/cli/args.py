"""What the command groups share: the parser class, argument types, the flags several commands
take, the checks of input files and paths made before anything is submitted, UTF-8 output."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from verify_dag.errors import UsageError

if TYPE_CHECKING:
    from verify_dag.models.source import RepoSource

STORE_HELP = (
    "report store directory (default: $VERIFY_DAG_STORE, else "
    "$XDG_DATA_HOME/verify-dag/runs, i.e. ~/.local/share/verify-dag/runs)"
)


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line on stderr and exit 2 (no usage dump)."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def severity(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a severity: {text!r}") from None
    if not 1 <= value <= 10:
        raise argparse.ArgumentTypeError(f"severity must be 1-10, got {value}")
    return value


def positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def seconds(most: float | None = None) -> Callable[[str], float]:
    """An argument type: a number of seconds above 0, and at most ``most`` when given."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
        if not (value > 0 and (most is None or value <= most)):
            bound = "more than 0" if most is None else f"more than 0 and at most {most:g}"
            raise argparse.ArgumentTypeError(f"must be {bound}, got {text}")
        return value

    return parse


def add_broker(p: argparse.ArgumentParser, default: str = "else in-process") -> None:
    p.add_argument(
        "--broker",
        metavar="URL",
        help=f"Celery broker URL (default: $VERIFY_DAG_BROKER_URL, {default})",
    )


NO_SANDBOX_HELP = (
    "run repository code without a sandbox where the host that runs it offers none (neither "
    "bubblewrap nor unshare works); without it such a host refuses (exit 3), and with it the "
    "output says so"
)


def add_no_sandbox(p: argparse.ArgumentParser) -> None:
    p.add_argument("--no-sandbox", action="store_true", help=NO_SANDBOX_HELP)


def refuse_unsandboxed(no_sandbox: bool) -> None:
    """This host runs the repository's code: refuse now, in one line, if it offers no sandbox
    and nobody chose to run without one."""
    from verify_dag import sandbox

    sandbox.check_required(False, no_sandbox)


def add_store(p: argparse.ArgumentParser) -> None:
    p.add_argument("--store", metavar="DIR", help=STORE_HELP)


def existing_file(value: str | None, flag: str) -> str | None:
    if value is None:
        return None
    path = Path(value)
    if not path.is_file():
        raise UsageError(f"{flag}: no such file: {value}")
    return str(path.resolve())


def read_text(path: str | None, flag: str) -> str | None:
    """The contents of a read-only input file: workers get the text, not a path on this host."""
    if path is None:
        return None
    try:
        return Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"{flag}: {path} is not UTF-8 text") from None
    except OSError as exc:
        raise UsageError(f"{flag}: cannot read {path}: {exc.strerror}") from None


def repo_arg(value: str) -> RepoSource:
    """PATH as an absolute path, or a repository URL as written (workers mirror it) once it is
    known to carry no credentials: decided here, once, and carried by the request."""
    from verify_dag import repos
    from verify_dag.models.source import parse_source

    source = parse_source(value)
    repos.refuse_credentials(source)
    return source


def store_dir(value: str | None) -> str | None:
    """``--store`` as an absolute path: workers write where the client means."""
    return str(Path(value).expanduser().resolve()) if value else None


def percent(value: str) -> float:
    """A percentage, 0 to 100 (``--fail-under``)."""
    try:
        got = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a percentage: {value!r}") from None
    if not 0 <= got <= 100:
        raise argparse.ArgumentTypeError(f"a percentage is 0 to 100, not {value}")
    return got


def new_output(value: str) -> str:
    """An --output path for a file that must not exist yet, made absolute (reports and fleet
    summaries are never overwritten); ``-`` is stdout."""
    if value == STDOUT:
        return value
    out = Path(value)
    if out.exists():
        raise UsageError(
            f"--output: {value} already exists, and a report never overwrites an earlier "
            "run's file",
            hint="pass a new path per run, e.g. --output=report-$(date +%s).json, or remove "
            "the old file first",
        )
    if not out.parent.is_dir():
        raise UsageError(f"--output: directory {out.parent} does not exist")
    return str(out.resolve())


def write_report(path: str, text: str, what: str) -> None:
    """A report written to ``--output``, never over an existing file, and a line saying where
    (``what`` names the kind: report.formats)."""
    from verify_dag import files

    if path == STDOUT:
        write_utf8(text)  # the report is all stdout carries; anything else goes to stderr
        return
    files.write_new(path, text, "--output")
    print(f"{what} written to {path}")


def write_utf8(text: str) -> None:
    """``text`` on stdout in UTF-8 whatever the locale: contracts, node ids and reasons may hold
    any character (the contract grammar itself holds an em dash)."""
    out = getattr(sys.stdout, "buffer", None)
    if out is None:
        sys.stdout.write(text)
        return
    sys.stdout.flush()
    out.write(text.encode("utf-8"))
    out.flush()


# --output=-: the report on stdout, whatever its format.
STDOUT = "-"
