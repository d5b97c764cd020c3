"""Phase 8: dedup, VI ids, classes and sort; one Report feeding Markdown and JSON v1.

``build`` makes the Report (verify_dag/models/report.py) from a RunState; its JSON form is the
JSON v1 document (``to_json``), ``markdown`` renders it; ``validate`` checks a v1 document
against schemas/report.v1.schema.json; ``exit_code`` maps a Report to the process exit code.
"""

from __future__ import annotations

from verify_dag.report.json_v1 import build, json_text, to_json
from verify_dag.report.markdown import markdown
from verify_dag.report.schema import validate
from verify_dag.report.summary import summary_lines
from verify_dag.report.verdict import exit_code

__all__ = ["build", "exit_code", "json_text", "markdown", "summary_lines", "to_json", "validate"]
