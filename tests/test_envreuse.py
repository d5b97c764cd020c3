"""A cached tox env is used without running tox again only while it holds what a build would
make: the same declarations (its key) and the same commit, in an env that does not point at the
checkout it was built from. Each run verifies in a checkout of its own, so the commit, not the
path, is what an env without an editable install holds."""

from __future__ import annotations

import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import Repo, make_repo

from verify_dag.files import file_lock
from verify_dag.phases.tester.env import base, tox
from verify_dag.phases.tester.env.toxchoice import Choice, ToxEnv

TOX_INI = "[tox]\nenv_list = py311\n\n[testenv]\ndeps = pytest\ncommands = pytest\n"


class FakeTox:
    """tox's part of a build, counted: the env a build makes, with or without an editable
    install of the checkout (a ``.pth`` naming its path)."""

    def __init__(self, editable: bool = False) -> None:
        self.built: list[Path] = []
        self.editable = editable

    def chosen(self, workdir: Path, tox_dir: Path, deadline: float, want: str | None) -> Choice:
        return Choice(ToxEnv("py311", "pytest", "py311"))

    def build(
        self, workdir: Path, cache: Path, tox_dir: Path, choice: Choice, deadline: float
    ) -> base.Env:
        self.built.append(workdir)
        bin_dir = tox_dir / "py311" / "bin"
        site = tox_dir / "py311" / "lib" / "python3.11" / "site-packages"
        bin_dir.mkdir(parents=True, exist_ok=True)
        site.mkdir(parents=True, exist_ok=True)
        (bin_dir / "python").write_text("", encoding="utf-8")
        pth = f"{workdir.resolve()}/src\n" if self.editable else "import coverage\n"
        (site / "project.pth").write_text(pth, encoding="utf-8")
        return base.Env(python=bin_dir / "python", bin_dir=bin_dir, path_dirs=(bin_dir,))


@pytest.fixture
def project(tmp_path: Path) -> Repo:
    repo = make_repo(tmp_path / "origin")
    repo.write("tox.ini", TOX_INI)
    repo.write("src/p.py", "X = 1\n")
    repo.commit("first")
    return repo


def checkout(origin: Repo, where: Path) -> Path:
    """A checkout of its own of the origin's head, as each run makes."""
    subprocess.run(["git", "clone", "-q", str(origin.path), str(where)], check=True)
    return where


def use(fake: FakeTox, workdir: Path, cache: Path, monkeypatch: pytest.MonkeyPatch) -> base.Env:
    monkeypatch.setattr(tox, "chosen", fake.chosen)
    monkeypatch.setattr(tox, "build", fake.build)
    with tox.runtime(workdir, cache) as env:
        return env


