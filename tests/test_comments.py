"""comment-review's deterministic rules on real branches: only added or modified comment lines."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import Repo

from verify_dag import git, settings
from verify_dag.backends.sources import file_layer
from verify_dag.errors import UsageError
from verify_dag.models.findings import Finding
from verify_dag.models.scope import FileChange, LineRange, Scope
from verify_dag.models.source import parse_source
from verify_dag.reviewers import comments

BASE = (
    "# Copyright 2024 Example Corp. Licensed under the MIT license.\n"
    "import os\n"
    "\n"
    "# previously this module used a list (VI-1), an unchanged line\n"
    "\n"
    "def size(path):\n"
    "    return os.path.getsize(path)\n"
)


def branch_scope(repo: Repo, base: str) -> Scope:
    """The scope the scope phase builds for a branch: new-side line ranges per changed file."""
    new = repo.head()
    ranges = git.line_ranges(repo.path, base, new)
    changes = []
    for status, path in (
        line.split("\t") for line in repo.git("diff", "--name-status", base, new).splitlines()
    ):
        kind = {"A": "added", "M": "modified"}[status]
        lines = (
            None
            if kind == "added"
            else tuple(LineRange(start=a, end=b) for a, b in ranges.get(path, []))
        )
        changes.append(FileChange(path=path, status=kind, lines=lines))
    return Scope(mode="branch", old_commit=base, new_commit=new, included=tuple(changes))


def change(repo: Repo, files: dict[str, str], base_files: dict[str, str] | None = None) -> Scope:
    for path, text in (base_files or {"mod.py": BASE}).items():
        repo.write(path, text)
    base = repo.commit("base")
    for path, text in files.items():
        repo.write(path, text)
    repo.commit("change")
    return branch_scope(repo, base)


def by_rule(found: list[Finding], rule: str) -> list[Finding]:
    return [f for f in found if f.rule == rule]


def lines_of(found: list[Finding]) -> list[int | None]:
    return [f.location.line if f.location else None for f in found]


def test_review_ids_on_added_lines_only(repo: Repo) -> None:
    scope = change(
        repo,
        {
            "mod.py": BASE
            + (
                "\n\n# Handle an empty path (VI-3).\n"  # 10
                "def empty(path):\n"
                "    return not path  # per review feedback\n"  # 12
                "# see https://example.com/CI-12/R2-4 for the format\n"  # 13
            )
        },
    )
    found = by_rule(comments.run(scope, repo.path, threshold=10), "review-reference")
    assert lines_of(found) == [10, 12]  # VI-1 on unchanged line 4 and the URL are not reported
    first, second = found
    assert (first.severity, first.issue_class, first.source) == (6, "comment", "comment-review")
    assert first.location is not None and first.location.path == "mod.py"
    assert '"Handle an empty path (VI-3)."' in first.description
    assert first.description.endswith('Rewrite: "Handle an empty path."')
    assert second.description.endswith("Rewrite: delete")


def test_review_ids_in_other_languages(repo: Repo) -> None:
    scope = change(
        repo,
        {
            "web/app.ts": 'const url = "// CI-4 in a string";\n// addressing review comments\n'
            "/* As requested in review, retry twice. */\n",
            "run.sh": '#!/bin/sh\necho "# R1-2" $#  # R3-1: quote the path\n',
            "cfg.yaml": "key: 'a # VI-9 value'  # fine\n",
            "lib.rs": "fn f<'a>(s: &'a str) -> char { 'x' } // it now returns x\n",
            "broken.py": "def f(:\n    pass  # CI-7\n",  # no tokens: still read its `#` comments
        },
    )
    found = sorted(
        (f.location.path, f.location.line, f.rule)
        for f in comments.run(scope, repo.path, threshold=10)
        if f.location
    )
    assert found == [
        ("broken.py", 2, "review-reference"),
        ("lib.rs", 1, "change-narration"),
        ("run.sh", 2, "review-reference"),
        ("web/app.ts", 2, "review-reference"),
        ("web/app.ts", 3, "review-reference"),
    ]


def test_change_narration_with_rewrites(repo: Repo) -> None:
    scope = change(
        repo,
        {
            "mod.py": BASE
            + (
                "\n\n# Use a dict for O(1) lookups; previously this was a list.\n"  # 10
                "CACHE = {}\n"
                "# We used to sort here.\n"  # 12
                "# This is used to build the index.\n"  # 13: describes the code, not its history
                "# Replaced the loop with a dict lookup.\n"  # 14
                "# skip previously seen items\n"  # 15: "previously" as an adjective
                "# the handle is no longer valid once closed\n"  # 16: runtime state
                "def get(key):\n"
                '    """Now we cache the result."""\n'  # 18
                "    # now we have the lock, read the value\n"  # 19: program flow
                "    return CACHE.get(key)\n"
                "# Swapped the list for a set.\n"  # 21
                "# the two values are swapped when a > b\n"  # 22: what the code does
            )
        },
    )
    found = by_rule(comments.run(scope, repo.path, threshold=10), "change-narration")
    assert lines_of(found) == [10, 12, 14, 18, 21]  # line 4's "previously" is unchanged
    assert all(f.severity == 5 and f.issue_class == "comment" for f in found)
    rewrites = [f.description.rsplit("Rewrite: ", 1)[1] for f in found]
    assert rewrites == [
        '"Use a dict for O(1) lookups"',
        "delete",
        "delete",
        '"We cache the result."',
        "delete",
    ]
    assert '"Use a dict for O(1) lookups; previously this was a list."' in found[0].description


def test_pragmas_shebang_and_license_are_not_prose(repo: Repo) -> None:
    scope = change(
        repo,
        {
            "new.py": (
                "#!/usr/bin/env python\n"
                "# Copyright 2020 Someone. Previously licensed under GPL, now we use MIT.\n"
                "import os  # noqa: F401\n"
                "x: int = 'a'  # type: ignore[assignment]\n"
                "y = 1  # type: ignore  # per review feedback, keep y\n"
            )
        },
        {"keep.py": "x = 1\n"},
    )
    found = comments.run(scope, repo.path, threshold=10)
    assert [(f.rule, lines_of([f])[0]) for f in found] == [("review-reference", 5)]


def test_density_over_and_under_threshold(repo: Repo, monkeypatch: pytest.MonkeyPatch) -> None:
    body = "".join(f"# step {n} explained at length\nx{n} = {n}\n" for n in range(5))
    scope = change(
        repo, {"dense.py": '"""A docstring is not counted."""\n' + body}, {"keep.py": "x = 1\n"}
    )
    monkeypatch.delenv(settings.DENSITY_ENV, raising=False)
    (dense,) = by_rule(comments.run(scope, repo.path), "comment-density")  # default 10%
    assert dense.location is None and dense.severity == 5 and dense.issue_class == "comment"
    assert dense.title == "Comment density 100% of added code lines (threshold 10%)"
    assert "5 added comment lines against 5 added code lines" in dense.description
    assert "dense.py (5)" in dense.description and "Rewrite:" in dense.description
    assert not by_rule(comments.run(scope, repo.path, threshold=1.0), "comment-density")
    monkeypatch.setenv(settings.DENSITY_ENV, "150%")
    assert not by_rule(comments.run(scope, repo.path), "comment-density")
    monkeypatch.setenv(settings.DENSITY_ENV, "0.5")
    assert by_rule(comments.run(scope, repo.path), "comment-density")


def test_density_counts_added_lines_only(repo: Repo) -> None:
    old = "".join(f"# old comment {n}\n" for n in range(10)) + "x = 1\n"
    scope = change(
        repo, {"mod.py": old + "".join(f"y{n} = {n}\n" for n in range(20))}, {"mod.py": old}
    )
    assert comments.run(scope, repo.path) == []


def test_density_threshold_sources(tmp_path: Path) -> None:
    assert comments.density_threshold(tmp_path, env={}) == comments.DEFAULT_DENSITY
    (tmp_path / "pyproject.toml").write_text('[tool.verify-dag]\ncomment-density = "25%"\n')
    assert comments.density_threshold(tmp_path, env={}) == 0.25
    assert comments.density_threshold(tmp_path, env={settings.DENSITY_ENV: "0.05"}) == 0.05
    with pytest.raises(UsageError, match="expected a fraction"):
        comments.density_threshold(tmp_path, env={settings.DENSITY_ENV: "10"})
    # The backends' validator of the same table accepts the key.
    file_layer({"comment-density": 0.2, "backend": "claude"}, "pyproject", trusted=False, notes=[])


def test_unchanged_file_lines_and_unknown_languages(repo: Repo) -> None:
    scope = change(
        repo,
        {"notes.md": "previously we did X (VI-2)\n", "mod.py": BASE.replace("getsize", "getmtime")},
        {"mod.py": BASE, "notes.md": "x\n"},
    )
    assert comments.run(scope, repo.path, threshold=10) == []
    whole = Scope(
        mode="files",
        new_commit=repo.head(),
        included=(FileChange(path="mod.py", status="included"),),
    )
    found = comments.run(whole, repo.path, threshold=10)
    assert sorted({f.rule for f in found if f.rule}) == ["change-narration", "review-reference"]
    assert all(5 <= f.severity <= 6 for f in found)


def test_the_clients_density_setting_travels_with_the_run(
    repo: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A worker on another host has its own environment: the setting the user made where they
    # ran verify-dag is carried in the request and wins over the worker's.
    from verify_dag import reviewers
    from verify_dag.models import RunState, VerifyRequest

    body = "".join(f"# step {n} explained at length\nx{n} = {n}\n" for n in range(5))
    scope = change(repo, {"dense.py": body}, {"keep.py": "x = 1\n"})
    monkeypatch.setenv(settings.DENSITY_ENV, "0.05")  # the worker's own environment

    def density(setting: str | None) -> list[Finding]:
        state = RunState(
            run_id="r",
            scope=scope,
            request=VerifyRequest(source=parse_source(str(repo.path)), comment_density=setting),
        )
        (outcome,) = reviewers.comment_review(state)
        return by_rule(list(outcome.findings), "comment-density")

    assert density(None)  # the worker's 5%
    assert not density("150%")  # the client's setting
