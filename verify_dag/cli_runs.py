"""Argument building and helpers for the run subcommands: ``status``, ``report``, ``runs`` and
``verify --no-wait`` (the ``cmd_*`` functions stay in ``cli``)."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the parser is built on every call, before pydantic is needed
    from verify_dag.store import RunMeta

# What ``status`` says of a run whose records the result backend lost (client.announce).
LOST = "LOST"
STORE_HELP = (
    "report store directory (default: $VERIFY_DAG_STORE, else "
    "$XDG_DATA_HOME/verify-dag/runs, i.e. ~/.local/share/verify-dag/runs)"
)


def add_store(p: argparse.ArgumentParser) -> None:
    p.add_argument("--store", metavar="DIR", help=STORE_HELP)


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def add_parsers(sub: Any, add_broker: Callable[[argparse.ArgumentParser], None]) -> None:
    """``sub`` is the subparsers action of the top-level parser."""
    s = sub.add_parser(
        "status", help="one line: the state of a run (PENDING, STARTED, SUCCESS, LOST)"
    )
    s.add_argument("run_id", metavar="RUN_ID")
    add_store(s)
    add_broker(s)

    r = sub.add_parser("report", help="print or write the stored report of a run")
    r.add_argument("run_id", metavar="RUN_ID")
    r.add_argument("--format", choices=["markdown", "json"], default="markdown")
    r.add_argument("--output", metavar="PATH", help="write the report here (never overwritten)")
    add_store(r)

    n = sub.add_parser("runs", help="list the runs in the report store, newest first")
    n.add_argument(
        "--limit",
        type=_positive,
        default=20,
        metavar="N",
        help="show the N newest runs (default 20)",
    )
    add_store(n)


def new_output(value: str) -> str:
    """An --output path for a file that must not exist yet, made absolute (reports and fleet
    summaries are never overwritten)."""
    from pathlib import Path

    from verify_dag.errors import UsageError

    out = Path(value)
    if out.exists():
        raise UsageError(f"--output: {value} already exists; pass a new path per run")
    if not out.parent.is_dir():
        raise UsageError(f"--output: directory {out.parent} does not exist")
    return str(out.resolve())


def submit(request: Any) -> Any:
    """Submit a run to a broker, recording it as PENDING on the result backend first.

    An id the backend has never seen also reads as PENDING, so without this record ``status``
    could not tell a queued run from a mistyped id. It is written before the canvas is sent: a
    worker that already marked the root task STARTED must not be overwritten. A local
    repository is first pinned and bundled into the store (``repos.prepare``): workers may be
    on other hosts. The run's sentinel (``client.announce``) is left beside it, so that a result
    store that loses the run can be told from one still running it.
    """
    from celery import states, uuid

    from verify_dag import client, repos
    from verify_dag.tasks.app import app
    from verify_dag.tasks.workflow import plan

    run_id = uuid()
    built = plan(repos.prepare(request, run_id), run_id)
    with unreachable_broker_is_fatal():
        app.backend.store_result(built.run_id, None, states.PENDING)
        built = client.announce(built)
        built.canvas.apply_async()
    return built


@contextmanager
def unreachable_broker_is_fatal() -> Iterator[None]:
    """A broker or result store that does not answer is a verification that could not start
    (exit 3), said in one line that names the URL (password hidden) instead of an internal
    error."""
    from kombu.exceptions import OperationalError

    from verify_dag import client, git
    from verify_dag.errors import FatalError
    from verify_dag.tasks.app import app

    unreachable: tuple[type[BaseException], ...] = (OperationalError, *client.outage_errors())
    try:
        yield
    except unreachable as exc:
        url = git.display_source(str(app.conf.broker_url))
        reason = client.one_line(exc).rstrip(".")
        raise FatalError(
            f"cannot reach the broker or result store at {url}: {reason} (is it running?)"
        ) from None


def status(run_id: str, store_dir: str | None, broker: str | None) -> str:
    """One line: a stored run is SUCCESS; any other run is asked of the result backend, when a
    broker is configured."""
    from verify_dag import store
    from verify_dag.errors import UsageError
    from verify_dag.tasks.app import broker_url, configure

    store.check_run_id(run_id)
    try:
        _, _, meta = store.load(store_dir, run_id)
    except UsageError:
        if broker_url(broker).startswith("memory://"):
            raise
        configure(broker)
        state = _backend_state(run_id)
        if state is None and (store.resolve(store_dir) / run_id).is_dir():
            # A run submitted from here (its bundle is in the store) that the backend forgot.
            state = LOST
        if state is None:
            raise UsageError(
                f"no run {run_id} in {store.resolve(store_dir)} and none known to "
                "the result backend (a run it lost looks the same)"
            ) from None
        if state == LOST:
            return (
                f"{run_id} LOST (its records vanished from the result store: a restart "
                "without persistence or a flush?)"
            )
        return f"{run_id} {state}"
    return f"{run_id} SUCCESS result={meta.result} exit={meta.exit_code} finished={meta.finished}"


def _backend_state(run_id: str) -> str | None:
    """The run's state from the result backend, or None when the backend does not know it.

    The run id is its root (scope) task's id. The report task's id is not derivable from it, so
    once the root task is done the run is reported STARTED until its report is in the store.
    """
    from celery import states

    from verify_dag.client import read_meta, sentinel_id

    # A Redis that is restarting is waited for (up to VERIFY_DAG_OUTAGE_LIMIT), as verify does.
    meta = read_meta(run_id)
    sentinel = read_meta(sentinel_id(run_id))
    if not meta.get("task_id"):  # what the backend answers for an id nobody stored
        return None
    if not sentinel.get("task_id"):
        # Known to the backend (a task still running when it was flushed wrote its result
        # again) but its sentinel is gone: nothing will finish the run.
        return LOST
    state = str(meta["status"])
    return states.STARTED if state == states.SUCCESS else state


def listing(store_dir: str | None, limit: int) -> str:
    """The newest ``limit`` runs as a table, newest first."""
    from verify_dag import store

    metas = store.runs(store_dir)[:limit]
    if not metas:
        return f"no runs in {store.resolve(store_dir)}\n"
    return table(metas)


def table(metas: Sequence[RunMeta]) -> str:
    head = ("RUN ID", "FINISHED (UTC)", "REPO", "MODE", "DEPTH", "RESULT", "EXIT")
    rows = [head] + [
        (
            m.run_id,
            m.finished[:19].replace("T", " "),
            m.repo,
            m.mode or "-",
            m.depth,
            m.result,
            str(m.exit_code),
        )
        for m in metas
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    return "".join(
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() + "\n"
        for row in rows
    )
