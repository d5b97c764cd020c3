"""Copy a compiled site-packages' bytecode into a PYTHONPYCACHEPREFIX tree.

Run as a script by the env's own interpreter (``python -I -S pyc_mirror.py SITE TREE``) inside
the sandbox that may write only the venv: the standard library alone, no site hooks. A ``.pyc``
holds the source's size, its mtime and the path it was compiled under, never where the
``.pyc`` itself lies, so the file compileall wrote to ``SITE/pkg/__pycache__/mod.TAG.pyc`` is
byte for byte the one it would write to ``TREE/SITE/pkg/mod.TAG.pyc`` under a prefix: copying
it costs a file copy where compiling the whole site-packages again costs seconds of CPU.

:mod:`verify_dag.phases.tester.env.bytecode` calls :func:`mirror` in process with ``link=True``
for the host interpreter's own trees (its standard library, verify-dag's site-packages), which
no repository code ever writes: a symlink to each ``.pyc`` in place of a copy.
"""

from __future__ import annotations

import os
import shutil
import stat
import sys
from pathlib import Path


def mirror(
    site: Path,
    tree: Path,
    *,
    link: bool = False,
    skip: frozenset[str] = frozenset(),
    suffix: str = ".pyc",
) -> None:
    """Copy every regular ``__pycache__/*.pyc`` under ``site`` (symlinks neither followed nor
    copied) to where the prefix ``tree`` looks for it; ``link``: a symlink to it instead.
    Directories named in ``skip`` are not entered; only names ending in ``suffix`` are taken.
    A copy whose size and mtime are its source's is left as it is: mirroring again after a
    rebuild of the env copies what compileall wrote anew, not the whole site-packages."""
    for top, dirs, files in os.walk(site):
        if Path(top).name != "__pycache__":
            dirs[:] = [d for d in dirs if d not in skip]
            continue
        dirs[:] = []
        source_dir = Path(top).parent
        dest = tree / source_dir.relative_to(source_dir.anchor)
        for name in files:
            if not name.endswith(suffix):
                continue
            src = Path(top, name)
            if not stat.S_ISREG(os.lstat(src).st_mode):
                continue
            dest.mkdir(parents=True, exist_ok=True)
            if link:
                os.symlink(src, dest / name)
            elif not _same(src, dest / name):
                shutil.copy2(src, dest / name, follow_symlinks=False)


def _same(src: Path, copy: Path) -> bool:
    try:
        a, b = os.lstat(src), os.lstat(copy)
    except OSError:
        return False
    return stat.S_ISREG(b.st_mode) and (a.st_size, a.st_mtime_ns) == (b.st_size, b.st_mtime_ns)


if __name__ == "__main__":
    mirror(Path(sys.argv[1]), Path(sys.argv[2]))
