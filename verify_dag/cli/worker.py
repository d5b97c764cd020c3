"""``verify-dag worker``: a Celery worker for the pipeline's queues, set by flags or, for a
container image, by the environment (worker.Dockerfile, ops/README.md)."""

from __future__ import annotations

import argparse
import os
from typing import Any

from verify_dag.cli import args as cli_args
from verify_dag.errors import UsageError

# The worker pools verify-dag supports (celery's gevent/eventlet need extra packages) and the log
# levels celery accepts.
WORKER_POOLS = ("prefork", "threads", "solo")
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL", "FATAL")


def add_parsers(sub: Any) -> None:
    """``sub`` is the subparsers action of the top-level parser."""
    w = sub.add_parser("worker", help="start a Celery worker for the pipeline's queues")
    w.set_defaults(handler=cmd_worker)
    cli_args.add_broker(w, default="required")
    # Defaults are resolved in cmd_worker from the environment, so a container image can choose
    # its queue set without a command line (worker.Dockerfile).
    w.add_argument(
        "--queues",
        metavar="Q1,Q2",
        help="queues to consume (default: $VERIFY_DAG_QUEUES, else all but fleet, which only "
        "a worker started for the nightly audits consumes)",
    )
    w.add_argument(
        "--concurrency",
        type=int,
        metavar="N",
        help="child processes or threads (default: $VERIFY_DAG_CONCURRENCY, else one per CPU)",
    )
    w.add_argument(
        "--pool",
        choices=WORKER_POOLS,
        help="default: $VERIFY_DAG_POOL, else prefork (time limits need prefork)",
    )
    w.add_argument("--loglevel", help="default: $VERIFY_DAG_LOGLEVEL, else INFO")
    w.add_argument("--hostname", metavar="NAME")


def _setting(flag_value: str | None, flag: str, env: str, default: str) -> tuple[str, str]:
    """A worker setting and where it came from: the flag, else the environment, else a default."""
    if flag_value is not None:
        return flag_value, flag
    from_env = os.environ.get(env, "").strip()
    if from_env:
        return from_env, env
    return default, flag


def cmd_worker(args: argparse.Namespace) -> int:
    from verify_dag import sandbox, url_secrets
    from verify_dag.tasks.app import (
        BROKER_ENV,
        BROKER_FILE_ENV,
        FLEET_QUEUE,
        QUEUES,
        broker_url,
        configure,
    )

    secret = url_secrets.credentials(args.broker) if args.broker else None
    if secret is not None:
        # Unlike a client's, a worker's command line lives as long as the worker, and any
        # process on the host reads it (/proc/<pid>/cmdline, ps), repository code included.
        raise UsageError(
            f"--broker {url_secrets.mask(args.broker)}: {secret} on a worker's command "
            "line is readable by every process on this host",
            hint=f"put the URL in {BROKER_ENV} or in a file named by {BROKER_FILE_ENV}, "
            'see ops/README.md "Broker credentials"',
        )
    url = broker_url(args.broker)
    if url.startswith("memory://"):
        raise UsageError("a worker needs a broker: pass --broker URL or set VERIFY_DAG_BROKER_URL")
    # A host set to require the sandbox and unable to give it serves nobody, loudly.
    sandbox.check_required(False)
    text, source = _setting(args.queues, "--queues", "VERIFY_DAG_QUEUES", ",".join(QUEUES))
    queues = [q.strip() for q in text.split(",") if q.strip()]
    if not queues:
        raise UsageError(f"{source}: no queue names given; known: {', '.join(QUEUES)}")
    known = (*QUEUES, FLEET_QUEUE)
    unknown = sorted(set(queues) - set(known))
    if unknown:
        raise UsageError(
            f"{source}: unknown queue(s) {', '.join(unknown)}; known: {', '.join(known)}"
        )
    flag_concurrency = None if args.concurrency is None else str(args.concurrency)
    text, source = _setting(flag_concurrency, "--concurrency", "VERIFY_DAG_CONCURRENCY", "")
    concurrency = None
    if text:
        if not text.isdigit() or int(text) < 1:
            raise UsageError(f"{source}: expected a positive number of processes, got {text!r}")
        concurrency = int(text)
    pool, source = _setting(args.pool, "--pool", "VERIFY_DAG_POOL", "prefork")
    if pool not in WORKER_POOLS:
        raise UsageError(f"{source}: unknown pool {pool!r}; known: {', '.join(WORKER_POOLS)}")
    loglevel, source = _setting(args.loglevel, "--loglevel", "VERIFY_DAG_LOGLEVEL", "INFO")
    if loglevel.upper() not in LOG_LEVELS:
        raise UsageError(
            f"{source}: unknown log level {loglevel!r}; known: {', '.join(LOG_LEVELS)}"
        )
    app = configure(url)
    argv = ["worker", "-Q", ",".join(queues), "--pool", pool, "--loglevel", loglevel.upper(), "-E"]
    if concurrency:
        argv += ["--concurrency", str(concurrency)]
    if args.hostname:
        argv += ["--hostname", args.hostname]
    app.worker_main(argv=argv)
    return 0
