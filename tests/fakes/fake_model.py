"""A fake model CLI behaving like ``codex exec`` and ``claude -p`` where verify-dag relies on it.

Installed under the real names by ``fakes.install``; the name it plays comes from $FAKE_MODEL_NAME.
Reads the prompt on stdin, logs {argv, prompt, cwd} to $FAKE_MODEL_LOG (JSON lines) when set, and
behaves as $FAKE_MODEL_MODE says: findings (default; the reply is $FAKE_MODEL_REPLY or one
finding), none, hang, rate-limit, auth, garbage, empty, crash. A real model answers each prompt
on its own, and an agent CLI reads the code in its working directory: $FAKE_MODEL_REPLIES names a
JSON file of {"reply": ..., "prompt": text} or {"reply": ..., "file": path, "contains": text}
entries, and the first whose text is in the prompt (or in that file of the working directory)
gives the reply (before $FAKE_MODEL_REPLY). Stdlib only.
"""

from __future__ import annotations

import json
import os
import sys
import time

DEFAULT_REPLY = json.dumps(
    {
        "findings": [
            {
                "title": "Division by zero when the list is empty",
                "severity": 7,
                "location": "src/calc.py:5",
                "category": "correctness",
                "description": "mean() divides by len(values) without checking for an empty list.",
            }
        ]
    }
)
GARBAGE = "I had a look around the repository and it seems mostly reasonable, hard to say really."
# The texts the real CLIs print (openai/codex and anthropics/claude-code issue reports).
CODEX_LIMIT = (
    "ERROR: You've hit your usage limit. Upgrade to Pro "
    "(https://openai.com/chatgpt/pricing) or try again in 2 days 17 hours 14 minutes."
)
CODEX_AUTH = "ERROR: exceeded retry limit, last status: 401 Unauthorized, request id: 9a4af587"
CLAUDE_LIMIT = "You've hit your limit · resets 3pm (Europe/London)"
CLAUDE_AUTH = "Invalid API key · Please run /login"
CMD_LIMIT = "Error: 429 Too Many Requests: rate limit exceeded, retry later"
CMD_AUTH = "Error: 401 Unauthorized: invalid API key"


def option(argv: list[str], *names: str) -> str | None:
    for i, arg in enumerate(argv):
        for name in names:
            if arg == name and i + 1 < len(argv):
                return argv[i + 1]
            if arg.startswith(name + "="):
                return arg.split("=", 1)[1]
    return None


# The options the real CLIs accept (`codex exec --help`, `claude --help`): an option the real
# CLI would reject fails here as it would there, so a misspelt flag cannot pass the tests.
CODEX_VALUED = {
    "-c",
    "--config",
    "-i",
    "--image",
    "-m",
    "--model",
    "-s",
    "--sandbox",
    "-p",
    "--profile",
    "-C",
    "--cd",
    "--output-schema",
    "--color",
    "-o",
    "--output-last-message",
    "--add-dir",
    "--local-provider",
}
CODEX_FLAGS = {
    "--oss",
    "--full-auto",
    "--dangerously-bypass-approvals-and-sandbox",
    "--skip-git-repo-check",
    "--json",
}
CLAUDE_VALUED = {
    "--output-format",
    "--input-format",
    "--model",
    "--effort",
    "--max-turns",
    "--system-prompt",
    "--append-system-prompt",
    "--permission-mode",
    "--allowedTools",
    "--disallowedTools",
    "--add-dir",
    "--settings",
    "--fallback-model",
    "--json-schema",
    "--mcp-config",
}
CLAUDE_FLAGS = {
    "-p",
    "--print",
    "--verbose",
    "--dangerously-skip-permissions",
    "--bare",
    "--safe-mode",
}


def unknown_option(args: list[str], valued: set[str], flags: set[str]) -> str | None:
    """The first option the real CLI would reject, or None."""
    i = 0
    while i < len(args):
        arg = args[i]
        name = arg.split("=", 1)[0]
        if arg == "-" or not arg.startswith("-"):
            i += 1
        elif name in valued:
            i += 1 if "=" in arg else 2
        elif arg in flags:
            i += 1
        else:
            return arg
    return None


