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

The project's own command line, when tox, a Makefile or CI runs mypy with targets
(:class:`Declared`), names what mypy checks instead of ``files``, as on mypy's command line.
"""

# Long module: what mypy checks comes from two declarations read the same way, its
# configuration file and the project's own command line (with stubtest's), and one selection
# serves both; split, each half would re-import the other's path rules.

from __future__ import annotations

import configparser
import glob
import os
import re
import tomllib
from collections import Counter
from collections.abc import Iterable, Sequence
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


def read(workdir: Path, names: Sequence[str] = _NAMES) -> Config:
    """The configuration mypy would use when started in ``workdir`` (``names``: the one
    file a `--config-file` names instead)."""
    for name in names:
        path = workdir / name
        if not path.is_file():
            continue
        section = _section(path)
        # mypy stops at its own files even without a [mypy] section; shared files count only
        # with one, and an unreadable file is passed over as mypy passes it over.
        if section is None:
            if (names is not _NAMES or name in ("mypy.ini", ".mypy.ini")) and _readable_ini(path):
                return Config(source=name)
            continue
        files = _entries(section.get("files"))
        exclude = _entries(section.get("exclude"), commas=False)
        targets = bool(files) or any(section.get(k) for k in ("packages", "modules"))
        return Config(source=name, files=tuple(files), exclude=tuple(exclude), targets=targets)
    return Config()


def read_for(workdir: Path, declared: Declared | None) -> Config:
    """The configuration mypy runs with for the project's command line ``declared``: the file
    its `--config-file` names, stubtest's (none: mypy's defaults), or else mypy's own choice."""
    if declared is None:
        return read(workdir)
    if declared.program == "stubtest":
        return read(workdir, (declared.config,)) if declared.config else Config()
    named = [o.partition("=")[2] for o in declared.options if o.startswith("--config-file=")]
    return read(workdir, named[-1:]) if named else read(workdir)


def select(
    workdir: Path, files: Sequence[str], declared: Declared | None = None
) -> tuple[list[str], str]:
    """The files of ``files`` mypy checks as the project runs it, and a remark on the rest.

    ``declared``: the targets of the project's own mypy command line (tox, a Makefile, CI),
    which mypy checks instead of any configured ``files``."""
    config = read_for(workdir, declared)
    absent: list[str] = []
    entries = [""]
    if declared is not None and declared.targets:
        entries, absent = declared.entries(workdir)
        label = f"outside mypy's targets ({', '.join(declared.shown())}, {declared.source})"
    elif config.targets and not config.files:
        return list(files), ""  # packages or modules: mypy resolves them, nothing to narrow
    else:
        label = f"outside mypy's files ({', '.join(config.files)}, {config.source})"
        if config.files:
            entries, absent = configured(config, workdir)
    inside: list[str] = []
    left: Counter[str] = Counter()
    for path in files:
        reasons = {_skipped(path, e, config.exclude) for e in entries} or {"outside"}
        # Under an entry but skipped there says more than outside the others.
        why = min(reasons, key=["", "exclude", "hidden", "outside"].index)
        # mypy finds the stub of a module before its source (`mypy .`, or a directory in
        # `files`), and two files of one module on its command line stop it ("Duplicate
        # module"): a source whose stub is beside it is checked through the stub.
        if not why and path not in entries and path.endswith(".py"):
            why = "stub" if (workdir / f"{path}i").is_file() else ""
        elif why == "outside" and path.endswith(".py") and (workdir / f"{path}i").is_file():
            # A target names the stub (`-m pkg.mod`, a .pyi path): the source is behind it.
            stub = f"{path}i"
            why = "stub" if any(not _skipped(stub, e, config.exclude) for e in entries) else why
        if why:
            left[why] += 1
        else:
            inside.append(path)
    where = {
        "outside": label,
        "exclude": f"excluded by mypy's exclude ({config.source})",
        "hidden": "in directories mypy's discovery skips (hidden, __pycache__, vendored)",
        "stub": "with a .pyi stub beside them (mypy checks the stub)",
    }
    remarks = [
        f"{left[k]} changed file(s) {text} not checked" for k, text in where.items() if left[k]
    ]
    if declared is not None and declared.program == "stubtest":
        # stubtest also imports the modules to compare them with their stubs: that runs the
        # project's code, and is the project's check, not a type checker's.
        remarks.append("stubtest's comparison of the stubs with the running code is not run")
    if absent and inside:
        remarks.append(
            f"mypy's {'targets' if declared else 'files'} name what this checkout "
            f"lacks, left out: {', '.join(absent)}"
        )
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


