"""The repository a run names is parsed once, where the run is built, and carried as a typed value:
workers never re-guess whether a string is a URL (the answer depends on the host's files)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import make_repo

from verify_dag import repos
from verify_dag.models import RunState, VerifyRequest
from verify_dag.models.source import RepoSource, parse_source


@pytest.mark.parametrize(
    "text",
    [
        "https://git.example.com/team/app.git",
        "ssh://git@example.com/a.git",
        "git@example.com:team/a.git",
        "file:///srv/repos/a",
    ],
)
def test_urls_are_remote_as_written(text: str) -> None:
    assert parse_source(text) == RepoSource(location=text, remote=True)


def test_paths_become_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert parse_source("sub/../app") == RepoSource(location=str(tmp_path / "app"))
    fleet_dir = tmp_path / "fleet"
    assert parse_source("../repo", relative_to=fleet_dir).location == str(tmp_path / "repo")


def test_an_existing_host_colon_path_stays_a_path(tmp_path: Path) -> None:
    # git's rule: "host:path" is scp-like unless such a path exists where it is read.
    (tmp_path / "box:repo").mkdir()
    assert parse_source("box:repo", relative_to=tmp_path) == RepoSource(
        location=str(tmp_path / "box:repo")
    )
    assert parse_source("box:repo", relative_to=tmp_path / "elsewhere").remote


def test_the_decision_travels_and_a_worker_localizes_without_re_guessing(tmp_path: Path) -> None:
    work = make_repo(tmp_path / "work")
    work.write("a.py", "x = 1\n")
    work.commit()
    url = work.path.as_uri()
    request = VerifyRequest(source=parse_source(url), scope="all")
    shipped = json.loads(json.dumps(RunState(run_id="r", request=request).model_dump(mode="json")))
    assert shipped["request"]["source"] == {"location": url, "remote": True}

    state = RunState.model_validate(shipped)
    mirrors = tmp_path / "mirrors"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(repos.MIRRORS_ENV, str(mirrors))
        local = repos.localize(state)
    # The task reads its own mirror; what the run names is untouched.
    assert Path(local.request.repo).parent == mirrors
    assert local.request.source == request.source


def test_a_stored_request_without_a_source_is_parsed_by_the_same_rule(tmp_path: Path) -> None:
    old = {"repo": str(tmp_path), "scope": "all"}
    got = VerifyRequest.model_validate(old)
    assert got.source == RepoSource(location=str(tmp_path)) and got.repo == str(tmp_path)
    assert VerifyRequest.model_validate({"repo": "git@example.com:a.git"}).source.remote


def test_credentials_are_refused_on_the_parsed_value() -> None:
    from verify_dag.errors import UsageError

    with pytest.raises(UsageError, match="carries a token"):
        repos.refuse_credentials(
            parse_source("https://ghp_abcdefghijklmnopqrstuvwxyz0123456789@x.io/a.git")
        )
    repos.refuse_credentials(RepoSource(location="/srv/ghp_abcdefghijklmnopqrstuvwxyz0123456789"))
