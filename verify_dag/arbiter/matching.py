"""Which tests of a bundle speak for which requirement of a plan (docs/arbiter.md, "Matching").

A test matches ``REQ-NNN`` when

1. it declared the requirement: the bundle's ``requirements`` list of the test holds ``REQ-NNN``
   (the tester reads it from ``record_property("requirements", "REQ-001 REQ-002")``), or
2. its node id names it: ``req``, an optional ``-`` or ``_``, then exactly the digits ``NNN``
   (leading zeros included), case-insensitive, not followed by another digit, and not preceded by
   a letter or digit, except a lower-case letter before an upper-case ``R`` (camel case). So
   ``tests/test_login.py::test_req_001_expired``, ``TestReq001::test_x``,
   ``tests/req_001/test_a.py::test_b`` and ``test_login[REQ-001]`` match REQ-001;
   ``test_req_0010``, ``test_req_01`` and ``test_prereq_001`` do not.

``test_types`` are not used to match: a junit record does not say what kind of test it is.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

_NAMED = re.compile(r"req[-_]?([0-9]+)(?![0-9])", re.IGNORECASE)


def named(nodeid: str) -> set[str]:
    """The requirement ids a node id names (rule 2)."""
    found = set()
    for m in _NAMED.finditer(nodeid):
        before = nodeid[m.start() - 1] if m.start() else ""
        boundary = not (before.isascii() and before.isalnum())
        if boundary or (before.islower() and nodeid[m.start()] == "R"):
            found.add(f"REQ-{m.group(1)}")
    return found


def names(nodeid: str, requirement_id: str) -> bool:
    return requirement_id in named(nodeid)


def requirement_ids(test: Mapping[str, Any]) -> set[str]:
    """Every requirement a bundle test matches, by either rule."""
    return set(test.get("requirements") or ()) | named(str(test.get("nodeid", "")))


def matches(test: Mapping[str, Any], requirement_id: str) -> bool:
    return requirement_id in requirement_ids(test)


def index(tests: Iterable[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
    """The matching tests of every requirement any test names, in bundle order: one pass over
    the bundle instead of one per requirement."""
    out: dict[str, list[Mapping[str, Any]]] = {}
    for test in tests:
        for rid in requirement_ids(test):
            out.setdefault(rid, []).append(test)
    return out
