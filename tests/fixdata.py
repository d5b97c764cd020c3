"""The small project Phase 9's tests fix, and what the fake model answers about it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import Repo

GUARD = "    if not values:\n        return 0.0\n    return sum(values) / len(values)\n"
CHANGED = (
    "import os\nimport sys\n\n\ndef add(a, b):\n    return a + b\n\n\n"
    "def mean(values):\n    return sum(values) / len(values)\n"
)


def finding(title: str, severity: int, line: int, description: str) -> dict[str, Any]:
    return {
        "title": title,
        "severity": severity,
        "location": f"src/calc.py:{line}",
        "category": "correctness",
        "description": description,
    }


ZERO = finding(
    "Division by zero when the list is empty", 7, 10, "mean() divides by len(values) unchecked."
)
DOCSTRING = finding("mean has no docstring", 2, 9, "mean() says nothing of what it returns.")


def fix_reply(*options: tuple[str, str]) -> str:
    """A model's fix options: (label, replacement of line 10)."""
    return json.dumps(
        {
            "options": [
                {
                    "label": label,
                    "description": f"{label} at src/calc.py:10",
                    "edits": [
                        {"path": "src/calc.py", "startLine": 10, "endLine": 10, "replacement": text}
                    ],
                }
                for label, text in options
            ]
        }
    )


def replies(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *entries: dict[str, str]) -> None:
    """What the fake model answers: the first entry matching the prompt (or the file it reads)."""
    path = tmp_path / "replies.json"
    path.write_text(json.dumps(list(entries)), encoding="utf-8")
    monkeypatch.setenv("FAKE_MODEL_REPLIES", str(path))


def reviewer_sees(
    *found: dict[str, Any], unless_guarded: tuple[dict[str, Any], ...] = ()
) -> list[dict[str, str]]:
    """The reviewer's answers: ``unless_guarded`` once the code has the empty-list guard."""
    return [
        {
            "file": "src/calc.py",
            "contains": "if not values",
            "reply": json.dumps({"findings": list(unless_guarded)}),
        },
        {"prompt": "", "reply": json.dumps({"findings": list(found)})},
    ]


def untouched(repo: Repo) -> tuple[str, str, str, str]:
    """HEAD, the index (its tree), the stash and the branch's refs: what Phase 9 never moves."""
    return (
        repo.head(),
        repo.git("write-tree"),
        repo.git("stash", "list"),
        repo.git("for-each-ref", "refs/heads", "refs/tags"),
    )
