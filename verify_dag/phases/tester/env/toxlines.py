"""The command lines a tox.ini runs (its envs' ``commands``), for triage: the linters and the
pytest line tox runs, with tox's substitutions resolved where they have a value outside tox."""

from __future__ import annotations

import configparser
import re
import shlex
from pathlib import Path

_TOX_SUBSTITUTION = re.compile(r"\{([^{}]*)\}")


def command_lines(workdir: Path) -> list[tuple[str, str, int]]:
    """(line, source, rank) of every ``commands`` line of tox.ini's envs."""
    path = workdir / "tox.ini"
    if not path.is_file():
        return []
    cfg = configparser.ConfigParser(interpolation=None, strict=False)
    try:
        cfg.read_string(path.read_text(encoding="utf-8"), source="tox.ini")
    except (configparser.Error, UnicodeDecodeError, OSError):
        return []  # triage notes a tox.ini it cannot read
    out = []
    for section in cfg.sections():
        if section == "testenv" or section.startswith("testenv:"):
            # [testenv] is what a plain `tox` runs in every env; named ones come after it.
            rank = 40 if section == "testenv" else 45
            text = cfg.get(section, "commands", fallback="").replace("\\\n", " ")
            for line in text.splitlines():
                out.append(
                    (_tox_command(line.strip().lstrip("- ")), f"tox.ini [{section}] commands", rank)
                )
    return out


def _tox_command(line: str) -> str:
    """A tox ``commands`` line with the substitutions that have a value outside tox resolved
    ({posargs} is empty, {posargs:x} is x, {toxinidir} is the checkout's root, which is where
    commands run, {envpython} is python) and the tokens holding any other left out, with the
    option they are the value of: a value left behind would be read as the value of something
    else (`--basetemp {envtmpdir} tests` must not become `--basetemp tests`)."""

    def resolve(m: re.Match[str]) -> str:
        inner = m.group(1)
        if inner.partition(":")[0] == "posargs":
            return inner.partition(":")[2]
        if inner in ("toxinidir", "tox_root"):
            return "."
        if inner == "envpython":
            return "python"  # `python -m X` from a config runs in the suite's env
        if inner.startswith("env:") and inner.count(":") >= 2:
            return inner.split(":", 2)[2]
        return m.group(0)

    text, before = line, ""
    while text != before:  # innermost first: {posargs:{toxinidir}/tests}
        before, text = text, _TOX_SUBSTITUTION.sub(resolve, text)
    try:
        tokens = shlex.split(text)
    except ValueError:
        return text
    kept: list[str] = []
    for tok in tokens:
        if tok == "[]":  # tox 3's old spelling of {posargs}
            continue
        if _TOX_SUBSTITUTION.search(tok):
            if len(kept) > 1 and kept[-1].startswith("-") and "=" not in kept[-1]:
                kept.pop()
            continue
        kept.append(tok)
    return shlex.join(kept)
