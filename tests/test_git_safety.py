"""No git call of verify-dag runs a program the repository configures.

Every test plants a program (an fsmonitor hook, a filter, a hook, a textconv, an external diff,
a gpg program) that appends its name to a marker file, then asserts the marker stays absent
while verify-dag's snapshots, checkouts, diffs and scope detection still give the right answers.
"""

from __future__ import annotations

import http.server
import subprocess
import threading
from pathlib import Path

import pytest
from conftest import Repo

from verify_dag import git
from verify_dag.git.parse import config_files, parse_config_z, program_overrides
from verify_dag.models import VerifyRequest
from verify_dag.models.source import parse_source
from verify_dag.phases import scope as phase

BODY = "".join(f"line {i}\n" for i in range(1, 6))


def _marker_script(tmp_path: Path, name: str, body: str = "") -> tuple[Path, Path]:
    """An executable ``name`` that records its run in a marker file, then runs ``body``."""
    marker = tmp_path / "ran"
    script = tmp_path / "bin" / name
    script.parent.mkdir(exist_ok=True)
    script.write_text(f'#!/bin/sh\necho "{name} $*" >> "{marker}"\n{body}\n', encoding="utf-8")
    script.chmod(0o755)
    return script, marker


def _ran(marker: Path) -> str:
    return marker.read_text(encoding="utf-8") if marker.exists() else ""


def _user_files(repo: Repo) -> tuple[bytes, bytes]:
    return (repo.path / ".git" / "config").read_bytes(), (repo.path / ".git" / "index").read_bytes()


def _dirty(repo: Repo) -> None:
    """A committed base, then a staged edit, an unstaged edit and an untracked file."""
    repo.write("a.py", BODY)
    repo.write("b.py", BODY)
    repo.commit("base")
    repo.write("a.py", BODY + "staged\n")
    repo.git("add", "a.py")
    repo.write("b.py", BODY + "unstaged\n")
    repo.write("new.py", "new\n")


def _snapshots(repo: Repo) -> tuple[str, str]:
    index = git.snapshot_index(repo.path)
    return index, git.snapshot_worktree(repo.path, index)


def test_fsmonitor_hook_is_not_run_by_snapshots(repo: Repo, tmp_path: Path) -> None:
    _dirty(repo)
    hook, marker = _marker_script(tmp_path, "fsmonitor", "exit 1")
    repo.git("config", "core.fsmonitor", str(hook))
    before = _user_files(repo)
    index, work = _snapshots(repo)
    assert _ran(marker) == ""
    assert git.read_file(repo.path, index, "a.py") == BODY + "staged\n"
    assert git.read_file(repo.path, work, "b.py") == BODY + "unstaged\n"
    assert git.read_file(repo.path, work, "new.py") == "new\n"
    assert _user_files(repo) == before


def test_fsmonitor_hook_is_not_run_by_scope_detection(repo: Repo, tmp_path: Path) -> None:
    _dirty(repo)
    hook, marker = _marker_script(tmp_path, "fsmonitor", "exit 1")
    repo.git("config", "core.fsmonitor", str(hook))
    before = _user_files(repo)
    # Auto-detection snapshots the index and the work tree to see which of them changed.
    scope = phase.run(phase.validate_request(VerifyRequest(source=parse_source(str(repo.path)))))
    assert _ran(marker) == ""
    assert (scope.mode, [f.path for f in scope.included]) == ("staged", ["a.py"])
    assert _user_files(repo) == before


def test_clean_and_process_filters_are_not_run_and_real_content_is_recorded(
    repo: Repo, tmp_path: Path
) -> None:
    repo.write(".gitattributes", "*.txt filter=upper\n*.dat filter=proc\n")
    repo.write("a.txt", "plain\n")
    repo.write("b.dat", "data\n")
    repo.commit("attributes")
    clean, marker = _marker_script(tmp_path, "clean", "tr a-z A-Z")
    proc, _ = _marker_script(tmp_path, "process", "exit 1")
    repo.git("config", "filter.upper.clean", str(clean))
    repo.git("config", "filter.upper.smudge", str(clean))
    repo.git("config", "filter.upper.required", "true")
    repo.git("config", "filter.proc.process", str(proc))
    repo.git("config", "filter.proc.required", "true")
    repo.write("a.txt", "edited\n")
    repo.write("b.dat", "more data\n")
    repo.write("c.txt", "untracked\n")
    before = _user_files(repo)
    index, work = _snapshots(repo)
    assert _ran(marker) == ""
    assert work != index
    assert git.read_file(repo.path, work, "a.txt") == "edited\n"
    assert git.read_file(repo.path, work, "b.dat") == "more data\n"
    assert git.read_file(repo.path, work, "c.txt") == "untracked\n"
    # A checkout of the snapshot runs no smudge either, and holds the same bytes.
    with git.worktree(repo.path, work) as wt:
        assert (wt / "a.txt").read_text(encoding="utf-8") == "edited\n"
        assert (wt / "b.dat").read_text(encoding="utf-8") == "more data\n"
    assert _ran(marker) == ""
    assert _user_files(repo) == before


