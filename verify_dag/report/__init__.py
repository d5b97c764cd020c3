"""Phase 8: dedup, VI ids, classes and sort; one report dict feeding Markdown and JSON v1.

``build`` makes the JSON v1 dict from a RunState; ``markdown`` renders that dict; ``validate``
checks it against schemas/report.v1.schema.json; ``exit_code`` maps it to the process exit code.
"""

from __future__ import annotations

from verify_dag.report.json_v1 import Report, build, to_json
from verify_dag.report.markdown import markdown
from verify_dag.report.schema import validate
from verify_dag.report.verdict import exit_code

__all__ = ["Report", "build", "exit_code", "markdown", "to_json", "validate"]
