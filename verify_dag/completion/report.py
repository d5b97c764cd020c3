"""Step 4: VERIFY_REPORT.md, one ``## Iteration N`` section per run, rendered from the shipped
template (``VERIFY_REPORT.md.template``, a :class:`string.Template`) and the three prior JSONs.

The seven sections (docs/completion.md): Summary (with the verdict line), Completion command,
Execution result, Stdout sample, Stderr sample, Verdict reasoning, Recommendations.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources
from string import Template

from verify_dag.completion.models import Mode
from verify_dag.phases.exerciser.criterion import Execution, Extracted, VerifyResult

SECTIONS = (
    "Summary",
    "Completion command",
    "Execution result",
    "Stdout sample",
    "Stderr sample",
    "Verdict reasoning",
    "Recommendations",
)
TEMPLATE = "VERIFY_REPORT.md.template"
SAMPLE_CHARS = 4000  # of each stream shown; execution_result.json keeps up to the cap
COMMAND_CHARS = 1000


@dataclass(frozen=True)
class Context:
    """What one iteration's section says, besides the three artifacts."""

    run_id: str
    iteration: int
    mode: Mode
    mode_chosen: str  # how the mode gate chose it (ModeChoice.note)
    mode_usage: dict[str, int]
    finished: str


def template() -> Template:
    text = resources.files("verify_dag.completion").joinpath(TEMPLATE).read_text("utf-8")
    return Template(text)


def section(ctx: Context, extracted: Extracted, execution: Execution, result: VerifyResult) -> str:
    ex = execution
    usage = f"full {ctx.mode_usage.get('full', 0)}, quick {ctx.mode_usage.get('quick', 0)}"
    return template().substitute(
        iteration=ctx.iteration,
        verdict=result.verdict,
        reason=_inline(result.reason),
        run_id=ctx.run_id,
        mode=ctx.mode,
        mode_chosen=_inline(ctx.mode_chosen),
        mode_usage=usage,
        finished=ctx.finished,
        command=_command(ctx, extracted),
        skipped=_yes_no(ex.skipped),
        exit_code="none" if ex.exit_code is None else str(ex.exit_code),
        duration_ms=ex.duration_ms,
        timed_out=f"{_yes_no(ex.timed_out)} (budget {ex.timeout_s:g} s)",
        truncated=(
            f"{_yes_no(ex.truncated)} (cap {ex.cap_bytes} bytes per stream"
            + ("; the samples show what was kept)" if ex.truncated else ")")
        ),
        cwd=f"`{ex.cwd}`" if ex.cwd else "none (not run)",
        named_paths=_named(ex),
        stdout_sample=_sample(ex, ex.stdout),
        stderr_sample=_sample(ex, ex.stderr),
        reasoning=_reasoning(ex, result),
        recommendations=_recommendations(ctx, ex, result),
    )


def place(existing: str | None, text: str, run_id: str, iteration: int) -> str:
    """The report with this iteration's section appended; a section of the same iteration
    (a redelivered step) is replaced, never duplicated, and earlier ones are never touched."""
    if not existing:
        return (
            f"# VERIFY_REPORT — run `{run_id}`\n\nThe completion criterion of this run, "
            "verified once per iteration (newest last).\n\n" + text
        )
    heading = re.search(rf"^## Iteration {iteration}\n", existing, re.MULTILINE)
    if heading is None:
        return existing.rstrip("\n") + "\n\n" + text
    after = re.search(r"^## Iteration \d+\n", existing[heading.end() :], re.MULTILINE)
    rest = existing[heading.end() + after.start() :] if after else ""
    return existing[: heading.start()] + text + ("\n" + rest if rest else "")


def _named(ex: Execution) -> str:
    """What the sandbox made of each path the criterion names, on one table row."""
    if not ex.named_paths:
        return "none besides the working directory"
    return "; ".join(
        f"`{_inline(n.path)}`: {n.access} ({_inline(n.note)})" for n in ex.named_paths
    ).replace("|", "\\|")


def _yes_no(flag: bool) -> str:
    return "yes" if flag else "no"


