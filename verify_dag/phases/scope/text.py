"""The Scope as text for reviewers: the VERIFICATION SCOPE and SCOPE_METADATA blocks."""

from __future__ import annotations

import shlex
from collections.abc import Sequence

from verify_dag.models.scope import FileChange, Scope

_DIFF_RULES = """CRITICAL SCOPE CONSTRAINTS:
- ONLY flag issues in code that was ADDED or MODIFIED in these files/lines
- DO NOT flag issues in surrounding context or old code unless it blocks the new changes
- DO NOT flag issues in other files not listed above
- Focus exclusively on the quality of the NEW or CHANGED code

Exception: You MAY flag issues in old code IF:
1. The new changes directly interact with or depend on that old code
2. The old code issue is causing the new code to be incorrect
3. The old code issue creates a blocker for the new functionality"""

_WHOLE_RULES = """CRITICAL SCOPE CONSTRAINTS:
- The ENTIRE content of the files listed above is in scope
- DO NOT flag issues in other files not listed above"""


def shell_command(argv: list[str], paths: Sequence[str]) -> str:
    """``argv`` with ``-- paths`` appended when there are paths, quoted for a shell."""
    return shlex.join([*argv, *(["--", *paths] if paths else [])])


def _show(path: str) -> str:
    # One record per line: a path holding a newline or tab must not break the block.
    return shlex.quote(path) if any(c in path for c in "\n\t\r") else path


def describe(change: FileChange) -> str:
    """``(modified, lines 45-67, 89-102)``, ``(added, entire file)``, ``(deleted)`` ..."""
    status: str = change.status
    if change.old_path:
        status = f"{status} from {_show(change.old_path)}"
    if change.binary:
        status = f"binary, {status}"
    if change.status == "deleted":
        return f"({status})"
    if change.lines is None:
        return f"({status}, entire file)"
    if not change.lines:
        return f"({status}, no added lines)"
    one = len(change.lines) == 1 and change.lines[0].start == change.lines[0].end
    labels = ", ".join(r.label() for r in change.lines)
    return f"({status}, {'line' if one else 'lines'} {labels})"


def scope_context(scope: Scope) -> str:
    """The VERIFICATION SCOPE block handed to every reviewer."""
    if scope.error:
        return f"VERIFICATION SCOPE:\nScope error {scope.error.code}: {scope.error.message}"
    if scope.nothing_to_verify:
        return "VERIFICATION SCOPE:\nNothing to verify: " + "; ".join(scope.notes)
    files = "\n".join(f"- {_show(c.path)} {describe(c)}" for c in scope.included)
    whole = scope.old_commit is None
    commands = [scope.diff_command]
    if not whole:
        commands.append(
            shell_command(
                ["git", "diff", scope.old_commit or "", scope.new_commit], scope.path_filter
            )
        )
    return (
        f"VERIFICATION SCOPE:\nFiles in scope:\n{files}\n\n"
        f"{_WHOLE_RULES if whole else _DIFF_RULES}\n\n"
        "Git commands to see your scoped changes:\n" + "\n".join(dict.fromkeys(commands))
    )


def scope_metadata(scope: Scope) -> str:
    """The machine-usable SCOPE_METADATA block."""
    baseline = scope.base_ref or {"staged": "HEAD", "unstaged": "INDEX"}.get(scope.mode, "")
    fields = [
        ("scope_mode", scope.mode),
        ("base_ref", baseline),
        ("compare_ref", scope.compare_ref),
        ("path_filter", ",".join(map(_show, scope.path_filter)) or "ALL_SCOPED_FILES"),
        ("diff_command", scope.diff_command),
        ("merge_base", scope.merge_base or ""),
        ("head_sha", scope.head_sha),
        ("included_files", ", ".join(f"{_show(c.path)} {describe(c)}" for c in scope.included)),
        ("excluded_files", ", ".join(f"{_show(e.path)} ({e.reason})" for e in scope.excluded)),
    ]
    if scope.delta_base_sha:
        fields += [
            ("delta_base_sha", scope.delta_base_sha),
            ("delta_files", ", ".join(f"{_show(c.path)} ({c.status})" for c in scope.delta_files)),
            ("delta_hunks", ", ".join(f"{_show(c.path)} {describe(c)}" for c in scope.delta_files)),
        ]
    return "SCOPE_METADATA:\n" + "\n".join(f"- {k}: {v}".rstrip() for k, v in fields)