def test_binary_attributes_still_apply_with_filters_overridden(repo: Repo, tmp_path: Path) -> None:
    # Only the programs are switched off: attributes that are data (-diff, binary) still count.
    repo.write(".gitattributes", "*.gen -diff\n*.txt filter=upper diff=upper\n")
    repo.write("x.gen", "text\n")
    repo.write("a.txt", "text\n")
    old = repo.commit("base")
    clean, marker = _marker_script(tmp_path, "clean", "cat")
    repo.git("config", "filter.upper.clean", str(clean))
    repo.git("config", "diff.upper.binary", "true")
    repo.write("x.gen", "more text\n")
    repo.write("a.txt", "more text\n")
    work = git.snapshot_worktree(repo.path, old)
    assert git.binary_paths(repo.path, old, work) == {"x.gen", "a.txt"}
    assert _ran(marker) == ""


def _hooks(tmp_path: Path, hooks_dir: Path) -> Path:
    names = (
        "post-index-change",
        "post-checkout",
        "reference-transaction",
        "post-commit",
        "pre-commit",
        "pre-auto-gc",
        "post-rewrite",
    )
    marker = tmp_path / "ran"
    hooks_dir.mkdir(parents=True, exist_ok=True)
    for name in names:
        script, marker = _marker_script(tmp_path, name)
        (hooks_dir / name).write_text(script.read_text(encoding="utf-8"), encoding="utf-8")
        (hooks_dir / name).chmod(0o755)
    return marker


def test_repository_hooks_are_not_run_by_snapshots_or_checkouts(repo: Repo, tmp_path: Path) -> None:
    _dirty(repo)
    marker = _hooks(tmp_path, repo.path / ".git" / "hooks")
    before = _user_files(repo)
    _index, work = _snapshots(repo)
    with git.worktree(repo.path, work) as wt:
        assert (wt / "new.py").read_text(encoding="utf-8") == "new\n"
    assert _ran(marker) == ""
    assert _user_files(repo) == before


def test_template_hooks_of_throwaway_clones_are_not_run(repo: Repo, tmp_path: Path) -> None:
    # A throwaway checkout is a fresh clone: its hooks come from the template directory, and
    # clone itself writes refs (reference-transaction) before the checkout (post-checkout).
    repo.write("a.py", BODY)
    sha = repo.commit("base")
    templates = tmp_path / "templates"
    marker = _hooks(tmp_path, templates / "hooks")
    subprocess.run(["git", "config", "--global", "init.templateDir", str(templates)], check=True)
    with git.worktree(repo.path, sha) as wt:
        assert (wt / "a.py").read_text(encoding="utf-8") == BODY
    bundle = tmp_path / "run.bundle"
    git.create_bundle(repo.path, bundle, {"pin": sha})
    assert bundle.is_file()
    assert _ran(marker) == ""


def test_global_hooks_path_is_not_used(repo: Repo, tmp_path: Path) -> None:
    _dirty(repo)
    marker = _hooks(tmp_path, tmp_path / "global-hooks")
    subprocess.run(
        ["git", "config", "--global", "core.hooksPath", str(tmp_path / "global-hooks")], check=True
    )
    _index, work = _snapshots(repo)
    with git.worktree(repo.path, work):
        pass
    assert _ran(marker) == ""


@pytest.fixture
def textconv_repo(repo: Repo, tmp_path: Path) -> tuple[Repo, str, str, Path]:
    repo.write(".gitattributes", "*.txt diff=conv\n")
    repo.write("a.txt", BODY)
    old = repo.commit("base")
    repo.write("a.txt", BODY.replace("line 3\n", "LINE 3\n"))
    new = repo.commit("edit")
    conv, marker = _marker_script(tmp_path, "textconv", 'printf "converted\\n"')
    ext, _ = _marker_script(tmp_path, "external", "exit 0")
    cmd, _ = _marker_script(tmp_path, "command", "exit 0")
    repo.git("config", "diff.conv.textconv", str(conv))
    repo.git("config", "diff.conv.command", str(cmd))
    repo.git("config", "diff.external", str(ext))
    return repo, old, new, marker


def test_textconv_and_external_diffs_are_not_run(
    textconv_repo: tuple[Repo, str, str, Path],
) -> None:
    repo, old, new, marker = textconv_repo
    patch = git.unified_diff(repo.path, old, new)
    assert "-line 3\n+LINE 3\n" in patch
    assert git.line_ranges(repo.path, old, new) == {"a.txt": [(3, 3)]}
    assert git.hunk_pairs(repo.path, old, new, "a.txt") == [(3, 1, 3, 1)]
    assert git.binary_paths(repo.path, old, new) == set()
    assert "a.txt" in git.diff_stat(repo.path, old, new)
    assert _ran(marker) == ""


