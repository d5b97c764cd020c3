"""Read and validate each configuration source into a :class:`Layer`; precedence is config.py's.

Every mistake is a UsageError of one line naming the file (or variable) and the key. The
repository's own table is untrusted: only ``REPO_KEYS`` are read from it, every other key is
dropped with a note for the report.
"""

from __future__ import annotations

import re
import shlex
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import Field

from verify_dag import skills, url_secrets
from verify_dag.errors import UsageError
from verify_dag.models.base import Frozen
from verify_dag.paths import user_file

Kind = Literal["codex", "claude", "command", "anthropic", "openai"]
# The kinds that call a model API over HTTP (backends/http.py) rather than a CLI.
HTTP_KINDS: tuple[Kind, ...] = ("anthropic", "openai")
# The skills that may have their own model and effort: the verify pipeline's that call a model
# (contract among them: its criteria have a model arm), and the shadow tool's claim verifier.
MODEL_SKILLS = (*skills.asks_a_model(), "shadow-verifier")
PLACEHOLDERS = ("{model}", "{effort}", "{skill}")
# comment-density is read by reviewers/comments.py (the deterministic comment-review rules); it is
# listed here only so that a [tool.verify-dag] table carrying it is not refused.
_KEYS = (
    "backend",
    "command",
    "model",
    "effort",
    "timeout",
    "skills",
    "comment-density",
    "base-url",
    "api-key-file",
    "max-output-tokens",
    "retries",
)
# What the repository under verification may set in its own table: nothing that picks
# or starts a program or spends the user's money. timeout only bounds a call to the backend the
# user chose, and a longer call is not a dearer one (models bill tokens, not time).
REPO_KEYS = ("timeout", "comment-density")
# The run settings a repository may make, read by the client that submits the run
# (verify_dag/settings.py), not here: skipped without a note.
_RUN_SETTINGS = ("depth", "fail-on", "test-timeout", "per-test-timeout", "tool-timeout")
_REFUSED = {
    "backend": "a model backend",
    "command": "a command template",
    "model": "a model",
    "effort": "a model effort",
    "skills": "a per-skill model or effort",
    # The address a prompt and the worker's API key are sent to: never the repository's choice.
    "base-url": "a model API address",
    "api-key-file": "an API key file",
    "max-output-tokens": "a model's output allowance",
    "retries": "a model call's retries",
}
# Retries beyond this would hold a review slot for minutes on a server that is down.
MAX_RETRIES = 10
_SKILL_KEYS = ("model", "effort")
# Model and effort names become CLI arguments: keep them to plain names, never option-like.
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,99}")
REPO_TABLE = "[tool.verify-dag]"


class SkillSettings(Frozen):
    model: str | None = None
    effort: str | None = None


class Layer(Frozen):
    """What one source said. ``backend`` is implied "command" when it gives only a template."""

    source: str
    backend: Kind | None = None
    command: tuple[str, ...] = ()
    model: str | None = None
    effort: str | None = None
    timeout: float | None = None
    skills: dict[str, SkillSettings] = Field(default_factory=dict)
    # The HTTP kinds' settings (backends/http.py); the CLIs have their own.
    base_url: str | None = None
    api_key_file: str | None = None
    max_output_tokens: int | None = None
    retries: int | None = None


def read_layers(repo: Path | None, env: Mapping[str, str], notes: list[str]) -> list[Layer]:
    """The environment, the user config file and the repository's pyproject, in that order."""
    layers = [env_layer(env)]
    user = user_file(env)
    if user is not None:
        layers.append(file_layer(read_toml(user), str(user), trusted=True, notes=notes))
    if repo is not None and (repo / "pyproject.toml").is_file():
        pyproject = repo / "pyproject.toml"
        try:
            doc = read_toml(pyproject)
        except UsageError as exc:
            # The change broke its own pyproject.toml: the run reports that as a finding on the
            # file (verify_dag/declarations.py); the reviewers still review, without its table.
            notes.append(f"{REPO_TABLE} not read: {exc}")
            doc = {}
        table = doc.get("tool", {})
        table = table.get("verify-dag") if isinstance(table, dict) else None
        if table is not None:
            where = f"{pyproject} {REPO_TABLE}"
            if not isinstance(table, dict):
                raise UsageError(f"{where}: expected a table")
            layers.append(file_layer(table, where, trusted=False, notes=notes))
    return layers


