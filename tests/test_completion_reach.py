"""What a completion criterion sees (docs/completion.md, "What the criterion sees"): the
repository it names, where the person's command means something, and never the worker's
secrets; under both sandbox launchers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import make_repo

from verify_dag.cli import completion as cli_completion
from verify_dag.completion import reach

CANARY = "canary-credential-7d1e"
SUITE = "".join(f"def test_{n}():\n    pass\n\n\n" for n in ("one", "two", "three"))


def run_criterion(tmp_path: Path, command: str) -> dict[str, Any]:
    d = tmp_path / "runs" / "r1"
    d.mkdir(parents=True)
    (d / "parsed_scope.json").write_text(json.dumps({"completion": command}), encoding="utf-8")
    cli_completion.verify("r1", runs_dir=str(d.parent), timeout=20)
    doc: dict[str, Any] = json.loads((d / "execution_result.json").read_text(encoding="utf-8"))
    return doc


def project(path: Path) -> Path:
    repo = make_repo(path)
    repo.write("tests/test_three.py", SUITE)
    repo.commit("three tests")
    return path


@pytest.mark.usefixtures("sandbox_mode")
def test_the_criterion_runs_in_the_repository_it_names(tmp_path: Path) -> None:
    """001 Step 2: the sub-agent "runs subprocess.run(["bash", "-c", completion], timeout=30,
    capture_output=True, text=True)": the person's line, as the person would run it. A line
    that prints `3 passed` outside prints it in the run too, though its repository lies in /tmp,
    which the sandbox hides."""
    repo = project(tmp_path / "x" / "r1")
    line = f"cd {repo} && {sys.executable} -m pytest -q -p no:cacheprovider"
    outside = subprocess.run(["bash", "-c", line], capture_output=True, text=True, check=False)
    assert outside.returncode == 0 and "3 passed" in outside.stdout
    ex = run_criterion(tmp_path, line)
    assert ex["exit_code"] == 0, ex["stderr"]
    assert "3 passed" in ex["stdout"]
    assert ex["named_paths"][0] == {
        "path": str(repo),
        "access": "read-write",
        "note": f"in the git work tree {repo} (its .git read-only)",
    }
    verdict = json.loads((tmp_path / "runs" / "r1" / "verify_result.json").read_text())
    assert verdict["verdict"] == "pass"


@pytest.mark.usefixtures("sandbox_mode")
def test_the_work_tree_is_writable_and_its_git_directory_is_not(tmp_path: Path) -> None:
    """Issue: "run it where the person's command means something": a build writes its outputs in the
    repository, as it would outside; but a hook written into .git would run, unsandboxed, at
    the person's next git command, so .git stays read-only."""
    repo = project(tmp_path / "x" / "r1")
    ex = run_criterion(
        tmp_path,
        f"cd {repo}/tests && touch ../built.txt && (echo pwned > ../.git/hooks/post-checkout"
        " || echo refused)",
    )
    assert ex["exit_code"] == 0, ex["stderr"]
    assert (repo / "built.txt").is_file()
    assert "refused" in ex["stdout"]
    assert not (repo / ".git" / "hooks" / "post-checkout").exists()


@pytest.mark.usefixtures("sandbox_mode")
def test_tilde_names_the_home_and_its_secrets_stay_hidden(tmp_path: Path) -> None:
    """The documented example, `cd ~/src/shop && python3 -m pytest -q tests/test_cart.py`, runs
    in ~/src/shop; the worker's secrets (~/.ssh, ~/.netrc, the user config) are never seen,
    even when the line names them."""
    home = Path(os.environ["HOME"])
    shop = project(home / "src" / "shop")
    (home / ".ssh").mkdir()
    (home / ".ssh" / "id_ed25519").write_text(CANARY)
    (home / ".netrc").write_text(f"machine example.org password {CANARY}\n")
    config = home / ".config" / "verify-dag" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(f'api_key = "{CANARY}"\n')
    ex = run_criterion(
        tmp_path,
        f"cd ~/src/shop && {sys.executable} -m pytest -q -p no:cacheprovider tests; "
        f"cat ~/.ssh/id_ed25519 ~/.netrc {config}; ls -a ~ ~/src; pwd",
    )
    assert "3 passed" in ex["stdout"], ex["stderr"]
    assert ex["stdout"].rstrip().endswith(str(shop))
    assert CANARY not in ex["stdout"] + ex["stderr"]
    listing = ex["stdout"]
    assert ".ssh" not in listing and ".netrc" not in listing and "shop" in listing
    access = {n["path"]: n["access"] for n in ex["named_paths"]}
    assert access == {
        str(shop): "read-write",
        str(home / ".ssh" / "id_ed25519"): "withheld",
        str(home / ".netrc"): "withheld",
        str(config): "withheld",
        str(home): "withheld",
        str(home / "src"): "read-write",
        sys.executable: "read-only",
    }
    report = (tmp_path / "runs" / "r1" / "VERIFY_REPORT.md").read_text()
    assert f"`{home / '.netrc'}`: withheld (a hidden entry of a home" in report


def test_what_the_line_names(tmp_path: Path) -> None:
    """Words are read as bash splits them; `~`, `~user` and `$HOME` expand; a value after `=`
    counts; relative paths and other variables are not followed."""
    home = tmp_path / "h"
    line = (
        'cd ~/src/shop&&pytest --rootdir=/srv/x "/a b" $HOME/c ${HOME}/d ~root/e rel $X/y;'
        "echo >/tmp/out"
    )
    assert reach.paths_named(line, home) == [
        f"{home}/src/shop",
        "/srv/x",
        "/a b",
        f"{home}/c",
        f"{home}/d",
        "/root/e",
        "/tmp/out",
    ]


def test_a_system_directory_never_becomes_writable(tmp_path: Path) -> None:
    """Only a work tree, or a directory in a home or a scratch directory, is made writable: a
    directory the sandbox already shows read-only stays so, and a place that holds a home,
    /tmp itself or the user configuration is withheld."""
    got = reach.reach(f"cd /usr/lib && ls / /tmp {os.environ['HOME']}")
    access = {n.path: n.access for n in got.named}
    assert access == {
        "/usr/lib": "read-only",
        "/": "read-only",
        "/tmp": "withheld",
        os.environ["HOME"]: "withheld",
    }
    assert got.policy.writable == ()