def _inline(text: str) -> str:
    return " ".join(text.split())


def _fence(text: str) -> str:
    """A fenced block that no backtick run inside ``text`` can close."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}\n{text.rstrip(chr(10))}\n{ticks}"


def _command(ctx: Context, extracted: Extracted) -> str:
    lines = []
    if extracted.completion:
        shown = extracted.completion
        if len(shown) > COMMAND_CHARS:
            shown = shown[:COMMAND_CHARS] + f" [... {len(shown) - COMMAND_CHARS} more characters]"
        lines += [_fence(shown), ""]
    else:
        lines += ["No command could be read.", ""]
    source = f"From `{extracted.source}`"
    if extracted.source_sha256:
        source += f" (sha256 `{extracted.source_sha256[:12]}`)"
    if extracted.iteration == ctx.iteration:
        source += ", extracted in this iteration (step 1 ran)."
    else:
        source += (
            f", extracted in iteration {extracted.iteration}: the file is unchanged, so "
            "step 1 did not run again."
        )
    lines.append(source)
    if extracted.errors:
        lines += ["", "Step 1 found these errors, so the command was not run:", ""]
        lines += [f"- `{e.code}`: {e.message}" for e in extracted.errors]
    else:
        lines += ["", "Validation: non-empty, at most 500 characters, a single line: ok."]
    return "\n".join(lines)


def _sample(ex: Execution, text: str) -> str:
    if ex.skipped:
        return "_Not run (skipped)._"
    if not text:
        return "_No output._"
    if len(text) <= SAMPLE_CHARS:
        return _fence(text)
    half = SAMPLE_CHARS // 2
    gap = len(text) - 2 * half
    return _fence(
        f"{text[:half]}\n[... {gap} characters not shown: see execution_result.json "
        f"...]\n{text[-half:]}"
    )


def _reasoning(ex: Execution, result: VerifyResult) -> str:
    exited = "none" if ex.exit_code is None else str(ex.exit_code)
    return "\n".join(
        [
            "The rule (deterministic, no judgement): `pass` if the command exited 0 AND it was not "
            "skipped AND it did not time out, else `fail`. Truncated output is reported, never a "
            "verdict input.",
            "",
            f"- exited 0: {_yes_no(ex.exit_code == 0)} (exit code {exited})",
            f"- not skipped: {_yes_no(not ex.skipped)}",
            f"- not timed out: {_yes_no(not ex.timed_out)}",
            f"- truncated (not an input): {_yes_no(ex.truncated)}",
            "",
            f"Verdict: **{result.verdict}** — {_inline(result.reason)}.",
        ]
    )


def _recommendations(ctx: Context, ex: Execution, result: VerifyResult) -> str:
    again = f"`verify-dag completion {ctx.run_id}`"
    out = []
    if ex.skipped:
        out.append(
            f"Fix `parsed_scope.json` (the errors under Completion command) and run "
            f"{again} again: step 1 re-runs because the file changed."
        )
    elif ex.timed_out:
        out.append(
            f"The command was still running after {ex.timeout_s:g} s and was killed with "
            "its whole process group: make the criterion faster or narrower."
        )
    elif ex.exit_code == 127:
        out.append(
            "Exit 127 is bash's 'command not found': the criterion runs with bash in "
            "the working directory above, with an environment stripped of secrets; name "
            "the command by path or `cd` to the project first."
        )
    elif result.verdict == "fail":
        out.append(
            f"The command exited {ex.exit_code}: read the stderr sample, fix the cause, "
            f"and run {again} again."
        )
    if ex.truncated:
        out.append(
            f"Output passed the {ex.cap_bytes}-byte cap and was cut; the verdict does not "
            "depend on it, but a quieter criterion is easier to audit."
        )
    if ctx.mode == "quick":
        out.append(
            "This iteration ran in quick mode (one task instead of four): when time "
            "allows, verify in full mode next time."
        )
    if not out:
        out.append("None: the completion criterion passed.")
    return "\n".join(f"- {line}" for line in out)
