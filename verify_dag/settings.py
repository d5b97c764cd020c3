"""The run settings a repository may set for itself in its ``pyproject.toml``
``[tool.verify-dag]`` table, and where each setting of a run came from.

Precedence, highest first: the command-line flag, the repository's table, the default. The
repository may set how deep and how strictly it is verified and how long its suite and tools may
take (``REPO_SETTINGS``); the model keys are the user's alone (backends/sources.py notes and drops
them). A key neither knows is refused up front, with the file and the key: a misspelt
``fail_on`` must not be silently ignored.
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verify_dag.errors import UsageError

TABLE = "[tool.verify-dag]"


def _depth(value: object) -> str:
    if value not in ("light", "deep"):
        raise ValueError("expected light or deep")
    return str(value)


def _severity(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 10:
        raise ValueError("expected a whole number from 1 to 10")
    return value


def _flag(value: object) -> bool:
    if not isinstance(value, bool):
        raise ValueError("expected true or false")
    return value


def _seconds(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ValueError("expected a number of seconds above 0")
    return float(value)


@dataclass(frozen=True)
class Spec:
    flag: str  # the command line's name for it
    default: Any
    check: Callable[[object], Any]


# comment-review's density threshold, which the worker's environment may set too: here, beside
# the other settings, so that ``verify`` checks a value up front without loading the reviewers.
DENSITY_ENV = "VERIFY_DAG_COMMENT_DENSITY"
DENSITY_KEY = "comment-density"


# key in [tool.verify-dag] -> the flag and default it stands for.
REPO_SETTINGS: dict[str, Spec] = {
    "depth": Spec("--depth", "light", _depth),
    "fail-on": Spec("--fail-on", 7, _severity),
    "allow-incomplete": Spec("--allow-incomplete", False, _flag),
    "test-timeout": Spec("--test-timeout", 1800.0, _seconds),
    "per-test-timeout": Spec("--per-test-timeout", 300.0, _seconds),
    "tool-timeout": Spec("--tool-timeout", 600.0, _seconds),
}
# Keys the table may hold that others read: the model keys (the worker notes and drops them, or
# keeps `timeout`), comment-review's density.
OTHER_KEYS = ("backend", "command", "model", "effort", "timeout", "skills", DENSITY_KEY)


def parse_density(value: object, where: str) -> float:
    """A fraction (0.1) or a percentage string ("10%"); a bare 10 is refused as ambiguous."""
    share: float | None = None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        share = float(value) if 0 <= value <= 1 else None
    elif isinstance(value, str):
        text = value.strip()
        try:
            share = float(text[:-1]) / 100 if text.endswith("%") else float(text)
        except ValueError:
            share = None
        if share is not None and not text.endswith("%") and share > 1:
            share = None
    if share is None or not math.isfinite(share) or share < 0:
        raise UsageError(
            f'{where}: expected a fraction such as 0.1 or a percentage such as "10%", got {value!r}'
        )
    return share


@dataclass(frozen=True)
class Setting:
    value: Any
    source: str  # "--flag", "<path> [tool.verify-dag]", "default"


def table(top: Path) -> tuple[dict[str, Any], str]:
    """The repository's table (empty when it has none) and how to name it in a message."""
    path = top / "pyproject.toml"
    where = f"{path} {TABLE}"
    try:
        with path.open("rb") as fh:
            doc = tomllib.load(fh)
    except FileNotFoundError:
        return {}, where
    except tomllib.TOMLDecodeError:
        # The change broke its own pyproject.toml: that is the change's problem, reported by
        # the run as a finding on the file's line (verify_dag/declarations.py), not the
        # caller's. The run goes on with the defaults.
        return {}, f"{where} (the file does not parse: defaults used)"
    except OSError as exc:
        raise UsageError(f"{path}: cannot read it: {exc}") from None
    found = doc.get("tool", {}).get("verify-dag", {})
    if not isinstance(found, dict):
        raise UsageError(f"{where}: expected a table")
    unknown = sorted(set(found) - set(REPO_SETTINGS) - set(OTHER_KEYS))
    if unknown:
        known = ", ".join((*REPO_SETTINGS, *OTHER_KEYS))
        raise UsageError(f"{where}: unknown key {unknown[0]!r} (known: {known})")
    return found, where


def resolve(
    flags: Mapping[str, Any], repo_table: Mapping[str, Any], where: str
) -> dict[str, Setting]:
    """Each repository setting's value and source; ``flags`` maps a key to the flag's value,
    None when the flag was not given."""
    out: dict[str, Setting] = {}
    for key, spec in REPO_SETTINGS.items():
        given = flags.get(key)
        if given is not None:
            out[key] = Setting(given, spec.flag)
        elif key in repo_table:
            try:
                out[key] = Setting(spec.check(repo_table[key]), where)
            except ValueError as exc:
                raise UsageError(f"{where}: {key}: {exc}, got {repo_table[key]!r}") from None
        else:
            out[key] = Setting(spec.default, "default")
    return out