# The options of mypy's command line that take a value (mypy 1.10 to 2.x, read from its own
# argument parser); --shadow-file takes two. Every other option is a flag.
_VALUED = frozenset(
    {
        *("--always-false", "--always-true", "--cache-dir", "--cache-map", "--config-file"),
        *("--custom-typeshed-dir", "--custom-typing-module", "--deprecated-calls-exclude"),
        *("--disable-error-code", "--enable-error-code", "--enable-incomplete-feature"),
        *("--exclude", "--find-occurrences", "--follow-imports", "--junit-format"),
        *("--junit-xml", "--num-workers", "--output", "--package-root", "--platform"),
        *("--python-executable", "--python-version", "--quickstart-file", "--shadow-file"),
        *("--soft-error-limit", "--sqlite-num-shards", "--timing-stats"),
        *("--line-checking-stats", "--untyped-calls-exclude", "-O", "-n"),
    }
)
# Options that say where output, reports and caches go, or install things: not how the code
# is checked. The run's own output flags come after the project's options, and the last of a
# flag wins in mypy's parser, so output-shape flags (--pretty, --hide-error-codes) need no entry.
_NOT_PASSED = frozenset(
    {
        *("--cache-dir", "--cache-map", "--python-executable", "--output", "-O"),
        *("--junit-xml", "--junit-format", "--install-types", "--non-interactive"),
        *("--quickstart-file", "--timing-stats", "--line-checking-stats"),
        *("--find-occurrences", "--shadow-file", "--pdb", "--sqlite-num-shards"),
    }
)
# stubtest's own options with a value; of them only its mypy configuration is mypy's.
_STUBTEST_VALUED = frozenset(
    {"--allowlist", "--whitelist", "--mypy-config-file", "--custom-typeshed-dir"}
)
_SOURCE_ROOTS = ("", "src")  # where a module of the checkout is looked for: flat and src layouts


@dataclass(frozen=True)
class Declared:
    """The project's own mypy command line (or the union of several): what mypy checks instead
    of the configured ``files``, and the options it is run with.

    ``stubtest`` (mypy's stub checker) builds its modules and their submodules with mypy and
    fails on mypy's errors, with mypy's defaults unless ``--mypy-config-file`` names a
    configuration: that is how such a project type-checks, so it is what mypy mirrors."""

    program: str  # "mypy" or "stubtest"
    options: tuple[str, ...] = ()  # one token each (`--opt=value`), passed on as written
    files: tuple[str, ...] = ()  # paths as written (globs expanded when read)
    modules: tuple[str, ...] = ()  # -m
    packages: tuple[str, ...] = ()  # -p: the package and its submodules
    config: str | None = None  # stubtest's --mypy-config-file
    source: str = ""

    @property
    def targets(self) -> bool:
        return bool(self.files or self.modules or self.packages)

    def shown(self) -> list[str]:
        return [*self.files, *self.modules, *self.packages]

    def argv(self) -> tuple[str, ...]:
        """As a command line :func:`declared` reads back (the toolchain's Command.argv)."""
        if self.program == "stubtest":
            config = (f"--mypy-config-file={self.config}",) if self.config else ()
            return ("stubtest", *config, *self.packages)
        mods = [t for m in self.modules for t in ("-m", m)]
        pkgs = [t for p in self.packages for t in ("-p", p)]
        return ("mypy", *self.options, *mods, *pkgs, *self.files)

    def entries(self, workdir: Path) -> tuple[list[str], list[str]]:
        """The targets as paths in the checkout (for :func:`select`), and those naming
        nothing here (a module installed elsewhere, a file an sdist lacks)."""
        found, absent = configured(Config(files=self.files), workdir)
        for name, recursive in [(m, False) for m in self.modules] + [
            (p, True) for p in self.packages
        ]:
            path = _module_path(name, workdir, recursive)
            if path is None:
                absent.append(name)
            else:
                found.append(path)
        return found, absent


