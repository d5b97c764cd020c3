"""What the tester records of a suite for the evidence bundle (verify_dag/evidence.py): the case
counts, the worker's inventory, and free text made fit to keep (redacted, no checkout paths).
Here, beside the tester, because the tester and its junit reader write them during the run; the
bundle is assembled from them when the report is written."""

from __future__ import annotations

import os
import platform
import re
import sys
from collections.abc import Iterable
from pathlib import Path

from verify_dag import processes
from verify_dag.models import CaseCounts, Inventory

MAX_TESTS = 20_000  # per-test records kept; the bundle travels through the broker once
REASON_MAX = 300
TIER_ENV = "VERIFY_DAG_INVENTORY_TIER"
TIERS = (0, 1, 2)
_SCRATCH = re.compile(r"(?:/[^\s/:'\"]+)*/verify-dag-[a-z]+-[A-Za-z0-9_]+(?:/tree)?")
# A requirement id a test names in its junit properties (REQ-001), kept per test.
REQ_ID = re.compile(r"\bREQ-[0-9]{3,}\b")


def sanitize(text: str, workdir: Path | None = None, limit: int = REASON_MAX) -> str:
    """Free text fit for a bundle: secrets redacted, checkout paths made relative or replaced,
    whitespace folded, capped."""
    if workdir is not None:
        for root in {str(workdir.resolve()), str(workdir)}:
            text = text.replace(root + os.sep, "").replace(root, ".")
    text = " ".join(_SCRATCH.sub("<checkout>", processes.redact(text)).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def inventory(runner: str, environment: str) -> Inventory:
    """The inventory of the worker running the suite. Its tier is what the operator declares in
    $VERIFY_DAG_INVENTORY_TIER (0 unit only, 1 services, 2 full with browser/UI); unset is 0."""
    raw = os.environ.get(TIER_ENV, "").strip()
    tier, source = 0, f"default (no {TIER_ENV})"
    if raw:
        if raw.isdigit() and int(raw) in TIERS:
            tier, source = int(raw), TIER_ENV
        else:
            source = f"default ({TIER_ENV}={raw[:20]!r} is not one of 0, 1, 2)"
    return Inventory(
        tier=tier,
        tier_source=source,
        python=platform.python_version(),
        platform=f"{sys.platform}-{platform.machine()}",
        runner=runner,
        environment=sanitize(environment),
    )


def counts(outcomes: Iterable[str]) -> CaseCounts:
    seen = list(outcomes)
    return CaseCounts(
        total=len(seen),
        **{k: seen.count(k) for k in ("passed", "failed", "error", "skipped", "xfailed")},
    )
