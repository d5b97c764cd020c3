"""Static baseline on real branches with real ruff: introduced or pre-existing at the merge base."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import Repo

from verify_dag import git
from verify_dag.models.findings import Finding
from verify_dag.models.request import VerifyRequest
from verify_dag.models.scope import Scope
from verify_dag.models.source import parse_source
from verify_dag.models.toolchain import Command, Toolchain
from verify_dag.phases import scope as scope_phase
from verify_dag.phases import static
from verify_dag.phases.static import baseline
from verify_dag.tools import runner

RUFF = Toolchain(
    commands=(
        Command(kind="lint", argv=("ruff", "check"), source="test", exists=True, tool="ruff"),
    )
)
OLD = "import os\nimport sys\n\n\ndef main():\n    return sys.argv\n"
# `import os` moves to the end (line 9, still unused); `x` (line 5) is a new F841.
NEW = "import sys\n\n\ndef main():\n    x = 1\n    return sys.argv\n\n\nimport os\n"


def branch(
    repo: Repo, old: dict[str, str], new: dict[str, str], remove: tuple[str, ...] = ()
) -> Scope:
    repo.write("ruff.toml", '[lint]\nselect = ["F"]\n')
    for path, text in old.items():
        repo.write(path, text)
    repo.commit("base")
    repo.git("tag", "base")
    for path in remove:
        repo.git("rm", "-q", path)
    for path, text in new.items():
        repo.write(path, text)
    repo.commit("change")
    sc = scope_phase.run(
        scope_phase.validate_request(
            VerifyRequest(source=parse_source(str(repo.path)), scope="branch", base="base")
        )
    )
    assert sc.old_commit is not None and sc.error is None
    return sc


def static_findings(repo: Repo, sc: Scope) -> list[Finding]:
    """What static reports on scoped lines, before any baseline (whole-file mode: no old commit)."""
    with git.worktree(repo.path, sc.new_commit) as workdir:
        out = static.run(sc.model_copy(update={"old_commit": None}), RUFF, workdir, 60)
    assert all(f.baseline is None for f in out.findings)
    return list(out.findings)


def baselines(found: list[Finding]) -> dict[tuple[str | None, int | None], str | None]:
    return {(f.rule, f.location.line if f.location else None): f.baseline for f in found}


def classify(repo: Repo, sc: Scope, problems: list[str] | None = None) -> list[Finding]:
    return baseline.classify(sc, RUFF, static_findings(repo, sc), str(repo.path), 60, problems)


def test_moved_old_finding_is_pre_existing_and_new_one_introduced(repo: Repo) -> None:
    sc = branch(repo, {"app.py": OLD}, {"app.py": NEW})
    assert baselines(classify(repo, sc)) == {("F401", 9): "pre-existing", ("F841", 5): "introduced"}


def test_a_finding_on_a_line_the_change_only_edited_is_pre_existing(repo: Repo) -> None:
    """`List` was already imported unused at the base; the change edits that very line to import
    `Dict` too, and uses it. The F401 on `List` is the old one (same rule, same message, on the
    line the edit replaced); an unused name the edit adds is introduced."""
    old = "from typing import Any, List\n\n\ndef f(a: Any) -> None:\n    return None\n"
    new = (
        "from typing import Any, Dict, List, Set\n\n\n"
        "def f(a: Any) -> Dict[str, int]:\n    return {}\n"
    )
    sc = branch(repo, {"app.py": old}, {"app.py": new})
    found = {f.title: f.baseline for f in classify(repo, sc)}
    assert found == {
        "ruff F401: `typing.List` imported but unused": "pre-existing",
        "ruff F401: `typing.Set` imported but unused": "introduced",
    }


def test_new_copy_of_an_unchanged_flagged_line_is_introduced(repo: Repo) -> None:
    # The old `import os` (line 1) is still there, unchanged: it cannot be the origin of the
    # same text added inside g().
    sc = branch(
        repo, {"app.py": OLD}, {"app.py": OLD + "\n\ndef g():\n    import os\n    return 1\n"}
    )
    found = baselines(classify(repo, sc))
    assert found[("F401", 10)] == "introduced"
    assert ("F401", 1) not in found  # unchanged line: never reported


def test_added_file_findings_are_introduced(repo: Repo) -> None:
    sc = branch(repo, {"app.py": OLD}, {"extra.py": "import json\n"})
    assert baselines(classify(repo, sc)) == {("F401", 1): "introduced"}


def test_renamed_file_compares_against_its_old_path(repo: Repo) -> None:
    sc = branch(
        repo,
        {"old_name.py": OLD + "\n\n# padding so git sees a rename\n" * 3},
        {"new_name.py": NEW + "\n\n# padding so git sees a rename\n" * 3},
        remove=("old_name.py",),
    )
    (change,) = sc.included
    assert (change.status, change.old_path) == ("renamed", "old_name.py")
    assert baselines(classify(repo, sc)) == {("F401", 9): "pre-existing", ("F841", 5): "introduced"}


def test_whole_file_scope_is_left_unclassified(repo: Repo) -> None:
    sc = branch(repo, {"app.py": OLD}, {"app.py": NEW})
    whole = sc.model_copy(update={"old_commit": None})
    found = baseline.classify(whole, RUFF, static_findings(repo, sc), str(repo.path), 60)
    assert {f.baseline for f in found} == {None}


def test_tool_that_cannot_run_at_the_base_leaves_findings_unclassified(repo: Repo) -> None:
    sc = branch(repo, {"app.py": OLD, "ruff.toml": "not toml ["}, {"app.py": NEW, "ruff.toml": ""})
    problems: list[str] = []
    found = classify(repo, sc, problems)
    assert {f.baseline for f in found} == {None}
    (problem,) = problems
    assert problem.startswith("baseline not established for ruff: it could not run")


def test_static_run_classifies_and_says_so(repo: Repo) -> None:
    sc = branch(
        repo,
        {"app.py": OLD, "lib.py": "import re\nX = 1\n"},
        {"app.py": NEW, "lib.py": "import re\nX = 2\n", "extra.py": "import json\n"},
    )
    with git.worktree(repo.path, sc.new_commit) as workdir:
        out = static.run(sc, RUFF, workdir, 60)
    assert out.status == "COMPLETED"
    assert out.notes == (
        "ruff (3 findings: 2 introduced, 1 pre-existing; 1 outside scoped lines not reported)"
    )  # lib.py's unchanged import
    found = {(f.location.path if f.location else None, f.rule): f.baseline for f in out.findings}
    assert found == {
        ("app.py", "F401"): "pre-existing",
        ("app.py", "F841"): "introduced",
        ("extra.py", "F401"): "introduced",
    }


# Lines that move into another file: a.py keeps enough code that git sees no rename.
KEEP = "".join(f"\n\ndef f{n}():\n    return {n}\n" for n in range(8))
TWO = 'def two():\n    return f"two"\n'


def statuses(sc: Scope) -> dict[str, str]:
    return {c.path: c.status for c in sc.included}


def test_line_moved_into_a_new_file_is_pre_existing(repo: Repo) -> None:
    sc = branch(repo, {"a.py": TWO + KEEP}, {"a.py": KEEP.lstrip("\n"), "b.py": TWO})
    assert statuses(sc) == {"a.py": "modified", "b.py": "added"}
    found = classify(repo, sc)
    assert [(f.location.path if f.location else None, f.rule, f.baseline) for f in found] == [
        ("b.py", "F541", "pre-existing")
    ]


def test_same_rule_on_different_text_in_a_new_file_is_introduced(repo: Repo) -> None:
    sc = branch(
        repo,
        {"a.py": TWO + KEEP},
        {"a.py": KEEP.lstrip("\n"), "b.py": TWO + '\n\ndef three():\n    return f"3"\n'},
    )
    assert baselines(classify(repo, sc)) == {("F541", 2): "pre-existing", ("F541", 6): "introduced"}


def test_duplicated_line_is_pre_existing_once(repo: Repo) -> None:
    sc = branch(
        repo,
        {"a.py": TWO + KEEP},
        {"a.py": KEEP.lstrip("\n"), "b.py": TWO + "\n\n" + TWO.replace("two()", "too()")},
    )
    found = classify(repo, sc)
    assert sorted(f.baseline or "" for f in found) == ["introduced", "pre-existing"]


def test_duplicate_kept_in_its_own_file_is_the_pre_existing_one(repo: Repo) -> None:
    # The moved (re-indented) line stays in a.py and a copy lands in b.py: a.py's is the origin.
    moved = KEEP.lstrip("\n") + '\n\nclass C:\n    def two(self):\n        return f"two"\n'
    sc = branch(repo, {"a.py": TWO + KEEP}, {"a.py": moved, "b.py": TWO})
    found = {
        (f.location.path if f.location else None, f.rule): f.baseline for f in classify(repo, sc)
    }
    assert found == {("a.py", "F541"): "pre-existing", ("b.py", "F541"): "introduced"}


def test_unchanged_line_copied_into_a_new_file_is_introduced(repo: Repo) -> None:
    sc = branch(repo, {"a.py": TWO + KEEP}, {"a.py": TWO + KEEP + "\nX = 1\n", "b.py": TWO})
    assert baselines(classify(repo, sc)) == {("F541", 2): "introduced"}


def test_line_from_a_renamed_file_moved_into_a_new_file_is_pre_existing(repo: Repo) -> None:
    sc = branch(
        repo, {"a.py": TWO + KEEP}, {"renamed.py": KEEP.lstrip("\n"), "b.py": TWO}, remove=("a.py",)
    )
    assert statuses(sc) == {"renamed.py": "renamed", "b.py": "added"}
    assert baselines(classify(repo, sc)) == {("F541", 2): "pre-existing"}


def test_line_from_a_deleted_file_is_pre_existing(repo: Repo) -> None:
    sc = branch(repo, {"a.py": TWO + KEEP}, {"b.py": TWO + "\n\nX = 1\n"}, remove=("a.py",))
    assert statuses(sc) == {"a.py": "deleted", "b.py": "added"}
    assert baselines(classify(repo, sc)) == {("F541", 2): "pre-existing"}


def test_untouched_files_at_the_base_are_not_origins(repo: Repo) -> None:
    # other.py has the same problem at the base but the change does not touch it: b.py's copy
    # is new code, and the base run covers only the scope's old paths.
    sc = branch(
        repo, {"a.py": KEEP, "other.py": TWO + KEEP}, {"a.py": KEEP + "\nX = 1\n", "b.py": TWO}
    )
    assert baselines(classify(repo, sc)) == {("F541", 2): "introduced"}


MYPY = Toolchain(
    commands=(Command(kind="typecheck", argv=("mypy",), source="test", exists=True, tool="mypy"),)
)


def test_mypy_at_the_base_runs_as_the_projects_configuration_says(repo: Repo) -> None:
    """mypy checks its configured `files` at both commits (the whole of src/, no file
    arguments): an old error on an edited line is pre-existing, a new one introduced, and a
    changed test file outside `files` is neither checked nor reported."""
    config = '[tool.mypy]\nfiles = ["src"]\n'
    old = 'a: int = "old"\n'
    new = 'import os\n\na: int =  "old"\nb: str = 1\n'  # the old error re-spaced, a new one
    sc = branch(
        repo,
        {"pyproject.toml": config, "src/app.py": old, "tests/t.py": "x = 1\n"},
        {"src/app.py": new, "tests/t.py": 'x: int = "not checked"\n'},
    )
    with git.worktree(repo.path, sc.new_commit) as workdir:
        out = static.run(sc, MYPY, workdir, 120)
    found = {(f.location.path, f.location.line): f.baseline for f in out.findings if f.location}
    assert found == {("src/app.py", 3): "pre-existing", ("src/app.py", 4): "introduced"}
    assert out.notes == (
        "mypy (2 findings: 1 introduced, 1 pre-existing; 1 changed file(s) outside mypy's "
        "files (src, pyproject.toml) not checked)"
    )


def test_nothing_runs_at_the_base_when_no_touched_file_lost_a_line_like_the_finding(
    repo: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The merge base is checked out and linted only for files that could hold a finding's
    origin: here the change only adds lines, so every finding is introduced without a run."""
    sc = branch(repo, {"a.py": OLD}, {"a.py": OLD + "\n\ndef other():\n    y = 2\n"})
    found = static_findings(repo, sc)
    assert [f.rule for f in found] == ["F841"]

    def no_checkout(*args: object) -> object:
        raise AssertionError("the merge base was checked out")

    monkeypatch.setattr(git, "worktree", no_checkout)
    out = baseline.classify(sc, RUFF, found, str(repo.path), 60)
    assert [f.baseline for f in out] == ["introduced"]


