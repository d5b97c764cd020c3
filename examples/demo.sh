#!/usr/bin/env bash
# Build a small throwaway repository whose branch adds a lint error on a new line, keeps an old
# lint error on an unchanged line and adds a failing test; then verify the branch against its base
# tag on the embedded default (no server). Usage: bash examples/demo.sh [extra verify-dag flags]
set -euo pipefail
demo=$(mktemp -d "${TMPDIR:-/tmp}/verify-dag-demo.XXXXXX")
cd "$demo"
git init -q -b main .
git config user.name "verify-dag demo"
git config user.email "demo@example.invalid"
mkdir -p src tests
cat > pyproject.toml <<'TOML'
[tool.pytest.ini_options]
testpaths = ["tests"]
pythonpath = ["src"]
TOML
cat > src/calc.py <<'PY'
import os


def add(a, b):
    return a + b
PY
cat > tests/test_calc.py <<'PY'
from calc import add


def test_add():
    assert add(2, 2) == 4
PY
git add -A && git commit -qm "calc: add" && git tag base
cat >> src/calc.py <<'PY'


def mul(a, b):
    unused = 1
    return a * b + 1
PY
cat >> tests/test_calc.py <<'PY'


def test_mul():
    from calc import mul
    assert mul(3, 4) == 12
PY
git add -A && git commit -qm "calc: mul"
echo "demo repository: $demo (branch main, base tag 'base')" >&2
set +e
verify-dag verify --scope=branch --base=base "$@" "$demo"
rc=$?
echo "verify-dag exit code: $rc (1 = issues at or above --fail-on)" >&2
exit 0