def test_gpg_signing_is_not_used_for_snapshot_commits(repo: Repo, tmp_path: Path) -> None:
    _dirty(repo)
    gpg, marker = _marker_script(tmp_path, "gpg", "exit 1")
    repo.git("config", "commit.gpgSign", "true")
    repo.git("config", "gpg.program", str(gpg))
    index, work = _snapshots(repo)
    assert _ran(marker) == ""
    assert "gpgsig" not in repo.git("cat-file", "commit", work)
    assert git.read_file(repo.path, index, "a.py") == BODY + "staged\n"


def test_signatures_are_not_verified_when_reading_history(repo: Repo, tmp_path: Path) -> None:
    # A fake gpg that "signs": log.showSignature would make every `git log` run it to verify.
    # It reads the payload first: exiting early would fail git's write to it (SIGPIPE).
    sign = (
        'cat >/dev/null\nprintf "\\n[GNUPG:] SIG_CREATED \\n" >&2\n'
        'printf -- "-----BEGIN PGP SIGNATURE-----\\n\\nAA==\\n-----END PGP SIGNATURE-----\\n"'
    )
    gpg, marker = _marker_script(tmp_path, "gpg", sign)
    repo.git("config", "gpg.program", str(gpg))
    repo.write("a.py", BODY)
    repo.git("add", "a.py")
    repo.git("commit", "-q", "-S", "-m", "signed")
    marker.unlink()
    repo.git("config", "log.showSignature", "true")
    assert git.last_change(repo.path, "HEAD", "a.py") == repo.head()
    assert _ran(marker) == ""


class _AuthRequired(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(401)
        self.send_header("WWW-Authenticate", 'Basic realm="x"')
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass  # keep request lines out of the test output


def test_repository_credential_helper_and_askpass_are_not_run(tmp_path: Path, repo: Repo) -> None:
    helper, marker = _marker_script(tmp_path, "helper", "exit 0")
    user_helper, _ = _marker_script(tmp_path, "user-helper", "exit 0")
    repo.write("a.py", BODY)
    repo.commit("base")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _AuthRequired)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        repo.git("remote", "add", "origin", f"http://127.0.0.1:{server.server_port}/r.git")
        repo.git("config", "credential.helper", f"!{helper}")
        repo.git("config", "core.askPass", str(helper))
        # The user's own helper (how workers reach repositories) is still asked.
        subprocess.run(
            ["git", "config", "--global", "credential.helper", f"!{user_helper}"], check=True
        )
        ok, _reason = git.fetch(repo.path, "origin", timeout=20)
    finally:
        server.shutdown()
        server.server_close()
    assert not ok
    assert _ran(marker).split() == ["user-helper", "get"]


def test_config_overrides_are_read_once_per_repository(
    repo: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _dirty(repo)
    reads: list[str] = []
    real = git.core._read_config

    def counting(where: str) -> object:
        reads.append(where)
        return real(where)

    monkeypatch.setattr(git.core, "_read_config", counting)
    git.core._OVERRIDES.clear()
    _snapshots(repo)
    _snapshots(repo)
    assert len(reads) == 1
    # A driver added later is overridden too: the cache follows the config file.
    clean, marker = _marker_script(tmp_path, "clean", "tr a-z A-Z")
    repo.write(".gitattributes", "*.py filter=late\n")
    repo.git("config", "filter.late.clean", str(clean))
    repo.git("config", "filter.late.required", "true")
    _index, work = _snapshots(repo)
    assert len(reads) == 2
    assert _ran(marker) == ""
    assert git.read_file(repo.path, work, "b.py") == BODY + "unstaged\n"


def test_program_overrides_from_config_listing() -> None:
    out = (
        "local\0file:.git/config\0filter.a.b.clean\nrun-me\0"
        "global\0file:/h/.gitconfig\0filter.lfs.process\ngit-lfs filter-process\0"
        "local\0file:.git/config\0diff.external\nx\0"
        "local\0file:.git/config\0diff.renames\ntrue\0"
        "global\0file:/h/.gitconfig\0credential.https://h.example.helper\nstore\0"
        "local\0file:.git/config\0credential.helper\n!evil\0"
        "local\0file:.git/config\0merge.m.driver\0"
    )
    entries = parse_config_z(out)
    assert config_files(entries) == [".git/config", "/h/.gitconfig"]
    assert program_overrides(entries) == [
        ("filter.a.b.clean", ""),
        ("filter.a.b.smudge", ""),
        ("filter.a.b.process", ""),
        ("filter.a.b.required", "false"),
        ("filter.lfs.clean", ""),
        ("filter.lfs.smudge", ""),
        ("filter.lfs.process", ""),
        ("filter.lfs.required", "false"),
        ("diff.external", ""),
        ("merge.m.driver", ""),
        # The repository's helper is dropped, the user's own is put back after the reset.
        ("credential.helper", ""),
        ("credential.https://h.example.helper", "store"),
    ]
