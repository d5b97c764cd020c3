"""The result cache's entries (verify_dag/resultcache.py) for the failing tests a run re-runs
alone: the exerciser's reproduction at the verified commit and the debugger's re-runs at the
merge base.

A re-run is decided by what the suite's own entry is (tester/suite_cache.py), and by the
failures it is asked about: the trees of the commits it runs in (every file its env is declared
in among them), the toolchain, the scoped files, the time limits, verify-dag's and the
interpreter's versions (:func:`verify_dag.resultcache.host_key`), and every finding it re-runs,
as the suite or the cache reported it. Only an answer that was settled is kept (the callers say
which); a re-run that timed out, could not be built or ran out of its budget runs again.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from verify_dag import git, resultcache
from verify_dag.models import RunState
from verify_dag.models.toolchain import Toolchain

T = TypeVar("T")
REPRODUCTION = "reproduction"
DEBUGGER = "debugger"


def dump(items: Sequence[BaseModel]) -> list[Any]:
    return [i.model_dump(mode="json") for i in items]


def key(kind: str, state: RunState, commits: Sequence[str], asked: Sequence[Any]) -> str | None:
    """The entry of ``kind`` for re-runs in ``commits`` of what ``asked`` holds (JSON data), or
    None when a commit has no tree git can name."""
    if state.scope is None:
        return None
    trees = [git.rev_parse(state.request.repo, f"{c}^{{tree}}") for c in commits]
    if not all(trees):
        return None
    request, toolchain = state.request, state.toolchain or Toolchain()
    return resultcache.key(
        resultcache.host_key(),
        kind,
        *(t for t in trees if t),
        json.dumps(toolchain.model_dump(mode="json"), sort_keys=True),
        json.dumps(dump(state.scope.included), sort_keys=True),
        f"{request.test_timeout:g} {request.per_test_timeout:g} {request.tool_timeout:g}",
        json.dumps(list(asked), sort_keys=True),
    )


def get(kind: str, entry: str | None, what: str, parse: Callable[[Any], T]) -> T | None:
    """The entry's value as ``parse`` reads it, recorded as the part ``what`` of the result;
    None (and nothing recorded) when there is none or it does not parse."""
    found = resultcache.lookup(kind, entry) if entry is not None else None
    if found is None or entry is None:
        return None
    try:
        value = parse(found[0])
    except (ValidationError, KeyError, TypeError, ValueError):
        return None
    resultcache.hit(what, entry, found[1])
    return value


def put(kind: str, entry: str | None, value: dict[str, Any]) -> None:
    if entry is not None:
        resultcache.put(kind, entry, value)
