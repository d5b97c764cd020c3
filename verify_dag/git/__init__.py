"""Every git call of the product: small helpers over the git CLI that return plain types.

:mod:`.core` alone runs git (through :func:`verify_dag.processes.run`), with the overrides that keep
git from running programs a configuration names; the modules beside it are grouped by what they
serve, and :mod:`.parse` reads git's output without running anything. Callers use the names
re-exported here (``from verify_dag import git``; ``git.head(repo)``).
"""

from __future__ import annotations

from verify_dag.git.contract import changed_paths, pathspec_matches, unified_diff
from verify_dag.git.core import FETCH_TIMEOUT, GIT_TIMEOUT
from verify_dag.git.diff import binary_paths, diff_stat, line_ranges, name_status, patch
from verify_dag.git.fixes import (
    apply_to_texts,
    backup_commit,
    commit_files,
    commit_message,
    index_differs,
    index_text,
    merge_file,
    patch_applies,
    patched_files,
    recommit,
    restore_index,
    restore_worktree,
    stage_texts,
    update_ref,
    worktree_differs,
)
from verify_dag.git.history import grep_word, hunk_pairs, last_change
from verify_dag.git.parse import Delta, valid_ref, valid_ref_name
from verify_dag.git.refs import (
    check_ref,
    has_commits,
    head,
    is_bare,
    is_shallow,
    merge_base,
    remote_exists,
    rev_parse,
    symbolic_ref,
    toplevel,
    verify_commit,
)
from verify_dag.git.remote import (
    CLONE_TIMEOUT,
    clone_mirror,
    create_bundle,
    display_source,
    fetch,
    fetch_mirror,
    init_from_bundle,
    remote_head,
    remote_show_head_branch,
)
from verify_dag.git.snapshot import (
    checkout_into,
    diff_workspace,
    snapshot_index,
    snapshot_worktree,
    worktree,
)
from verify_dag.git.tree import (
    blobs,
    empty_tree,
    list_files,
    ls_files,
    ls_tree,
    read_file,
    read_files,
    reader,
    untracked,
)

__all__ = [
    "CLONE_TIMEOUT",
    "FETCH_TIMEOUT",
    "GIT_TIMEOUT",
    "Delta",
    "apply_to_texts",
    "backup_commit",
    "binary_paths",
    "blobs",
    "changed_paths",
    "check_ref",
    "checkout_into",
    "clone_mirror",
    "commit_files",
    "commit_message",
    "create_bundle",
    "diff_stat",
    "diff_workspace",
    "display_source",
    "empty_tree",
    "fetch",
    "fetch_mirror",
    "grep_word",
    "has_commits",
    "head",
    "hunk_pairs",
    "index_differs",
    "index_text",
    "init_from_bundle",
    "is_bare",
    "is_shallow",
    "last_change",
    "line_ranges",
    "list_files",
    "ls_files",
    "ls_tree",
    "merge_base",
    "merge_file",
    "name_status",
    "patch",
    "patch_applies",
    "patched_files",
    "pathspec_matches",
    "read_file",
    "read_files",
    "reader",
    "recommit",
    "remote_exists",
    "remote_head",
    "remote_show_head_branch",
    "restore_index",
    "restore_worktree",
    "rev_parse",
    "snapshot_index",
    "snapshot_worktree",
    "stage_texts",
    "symbolic_ref",
    "toplevel",
    "unified_diff",
    "untracked",
    "update_ref",
    "valid_ref",
    "valid_ref_name",
    "verify_commit",
    "worktree",
    "worktree_differs",
]