def test_the_same_commit_in_another_checkout_runs_no_build(
    project: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake, cache = FakeTox(), tmp_path / "cache"
    first = use(fake, checkout(project, tmp_path / "run1"), cache, monkeypatch)
    second = use(fake, checkout(project, tmp_path / "run2"), cache, monkeypatch)
    assert fake.built == [tmp_path / "run1"]
    assert first.error is None and second.python == first.python


def test_a_changed_tox_ini_is_provisioned_again(
    project: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake, cache = FakeTox(), tmp_path / "cache"
    first = use(fake, checkout(project, tmp_path / "run1"), cache, monkeypatch)
    project.write("tox.ini", TOX_INI.replace("deps = pytest", "deps = pytest\n    attrs"))
    project.commit("a dependency more")
    second = use(fake, checkout(project, tmp_path / "run2"), cache, monkeypatch)
    assert fake.built == [tmp_path / "run1", tmp_path / "run2"]
    assert second.python != first.python  # another declaration: an env of its own


def test_another_commit_with_the_same_declarations_is_built_again(
    project: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The env holds the project as built from its commit: a change to the code needs the
    package built and installed again, whatever the declarations say."""
    fake, cache = FakeTox(), tmp_path / "cache"
    first = use(fake, checkout(project, tmp_path / "run1"), cache, monkeypatch)
    project.write("src/p.py", "X = 2\n")
    project.commit("code only")
    second = use(fake, checkout(project, tmp_path / "run2"), cache, monkeypatch)
    assert fake.built == [tmp_path / "run1", tmp_path / "run2"]
    assert second.python == first.python  # the same key: rebuilt in place


def test_an_env_that_points_at_its_checkout_serves_no_other(
    project: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An editable install imports from the checkout it was made from, which goes with its run:
    another checkout of the same commit gets a build of its own."""
    fake, cache = FakeTox(editable=True), tmp_path / "cache"
    use(fake, checkout(project, tmp_path / "run1"), cache, monkeypatch)
    use(fake, checkout(project, tmp_path / "run2"), cache, monkeypatch)
    assert fake.built == [tmp_path / "run1", tmp_path / "run2"]


def test_an_env_written_after_its_build_is_not_reused_by_another_checkout(
    project: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake, cache = FakeTox(), tmp_path / "cache"
    env = use(fake, checkout(project, tmp_path / "run1"), cache, monkeypatch)
    assert env.bin_dir is not None
    (env.bin_dir / "planted").write_text("", encoding="utf-8")
    again = use(fake, checkout(project, tmp_path / "run2"), cache, monkeypatch)
    assert fake.built == [tmp_path / "run1", tmp_path / "run2"]
    assert any("the cached env was rebuilt" in n for n in again.notes)


def test_no_commit_no_sharing(tmp_path: Path) -> None:
    """A checkout whose commit could not be read names nothing another could share."""
    workdir = tmp_path / "w"
    workdir.mkdir()
    assert base.portable_id(f"{workdir.resolve()}@", workdir) is None
    assert base.portable_id(f"{workdir.resolve()}@\0typing", workdir) is None
    assert base.portable_id(f"{workdir.resolve()}@abc\0typing", workdir) == "@abc\0typing"


def test_a_phase_that_found_no_env_uses_the_one_another_phase_built_while_its_suite_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The static tools and the suite of one checkout both find the env not built for it; the
    suite's phase builds it and holds it for its whole run. The static phase takes the built env
    as soon as the build ends, not when the suite does."""
    env_dir = tmp_path / "tox" / "key"
    env_dir.mkdir(parents=True)
    want = f"{tmp_path}/tree@0123abcd"
    builds: list[str] = []

    def build() -> base.Env:
        builds.append(threading.current_thread().name)
        time.sleep(0.5)
        python = env_dir / "py311" / "bin" / "python"
        python.parent.mkdir(parents=True, exist_ok=True)
        python.write_text("", encoding="utf-8")
        return base.Env(python=python, bin_dir=python.parent)

    # Both look before either builds (as the two phases of a run do, started together), and the
    # suite's phase takes the exclusive lock first.
    looked = threading.Barrier(2)
    first = {"suite", "static"}
    installed = base._installed

    def looking(*args: object, **kwargs: object) -> tuple[base.Env | None, str | None]:
        found = installed(*args, **kwargs)  # type: ignore[arg-type]
        name = threading.current_thread().name
        if name in first:
            first.discard(name)
            looked.wait(timeout=10)
        return found

    def locking(path: Path, deadline: float | None = None, *, shared: bool = False) -> Any:
        if not shared and threading.current_thread().name == "static" and not builds:
            time.sleep(0.2)
        return file_lock(path, deadline, shared=shared)

    monkeypatch.setattr(base, "_installed", looking)
    monkeypatch.setattr(base, "file_lock", locking)
    got: dict[str, float] = {}

    def phase(hold: float) -> None:
        with base.shared(env_dir, want, build, time.monotonic() + 60) as env:
            assert env.error is None and env.python is not None
            got[threading.current_thread().name] = time.monotonic()
            time.sleep(hold)

    suite = threading.Thread(target=phase, args=(5.0,), name="suite")
    static = threading.Thread(target=phase, args=(0.0,), name="static")
    suite.start()
    static.start()
    static.join(timeout=30)
    static_done = time.monotonic()
    suite.join(timeout=30)
    assert builds == ["suite"]
    assert got["static"] - got["suite"] < 3.0  # not the suite's 5 s
    assert static_done < got["suite"] + 5.0
