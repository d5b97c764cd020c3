"""Which CLARIFICATIONS sentence authorises a weakening (docs/contract.md, "Waivers").

A sentence authorises a floor finding when it

- says so: it holds an authorising word (allow, allowed, authorise/authorize, permit, may,
  waive, approve, accept, ok to) and no negation (not, never, no, don't, cannot, forbidden, ...);
- names the kind of weakening (skip, xfail, assert, noqa, timeout, threshold, CI step, ...: the
  words per kind are ``KIND_WORDS``), or the marker itself (``# type: ignore``); and
- names the place: the file's path or its base name.

Anything less specific ("tests may change") authorises nothing: the finding stays a gap.
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath
from typing import Protocol

_AUTHORISE = re.compile(
    r"\b(?:allow(?:s|ed|ing)?|authori[sz](?:e|es|ed|ing)|permit(?:s|ted)?"
    r"|may|waive(?:s|d)?|approve(?:s|d)?|accept(?:s|ed|able)?"
    r"|ok(?:ay)?\s+to)\b",
    re.IGNORECASE,
)
_NEGATION = re.compile(
    r"\b(?:not|never|no|nor|cannot|forbid(?:s|den)?|prohibit(?:s|ed)?)\b"
    r"|n't\b",
    re.IGNORECASE,
)
KIND_WORDS: dict[str, tuple[str, ...]] = {
    "TEST_DELETED": ("delet", "remov", "drop"),
    "SKIP": ("skip", "focus", ".only", "xit"),
    "XFAIL": ("xfail", "expected failure", "expectedfailure", "failing"),
    "ASSERT_REMOVED": ("assert",),
    "ASSERT_LOOSENED": ("assert", "loosen", "relax", "weaken"),
    "SUPPRESSION": ("suppress",),
    "THRESHOLD_LOWERED": ("threshold", "fail_under", "fail-under", "coverage"),
    "TIMEOUT_RAISED": ("timeout", "time limit", "time-out"),
    "OR_TRUE": ("|| true", "|| :", "|| exit 0", "set +e"),
    "ALLOW_FAILURE": ("continue-on-error", "allow_failure", "allow failure", "ignore_outcome"),
    "CI_STEP_REMOVED": ("step", "workflow", "pipeline", "hook", " ci ", " ci.", " ci,"),
}


class Finding(Protocol):
    @property
    def kind(self) -> str: ...
    @property
    def path(self) -> str: ...
    @property
    def marker(self) -> str: ...


def sentences(text: str) -> list[str]:
    """One sentence per list item or line, split further after ``.``, ``!``, ``?``."""
    out: list[str] = []
    for raw in re.split(r"\n\s*\n|\n(?=\s*(?:[-*+]|\d+[.)])\s)", text):
        item = " ".join(re.sub(r"^\s*(?:[-*+]|\d+[.)])\s+", "", raw).split())
        out += [s.strip() for s in re.split(r"(?<=[.!?])\s+(?=[A-Z`\"'(])", item) if s.strip()]
    return out


def _names_kind(sentence: str, finding: Finding) -> bool:
    low = f" {sentence.lower()} "
    if any(word in low for word in KIND_WORDS.get(finding.kind, ())):
        return True
    # The marker itself (noqa, pytest.skip, fail_under, a test's name); a CI step's marker is
    # its YAML key (run, name), far too common a word to name anything.
    marker = finding.marker.lower()
    return finding.kind != "CI_STEP_REMOVED" and len(marker) >= 3 and marker in low


def _negated(sentence: str, finding: Finding) -> bool:
    # "pragma: no cover" and the like are names, not negations.
    text = re.sub(r"pragma:\s*no\s*(?:cover|branch)", " ", sentence, flags=re.IGNORECASE)
    if finding.marker:
        text = re.sub(re.escape(finding.marker), " ", text, flags=re.IGNORECASE)
    return _NEGATION.search(text) is not None


def _names_place(sentence: str, finding: Finding) -> bool:
    low = sentence.lower()
    path = finding.path.lower()
    return path in low or PurePosixPath(path).name in low


def authorising(finding: Finding, clarifications: str) -> str | None:
    """The first sentence of ``clarifications`` that authorises ``finding``, or None."""
    for sentence in sentences(clarifications):
        if (
            _AUTHORISE.search(sentence)
            and not _negated(sentence, finding)
            and _names_kind(sentence, finding)
            and _names_place(sentence, finding)
        ):
            return sentence
    return None
