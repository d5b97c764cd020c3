"""``verify-dag config``: what a run would use and where each setting came from."""

from __future__ import annotations

import os
import re
from pathlib import Path

from conftest import Repo, calc_base, run_cli


def test_config_names_each_setting_and_its_source(repo: Repo, tmp_path: Path) -> None:
    calc_base(repo)
    pyproject = (repo.path / "pyproject.toml").read_text(encoding="utf-8")
    repo.write("pyproject.toml", pyproject + '\n[tool.verify-dag]\nfail-on = 3\nmodel = "x"\n')
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("VERIFY_DAG_", "CELERY_"))},
        "VERIFY_DAG_BACKEND": "claude",
        "VERIFY_DAG_MODEL_QA": "haiku",
        "VERIFY_DAG_STORE": str(tmp_path / "store"),
        "VERIFY_DAG_BROKER_URL": "redis://:s3cret-pw@127.0.0.1:6399/0",
    }
    proc = run_cli("config", str(repo.path), env=env)
    assert proc.returncode == 0, proc.stderr
    lines = [" ".join(line.split()) for line in proc.stdout.splitlines()]
    table = f"{repo.path / 'pyproject.toml'} [tool.verify-dag]"
    assert f"fail-on 3 {table}" in lines and "depth light default" in lines
    assert "Broker: redis://:***@127.0.0.1:6399/0 (VERIFY_DAG_BROKER_URL)" in lines
    assert "s3cret-pw" not in proc.stdout
    assert f"Report store: {tmp_path / 'store'} (environment VERIFY_DAG_STORE)" in lines
    (qa,) = [x for x in lines if x.startswith("qa ")]
    assert qa == (
        "qa claude model=haiku effort=- (backend: environment VERIFY_DAG_BACKEND; model: "
        "environment VERIFY_DAG_MODEL_QA; effort: default for the general tier)"
    )
    # The repository's model is the user's to choose, never the repository's: noted, dropped.
    assert any(x.startswith("note: ") and "ignored `model`" in x for x in lines)
    (ruff,) = [x for x in lines if x.startswith("ruff ruff ")]
    assert ruff.endswith("-m ruff")


def test_config_shows_a_model_apis_address_and_key_source_never_the_key(
    repo: Repo, tmp_path: Path
) -> None:
    calc_base(repo)
    key_file = tmp_path / "openai.key"
    key_file.write_text("sk-proj-secret-0123456789abcdef\n")
    user = tmp_path / "config.toml"
    user.write_text(f'api-key-file = "{key_file}"\nretries = 5\n')
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("VERIFY_DAG_", "OPENAI_"))},
        "VERIFY_DAG_CONFIG": str(user),
        "VERIFY_DAG_BACKEND": "openai",
        "VERIFY_DAG_MODEL_REVIEWER": "qwen2.5-coder",
        "VERIFY_DAG_BASE_URL": "http://ollama:s3cret@127.0.0.1:11434/v1",
        "VERIFY_DAG_REVIEW_RATE_LIMIT": "30/m",
    }
    proc = run_cli("config", str(repo.path), env=env)
    assert proc.returncode == 0, proc.stderr
    lines = [" ".join(line.split()) for line in proc.stdout.splitlines()]
    at = lines.index(
        "reviewer openai model=qwen2.5-coder effort=- (backend: environment VERIFY_DAG_BACKEND; "
        "model: environment VERIFY_DAG_MODEL_REVIEWER; effort: default for the capable tier)"
    )
    assert lines[at + 1] == (
        "url=http://ollama:***@127.0.0.1:11434/v1 (environment VERIFY_DAG_BASE_URL); key: file "
        f"{key_file} ({user}); max-output-tokens=8192 retries=5 timeout=600s"
    )
    # The openai kind names no model of its own: a skill without one is NOT_RUN, and says why.
    (qa,) = [x for x in lines if x.startswith("qa ")]
    assert qa.startswith("qa none (the openai backend needs a model for qa: set VERIFY_DAG_MODEL")
    rate = "review tasks' rate limit per worker: 30/m (environment VERIFY_DAG_REVIEW_RATE_LIMIT)"
    assert rate in lines
    assert "sk-proj-secret" not in proc.stdout and "s3cret" not in proc.stdout


def test_config_says_what_a_run_here_would_do(repo: Repo) -> None:
    """The linters, type checker and test command a run would use, each with the declaration
    it came from, who builds the suite's environment, and the depth's skills; a broken tox.ini
    in the repository does not become tox's version."""
    repo.write(
        "pyproject.toml",
        "[tool.ruff]\nline-length = 100\n\n[tool.mypy]\nfiles = ['src']\n\n"
        "[tool.pytest.ini_options]\ntestpaths = ['tests']\n",
    )
    repo.write("tox.ini", "[tox\nenvlist = py\n")  # does not parse
    repo.write("src/calc.py", "def add(a: int, b: int) -> int:\n    return a + b\n")
    repo.write("tests/test_calc.py", "def test_one():\n    pass\n")
    repo.commit()
    proc = run_cli("config", "--store", str(repo.path.parent / "store"), cwd=repo.path)
    assert proc.returncode == 0, proc.stderr
    section = proc.stdout.split("What a run here would do (depth light, read from the work tree):")
    assert len(section) == 2, proc.stdout
    lines = section[1].split("\n\n")[0].splitlines()
    kinds = {line.split()[0] for line in lines if line.strip()}
    assert {"lint", "typecheck", "test", "skills"} <= kinds, lines
    assert any(line.split()[:2] == ["lint", "ruff"] and "[tool.ruff]" in line for line in lines)
    assert any(line.split()[:2] == ["typecheck", "mypy"] for line in lines), lines
    assert any("built by tox" in line for line in lines), lines
    (skills_line,) = [line for line in lines if line.split()[:1] == ["skills"]]
    assert "static-analysis, tester" in skills_line and "qa" not in skills_line
    (tox,) = [line for line in proc.stdout.splitlines() if line.split()[:1] == ["tox"]]
    assert re.match(r"\s*tox\s+\d+\.\d+", tox), tox