def read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path}: invalid TOML: {exc}") from exc
    except OSError as exc:
        raise UsageError(f"{path}: cannot read: {exc.strerror or exc}") from exc


def env_layer(env: Mapping[str, str]) -> Layer:
    def get(name: str) -> str | None:
        value = env.get(name, "").strip()
        return value or None

    raw: dict[str, Any] = {
        k: v
        for k, v in (
            ("backend", get("VERIFY_DAG_BACKEND")),
            ("command", get("VERIFY_DAG_BACKEND_COMMAND")),
            ("model", get("VERIFY_DAG_MODEL")),
            ("effort", get("VERIFY_DAG_EFFORT")),
            ("timeout", get("VERIFY_DAG_MODEL_TIMEOUT")),
            ("base-url", get("VERIFY_DAG_BASE_URL")),
            ("api-key-file", get("VERIFY_DAG_API_KEY_FILE")),
            ("max-output-tokens", get("VERIFY_DAG_MAX_OUTPUT_TOKENS")),
            ("retries", get("VERIFY_DAG_MODEL_RETRIES")),
        )
        if v is not None
    }
    skills: dict[str, dict[str, str]] = {}
    for skill in MODEL_SKILLS:
        suffix = skill.upper().replace("-", "_")
        for key in _SKILL_KEYS:
            value = get(f"VERIFY_DAG_{key.upper()}_{suffix}")
            if value is not None:
                skills.setdefault(skill, {})[key] = value
    if skills:
        raw["skills"] = skills
    return file_layer(raw, "environment", trusted=True, notes=[], env_names=True)


def file_layer(
    raw: Mapping[str, Any], source: str, *, trusted: bool, notes: list[str], env_names: bool = False
) -> Layer:
    def where(key: str) -> str:
        if env_names:
            names = {
                "backend": "VERIFY_DAG_BACKEND",
                "command": "VERIFY_DAG_BACKEND_COMMAND",
                "timeout": "VERIFY_DAG_MODEL_TIMEOUT",
                "base-url": "VERIFY_DAG_BASE_URL",
                "api-key-file": "VERIFY_DAG_API_KEY_FILE",
                "max-output-tokens": "VERIFY_DAG_MAX_OUTPUT_TOKENS",
                "retries": "VERIFY_DAG_MODEL_RETRIES",
            }
            name = names.get(key) or "VERIFY_DAG_" + re.sub(r"[.-]", "_", key.upper())
            return f"environment {name}"
        return f"{source}: {key}"

    if not trusted:
        raw = _repository_safe(raw, source, notes)
    unknown = sorted(set(raw) - set(_KEYS))
    if unknown:
        raise UsageError(f"{source}: unknown key {unknown[0]!r} (known: {', '.join(_KEYS)})")
    backend = raw.get("backend")
    if backend is not None and backend not in get_args(Kind):
        raise UsageError(
            f"{where('backend')}: expected one of {', '.join(get_args(Kind))}, got {backend!r}"
        )
    command = _template(raw["command"], where("command")) if "command" in raw else ()
    if command and backend is None:
        backend = "command"
    skills: dict[str, SkillSettings] = {}
    table = raw.get("skills", {})
    if not isinstance(table, dict):
        raise UsageError(f"{where('skills')}: expected a table of skills")
    for skill, settings in table.items():
        if skill not in MODEL_SKILLS:
            raise UsageError(
                f"{where('skills')}: unknown skill {skill!r} (known: {', '.join(MODEL_SKILLS)})"
            )
        if not isinstance(settings, dict):
            raise UsageError(f"{where('skills.' + skill)}: expected a table with model/effort")
        bad = sorted(set(settings) - set(_SKILL_KEYS))
        if bad:
            raise UsageError(
                f"{where('skills.' + skill)}: unknown key {bad[0]!r} (known: model, effort)"
            )
        skills[skill] = SkillSettings(
            **{
                k: _name(v, where(f"{k}.{skill}" if env_names else f"skills.{skill}.{k}"))
                for k, v in settings.items()
            }
        )
    return Layer(
        source=source,
        backend=backend,
        command=command,
        model=_name(raw.get("model"), where("model")),
        effort=_name(raw.get("effort"), where("effort")),
        timeout=_timeout(raw.get("timeout"), where("timeout")),
        skills=skills,
        base_url=_url(raw.get("base-url"), where("base-url")),
        api_key_file=_path(raw.get("api-key-file"), where("api-key-file")),
        max_output_tokens=_count(raw.get("max-output-tokens"), where("max-output-tokens"), 1),
        retries=_count(raw.get("retries"), where("retries"), 0, MAX_RETRIES),
    )


