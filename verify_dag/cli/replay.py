"""An unchanged re-verify answered before a run is built (docs/verify.md, "Re-verifying").

A run whose every part came from the result cache (verify_dag/resultcache.py) started no
command but git and made no model call: its report was decided by its commits, its settings and
the cache alone. Such a run's answer (what it printed, where, and its exit code) is kept under a
key of everything it was decided by, and the next identical request answers with it before
importing Celery, pydantic's models or any phase: the same report, naming the run that made it.

The key is wider than what the run read, never narrower: the command line, the working
directory, every ref and the repository's git configuration, the work tree's pyproject.toml
(whose [tool.verify-dag] a run reads from there), verify-dag's configuration file, the whole
process environment, the stat of every directory on PATH (a tool installed there changes it),
the interpreter, the distributions it can import and verify-dag's own source files. Anything
that changes one of them misses, and the run is built as before (from the result cache, where
its parts are still there). Only requests whose inputs all sit there are answered: a branch
scope with an explicit ``--base`` that is not fetched first, without files read at submit
(ledger, plan, epic, contract) or a completion command, on the in-process worker, that waits
for its report; ``--no-cache`` never is.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from verify_dag import digest, envvars, git, paths
from verify_dag.errors import FatalError, UsageError
from verify_dag.files import write_atomic

FORMAT = 1
KIND = "replay"
# Flags whose value is a file read at submit, or work the run does beyond its commits.
_READS = ("since", "ledger", "epic_context", "plan_file", "contract", "completion")
_BROKERS = (envvars.BROKER_ENV, envvars.BROKER_FILE_ENV, envvars.CELERY_BROKER_ENV)
# The shell's own bookkeeping, not the process's settings (the directory is keyed as cwd).
_VOLATILE = frozenset({"_", "PWD", "OLDPWD"})
_PACKAGE = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Answer:
    run_id: str
    stored: str
    code: int
    text: str  # what the run wrote: on stdout, or into its --output file
    to_file: bool
    what: str  # the report's kind, for the "written to" line
    said: tuple[str, ...]  # its lines on stderr after the report (the verdict's)


def key(args: argparse.Namespace) -> str | None:
    """The key of this request's answer, or None when it is not one answered this way."""
    if not _answerable(args):
        return None
    try:
        cwd = os.getcwd()
        repo = git.toplevel(args.path)
        if git.fetched_base(repo, args.base) is not None:
            return None  # the base moves with the fetch the run makes first
        refs = git.state(repo)
    except (UsageError, FatalError, OSError):
        return None  # the run says what is wrong, in its words
    if refs is None:
        return None
    given = {k: v for k, v in vars(args).items() if k != "handler"}
    # Where the report goes is not part of what it says: a new file each time still answers.
    given["output"] = None if args.output is None else (args.output == "-")
    parts = [
        f"format {FORMAT}",
        json.dumps(given, sort_keys=True, default=repr),
        cwd,
        str(repo),
        refs,
        _read(repo / "pyproject.toml"),
        _user_config(),
        json.dumps(sorted((k, v) for k, v in os.environ.items() if k not in _VOLATILE)),
        json.dumps([os.isatty(fd) for fd in (0, 1, 2)]),
        json.dumps(_path_dirs()),
        sys.version,
        os.path.realpath(sys.executable),
        json.dumps(_distributions()),
        json.dumps(_own_source()),
    ]
    return digest.key(*parts)


def _answerable(args: argparse.Namespace) -> bool:
    if args.scope != "branch" or args.base is None or args.files or args.module is not None:
        return False
    if args.no_cache or args.no_wait or args.mode == "auto-fix":
        return False
    if any(getattr(args, name) for name in _READS):
        return False
    if args.broker or any(os.environ.get(name, "").strip() for name in _BROKERS):
        return False
    return os.path.isdir(args.path)


def lookup(entry: str) -> Answer | None:
    try:
        record = json.loads(_path(entry).read_text(encoding="utf-8"))
        if record.get("format") != FORMAT or record.get("key") != entry:
            return None
        return Answer(
            run_id=str(record["run"]),
            stored=str(record["stored"]),
            code=int(record["code"]),
            text=str(record["text"]),
            to_file=bool(record["toFile"]),
            what=str(record["what"]),
            said=tuple(str(line) for line in record["said"]),
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None  # none kept, or not readable as one: the run is built


def remember(entry: str, answer: Answer) -> None:
    """Keep ``answer`` under ``entry``; a cache that cannot be written only costs the next run
    its speed."""
    record = {
        "format": FORMAT,
        "key": entry,
        "run": answer.run_id,
        "stored": answer.stored,
        "code": answer.code,
        "text": answer.text,
        "toFile": answer.to_file,
        "what": answer.what,
        "said": list(answer.said),
    }
    path = _path(entry)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, json.dumps(record, separators=(",", ":")).encode("utf-8"))
    except OSError as exc:
        print(f"verify-dag: warning: result cache: could not store {path}: {exc}", file=sys.stderr)


def now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _path(entry: str) -> Path:
    return paths.results_root() / KIND / entry[:2] / f"{entry}.json"


def _read(path: Path) -> str:
    try:
        return path.read_bytes().hex()
    except OSError as exc:
        return f"unread: {type(exc).__name__}"


def _user_config() -> str:
    try:
        found = paths.user_file(os.environ)
    except UsageError as exc:
        return f"bad: {exc}"
    return "none" if found is None else f"{found}\0{_read(found)}"


def _path_dirs() -> list[tuple[str, int, int]]:
    out = []
    for entry in os.environ.get("PATH", os.defpath).split(os.pathsep):
        try:
            st = os.stat(entry or ".")
        except OSError:
            out.append((entry, -1, -1))
        else:
            out.append((entry, st.st_ino, st.st_mtime_ns))
    return out


def _distributions() -> list[str]:
    """The distributions (and .pth files) on sys.path, by name and version: every package a
    tool, a runner or verify-dag itself imports from this interpreter."""
    out = []
    for entry in sys.path:
        try:
            with os.scandir(entry or ".") as it:
                out += [
                    f"{entry}/{e.name}"
                    for e in it
                    if e.name.endswith((".dist-info", ".egg-info", ".pth", ".egg-link"))
                ]
        except OSError:
            continue
    return sorted(out)


def _own_source() -> list[tuple[str, int, int]]:
    """verify-dag's source files with their sizes and times: an editable install changes its
    code without its version."""
    out = []
    for top, dirs, names in os.walk(_PACKAGE):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(names):
            if name.endswith((".py", ".json", ".toml", ".md")):
                try:
                    st = os.stat(os.path.join(top, name))
                except OSError:
                    continue
                out.append((os.path.join(top, name), st.st_size, st.st_mtime_ns))
    return out


def answer(args: argparse.Namespace, kept: Answer) -> int:
    """Write ``kept`` as its run wrote it, with a line saying whose it is; its exit code."""
    from verify_dag.cli import args as cli_args

    if not args.quiet:
        print(
            f"verify-dag: nothing changed since run {kept.run_id} ({kept.stored}): its report, "
            "from the result cache (--no-cache runs everything again)",
            file=sys.stderr,
        )
    if kept.to_file:
        cli_args.write_report(cli_args.new_output(args.output), kept.text, kept.what)
    elif args.output == cli_args.STDOUT:
        cli_args.write_utf8(kept.text)
    else:
        sys.stdout.write(kept.text)
    sys.stdout.flush()
    for line in kept.said:
        print(line, file=sys.stderr)
    return kept.code
