"""The tests of one test file, each with its assertions: what the floor guard judges test
weakening by (docs/contract.md, "Tests and assertions").

Counting a file's assertions lets a change pay for an assertion it removes from one test with
one it writes in another; reading the file as units (a test, a helper, the code outside any
function) lets the guard compare each test with itself. Python is read with ``ast`` (an
assertion is a node, so a reflowed one is the same assertion and a docstring saying "assert"
is none); other languages, and Python that does not parse, by lines: a test runs from its
definition line (``rules.TEST_DEF``) to the next line indented no deeper.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TypeGuard

from verify_dag.reviewers.contract import floor_rules as rules
from verify_dag.reviewers.contract.weakening import norm

_NEWLINE = re.compile(r"\r\n?|\n")  # the line breaks ast counts (not \x0c, \x1c, ...)
_ASSERT_NAME = re.compile(r"^assert(?:[A-Z_]|$)")  # assertEqual, assert_called_with, not assertion
_FAIL_NAME = re.compile(r"^fail(?:[A-Z_]|$)")  # self.fail, self.failUnless
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


@dataclass(frozen=True)
class Assertion:
    line: int  # its first line in its file
    key: str  # what it is, whatever its layout: equal keys are the same assertion
    text: str  # its lines folded to one: what a row shows
    rank: int  # strength, rules.assertion_rank: 3 exact, 2 relational, 1 truthiness


@dataclass(frozen=True)
class Unit:
    path: str
    name: str  # qualified (TestCart.test_add, or a JS test's title); "" outside any function
    title: str  # the name alone (test_add): what a waiver may quote
    line: int  # its definition line
    header: str  # that line's text
    is_test: bool  # a test, as opposed to a helper, a fixture or code outside any function
    assertions: tuple[Assertion, ...]
    body: str  # its code without its name, normalised: an assertion-less test's identity
    uses: frozenset[str] | None = None  # the names it refers to; None: not known (read by lines)
    autouse: bool = False  # a pytest fixture every test runs without naming it


def strip_strings(text: str) -> str:
    """The code of an assertion without its string literals and trailing comment: a message
    saying "is not None" does not make ``==`` weaker."""
    code = re.sub(r"(['\"]).*?\1", '""', text)
    return re.split(r"\s#\s|\s//\s", code, maxsplit=1)[0]


def pair(path: str, old: str | None, new: str | None) -> tuple[list[Unit], list[Unit]]:
    """The units of both sides of one file, read the same way: a key from ``ast`` never equals
    one from lines, so Python is read by lines when either side does not parse."""
    if path.endswith(".py"):
        try:
            return _python(path, old), _python(path, new)
        except (SyntaxError, ValueError, RecursionError):  # ValueError: a null byte (3.11)
            pass
    return _by_lines(path, old), _by_lines(path, new)


# --- Python, with ast -------------------------------------------------------------------------


def _is_assertion(node: ast.AST) -> TypeGuard[ast.Assert | ast.Call]:
    """The forms rules.ASSERTION finds in a line, as nodes: ``assert``, ``self.assert*(`` and
    ``self.fail*(``, ``.assert_*(`` (mocks), ``assertX(``/``assert_x(`` imported bare,
    ``pytest.raises(`` and ``expect(``."""
    if isinstance(node, ast.Assert):
        return True
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    if isinstance(func, ast.Attribute):
        owner = func.value.id if isinstance(func.value, ast.Name) else ""
        return bool(
            _ASSERT_NAME.match(func.attr)
            or (owner == "self" and _FAIL_NAME.match(func.attr))
            or (owner == "pytest" and func.attr == "raises")
        )
    return isinstance(func, ast.Name) and bool(
        _ASSERT_NAME.match(func.id) or func.id in ("raises", "expect")
    )


def _assertion_nodes(node: ast.AST) -> Iterator[ast.Assert | ast.Call]:
    """The outermost assertions in ``node``, nested functions included (a closure's assertion
    checks the test that defines it)."""
    if _is_assertion(node):
        yield node
        return
    for child in ast.iter_child_nodes(node):
        yield from _assertion_nodes(child)


def _assertions(nodes: Iterable[ast.AST], lines: Sequence[str]) -> tuple[Assertion, ...]:
    found = sorted(
        (a for node in nodes for a in _assertion_nodes(node)),
        key=lambda n: (n.lineno, n.col_offset),
    )
    return tuple(
        Assertion(
            line=n.lineno,
            key=ast.unparse(n),
            text=norm(" ".join(lines[n.lineno - 1 : n.end_lineno or n.lineno])),
            # An assert's message says nothing of its strength.
            rank=rules.assertion_rank(
                strip_strings(ast.unparse(n.test if isinstance(n, ast.Assert) else n))
            ),
        )
        for n in found
    )


def _functions(
    node: ast.AST, prefix: str = ""
) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """Every function not inside another one, by qualified name (methods under their class;
    those under an ``if`` or a ``try`` too)."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, _FUNCTIONS):
            yield prefix + child.name, child
        elif isinstance(child, ast.ClassDef):
            yield from _functions(child, f"{prefix}{child.name}.")
        else:
            yield from _functions(child, prefix)


def _outside(node: ast.AST) -> Iterator[ast.AST]:
    """The parts of ``node`` outside every function: where the rest of its assertions are (a
    module-level check, a class body's)."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, _FUNCTIONS):
            continue
        if any(isinstance(n, _FUNCTIONS) for n in ast.walk(child)):
            yield from _outside(child)
        else:
            yield child


def _names(fn: ast.AST) -> frozenset[str]:
    """What a function may call or request: names, attributes, parameters (a fixture is
    requested by one) and identifier strings (``usefixtures("db")``)."""
    out: set[str] = set()
    for n in ast.walk(fn):
        if isinstance(n, ast.Name):
            out.add(n.id)
        elif isinstance(n, ast.Attribute):
            out.add(n.attr)
        elif isinstance(n, ast.arg):
            out.add(n.arg)
        elif isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value.isidentifier():
            out.add(n.value)
    return frozenset(out)


def _true(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value is True


def _python(path: str, text: str | None) -> list[Unit]:
    if text is None:
        return []
    tree = ast.parse(text)
    lines = _NEWLINE.split(text)
    units = [
        Unit(
            path=path,
            name=name,
            title=fn.name,
            line=fn.lineno,
            header=lines[fn.lineno - 1],
            is_test=fn.name.startswith("test"),  # pytest's and unittest's default prefix
            assertions=_assertions([fn], lines),
            body="\n".join(ast.unparse(stmt) for stmt in fn.body),
            uses=_names(fn),
            autouse=any(
                isinstance(d, ast.Call)
                and any(k.arg == "autouse" and _true(k.value) for k in d.keywords)
                for d in fn.decorator_list
            ),
        )
        for name, fn in _functions(tree)
    ]
    units.append(Unit(path, "", "", 1, "", False, _assertions(_outside(tree), lines), ""))
    return units


# --- any language, by lines -------------------------------------------------------------------


def test_name(text: str) -> str | None:
    """The name a line defines a test by (``def test_x(``, ``it('adds'``, ``func TestX(``)."""
    for pattern in rules.TEST_DEF:
        m = pattern.match(text)
        if m:
            return m.groupdict().get("name") or m.group(1)
    return None


def _indent(text: str) -> int:
    return len(text) - len(text.lstrip(" \t"))


def _line_assertions(lines: Sequence[str], start: int, end: int) -> tuple[Assertion, ...]:
    return tuple(
        Assertion(i + 1, norm(lines[i]), norm(lines[i]), rules.assertion_rank(strip_strings(t)))
        for i in range(start, end)
        if not rules.is_comment(t := lines[i]) and rules.ASSERTION.search(t)
    )


def _by_lines(path: str, text: str | None) -> list[Unit]:
    if text is None:
        return []
    lines = _NEWLINE.split(text)
    units: list[Unit] = []
    outside: list[Assertion] = []
    i = 0
    while i < len(lines):
        name = test_name(lines[i])
        if name is None:
            outside += _line_assertions(lines, i, i + 1)
            i += 1
            continue
        end = i + 1
        while end < len(lines) and (
            not lines[end].strip() or _indent(lines[end]) > _indent(lines[i])
        ):
            end += 1
        if end < len(lines) and lines[end].lstrip()[:1] in ("}", ")", "]"):
            end += 1  # the brace that closes the test is the test's
        body = "\n".join(norm(ln) for ln in lines[i + 1 : end] if ln.strip())
        assertions = _line_assertions(lines, i, end)
        units.append(Unit(path, name, name, i + 1, lines[i], True, assertions, body))
        i = end
    units.append(Unit(path, "", "", 1, "", False, tuple(outside), ""))
    return units