def _repository_safe(raw: Mapping[str, Any], source: str, notes: list[str]) -> dict[str, Any]:
    """The keys of a repository's table it may set; a note for each other one, never an error:
    the repository is not the user's to fix, and refusing keeps the run going without it."""
    kept: dict[str, Any] = {}
    for key in raw:
        if key in REPO_KEYS:
            kept[key] = raw[key]
        elif key in _RUN_SETTINGS:
            continue
        else:
            # Unknown keys too: a name this version does not know may choose a program.
            what = _REFUSED.get(key, "a setting a repository may not make")
            notes.append(
                f"{source}: ignored `{key}`: {what} is only accepted from the "
                "environment or the user config file, never from the repository under "
                f"verification (it may set {' and '.join(REPO_KEYS)})"
            )
    return kept


def _name(value: object, where: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not _NAME.fullmatch(value):
        raise UsageError(
            f"{where}: expected a model or effort name (letters, digits and "
            f". _ : / @ + -), got {value!r}"
        )
    return value


def _timeout(value: object, where: str) -> float | None:
    if value is None:
        return None
    try:
        seconds = float(value)  # type: ignore[arg-type]  # TOML number or env string
    except (TypeError, ValueError):
        seconds = -1.0
    if isinstance(value, bool) or not seconds > 0:
        raise UsageError(f"{where}: expected a positive number of seconds, got {value!r}")
    return seconds


def _url(value: object, where: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not re.fullmatch(r"https?://[^\s/?#]+(?:/[^\s?#]*)?", value):
        shown = url_secrets.mask_in(value, "***", whole=True) if isinstance(value, str) else value
        raise UsageError(f"{where}: expected an http:// or https:// URL, got {shown!r}")
    return value.rstrip("/")


def _path(value: object, where: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise UsageError(f"{where}: expected the path of a file")
    return str(Path(value).expanduser())


def _count(value: object, where: str, least: int, most: int | None = None) -> int | None:
    if value is None:
        return None
    number: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str) and value.strip().isdigit():
        number = int(value)
    if number is None or number < least or (most is not None and number > most):
        bound = f"from {least} to {most}" if most is not None else f"of at least {least}"
        raise UsageError(f"{where}: expected a whole number {bound}, got {value!r}")
    return number


def _template(value: object, where: str) -> tuple[str, ...]:
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        argv = [str(v) for v in value]
    elif isinstance(value, str):
        try:
            argv = shlex.split(value)
        except ValueError as exc:
            raise UsageError(f"{where}: cannot split the command template: {exc}") from exc
    else:
        raise UsageError(f"{where}: expected a command string or a list of arguments")
    if not argv:
        raise UsageError(f"{where}: the command template is empty")
    for arg in argv:
        if arg not in PLACEHOLDERS and any(p in arg for p in PLACEHOLDERS):
            raise UsageError(
                f"{where}: placeholders must be whole arguments ('--model {{model}}', not {arg!r})"
            )
    return tuple(argv)