def reply_for(mode: str) -> str:
    if mode == "none":
        return '{"findings": []}'
    if mode == "garbage":
        return GARBAGE
    if mode == "empty":
        return ""
    keyed = os.environ.get("FAKE_MODEL_REPLIES")
    if keyed:
        with open(keyed, encoding="utf-8") as fh:
            for entry in json.load(fh):
                if "file" in entry:
                    try:
                        with open(entry["file"], encoding="utf-8") as code:
                            seen = code.read()
                    except OSError:
                        continue
                    if entry["contains"] in seen:
                        return str(entry["reply"])
                elif entry["prompt"] in PROMPT:
                    return str(entry["reply"])
    return os.environ.get("FAKE_MODEL_REPLY", DEFAULT_REPLY)


def envelope(result: str, is_error: bool) -> str:
    return json.dumps(
        {
            "type": "result",
            "subtype": "success",
            "is_error": is_error,
            "duration_ms": 1234,
            "duration_api_ms": 1100,
            "num_turns": 1,
            "result": result,
            "session_id": "6a3f2c1e-0000-4000-8000-000000000000",
            "total_cost_usd": 0.0123,
            "usage": {"input_tokens": 42, "output_tokens": 17},
        }
    )


def as_codex(argv: list[str], mode: str, reply: str) -> int:
    if not argv or argv[0] != "exec" or argv[-1] != "-":
        print("error: the fake expects `codex exec [OPTIONS] -`", file=sys.stderr)
        return 2
    bad = unknown_option(argv[1:], CODEX_VALUED, CODEX_FLAGS)
    if bad is not None:
        print(
            f"error: unexpected argument '{bad}' found\n\nUsage: codex exec [OPTIONS] [PROMPT]",
            file=sys.stderr,
        )
        return 2
    print(
        "OpenAI Codex v0.0.0-fake (research preview)\n--------\nworkdir: "
        + os.getcwd()
        + f"\nmodel: {option(argv, '-m', '--model') or 'gpt-5-codex'}\nsandbox: "
        + f"{option(argv, '-s', '--sandbox')}\n--------\nuser\n{PROMPT}",
        file=sys.stderr,
    )
    if mode in ("rate-limit", "auth"):
        print(CODEX_LIMIT if mode == "rate-limit" else CODEX_AUTH, file=sys.stderr)
        return 1
    print("thinking\nReviewing the diff.\ncodex", file=sys.stderr)
    last = option(argv, "-o", "--output-last-message")
    if last:
        with open(last, "w", encoding="utf-8") as fh:
            fh.write(reply)
    print(reply)
    print("tokens used: 1234", file=sys.stderr)
    return 0


def as_claude(argv: list[str], mode: str, reply: str) -> int:
    if "-p" not in argv and "--print" not in argv:
        print("error: the fake only supports print mode (-p)", file=sys.stderr)
        return 2
    bad = unknown_option(argv, CLAUDE_VALUED, CLAUDE_FLAGS)
    if bad is not None:
        print(f"error: unknown option '{bad}'", file=sys.stderr)
        return 1
    as_json = option(argv, "--output-format") == "json"
    if mode in ("rate-limit", "auth"):
        text = CLAUDE_LIMIT if mode == "rate-limit" else CLAUDE_AUTH
        print(envelope(text, True) if as_json else text)
        return 1
    print(envelope(reply, False) if as_json else reply)
    return 0


def as_command(mode: str, reply: str) -> int:
    if mode in ("rate-limit", "auth"):
        print(CMD_LIMIT if mode == "rate-limit" else CMD_AUTH, file=sys.stderr)
        return 1
    sys.stdout.write(reply)
    return 0


def main() -> int:
    argv = sys.argv[1:]
    name = os.environ.get("FAKE_MODEL_NAME", "fake-model")
    mode = os.environ.get("FAKE_MODEL_MODE", "findings")
    log = os.environ.get("FAKE_MODEL_LOG")
    if log:
        with open(log, "a", encoding="utf-8") as fh:
            fh.write(
                json.dumps({"name": name, "argv": argv, "prompt": PROMPT, "cwd": os.getcwd()})
                + "\n"
            )
    if mode == "hang":
        time.sleep(3600)
    # A model's answer takes time: FAKE_MODEL_LATENCY seconds, spent waiting as on the network.
    time.sleep(float(os.environ.get("FAKE_MODEL_LATENCY", "0") or 0))
    if mode == "crash":
        print("thread 'main' panicked at src/main.rs:1:1:\nfake model crashed", file=sys.stderr)
        return 101
    reply = reply_for(mode)
    if name == "codex":
        return as_codex(argv, mode, reply)
    if name == "claude":
        return as_claude(argv, mode, reply)
    return as_command(mode, reply)


PROMPT = sys.stdin.read() if not sys.stdin.isatty() else ""

if __name__ == "__main__":
    sys.exit(main())
