"""What counts as a weakening, as data: file classes, marker patterns, assertion strength,
threshold and timeout keys, CI step lines. The detection over a diff is floor.py's.
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath

# --- file classes ----------------------------------------------------------------------------

DOC_EXT = frozenset({".md", ".markdown", ".rst", ".txt", ".adoc"})
_TEST_DIRS = frozenset({"test", "tests", "testing", "__tests__", "spec", "specs", "e2e"})
_TEST_NAME = re.compile(
    r"^(?:test_.*\.py|.*_test\.py|conftest\.py|.*_test\.go|.*\.(?:test|spec)"
    r"\.[cm]?[jt]sx?|.*Tests?\.(?:java|kt|cs)|.*_spec\.rb|test_.*\.rb)$"
)
_CI_NAME = re.compile(
    r"^(?:\.github/workflows/[^/]+\.ya?ml|\.gitlab-ci\.ya?ml|\.circleci/.+"
    r"\.ya?ml|azure-pipelines\.ya?ml|Jenkinsfile|\.travis\.ya?ml"
    r"|bitbucket-pipelines\.ya?ml|\.drone\.ya?ml|\.buildkite/.+\.ya?ml"
    r"|\.pre-commit-config\.ya?ml|\.gitlab/ci/.+\.ya?ml)$"
)
_TOOL_CONFIG = re.compile(
    r"^(?:pyproject\.toml|setup\.cfg|tox\.ini|pytest\.ini|\.coveragerc"
    r"|noxfile\.py|package\.json|Makefile|\.nycrc(?:\.json|\.ya?ml)?"
    r"|\.c8rc(?:\.json)?|\.mocharc\.(?:json|ya?ml|[cm]?js)|codecov\.ya?ml"
    r"|(?:jest|vitest|karma|playwright|cypress)\.conf(?:ig)?\.[cm]?[jt]s"
    r"|mypy\.ini|\.mypy\.ini|ruff\.toml|\.ruff\.toml|\.flake8)$"
)
# Files where a bare "lines: 80" or "branches: 80" is a coverage threshold.
_COVERAGE_CONFIG = re.compile(
    r"^(?:package\.json|\.nycrc(?:\.json|\.ya?ml)?|\.c8rc(?:\.json)?"
    r"|codecov\.ya?ml|(?:jest|vitest|karma)\.conf(?:ig)?\.[cm]?[jt]s)$"
)


def is_doc(path: str) -> bool:
    return PurePosixPath(path).suffix.lower() in DOC_EXT


def is_test_file(path: str) -> bool:
    parts = PurePosixPath(path).parts
    return bool(_TEST_NAME.match(parts[-1])) or any(p in _TEST_DIRS for p in parts[:-1])


def is_ci_file(path: str) -> bool:
    return bool(_CI_NAME.match(path))


def is_tool_config(path: str) -> bool:
    return bool(_TOOL_CONFIG.match(PurePosixPath(path).name))


def is_coverage_config(path: str) -> bool:
    return bool(_COVERAGE_CONFIG.match(PurePosixPath(path).name))


def is_comment(text: str) -> bool:
    s = text.lstrip()
    return (s.startswith("#") and not s.startswith(("#[", "#!["))) or s.startswith("//")


# --- markers: added lines, credited against removed ones ---------------------------------------

# (kind, marker name, pattern). A marker name is what a waiver may quote.
MARKERS: tuple[tuple[str, str, re.Pattern[str]], ...] = tuple(
    (kind, name, re.compile(pattern, flags))
    for kind, name, pattern, flags in (
        ("SKIP", "pytest.skip", r"\bpytest\.skip\s*\(", 0),
        ("SKIP", "pytest.mark.skip", r"@pytest\.mark\.skip(?:if)?\b", 0),
        ("SKIP", "unittest.skip", r"@(?:unittest\.)?skip(?:If|Unless)?\b", 0),
        ("SKIP", "skipTest", r"\.skipTest\s*\(|\braise\s+(?:unittest\.)?SkipTest\b", 0),
        ("SKIP", "it.skip", r"\b(?:it|test|describe|context|suite)\.skip\s*\(", 0),
        ("SKIP", "xit", r"(?<![\w.$])x(?:it|test|describe|context)\s*\(", 0),
        (
            "SKIP",
            "only",
            r"\b(?:it|test|describe|context)\.only\s*\(|(?<![\w.$])f(?:it|describe)"
            r"\s*\(",
            0,
        ),
        ("SKIP", "t.Skip", r"\bt\.Skip(?:f|Now)?\s*\(", 0),
        ("SKIP", "#[ignore]", r"#\[ignore\b", 0),
        ("XFAIL", "xfail", r"\bpytest\.xfail\s*\(|@pytest\.mark\.xfail\b", 0),
        ("XFAIL", "expectedFailure", r"@(?:unittest\.)?expectedFailure\b", 0),
        ("XFAIL", "it.failing", r"\b(?:it|test)\.failing\s*\(", 0),
        ("SUPPRESSION", "noqa", r"#\s*noqa\b", re.IGNORECASE),
        ("SUPPRESSION", "type: ignore", r"#\s*type:\s*ignore\b", 0),
        ("SUPPRESSION", "pragma: no cover", r"pragma:\s*no\s*(?:cover|branch)\b", 0),
        ("SUPPRESSION", "eslint-disable", r"eslint-disable(?:-next-line|-line)?\b", 0),
        ("SUPPRESSION", "ts-ignore", r"@ts-(?:ignore|nocheck|expect-error)\b", 0),
        ("SUPPRESSION", "pylint: disable", r"pylint:\s*disable\b", 0),
        ("SUPPRESSION", "nosec", r"#\s*nosec\b", 0),
        ("SUPPRESSION", "nolint", r"//\s*nolint\b", 0),
        ("SUPPRESSION", "pyright: ignore", r"pyright:\s*ignore\b", 0),
        (
            "SUPPRESSION",
            "mypy: ignore-errors",
            r"mypy:\s*ignore-errors\b|^\s*ignore_errors\s*=\s*"
            r"[Tt]rue\b",
            0,
        ),
        ("SUPPRESSION", "rubocop:disable", r"rubocop:disable\b", 0),
        ("SUPPRESSION", "allow", r"#!?\[allow\(", 0),
        ("SUPPRESSION", "SuppressWarnings", r"@SuppressWarnings\b", 0),
        ("OR_TRUE", "|| true", r"\|\|\s*(?:true\b|:(?=[\s;)\"']|$)|exit\s+0\b)", 0),
        ("OR_TRUE", "set +e", r"^\s*(?:-\s+)?set\s+\+e\b", 0),
        ("ALLOW_FAILURE", "continue-on-error", r"\bcontinue-on-error:\s*true\b", 0),
        ("ALLOW_FAILURE", "allow_failure", r"\ballow_failure:\s*true\b", 0),
        ("ALLOW_FAILURE", "ignore_outcome", r"\bignore_outcome\s*=\s*true\b", re.IGNORECASE),
    )
)
# Markers that only mean something in code or CI, never in prose.
COMMENT_FREE_KINDS = frozenset({"SKIP", "XFAIL"})
# Markers that are ordinary code in other languages (a Python `fit(X, y)` is no focused test).
_JS = (".js", ".jsx", ".ts", ".tsx", ".mjs", ".cjs", ".coffee")
MARKER_SUFFIXES: dict[str, tuple[str, ...]] = {
    "it.skip": _JS,
    "xit": _JS,
    "only": _JS,
    "it.failing": _JS,
    "t.Skip": (".go",),
    "#[ignore]": (".rs",),
    "allow": (".rs",),
    "SuppressWarnings": (".java", ".kt"),
}


def marker_applies(name: str, path: str) -> bool:
    suffixes = MARKER_SUFFIXES.get(name)
    return suffixes is None or PurePosixPath(path).suffix.lower() in suffixes


# --- tests and assertions --------------------------------------------------------------------

TEST_DEF = (
    re.compile(r"^\s*(?:async\s+)?def\s+(test\w*)\s*\("),
    # it.skip('x') and xit('x') still define test x: a skip, not a deletion.
    re.compile(
        r"^\s*[xf]?(?:it|test)(?:\.(?:skip|only|todo|failing|concurrent))?\s*\(\s*"
        r"(['\"`])(?P<name>.*?)\1"
    ),
    re.compile(r"^func\s+(Test\w+)\s*\("),
)
ASSERTION = re.compile(
    r"^\s*assert\b|\bself\.(?:assert\w*|fail\w*)\s*\(|\.assert_\w+\s*\(|\bexpect\s*\("
    r"|\.should\b|\bassert\.\w+\s*\(|(?<![\w.])assert[A-Z]\w*\s*\(|\bpytest\.raises\s*\("
    r"|\brequire\.(?:Equal|NoError|True|False|Nil|NotNil|Len|Contains|Error)\w*\s*\("
    r"|\bt\.(?:Error|Errorf|Fatal|Fatalf|Fail|FailNow)\s*\("
)
# Strength: 3 exact, 2 relational or approximate, 1 truthiness. Checked in this order.
_RANK_1 = re.compile(
    r"\bis\s+not\s+None\b|assertTrue|assertFalse|assertIsNotNone|toBeTruthy"
    r"|toBeFalsy|toBeDefined|\.ok\(|raises\s*\(\s*(?:Base)?Exception\s*[,)]"
    r"|toThrow\(\s*\)|\bNotNil\b|\bassert\.True\b"
)
_RANK_2 = re.compile(
    r"approx|AlmostEqual|toBeCloseTo|!=|<=|>=|(?<![-=<>])[<>](?![=>])"
    r"|\bnot\s+in\b|\bin\b|assertIn|assertNotEqual|Greater|Less|toContain"
    r"|toMatch|assertRegex|isinstance|assertIsInstance|toHaveLength|Contains"
)
_RANK_3 = re.compile(
    r"==|\bis\b|Equal|toBe\(|toStrictEqual|called_\w*with|assertRaises|raises"
    r"|toThrow\(.|deepEqual|strictEqual|\.equal\(|\bNoError\b|\bLen\b"
)


def assertion_rank(text: str) -> int:
    if _RANK_1.search(text):
        return 1
    if _RANK_2.search(text):
        return 2
    return 3 if _RANK_3.search(text) else 1


# --- thresholds and timeouts: "key = number" pairs -------------------------------------------

KEY_VALUE = (
    re.compile(
        r"(?P<key>--[A-Za-z][\w-]*)(?:=|\s+)[\"']?(?P<num>\d+(?:\.\d+)?)(?P<unit>ms|min|s|m"
        r"|h)?%?(?![\w.])"
    ),
    re.compile(
        r"(?P<key>(?<![\w-])[A-Za-z_][\w.-]*)[\"']?\s*[:=]\s*[\"']?(?P<num>\d+(?:\.\d+)?)"
        r"(?P<unit>ms|min|s|m|h)?%?(?![\w.])"
    ),
    re.compile(r"(?P<key>[A-Za-z_][\w.]*)\s*\(\s*(?P<num>\d+(?:\.\d+)?)(?P<unit>)\s*[,)]"),
)
THRESHOLD_KEYS = frozenset(
    {
        "fail_under",
        "cov_fail_under",
        "min_coverage",
        "minimum_coverage",
        "coverage_threshold",
        "coverage_min",
        "fail_under_line",
        "fail_under_branch",
        "check_coverage",
    }
)
COVERAGE_KEYS = frozenset({"lines", "branches", "functions", "statements", "target"})
_UNIT = {"ms": 0.001, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "": 1.0}


def normal_key(key: str) -> str:
    return key.lstrip("-").replace("-", "_").lower()


def seconds(num: str, unit: str | None) -> float:
    return float(num) * _UNIT.get(unit or "", 1.0)


# --- CI steps --------------------------------------------------------------------------------

CI_STEP = re.compile(
    r"^\s*-\s+(?P<key>name|run|uses|id|script|task|bash|pwsh|powershell|template"
    r"|checkout)\s*:|^\s*(?P<groovy>sh|bat|stage)\s*[('\"]"
)
# GitLab, Travis, Bitbucket: plain list items under script: are the steps.
CI_SCRIPT_ITEM = re.compile(r"^\s*-\s+(?P<cmd>[^\s#:'\"][^#:]*)$")
CI_ITEM_FILES = re.compile(
    r"^(?:\.gitlab-ci\.ya?ml|\.gitlab/ci/.+|\.travis\.ya?ml"
    r"|bitbucket-pipelines\.ya?ml)$"
)
