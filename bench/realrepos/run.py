"""Run verify-dag on every case of the corpus and tabulate what it says against the oracle.

Run by hand (it needs the package index): ``python bench/realrepos/run.py CORPUS --label L``,
after ``make_corpus.py CORPUS`` and ``oracle.py CORPUS``. Each case is verified as a user
would: ``verify-dag verify REPO --scope=branch --base=base --format=json``, one run at a time.
Each report is kept as ``results/L/<case>.json``, the rows as ``results/L.json``, and the
table goes into README.md between the markers of label L (added at the end when missing).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Any

import oracle
from cases import CASES, Case

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
README = HERE / "README.md"
MAIN = HERE.parent.parent
_COUNT = re.compile(r"(?<![\w.])(\d+) ((?:subtests )?[a-z]+)\b")
# The tester's note when it ran unittest as declared: "unittest: Ran 929 tests, OK".
_UNITTEST = re.compile(r"unittest: (Ran \d+ tests?, (?:OK|FAILED)(?: \([^)]*\))?)")
# Judgement reviewers with no model backend are NOT_RUN by design on this machine: not a finding.
_EXPECTED_NOT_RUN = "no model backend configured"


def verify(case: Case, corpus: Path, out: Path, cache: str, cli: str) -> tuple[int, float, str]:
    out.unlink(missing_ok=True)
    env = {**os.environ, "VERIFY_DAG_CACHE": cache}
    if os.sep in cli:  # a CLI from another venv: its ruff and mypy come first on PATH too
        env["PATH"] = f"{Path(cli).parent}{os.pathsep}{env['PATH']}"
    cmd = [
        cli,
        "verify",
        str(corpus / case.name),
        "--scope=branch",
        "--base=base",
        "--format=json",
        f"--output={out}",
        "--store=/tmp/vdstore-realrepos",
    ]
    start = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=3600, env=env)
    return proc.returncode, time.monotonic() - start, proc.stderr


def tester_counts(notes: str) -> dict[str, int]:
    unittest = _UNITTEST.search(notes)
    if unittest:  # the same words the oracle reads from unittest's own summary
        ran, _, end = unittest.group(1).partition(", ")
        return oracle.parse_counts(f"{ran} in 0s\n{end}\n")
    head = notes.split(";")[0]
    return {word: int(n) for n, word in _COUNT.findall(head)}


def type_check(case: Case, issues: list[dict[str, Any]], static: dict[str, Any] | None) -> str:
    """How many of verify-dag's severity 7+ mypy findings the project's own mypy reports too."""
    mine = [
        f"{i['location']['path']}:{i['location'].get('line')}:{i['title'].split(':')[0][5:]}"
        for i in issues
        if i["severity"] >= 7 and i["title"].startswith("mypy ") and i.get("location")
    ]
    if not mine:
        return "-"
    if not case.static_command:
        return f"0 of {len(mine)} (the project declares no mypy run over these files)"
    if static is None or "errors" not in static:
        return f"? of {len(mine)} (no static oracle result)"
    return f"{sum(1 for m in mine if m in set(static['errors']))} of {len(mine)}"


def row(
    case: Case,
    report: dict[str, Any] | None,
    code: int,
    wall: float,
    stderr: str,
    oracle: dict[str, Any],
    static: dict[str, Any] | None = None,
) -> dict[str, Any]:
    if report is None:
        return {
            "case": case.name,
            "shape": case.shape,
            "exit": code,
            "wall_s": round(wall),
            "oracle": oracle.get("counts"),
            "error": stderr.strip()[-500:],
        }
    skills = {s["skill"]: s for s in report["skillResults"]}
    tester = skills.get("tester", {})
    issues = report.get("issues", [])
    severe = [
        f"{i['severity']} {i['title']}"
        + (
            f" @ {i['location']['path']}:{i['location'].get('line', '')}"
            if i.get("location")
            else ""
        )
        + (f" [{i['baseline']}]" if i.get("baseline") else "")
        for i in issues
        if i["severity"] >= 7
    ]
    # The end of each severe finding's description: where an installer's or a tool's reason is.
    detail = [f"{i['title']}: ...{i['description'][-400:]}" for i in issues if i["severity"] >= 7]
    stuck = [
        f"{name} {s['status']}: {s['notes'].split(';')[0][:160]}"
        for name, s in skills.items()
        if s["status"] in ("BLOCKED", "NOT_RUN") and _EXPECTED_NOT_RUN not in s["notes"]
    ]
    return {
        "case": case.name,
        "shape": case.shape,
        "status": report["status"],
        "oracle": oracle.get("counts"),
        "oracle_exit": oracle.get("exit", oracle.get("install_exit")),
        "tester_status": tester.get("status"),
        "tester": tester_counts(tester.get("notes", "")),
        "tester_notes": tester.get("notes", "")[:600],
        "static_notes": skills.get("static-analysis", {}).get("notes", ""),
        "by_severity": dict(sorted(Counter(i["severity"] for i in issues).items(), reverse=True)),
        "severe": severe,
        "severe_groups": grouped(issues),
        "mypy_confirmed": type_check(case, issues, static),
        "severe_detail": detail,
        "stuck": stuck,
        "exit": code,
        "wall_s": round(wall),
    }


def grouped(issues: list[dict[str, Any]]) -> list[str]:
    """Severity 7+ issues grouped by severity, rule and top directory, largest group first."""
    groups: Counter[str] = Counter()
    for i in issues:
        if i["severity"] < 7:
            continue
        rule = i["title"].split(":")[0]
        where = f" in {i['location']['path'].split('/')[0]}" if i.get("location") else ""
        base = f" [{i['baseline']}]" if i.get("baseline") else ""
        groups[f"{i['severity']} {rule}{where}{base}"] += 1
    top = [f"{n}x {key}" for key, n in groups.most_common(6)]
    if len(groups) > 6:
        top.append(f"... {len(groups) - 6} more groups")
    return top


def cell(items: list[str]) -> str:
    return "<br>".join(x.replace("|", "\\|").replace("\n", " ") for x in items) or "-"


def counts_text(counts: dict[str, int] | None) -> str:
    return oracle.counts_text(counts) if counts else "-"


def table(rows: list[dict[str, Any]], label: str, main_rev: str) -> str:
    revisions = sorted({r.get("revision", main_rev) for r in rows})
    if len(revisions) == 1:
        where = f"on verify-dag {revisions[0]}"
    else:  # cases re-run on a later revision name it
        where = "; ".join(
            ", ".join(r["case"] for r in rows if r.get("revision", main_rev) == rev)
            + f" on verify-dag {rev}"
            for rev in revisions
        )
    # When each report was written, not when this table was: --table-only rebuilds it later.
    written = [float(r["ran_at"]) for r in rows if "ran_at" in r] or [time.time()]
    span = "-".join(
        sorted({time.strftime("%H:%M", time.gmtime(t)) for t in (min(written), max(written))})
    )
    day = time.strftime("%Y-%m-%d", time.gmtime(min(written)))
    lines = [
        f"Run `{label}`, reports written {day} {span} UTC: {where}.",
        "",
        "| case | shape | oracle | tester | findings by severity | severity >= 7 "
        "| of those from mypy, the project's mypy reports | BLOCKED / NOT_RUN | exit | time |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if "error" in r:
            lines.append(
                f"| {r['case']} | {r['shape']} | {counts_text(r['oracle'])} | - | - | - "
                f"| - | run failed: {r['error'][-200:]} | {r['exit']} | {r['wall_s']} s |"
            )
            continue
        sev = ", ".join(f"{n}x{s}" for s, n in r["by_severity"].items()) or "none"
        lines.append(
            f"| {r['case']} | {r['shape']} | {counts_text(r['oracle'])} "
            f"| {r['tester_status']}: {counts_text(r['tester'])} | {sev} "
            f"| {cell(r['severe_groups'])} | {r['mypy_confirmed']} "
            f"| {cell(r['stuck'])} | {r['exit']} | {r['wall_s']} s |"
        )
    return "\n".join(lines)


def write_table(text: str, label: str) -> None:
    begin, end = f"<!-- table {label} begin -->", f"<!-- table {label} end -->"
    readme = README.read_text() if README.exists() else ""
    block = f"{begin}\n{text}\n{end}"
    if begin in readme and end in readme:
        head, rest = readme.split(begin, 1)
        readme = head + block + rest.split(end, 1)[1]
    else:
        readme = readme.rstrip("\n") + f"\n\n{block}\n"
    README.write_text(readme)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus", type=Path, help="the directory make_corpus.py wrote")
    parser.add_argument("--label", required=True, help="names this run's results and table")
    parser.add_argument("--case", action="append", help="only these cases (repeatable)")
    parser.add_argument("--cache", default="/tmp/vdcache-realrepos", help="VERIFY_DAG_CACHE")
    parser.add_argument(
        "--cli",
        default="verify-dag",
        help="the verify-dag to run (default: the one on PATH, /work/main's)",
    )
    parser.add_argument("--revision", help="what --cli was installed from, for the table")
    parser.add_argument(
        "--table-only",
        action="store_true",
        help="rebuild the table from the kept reports and the current oracle",
    )
    args = parser.parse_args()
    corpus = args.corpus.resolve()
    oracle_path = RESULTS / "oracle.json"
    oracles = json.loads(oracle_path.read_text()) if oracle_path.exists() else {}
    static_path = RESULTS / "static.json"
    statics = json.loads(static_path.read_text()) if static_path.exists() else {}
    out_dir = RESULTS / args.label
    out_dir.mkdir(parents=True, exist_ok=True)
    rows_path = RESULTS / f"{args.label}.json"
    rows = {r["case"]: r for r in json.loads(rows_path.read_text())} if rows_path.exists() else {}
    rev = (
        args.revision
        or subprocess.run(
            ["git", "-C", str(MAIN), "log", "-1", "--format=%h"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        + " plus the work tree's uncommitted edits"
    )
    for case in CASES:
        if args.case and case.name not in args.case:
            continue
        out = out_dir / f"{case.name}.json"
        if args.table_only:
            if case.name in rows:
                old = rows[case.name]
                report = json.loads(out.read_text()) if out.exists() else None
                rows[case.name] = row(
                    case,
                    report,
                    old["exit"],
                    old["wall_s"],
                    old.get("error", ""),
                    oracles.get(case.name, {}),
                    statics.get(case.name),
                )
                if "revision" in old:
                    rows[case.name]["revision"] = old["revision"]
                # Rows from before ran_at was kept: the report file's time is when it ran.
                ran_at = old.get("ran_at") or (out.stat().st_mtime if out.exists() else None)
                if ran_at is not None:
                    rows[case.name]["ran_at"] = ran_at
            continue
        code, wall, stderr = verify(case, corpus, out, args.cache, args.cli)
        report = json.loads(out.read_text()) if out.exists() else None
        rows[case.name] = row(
            case, report, code, wall, stderr, oracles.get(case.name, {}), statics.get(case.name)
        )
        rows[case.name]["revision"] = rev  # cases re-run later name their own
        rows[case.name]["ran_at"] = time.time()
        print(json.dumps(rows[case.name]), flush=True)
        ordered = [rows[c.name] for c in CASES if c.name in rows]
        rows_path.write_text(json.dumps(ordered, indent=2) + "\n")
        write_table(table(ordered, args.label, rev), args.label)  # a long run shows progress
    rows_path.write_text(
        json.dumps([rows[c.name] for c in CASES if c.name in rows], indent=2) + "\n"
    )
    write_table(table([rows[c.name] for c in CASES if c.name in rows], args.label, rev), args.label)


if __name__ == "__main__":
    main()
