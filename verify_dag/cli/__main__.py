"""``python -m verify_dag.cli``: what the ``verify-dag`` console script runs."""

from __future__ import annotations

from verify_dag.cli import entry

entry()
