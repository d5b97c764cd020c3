"""Make the corpus: one git repository per case, base = an older sdist, HEAD = the next one.

Run by hand (it needs the package index): ``python bench/realrepos/make_corpus.py OUTDIR``.
Each case of ``cases.CASES`` becomes ``OUTDIR/<name>``: a first commit holding the older
release's sdist tree, tagged ``base`` and ``v<older>``, and a second commit on ``main`` holding
the newer release's tree. Downloads are cached under ``bench/realrepos/.cache``.

Why sdists: they are what PyPI keeps for every release, so the corpus is reproducible
without a code host, and two consecutive sdists are a real release diff.

Why PKG-INFO and ``*.egg-info`` go for the VCS-versioned cases (setuptools-scm, hatch-vcs,
pdm-backend's scm source): a real checkout of such a project has no PKG-INFO, and
setuptools-scm falls back to PKG-INFO when it finds no git metadata. Kept, that fallback
would let a build from a copy without ``.git`` succeed and hide exactly the failure these
cases are here to catch. The tag ``v<older>`` lets the build derive a version from git.
Every other case keeps its sdist as released.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import urllib.parse
import urllib.request
import zipfile
from pathlib import Path

from cases import CASES, Case

HERE = Path(__file__).resolve().parent
CACHE = HERE / ".cache"
INDEX = "https://pypi.org/pypi"

# Fixed identity and dates so two runs make the same commits.
GIT_ENV = {
    "GIT_AUTHOR_NAME": "corpus",
    "GIT_AUTHOR_EMAIL": "corpus@example.invalid",
    "GIT_COMMITTER_NAME": "corpus",
    "GIT_COMMITTER_EMAIL": "corpus@example.invalid",
    "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
    "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_CONFIG_NOSYSTEM": "1",
}


def sdist(package: str, version: str) -> Path:
    """The cached sdist of one release, downloaded from the index's JSON API when missing."""
    CACHE.mkdir(exist_ok=True)
    found = [p for p in CACHE.glob("*") if p.name.startswith(f"{package}=={version}__")]
    if found:
        return found[0]
    # The project document, not the per-release one: this index serves only the former.
    meta_url = f"{INDEX}/{package}/json"
    with urllib.request.urlopen(meta_url, timeout=60) as response:
        meta = json.load(response)
    releases = meta["releases"].get(version, [])
    files = [f for f in releases if f["packagetype"] == "sdist" and not f.get("yanked")]
    if not files:
        raise SystemExit(f"{package} {version}: no sdist on the index")
    # The index may answer with URLs relative to the JSON document.
    url = urllib.parse.urljoin(meta_url, files[0]["url"])
    target = CACHE / f"{package}=={version}__{files[0]['filename']}"
    with urllib.request.urlopen(url, timeout=300) as response, open(target, "wb") as out:
        shutil.copyfileobj(response, out)
    return target


def unpack(archive: Path, into: Path) -> Path:
    """Unpack an sdist and return its single top directory."""
    with tempfile.TemporaryDirectory() as tmp:
        if archive.name.endswith(".zip"):
            with zipfile.ZipFile(archive) as zf:
                zf.extractall(tmp)
        else:
            with tarfile.open(archive) as tf:
                tf.extractall(tmp, filter="data")
        (top,) = Path(tmp).iterdir()
        shutil.move(str(top), into)
    return into


def strip_generated(tree: Path) -> None:
    """Remove what setuptools-scm would read instead of git (see the module docstring).

    Some sdists (hatch's, with an explicit include list) ship their README only inside
    PKG-INFO, and the build of a checkout reads README.md (hatch-fancy-pypi-readme's
    fragments): the project's checkout has it, so it is rebuilt from PKG-INFO's body.
    """
    pkg_info = tree / "PKG-INFO"
    if pkg_info.exists() and not list(tree.glob("README*")):
        text = pkg_info.read_text(encoding="utf-8")
        headers, _, body = text.partition("\n\n")
        name = "README.rst" if "text/x-rst" in headers else "README.md"
        (tree / name).write_text(body, encoding="utf-8")
    pkg_info.unlink(missing_ok=True)
    for info in list(tree.glob("*.egg-info")) + list(tree.glob("src/*.egg-info")):
        shutil.rmtree(info)


def git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-C", str(repo), *args],
        check=True,
        env={**os.environ, **GIT_ENV},
        stdout=subprocess.DEVNULL,
    )


def replace_tree(repo: Path, tree: Path) -> None:
    for child in repo.iterdir():
        if child.name != ".git":
            shutil.rmtree(child) if child.is_dir() and not child.is_symlink() else child.unlink()
    for child in tree.iterdir():
        shutil.move(str(child), repo / child.name)


def make_case(case: Case, out: Path) -> Path:
    repo = out / case.name
    if repo.exists():
        shutil.rmtree(repo)
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    with tempfile.TemporaryDirectory() as tmp:
        for step, version in enumerate((case.old, case.new)):
            tree = unpack(sdist(case.package, version), Path(tmp) / version)
            if case.vcs_version:
                strip_generated(tree)
            replace_tree(repo, tree)
            # The sdist's own .gitignore applies, as in the project's real checkout.
            git(repo, "add", "-A")
            git(repo, "commit", "-q", "--allow-empty", "-m", f"{case.package} {version}")
            if step == 0:
                git(repo, "tag", "base")
                git(repo, "tag", f"v{case.old}")
    return repo


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="directory the repositories are written to")
    parser.add_argument("--case", action="append", help="only these cases (repeatable)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for case in CASES:
        if args.case and case.name not in args.case:
            continue
        repo = make_case(case, args.out)
        print(f"{case.name}: {case.package} {case.old} -> {case.new} at {repo}", file=sys.stderr)


if __name__ == "__main__":
    main()
