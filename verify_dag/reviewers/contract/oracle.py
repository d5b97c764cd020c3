"""A criterion's oracle (CHECK + EXPECT): what counts as a pass, and when it proves nothing.

EXPECT takes a bare exit code (``EXPECT: 0``), the custom-gate clauses of docs/gates.md
(``exit N; output contains "x"; output matches /re/``), or any other text, which is the expected
output (the command's output must contain it, and it must exit 0).

The vacuity rule (docs/contract.md, "The vacuity rule") is deterministic. An oracle is vacuous
when

1. it runs only constant commands (``true``, ``:``, ``false``, ``echo``, ``printf``, ``exit``,
   ``sleep``, ``return``): nothing in the repository can change its outcome;
2. its exit status is forced and EXPECT looks at nothing else: the last command is ``|| true``
   (``|| :``, ``|| exit 0``, ``|| echo ...``), or a constant command after ``;`` (``pytest; echo
   done``), or a pipeline ending in ``cat``/``tee`` (``pytest | tee log``);
3. the output EXPECT asks for is printed by the command itself (``pytest; echo passed`` with
   ``EXPECT: passed``);
4. the criterion names artifacts (inline code, or words that look like paths or file names) and
   the oracle observes none of them: no name of one occurs in the CHECK text nor in what it
   observes through the files it names (read at the verified commit): the selected tests'
   bodies and what they call when it selects tests, else the whole file (testbody.py).

Everything here is pure; reading the named files is the caller's (``observes`` takes a reader).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass

from verify_dag.phases import gates
from verify_dag.phases.gates import Expect
from verify_dag.reviewers.contract import testbody

CONSTANT = frozenset({"true", ":", "false", "echo", "printf", "exit", "sleep", "return"})
ALWAYS_OK = frozenset({"true", ":", "echo", "printf"})  # "exit 0" is checked separately
SINKS = frozenset({"cat", "tee"})
_SEPARATORS = frozenset({";", "&", "\n", ";;"})
_OPERATORS = frozenset({"&&", "||", "|", "|&", *_SEPARATORS})
_CODE_EXT = (
    "py",
    "pyi",
    "js",
    "jsx",
    "ts",
    "tsx",
    "mjs",
    "cjs",
    "go",
    "rs",
    "java",
    "kt",
    "rb",
    "php",
    "c",
    "h",
    "cc",
    "cpp",
    "hpp",
    "cs",
    "swift",
    "scala",
    "sh",
    "bash",
    "sql",
    "md",
    "rst",
    "txt",
    "json",
    "yaml",
    "yml",
    "toml",
    "cfg",
    "ini",
    "html",
    "css",
    "scss",
    "xml",
    "csv",
    "lock",
    "proto",
    "graphql",
    "vue",
    "svelte",
    "tf",
)
_EXT = "|".join(_CODE_EXT)
# A file name with a known extension (any directories before it), or a directory written with
# its trailing slash: "and/or" is prose, "src/billing/" and "billing.py" are artifacts.
_PATHLIKE = re.compile(
    r"(?<![\w/.-])(?:[\w.-]+/)*[\w-]+(?:\.[\w-]+)*\.(?:" + _EXT + r")\b"
    r"|(?<![\w/.-])(?:[\w.-]+/)+(?=[\s,;:)]|$)"
)
_INLINE = re.compile(r"`([^`]+)`")
# Executables too common to say anything about which artifact a command observes.
_GENERIC = frozenset(
    {
        "python",
        "python3",
        "bash",
        "node",
        "npm",
        "npx",
        "yarn",
        "pnpm",
        "pytest",
        "make",
        "cargo",
        "git",
        "echo",
        "cat",
        "grep",
        "test",
        "true",
        "false",
        "run",
        "exit",
        "sudo",
        "env",
        "uv",
        "poetry",
        "tox",
        "pip",
        "the",
        "and",
        "for",
        "with",
        "from",
        "not",
    }
)
MIN_HANDLE = 3


@dataclass(frozen=True)
class Oracle:
    check: str
    expect: Expect
    problem: str | None = None  # malformed EXPECT


def parse_expect(values: tuple[str, ...]) -> tuple[Expect, str | None]:
    """Every EXPECT line of one criterion -> (Expect, problem or None). Exit 0 is implied."""
    exit_code = 0
    contains: list[str] = []
    matches: list[str] = []
    for raw in values:
        value = raw.strip()
        if not value:
            return Expect(), "empty EXPECT line"
        if re.fullmatch(r"-?\d+", value):
            exit_code = int(value)
        elif re.match(r"(?:exit|output)\b", value, re.IGNORECASE):
            parsed, problem = gates.parse_expect(value)
            if problem is not None:
                return Expect(), problem
            if re.search(r"(?:^|;)\s*exit\b", value, re.IGNORECASE):
                exit_code = parsed.exit_code
            contains += parsed.contains
            matches += parsed.matches
        else:
            quoted = len(value) >= 2 and value[0] == value[-1] == '"'
            contains.append(value[1:-1] if quoted else value)
    return Expect(exit_code=exit_code, contains=tuple(contains), matches=tuple(matches)), None


def describe_expect(expect: Expect) -> str:
    parts = [f"exit {expect.exit_code}"]
    parts += [f'output contains "{text}"' for text in expect.contains]
    parts += [f"output matches /{pattern}/" for pattern in expect.matches]
    return "; ".join(parts)


# --- vacuity ---------------------------------------------------------------------------------


def _tokens(command: str) -> list[str] | None:
    lexer = shlex.shlex(command, posix=True, punctuation_chars=";&|")
    lexer.whitespace_split = True
    lexer.commenters = "#"
    try:
        return list(lexer)
    except ValueError:  # unbalanced quotes: bash fails on it too, which is not "cannot fail"
        return None


def _simple_commands(tokens: list[str]) -> list[tuple[str, list[str]]]:
    """(operator before it, words) for each simple command; ``!`` and env assignments dropped."""
    commands: list[tuple[str, list[str]]] = []
    words: list[str] = []
    before = ";"
    for token in tokens:
        if token in _OPERATORS:
            if words:
                commands.append((before, words))
            words, before = [], token
        elif not words and (token == "!" or re.fullmatch(r"[A-Za-z_]\w*=.*", token)):
            continue
        else:
            words.append(token)
    if words:
        commands.append((before, words))
    return commands


def _succeeds(words: list[str]) -> bool:
    if words[0] == "exit":  # a bare "exit" keeps the previous command's status
        return len(words) > 1 and words[1] == "0"
    return words[0] in ALWAYS_OK


def vacuity(check: str, expect: Expect) -> str | None:
    """Why the oracle cannot fail (rules 1-3), or None."""
    tokens = _tokens(check)
    if tokens is None:
        return None
    commands = _simple_commands(tokens)
    if not commands:
        return f"`{check}` runs no command"
    names = sorted({words[0] for _, words in commands})
    if all(words[0] in CONSTANT for _, words in commands):
        return f"`{check}` cannot fail: it runs only {', '.join(names)}"
    printed = " ".join(
        " ".join(words[1:]) for _, words in commands if words[0] in ("echo", "printf")
    )
    for text in expect.contains:
        if text and text in printed:
            return f'`{check}` prints its own expected output "{text}"'
    for pattern in expect.matches:
        if printed and re.search(pattern, printed, re.MULTILINE):
            return f"`{check}` prints its own expected output /{pattern}/"
    if expect.contains or expect.matches or expect.exit_code != 0:
        return None
    before, last = commands[-1]
    if before == "||" and _succeeds(last):
        return f"`{check}` cannot fail: `|| {' '.join(last)}` forces exit 0"
    if before in _SEPARATORS and _succeeds(last) and len(commands) > 1:
        return f"`{check}` cannot fail: its exit status is that of `{' '.join(last)}`"
    if before in ("|", "|&") and last[0] in SINKS:
        return f"`{check}` cannot fail: its exit status is that of `{last[0]}` ending the pipe"
    return None


def artifacts(criterion: str) -> list[str]:
    """What the criterion names: inline code spans and path- or file-like words."""
    found = [span.strip() for span in _INLINE.findall(criterion) if span.strip()]
    bare = _INLINE.sub(" ", criterion)
    found += [m.group(0).rstrip(".") for m in _PATHLIKE.finditer(bare) if "://" not in m.group(0)]
    return list(dict.fromkeys(found))


def handles(artifact: str) -> set[str]:
    """Names by which a command or a file can refer to ``artifact``."""
    out = {artifact}
    for word in artifact.split():
        word = word.strip("'\"(),;")
        if not word or word.startswith("-") or word.lower() in _GENERIC:
            continue
        name = word.split("::")[0].split("(")[0].rstrip("/")
        base = name.rsplit("/", 1)[-1]
        ext = re.search(r"\.(\w{1,5})$", base)
        if ext and ext.group(1).lower() in _CODE_EXT:  # billing/invoices.py: invoices
            out |= {word, name, base, base[: ext.start()]}
        else:  # billing.reconcile: reconcile
            out |= {word, name, base, base.rsplit(".", 1)[-1]}
    return {h for h in out if len(h) >= MIN_HANDLE and h.lower() not in _GENERIC}


def named_paths(check: str) -> list[str]:
    """Words of the CHECK that may name files in the repository (``a/b.py::test_x`` -> a/b.py)."""
    tokens = _tokens(check) or check.split()
    out: list[str] = []
    for token in tokens:
        if token in _OPERATORS or (token.startswith("-") and "=" not in token):
            continue
        value = token.split("=", 1)[1] if token.startswith("-") else token
        value = value.split("::")[0].strip("'\"")
        if value and not value.startswith(("/", "~")) and ".." not in value.split("/"):
            out.append(value.removeprefix("./"))
    return list(dict.fromkeys(out))


def unobserved(criterion: str, check: str, read: Callable[[str], str | None]) -> str | None:
    """Rule 4: the named artifacts none of which the oracle observes, or None.

    ``read(path)`` returns the text the CHECK can reach through ``path`` (a file's content, a
    directory's files), or None when the path is not in the repository.
    """
    named = artifacts(criterion)
    wanted = {a: handles(a) for a in named}
    wanted = {a: h for a, h in wanted.items() if h}
    if not wanted:
        return None
    haystacks = [check.lower()]
    tokens = _tokens(check) or check.split()
    haystacks += [text.lower() for text in testbody.observed(tokens, named_paths(check), read)]
    for names in wanted.values():
        if any(name.lower() in hay for name in names for hay in haystacks):
            return None
    shown = ", ".join(f"`{a}`" for a in wanted)
    return f"`{check}` does not observe {shown} named by the criterion"
