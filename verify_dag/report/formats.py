"""The output formats of the report, by name: what ``verify --format`` and ``report --format``
offer, and what their help says of each.

Adding a format is one module in verify_dag/report/ that renders the Report model, and its line
in ``FORMATS``. This module imports no renderer: every command's parser reads it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from verify_dag.models import Report


@dataclass(frozen=True)
class OutputFormat:
    name: str
    what: str  # what the line after an --output write calls the file
    # "module:function", imported only when a report is rendered: the renderers pull in the
    # models and pydantic.
    renderer: str
    # A document for machines: written to --output (a file, or - for stdout), never mixed
    # into a terminal's text by default.
    document: bool = False
    note: str = ""  # what --format's help says after the name: "(v1)", "annotations"

    def render(self, report: Report) -> str:
        module, _, function = self.renderer.partition(":")
        render: Callable[[Report], str] = getattr(importlib.import_module(module), function)
        return render(report)


# The first is the default: the one written on stdout for a person to read.
FORMATS: dict[str, OutputFormat] = {
    f.name: f
    for f in (
        OutputFormat("markdown", "Markdown report", "verify_dag.report:markdown"),
        OutputFormat(
            "json", "JSON report", "verify_dag.report.json_v1:to_json", document=True, note="(v1)"
        ),
        OutputFormat(
            "sarif", "SARIF report", "verify_dag.report.sarif:sarif", document=True, note="(2.1.0)"
        ),
        OutputFormat(
            "github", "GitHub annotations", "verify_dag.report.github:github", note="annotations"
        ),
        OutputFormat(
            "gitlab",
            "GitLab Code Quality report",
            "verify_dag.report.gitlab:gitlab",
            document=True,
            note="(Code Quality)",
        ),
        OutputFormat(
            "junit", "JUnit report", "verify_dag.report.junit:junit", document=True, note="(XML)"
        ),
    )
}
DEFAULT = next(iter(FORMATS))


def for_machines_on_stdout(name: str) -> bool:
    """Whether format ``name``, without --output, writes on stdout what a machine reads (GitHub
    annotations in a CI log): nothing meant for a person may be printed there."""
    return name != DEFAULT and not FORMATS[name].document


def documents() -> str:
    """The formats written to --output, listed: "json, sarif, gitlab and junit"."""
    return _either([f.name for f in FORMATS.values() if f.document], "and")


def help_text() -> str:
    """--format's help: the formats on stdout, then those written to --output."""
    shown = [
        " ".join(filter(None, (f.name, "(default)" if f.name == DEFAULT else "", f.note)))
        for f in FORMATS.values()
        if not f.document
    ]
    written = [f"{f.name} {f.note}".strip() for f in FORMATS.values() if f.document]
    return f"{_either(shown)} on stdout; {_either(written)} to --output"


def _either(words: list[str], last: str = "or") -> str:
    return f"{', '.join(words[:-1])} {last} {words[-1]}" if len(words) > 1 else "".join(words)
