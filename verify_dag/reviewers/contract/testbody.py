"""What an oracle that runs selected tests observes: the selected tests' bodies and what they
call, not the whole test file (docs/contract.md, "The vacuity rule", rule 4).

002: "Read the CHECK: and confirm it observes the artifact the criterion names." A CHECK of
``pytest tests/test_calc.py::test_add`` for a criterion about ``sub()`` runs ``test_add``; that
the file also holds a ``test_sub`` says nothing about what this oracle checks. So when the CHECK
selects tests (a node id ``path::name``, or ``-k NAME``) in a Python file, what it observes is
the source of each selected test and, one call deep, of the functions it calls that the test
file defines or imports from the repository (``from calc import add`` reads ``add`` in
``calc.py`` or ``src/calc.py``). Anything else (no selection, a file that does not parse, a
``-k`` expression) observes the whole file.

Pure: reading files is the caller's ``read(path)``.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Sequence

Reader = Callable[[str], "str | None"]
# Where a module named in an import may live, relative to the repository's top.
_ROOTS = ("", "src/")


def observed(tokens: Sequence[str], paths: Sequence[str], read: Reader) -> list[str]:
    """The texts the CHECK observes through the files ``paths`` it names."""
    selected: dict[str, list[str]] = {}
    for token in tokens:
        value = token.split("=", 1)[1] if token.startswith("-") and "=" in token else token
        path, sep, rest = value.strip("'\"").removeprefix("./").partition("::")
        if sep and rest:
            selected.setdefault(path, []).append(rest.split("::")[-1].split("[")[0])
    keyword = _keyword(tokens)
    out: list[str] = []
    for path in paths:
        text = read(path)
        if text is None:
            continue
        names = selected.get(path)
        if names is None and keyword is not None and path.endswith(".py"):
            names = [keyword]
        bodies = _bodies(path, text, names, read, exact=path in selected) if names else None
        out.append(text if bodies is None else bodies)
    return out


def _keyword(tokens: Sequence[str]) -> str | None:
    """``-k NAME`` when NAME is one plain name (an expression selects too loosely to say)."""
    for i, token in enumerate(tokens):
        value = None
        if token == "-k" and i + 1 < len(tokens):
            value = tokens[i + 1]
        elif token.startswith("-k") and len(token) > 2:
            value = token[2:].lstrip("=")
        if value is not None:
            value = value.strip("'\"")
            return value if value.isidentifier() else None
    return None


def _bodies(path: str, text: str, names: list[str], read: Reader, *, exact: bool) -> str | None:
    """The selected tests' source and their callees', or None when it cannot be told."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return None
    defs = _defs(tree)
    picked = [
        node
        for name, node in defs.items()
        if (name in names if exact else any(n in name for n in names))
    ]
    if not picked:
        return None
    imported = _imports(tree)
    parts: list[str] = []
    for node in picked:
        parts.append(ast.get_source_segment(text, node) or "")
        for callee in sorted(_called(node)):
            if callee in defs and defs[callee] not in picked:
                parts.append(ast.get_source_segment(text, defs[callee]) or "")
            elif callee in imported:
                parts.append(_imported_body(imported[callee], callee, read))
    return "\n".join(p for p in parts if p)


def _defs(tree: ast.Module) -> dict[str, ast.AST]:
    """Top-level functions and classes, and the methods of test classes (``Class::method``
    selects the method; the method's own name is what a node id's last part says)."""
    out: dict[str, ast.AST] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            out[node.name] = node
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                    out.setdefault(item.name, item)
    return out


def _called(node: ast.AST) -> set[str]:
    names: set[str] = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call):
            if isinstance(sub.func, ast.Name):
                names.add(sub.func.id)
            elif isinstance(sub.func, ast.Attribute):
                names.add(sub.func.attr)
    return names


def _imports(tree: ast.Module) -> dict[str, str]:
    """name -> the module it is imported from (``from calc import add``)."""
    out: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                out[alias.asname or alias.name] = node.module
    return out


def _imported_body(module: str, name: str, read: Reader) -> str:
    base = module.replace(".", "/")
    for root in _ROOTS:
        for candidate in (f"{root}{base}.py", f"{root}{base}/__init__.py"):
            text = read(candidate)
            if text is None:
                continue
            try:
                tree = ast.parse(text)
            except (SyntaxError, ValueError):
                return text  # cannot tell which part: the whole module
            node = _defs(tree).get(name)
            return (ast.get_source_segment(text, node) or "") if node is not None else ""
    return ""