def declared(argv: Sequence[str], source: str = "") -> Declared | None:
    """A ``mypy ...`` or ``stubtest ...`` command line as mypy's targets and options; None when
    it checks no code of the checkout (`mypy --version`, `mypy -c CODE`, `stubtest
    --check-typeshed`)."""
    if not argv or argv[0] not in ("mypy", "stubtest"):
        return None
    if argv[0] == "stubtest":
        return _stubtest(argv[1:], source)
    options: list[str] = []
    files: list[str] = []
    modules: list[str] = []
    packages: list[str] = []
    tokens = list(argv[1:])
    while tokens:
        tok = tokens.pop(0)
        if tok == "--":
            files.extend(tokens)
            break
        if not tok.startswith("-") or tok == "-":
            files.append(tok)
            continue
        name, eq, value = tok.partition("=")
        if name in ("-c", "--command", "-h", "--help", "-V", "--version"):
            return None
        if name in ("-m", "--module", "-p", "--package"):
            value = value if eq else (tokens.pop(0) if tokens else "")
            (modules if name in ("-m", "--module") else packages).append(value)
            continue
        valued = name in _VALUED or name.endswith("-report") or name.startswith("--xslt-")
        if valued and not eq:
            # --shadow-file SOURCE SHADOW: two values; any other valued option one.
            take = 2 if name == "--shadow-file" else 1
            value = " ".join(tokens.pop(0) for _ in range(min(take, len(tokens))))
        if name in _NOT_PASSED or name.endswith("-report") or name.startswith("--xslt-"):
            continue
        if not valued:
            options.append(tok)
        else:  # one token, so that options are compared and merged whole
            options.append(f"{name}={value}" if name.startswith("--") else f"{name}{value}")
    return Declared(
        "mypy", tuple(options), tuple(files), tuple(modules), tuple(packages), source=source
    )


def merged(invocations: Sequence[Declared]) -> Declared | None:
    """One Declared for several of a project's invocations: the union of their targets, with
    the options they all share (an option only one of them sets does not apply to the others'
    targets, so it is not applied to all). mypy's own command lines count before stubtest's.
    None when there is nothing to merge."""
    chosen = [d for d in invocations if d.program == "mypy"] or list(invocations)
    if not chosen:
        return None
    first = chosen[0]
    if first.program == "stubtest":
        configs = [d.config for d in chosen if d.config]
        return Declared(
            "stubtest",
            packages=_union(d.packages for d in chosen),
            config=configs[0] if configs else None,
            source=_sources(chosen),
        )
    options = tuple(o for o in first.options if all(o in d.options for d in chosen[1:]))
    if not all(d.targets for d in chosen):
        # One of them runs on what the configuration names: the whole configured tree.
        return Declared("mypy", options, source=_sources(chosen))
    return Declared(
        "mypy",
        options,
        _union(d.files for d in chosen),
        _union(d.modules for d in chosen),
        _union(d.packages for d in chosen),
        source=_sources(chosen),
    )


def _stubtest(tokens: Sequence[str], source: str) -> Declared | None:
    modules: list[str] = []
    config: str | None = None
    rest = list(tokens)
    while rest:
        tok = rest.pop(0)
        if not tok.startswith("-"):
            modules.append(tok)
            continue
        name, eq, value = tok.partition("=")
        if name == "--check-typeshed":
            return None  # typeshed's stdlib stubs, not the project's
        if name in _STUBTEST_VALUED and not eq:
            value = rest.pop(0) if rest else ""
        if name == "--mypy-config-file":
            config = value
    if not modules:
        return None
    return Declared("stubtest", packages=tuple(modules), config=config, source=source)


def _union(groups: Iterable[Sequence[str]]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(t for g in groups for t in g))


def _sources(invocations: Sequence[Declared]) -> str:
    return "; ".join(dict.fromkeys(d.source for d in invocations if d.source))


def _module_path(name: str, workdir: Path, recursive: bool) -> str | None:
    """Where module ``name`` of the checkout is, as mypy would find it from the checkout's root
    or a src layout: its stub before its source, a package's directory for ``-p`` (its
    submodules too), its ``__init__`` for ``-m``."""
    rel = name.replace(".", "/")
    for root in _SOURCE_ROOTS:
        base = f"{root}/{rel}" if root else rel
        for candidate in (f"{base}.pyi", f"{base}.py"):
            if (workdir / candidate).is_file():
                return candidate
        if (workdir / base).is_dir():
            if recursive:
                return base
            for init in ("__init__.pyi", "__init__.py"):
                if (workdir / base / init).is_file():
                    return f"{base}/{init}"
    return None
