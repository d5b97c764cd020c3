"""FILE SCOPE globs against the files a diff touches (docs/contract.md, "FILE SCOPE").

A glob matches the whole repository-relative path: ``*`` and ``?`` stay within one directory,
``**`` crosses directories, ``[abc]`` is a class; a glob without wildcards also matches every file
under it when it names a directory (``src`` or ``src/``). A leading ``./`` or ``/`` is ignored.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from functools import cache

from verify_dag.git import Delta
from verify_dag.reviewers.contract.models import ScopeResult


@cache
def _regex(glob: str) -> re.Pattern[str]:
    pattern = glob.strip().removeprefix("./").lstrip("/")
    if pattern.endswith("/"):
        pattern += "**"
    out, i = [], 0
    while i < len(pattern):
        c = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
            continue
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[" and (end := pattern.find("]", i + 2)) != -1:
            body = pattern[i + 1 : end]
            body = "^" + body[1:] if body.startswith("!") else body
            out.append(f"[{body.replace(chr(92), chr(92) * 2)}]")
            i = end + 1
            continue
        else:
            out.append(re.escape(c))
        i += 1
    literal = not re.search(r"[*?\[]", pattern)
    suffix = "(?:/.*)?" if literal else ""
    return re.compile("".join(out) + suffix)


def matches(path: str, globs: Iterable[str]) -> bool:
    return any(_regex(g).fullmatch(path) for g in globs)


def touched(deltas: Sequence[Delta]) -> list[str]:
    """Every path a diff touches: a rename touches both its old and its new path."""
    paths: list[str] = []
    for d in deltas:
        if d.old_path and d.status == "R":
            paths.append(d.old_path)
        paths.append(d.path)
    return list(dict.fromkeys(paths))


def check(
    paths: Sequence[str], globs: Sequence[str], declared: bool, exempt: Iterable[str] = ()
) -> ScopeResult:
    """Split ``paths`` into in-scope and out-of-scope; ``exempt`` (the contract itself) is
    neither. Without a FILE SCOPE section nothing is in scope: the contract authorises no file."""
    skip = set(exempt)
    considered = [p for p in paths if p not in skip]
    inside = tuple(p for p in considered if matches(p, globs))
    outside = tuple(p for p in considered if p not in inside)
    return ScopeResult(declared=declared, globs=tuple(globs), inScope=inside, outOfScope=outside)
