"""Phase 8: dedup, VI ids, classes and sort; one Report feeding every output format.

``build`` makes the Report (verify_dag/models/report.py) from a RunState; its JSON form is the
JSON v1 document (``to_json``), ``markdown`` renders it; ``validate`` checks a v1 document
against schemas/report.v1.schema.json; ``exit_code`` maps a Report to the process exit code.
The output formats are listed in :mod:`~verify_dag.report.formats`.

The names are imported when first used: every command's parser lists the formats, and the
renderers pull in pydantic and the models, which a command line's start should not pay for.
Renderers are reached through the package (``report.markdown``, ``verify_dag.report:markdown``):
a first import of the submodule ``report.markdown`` by its own name would bind the package's
``markdown`` to the module instead of the function.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from verify_dag.report.json_v1 import build, json_text, to_json
    from verify_dag.report.markdown import markdown
    from verify_dag.report.schema import validate
    from verify_dag.report.summary import summary_lines
    from verify_dag.report.verdict import exit_code

__all__ = ["build", "exit_code", "json_text", "markdown", "summary_lines", "to_json", "validate"]

_HOME = {
    "build": "json_v1",
    "json_text": "json_v1",
    "to_json": "json_v1",
    "markdown": "markdown",
    "validate": "schema",
    "summary_lines": "summary",
    "exit_code": "verdict",
}


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    # Importing the submodule report.markdown bound the package's `markdown` to the module; the
    # package's name is the function.
    globals()[name] = value
    return value
