"""Every VERIFY_DAG_* variable the code reads is in the one table (verify_dag/envvars.py) that
``verify --help`` prints."""

from __future__ import annotations

import re
from pathlib import Path

from conftest import run_cli

from verify_dag.envvars import ENV

ROOT = Path(__file__).parents[1]


def test_every_variable_read_is_documented_in_help() -> None:
    read = set()
    for path in [*ROOT.joinpath("verify_dag").rglob("*.py"), *ROOT.joinpath("tasks").rglob("*.py")]:
        read |= set(re.findall(r'"(VERIFY_DAG_[A-Z_]+)"', path.read_text(encoding="utf-8")))
    missing = sorted(read - set(ENV))
    assert not missing, f"read but not in verify_dag/envvars.py: {missing}"
    said = run_cli("verify", "--help").stdout
    for name, (who, _) in ENV.items():
        assert (name in said) == (who != "internal"), name
