"""``verify-dag metrics``: the run-level Prometheus metrics of the report store
(verify_dag/metrics.py), served on /metrics or printed once."""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

from verify_dag.cli import args as cli_args
from verify_dag.errors import UsageError

DEFAULT_PORT = 9808


def add_parsers(sub: Any) -> None:
    """``sub`` is the subparsers action of the top-level parser."""
    m = sub.add_parser(
        "metrics",
        help="serve the runs' Prometheus metrics (results, durations, issues, checks not run, "
        "cache hits) from the report store",
    )
    m.set_defaults(handler=cmd_metrics)
    m.add_argument("--address", default="127.0.0.1", help="listen address (default 127.0.0.1)")
    m.add_argument(
        "--port", type=cli_args.positive, default=DEFAULT_PORT, help=f"default {DEFAULT_PORT}"
    )
    m.add_argument("--once", action="store_true", help="print the metrics once and exit")
    cli_args.add_store(m)
    m.add_argument(
        "--broker",
        metavar="URL",
        help="also serve each queue's depth and the runs in flight, read from this broker "
        "and its result backend at each scrape (default: $VERIFY_DAG_BROKER_URL, else none)",
    )


def cmd_metrics(args: argparse.Namespace) -> int:
    from verify_dag import metrics

    store_dir = cli_args.store_dir(args.store)
    broker = args.broker or os.environ.get("VERIFY_DAG_BROKER_URL") or None
    more = []
    if broker:
        from verify_dag.tasks.monitor import BrokerCollector

        more.append(BrokerCollector(broker))
    if args.once:
        sys.stdout.write(metrics.exposition(store_dir, more))
        return 0
    try:
        metrics.serve(store_dir, args.address, args.port, more)
    except OSError as exc:
        raise UsageError(f"cannot listen on {args.address}:{args.port}: {exc.strerror}") from None
    print(f"verify-dag metrics on http://{args.address}:{args.port}/metrics", flush=True)
    while True:  # the server runs in a thread; Ctrl-C or SIGTERM ends the process
        time.sleep(3600)
