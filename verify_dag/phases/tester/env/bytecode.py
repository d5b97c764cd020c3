"""The host interpreter's own bytecode, where a suite's PYTHONPYCACHEPREFIX finds it.

A suite runs with its bytecode going to a prefix of the run's own (the checkout keeps what was
committed, the env stays read-only), and under a prefix Python looks for every ``.pyc`` there
and nowhere else: each run compiled the standard library's modules it imports from source, and
pytest, pluggy and every plugin too when the suite runs on verify-dag's own interpreter (a
project that declares nothing to install). Measured on a one-test suite on that interpreter:
1.2 s of CPU under a fresh prefix, 0.5 s with this tree linked in.

So the interpreter's standard library and its site-packages are mirrored once into a tree of
symlinks to their own compiled ``__pycache__`` files (:mod:`.pyc_mirror`), and each run's
prefix links that tree in at the directories' own paths (:func:`.base.pycache_prefix`). Python
still checks every ``.pyc`` against its source (size and mtime) and compiles a stale or missing
one itself; the tree is written by verify-dag alone and repository code may only read it. An
interpreter that is not this one imports from other paths and never meets the tree.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import sys
import sysconfig
import tempfile
from pathlib import Path

from verify_dag.paths import cache_root
from verify_dag.phases.tester.env import pyc_mirror

log = logging.getLogger(__name__)

FORMAT = "1"
# Beside the interpreter when it is a venv of its own (pipx's, uv tool's, a checkout's .venv):
# built once for every user of that install, and gone with it.
IN_VENV = ".verify-dag-host-pycache"
# Another interpreter's packages, mirrored (or not) by their own tree: the base interpreter's
# site-packages lies inside its standard library's directory.
_SKIP = frozenset({"site-packages", "dist-packages"})


def sources() -> list[Path]:
    """The directories whose bytecode is mirrored: the standard library and, when it is not
    the same directory, the site-packages verify-dag runs from; as ``sys.path`` spells them."""
    paths = sysconfig.get_paths()
    found: list[Path] = []
    for name in ("stdlib", "purelib", "platlib"):
        path = Path(paths[name])
        if path.is_dir() and path not in found:
            found.append(path)
    return found


def location() -> Path:
    """Where the trees live: in this interpreter's venv when it may be written (never a system
    prefix such as /usr), else in verify-dag's cache."""
    prefix = Path(sys.prefix)
    if sys.prefix != sys.base_prefix and os.access(prefix, os.W_OK):
        return prefix / IN_VENV
    return cache_root() / "bytecode"


def key() -> str:
    """This interpreter and what is installed in it: its path, its version and the mtimes of
    :func:`sources`, which change when a package is installed or removed. Raises OSError."""
    h = hashlib.sha256(f"{FORMAT}\0{sys.version}\0{os.path.realpath(sys.executable)}".encode())
    for root in sources():
        h.update(f"\0{root}\0{root.stat().st_mtime_ns}".encode())
    return h.hexdigest()[:24]


def host_tree() -> Path | None:
    """The mirrored tree of :func:`sources`, built on first use; None when it cannot be (the run
    then compiles what it imports). Keyed by the interpreter and the directories' mtimes, which
    change when a package is installed or removed; a new key's tree replaces the older ones."""
    roots = sources()
    try:
        home = location()
        tree = home / key()
        if tree.is_dir():
            return tree
        home.mkdir(parents=True, exist_ok=True)
        building = Path(tempfile.mkdtemp(prefix=".building-", dir=home))
        try:
            for root in roots:
                pyc_mirror.mirror(
                    root,
                    building,
                    link=True,
                    skip=_SKIP,
                    suffix=f".{sys.implementation.cache_tag}.pyc",
                )
            os.rename(building, tree)
        except OSError:
            shutil.rmtree(building, ignore_errors=True)
            if not tree.is_dir():  # unless another run renamed its own into place first
                raise
        for old in home.iterdir():
            # What else is kept per key (host.py's plugin list) is named after the key too.
            if not old.name.startswith((tree.name, ".building-")):
                if old.is_dir():
                    shutil.rmtree(old, ignore_errors=True)
                else:
                    old.unlink(missing_ok=True)
        return tree
    except OSError as exc:
        log.warning("the interpreter's bytecode could not be mirrored: %s", exc)
        return None
