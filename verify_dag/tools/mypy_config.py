"""Which changed files the project's mypy configuration makes mypy's business.

mypy itself decides what it checks: when the configuration names its targets, mypy checks them
as the project runs it (``packages`` and ``modules``: no file arguments; ``files``: its entries,
globs expanded, as arguments, which mypy treats exactly as its configured ``files``, minus any
entry this checkout lacks), and its findings are filtered to the changed lines afterwards. What
is read here otherwise decides whether mypy runs at all (no changed file inside its ``files``: it
does not) and which changed files the report names as left out; without configured targets the
changed files are passed to mypy, minus those its ``exclude`` would skip when it discovers
files, as ``mypy .`` would.

The configuration is found as mypy finds it (the first of mypy.ini, .mypy.ini, pyproject.toml
with ``[tool.mypy]``, setup.cfg with ``[mypy]``), and read with mypy's rules: comma-separated or
list entries, globs expanded recursively, directories searched for .py/.pyi files except
hidden, ``__pycache__``, ``site-packages`` and ``node_modules`` entries and whatever an
``exclude`` regex finds in the path (``dir/`` for a directory, searched, forward slashes), and a
module's stub (.pyi) found instead of its source.
"""

from __future__ import annotations

import configparser
import glob
import os
import re
import tomllib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verify_dag.tools.base import PY_SUFFIXES, relative

_NAMES = ("mypy.ini", ".mypy.ini", "pyproject.toml", "setup.cfg")
_SKIPPED_NAMES = frozenset({"__pycache__", "site-packages", "node_modules"})


@dataclass(frozen=True)
class Config:
    source: str = ""  # the file it was read from; "" when the project has none
    files: tuple[str, ...] = ()  # the `files` entries as written
    exclude: tuple[str, ...] = ()
    targets: bool = False  # files, packages or modules set: plain `mypy` knows what to check


def read(workdir: Path) -> Config:
    """The configuration mypy would use when started in ``workdir``."""
    for name in _NAMES:
        path = workdir / name
        if not path.is_file():
            continue
        section = _section(path)
        # mypy stops at its own files even without a [mypy] section; shared files count only
        # with one, and an unreadable file is passed over as mypy passes it over.
        if section is None:
            if name in ("mypy.ini", ".mypy.ini") and _readable_ini(path):
                return Config(source=name)
            continue
        files = _entries(section.get("files"))
        exclude = _entries(section.get("exclude"), commas=False)
        targets = bool(files) or any(section.get(k) for k in ("packages", "modules"))
        return Config(source=name, files=tuple(files), exclude=tuple(exclude), targets=targets)
    return Config()


def select(workdir: Path, files: Sequence[str]) -> tuple[list[str], str]:
    """The files of ``files`` mypy checks as the project runs it, and a remark on the rest."""
    config = read(workdir)
    if config.targets and not config.files:
        return list(files), ""  # packages or modules: mypy resolves them, nothing to narrow
    absent: list[str] = []
    entries = [""]
    if config.files:
        entries, absent = configured(config, workdir)
    inside: list[str] = []
    left: Counter[str] = Counter()
    for path in files:
        reasons = {_skipped(path, e, config.exclude) for e in entries}
        # Under an entry but skipped there says more than outside the others.
        why = min(reasons, key=["", "exclude", "hidden", "outside"].index)
        # mypy finds the stub of a module before its source (`mypy .`, or a directory in
        # `files`), and two files of one module on its command line stop it ("Duplicate
        # module"): a source whose stub is beside it is checked through the stub.
        if not why and path not in entries and path.endswith(".py"):
            why = "stub" if (workdir / f"{path}i").is_file() else ""
        if why:
            left[why] += 1
        else:
            inside.append(path)
    where = {
        "outside": f"outside mypy's files ({', '.join(config.files)}, {config.source})",
        "exclude": f"excluded by mypy's exclude ({config.source})",
        "hidden": "in directories mypy's discovery skips (hidden, __pycache__, vendored)",
        "stub": "with a .pyi stub beside them (mypy checks the stub)",
    }
    remarks = [
        f"{left[k]} changed file(s) {text} not checked" for k, text in where.items() if left[k]
    ]
    if absent and inside:
        remarks.append(f"mypy's files name what this checkout lacks, left out: {', '.join(absent)}")
    return inside, "; ".join(remarks)


def configured(config: Config, workdir: Path) -> tuple[list[str], list[str]]:
    """``files`` as the paths mypy gets (globs expanded), and the entries that name nothing.

    mypy treats its configured ``files`` exactly as file arguments, so these are passed as
    such. What names nothing here is left out: a file the released sources do not ship (a
    noxfile named in ``files`` but absent from an sdist) would stop mypy before it checks
    anything, which says nothing about the change.
    """
    paths = _expand(config.files, workdir)
    found = [p for p in paths if (workdir / p).exists()]
    return found, [p or "." for p in paths if p not in found]


def _section(path: Path) -> dict[str, Any] | None:
    if path.suffix == ".toml":
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
            return None
        tool = data.get("tool")
        section = tool.get("mypy") if isinstance(tool, dict) else None
        return section if isinstance(section, dict) else None
    parser = configparser.RawConfigParser()
    try:
        parser.read(path, encoding="utf-8")
    except (configparser.Error, UnicodeDecodeError):
        return None
    return dict(parser["mypy"]) if parser.has_section("mypy") else None


def _readable_ini(path: Path) -> bool:
    try:
        configparser.RawConfigParser().read(path, encoding="utf-8")
    except (configparser.Error, UnicodeDecodeError):
        return False
    return True


def _entries(value: object, commas: bool = True) -> list[str]:
    """A string (comma-separated where mypy splits it) or a list, as stripped entries."""
    if isinstance(value, str):
        items = value.split(",") if commas else [value]
    elif isinstance(value, list):
        items = [str(v) for v in value]
    else:
        return []
    return [i.strip() for i in items if i.strip()]


def _expand(entries: Sequence[str], workdir: Path) -> list[str]:
    """Entries as repo-relative paths, globs expanded (an entry matching nothing stays as is)."""
    out: list[str] = []
    for entry in entries:
        text = os.path.expanduser(entry.replace("$MYPY_CONFIG_FILE_DIR", str(workdir)))
        text = os.path.expandvars(text.replace("${MYPY_CONFIG_FILE_DIR}", str(workdir)))
        # mypy globs from its working directory, which is the checkout here.
        root = None if Path(text).is_absolute() else workdir
        found = glob.glob(text, root_dir=root, recursive=True)
        for path in found or [text]:
            norm = relative(os.path.normpath(path), workdir)
            out.append("" if norm == "." else norm)
    return out


def _skipped(path: str, entry: str, exclude: Sequence[str]) -> str:
    """ "" when mypy, given ``entry`` ("" is the checkout), checks ``path``; else why not."""
    if path == entry:
        return ""  # a file named explicitly is checked whatever exclude says
    if (entry and not path.startswith(entry + "/")) or Path(path).suffix not in PY_SUFFIXES:
        return "outside"
    parts = path[len(entry) + 1 if entry else 0 :].split("/")
    for depth, name in enumerate(parts, 1):
        if name in _SKIPPED_NAMES or name.startswith("."):
            return "hidden"
        sub = "/".join(filter(None, (entry, *parts[:depth])))
        if any(_search(rx, sub + ("/" if depth < len(parts) else "")) for rx in exclude):
            return "exclude"
    return ""


def _search(pattern: str, text: str) -> bool:
    try:
        return re.search(pattern, text) is not None
    except re.error:
        return False  # mypy reports the bad regex itself and stops: that run says so
