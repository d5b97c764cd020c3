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
from collections.abc import Mapping
from typing import Any

_NAMED = re.compile(r"req[-_]?([0-9]+)(?![0-9])", re.IGNORECASE)


def names(nodeid: str, requirement_id: str) -> bool:
    """Whether the node id names the requirement (rule 2)."""
    digits = requirement_id.removeprefix("REQ-")
    for m in _NAMED.finditer(nodeid):
        if m.group(1) != digits:
            continue
        before = nodeid[m.start() - 1] if m.start() else ""
        if not (before.isascii() and before.isalnum()):
            return True
        if before.islower() and nodeid[m.start()] == "R":
            return True
    return False


def matches(test: Mapping[str, Any], requirement_id: str) -> bool:
    declared = test.get("requirements") or ()
    return requirement_id in declared or names(str(test.get("nodeid", "")), requirement_id)