def test_only_files_that_lost_a_like_line_are_linted_at_the_base(
    repo: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two touched files; only b.py lost a line reading like the finding's: ruff at the base is
    given b.py alone, and the finding moved from there stays pre-existing."""
    moved = "import json\n"
    sc = branch(
        repo,
        {"a.py": OLD, "b.py": moved + "X = 1\n"},
        {"a.py": OLD.replace("sys.argv", "list(sys.argv)"), "b.py": "X = 1\n", "c.py": moved},
    )
    found = static_findings(repo, sc)
    seen: list[list[str]] = []
    real = runner._run

    def spy(spec: Any, files: Any, *args: Any, **kwargs: Any) -> runner.ToolRun:
        seen.append(sorted(files))
        return real(spec, files, *args, **kwargs)

    monkeypatch.setattr(runner, "_run", spy)
    out = baseline.classify(sc, RUFF, found, str(repo.path), 60)
    assert seen == [["b.py"]]
    assert baselines(out)[("F401", 1)] == "pre-existing"


def test_the_changed_files_are_read_in_one_git_process_per_commit(
    repo: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Classifying findings on five changed files reads the new commit's files in one
    ``cat-file --batch`` (and the base's in another), not one process per file."""
    files = {f"mod{n}.py": OLD for n in range(5)}
    sc = branch(repo, files, {path: NEW for path in files})
    found = static_findings(repo, sc)
    reads: list[tuple[str, ...]] = []
    real = git.core.run_git

    def counted(where: Any, *args: str, **kwargs: Any) -> Any:
        if args[:1] == ("cat-file",):
            reads.append(args)
        return real(where, *args, **kwargs)

    monkeypatch.setattr(git.core, "run_git", counted)
    monkeypatch.setattr(git.tree, "run_git", counted)
    out = baseline.classify(sc, RUFF, found, str(repo.path), 60)
    assert {b for b in baselines(out).values()} == {"introduced", "pre-existing"}
    # One batch for each commit: the new one's changed files, the base's candidates.
    assert reads == [("cat-file", "--batch")] * 2, reads


def test_the_change_is_aligned_by_one_git_diff_however_many_findings_and_files(
    repo: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Import lines edited in place in two files, each keeping its old unused name and adding a
    new one: git's diff of the two commits is asked once for both files, not once per finding
    or per file, and its hunks tell each old name (pre-existing) from each added one
    (introduced)."""
    old = "from typing import List\nfrom os import path\nfrom json import dumps\n"
    new = "from typing import List, Dict\nfrom os import path, sep\nfrom json import dumps, loads\n"
    sc = branch(repo, {"app.py": old, "lib.py": old}, {"app.py": new, "lib.py": new})
    found = static_findings(repo, sc)
    aligned: list[tuple[str, ...]] = []
    real = git.core.run_git

    def counted(where: Any, *args: str, **kwargs: Any) -> Any:
        aligned.append(args)
        return real(where, *args, **kwargs)

    monkeypatch.setattr(git.diff, "run_git", counted)
    out = baseline.classify(sc, RUFF, found, str(repo.path), 60)
    by_name = sorted(
        (f.location.path if f.location else "", f.title.split("`")[1], f.baseline) for f in out
    )
    assert by_name == [
        (path, name, verdict)
        for path in ("app.py", "lib.py")
        for name, verdict in sorted(
            {
                "json.dumps": "pre-existing",
                "json.loads": "introduced",
                "os.path": "pre-existing",
                "os.sep": "introduced",
                "typing.Dict": "introduced",
                "typing.List": "pre-existing",
            }.items()
        )
    ]
    assert [a[:3] for a in aligned] == [("diff", "-U0", "--text")], aligned
