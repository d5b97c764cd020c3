"""Which model backend a judgement skill uses, with which model and effort: configuration as data.

Sources, highest precedence first:

1. the environment: ``VERIFY_DAG_BACKEND`` (codex | claude | command | anthropic | openai),
   ``VERIFY_DAG_BACKEND_COMMAND``, ``VERIFY_DAG_MODEL``, ``VERIFY_DAG_EFFORT``, per skill
   ``VERIFY_DAG_MODEL_<SKILL>`` and ``VERIFY_DAG_EFFORT_<SKILL>`` (SKILL upper-cased, ``-`` ->
   ``_``), ``VERIFY_DAG_MODEL_TIMEOUT`` (seconds); for the HTTP kinds ``VERIFY_DAG_BASE_URL``,
   ``VERIFY_DAG_API_KEY_FILE``, ``VERIFY_DAG_MAX_OUTPUT_TOKENS``, ``VERIFY_DAG_MODEL_RETRIES``;
2. the user's config file: ``$VERIFY_DAG_CONFIG``, else ``$XDG_CONFIG_HOME/verify-dag/config.toml``,
   else ``~/.config/verify-dag/config.toml`` (top-level keys backend, command, model, effort,
   timeout, base-url, api-key-file, max-output-tokens, retries and ``[skills.<skill>]``
   tables);
3. the verified repository's ``pyproject.toml`` ``[tool.verify-dag]``: ``timeout`` only (and
   ``comment-density``, read by reviewers/comments.py). That repository is what we are verifying:
   a backend, model, effort or command template from it would choose what runs on the user's
   machine and what the user pays for, so each is dropped with a note (``sources.REPO_KEYS``).

For one skill, the first source that says anything wins: its skill table, then its global value.
A source's model and effort only apply when that source names no backend or names the one that
will run the skill, because model names belong to one engine (``opus`` means nothing to Codex).
codex-reviewer always runs Codex, so its own skill table applies whatever backend it sits beside.

Reading and validating each source lives in ``sources.py``; this module owns precedence.

Defaults follow each skill's cost tier (``tier`` in verify_dag/skills.py): reviewer gets the most
capable model, the other skills that call a model a general-purpose one. Per kind that is:

============  =====================  =====================
kind          capable (reviewer)     general (the others)
============  =====================  =====================
claude        model ``opus``         model ``sonnet``
codex         effort ``high``        effort ``medium``
command       nothing                nothing
anthropic     ``claude-opus-4-5``    ``claude-sonnet-4-5``
openai        nothing                nothing
============  =====================  =====================

Codex gets no default model, only an effort: its CLI's own default model tracks the best current
one, and pinning a name here would age. A command template gets no defaults: we cannot know what
its ``{model}`` means. The Messages API wants a model in every request and has no alias that
tracks the newest, so the anthropic kind names one (``VERIFY_DAG_MODEL`` replaces it); an
OpenAI-compatible server's models are whatever it serves, so the openai kind needs one named.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from verify_dag import skills
from verify_dag.backends.sources import HTTP_KINDS, MODEL_SKILLS, Kind, Layer, read_layers
from verify_dag.errors import UsageError
from verify_dag.models.base import Frozen

__all__ = [
    "DEFAULT_MAX_OUTPUT_TOKENS",
    "DEFAULT_RETRIES",
    "DEFAULT_TIMEOUT",
    "HTTP_KINDS",
    "MODEL_SKILLS",
    "Backend",
    "BackendsConfig",
    "Kind",
    "codex_on_path",
    "explain",
    "how_to_configure",
    "load_config",
    "resolve",
]

DEFAULT_TIMEOUT = 600.0
HttpSetting = Literal["base_url", "api_key_file", "max_output_tokens", "retries"]
_HTTP_ENV: dict[HttpSetting, str] = {
    "base_url": "VERIFY_DAG_BASE_URL",
    "api_key_file": "VERIFY_DAG_API_KEY_FILE",
    "max_output_tokens": "VERIFY_DAG_MAX_OUTPUT_TOKENS",
    "retries": "VERIFY_DAG_MODEL_RETRIES",
}
# The HTTP kinds: what a reply may cost at most (the Messages API requires a figure; a review's
# findings fit well within it), and how often a 429 or 5xx is tried again.
DEFAULT_MAX_OUTPUT_TOKENS = 8192
DEFAULT_RETRIES = 3
DEFAULTS: dict[Kind, dict[skills.Tier, tuple[str | None, str | None]]] = {  # (model, effort)
    "claude": {"capable": ("opus", None), "general": ("sonnet", None)},
    "codex": {"capable": (None, "high"), "general": (None, "medium")},
    "command": {"capable": (None, None), "general": (None, None)},
    "anthropic": {"capable": ("claude-opus-4-5", None), "general": ("claude-sonnet-4-5", None)},
    "openai": {"capable": (None, None), "general": (None, None)},
}


class BackendsConfig(Frozen):
    layers: tuple[Layer, ...] = ()  # highest precedence first
    notes: tuple[str, ...] = ()  # what was ignored and why, for the report

    @property
    def backend(self) -> Kind | None:
        """The configured kind, or None when nothing usable is configured."""
        kind = next((layer.backend for layer in self.layers if layer.backend), None)
        if kind == "command" and not self.command:
            return None
        return kind

    @property
    def command(self) -> tuple[str, ...]:
        return next((layer.command for layer in self.layers if layer.command), ())

    @property
    def timeout(self) -> float:
        return next((la.timeout for la in self.layers if la.timeout is not None), DEFAULT_TIMEOUT)

    def first(self, key: HttpSetting) -> Any:
        """The highest-precedence source's value of an HTTP kind's setting, and None when
        no source gives one."""
        return next((v for la in self.layers if (v := getattr(la, key)) is not None), None)

    def origin(self, key: HttpSetting) -> str:
        """Where ``first(key)`` came from: the variable or the file, or "default"."""
        layer = next((la for la in self.layers if getattr(la, key) is not None), None)
        if layer is None:
            return "default"
        if layer.source == "environment":
            return f"environment {_HTTP_ENV[key]}"
        return layer.source


class Backend(Frozen):
    """One skill's resolved backend: everything ``invoke`` needs to call it."""

    kind: Kind
    skill: str
    model: str | None = None
    effort: str | None = None
    command: tuple[str, ...] = ()  # the command kind's template, split, placeholders intact
    timeout: float = DEFAULT_TIMEOUT
    # The HTTP kinds (backends/http.py): where requests go (None: the kind's own default or its
    # SDK's environment variable), the file that holds the key (None: the kind's environment
    # variable), the reply's token allowance and the retries of a 429 or 5xx. Never the key.
    base_url: str | None = None
    api_key_file: str | None = None
    max_output_tokens: int = DEFAULT_MAX_OUTPUT_TOKENS
    retries: int = DEFAULT_RETRIES

    def parameters(self) -> tuple[str, ...]:
        """What decides a reply besides the prompt and the model: the result cache keys on it
        (never on the key, which changes who pays, not what is answered)."""
        if self.kind in HTTP_KINDS:
            return (self.base_url or "", str(self.max_output_tokens))
        return tuple(self.command)

    def describe(self) -> str:
        parts = [
            f"model {self.model}" if self.model else "",
            f"effort {self.effort}" if self.effort else "",
        ]
        detail = ", ".join(p for p in parts if p)
        name = self.command[0] if self.kind == "command" and self.command else self.kind
        return f"{name} ({detail})" if detail else name


def how_to_configure() -> str:
    return (
        "configure a model backend with VERIFY_DAG_BACKEND=codex or claude (its CLI on PATH), "
        "anthropic or openai (ANTHROPIC_API_KEY or OPENAI_API_KEY in the worker's environment; "
        "VERIFY_DAG_BASE_URL for an OpenAI-compatible server) "
        "or VERIFY_DAG_BACKEND_COMMAND='your-cli {model}' (prompt on stdin, reply on stdout), "
        'or backend = "claude" in ~/.config/verify-dag/config.toml'
    )


def codex_on_path() -> bool:
    """`which codex`, on the host that asks: the review worker that would run Codex."""
    return shutil.which("codex") is not None


def resolve(config: BackendsConfig, skill: str) -> Backend | None:
    """The backend ``skill`` runs on, or None when there is none to run it.

    codex-reviewer is Codex or nothing: its value is a second engine's opinion, so it never
    silently becomes another backend under its own name.
    """
    if skill == "codex-reviewer":
        kind: Kind | None = "codex" if codex_on_path() else None
    else:
        kind = config.backend
    if kind is None:
        return None
    # The verification tools' model arms (shadow-verifier) are not skills of the pipeline.
    tier: skills.Tier = skills.SKILLS[skill].tier if skill in skills.SKILLS else "general"
    default_model, default_effort = DEFAULTS[kind][tier]
    model = _pick(config, skill, kind, "model") or default_model
    effort = _pick(config, skill, kind, "effort")
    if kind in HTTP_KINDS:
        if model is None:
            raise UsageError(
                f"the {kind} backend needs a model for {skill}: set VERIFY_DAG_MODEL (or "
                f"VERIFY_DAG_MODEL_{skill.upper().replace('-', '_')}), or model = ... in the "
                "user config file"
            )
        return Backend(
            kind=kind,
            skill=skill,
            model=model,
            effort=effort,
            timeout=config.timeout,
            base_url=config.first("base_url"),
            api_key_file=config.first("api_key_file"),
            max_output_tokens=config.first("max_output_tokens") or DEFAULT_MAX_OUTPUT_TOKENS,
            retries=_or(config.first("retries"), DEFAULT_RETRIES),
        )
    return Backend(
        kind=kind,
        skill=skill,
        model=model,
        effort=effort or default_effort,
        command=config.command if kind == "command" else (),
        timeout=config.timeout,
    )


def _or(value: int | None, default: int) -> int:
    return default if value is None else value


def _pick(
    config: BackendsConfig, skill: str, kind: Kind, key: Literal["model", "effort"]
) -> str | None:
    return _picked(config, skill, kind, key)[0]


def _picked(
    config: BackendsConfig, skill: str, kind: Kind, key: Literal["model", "effort"]
) -> tuple[str | None, str]:
    """The value and the source that gave it ("default" when none did)."""
    for layer in config.layers:
        own = layer.skills.get(skill)
        # A source that names no backend speaks of the one configured overall: its model is
        # that engine's name (VERIFY_DAG_MODEL=sonnet beside backend = "claude" is a Claude
        # model), so it never reaches codex-reviewer's Codex unless Codex is that engine.
        applies = (layer.backend or config.backend) in (None, kind)
        env = layer.source == "environment"
        if own is not None and getattr(own, key) and (applies or skill == "codex-reviewer"):
            name = f"VERIFY_DAG_{key.upper()}_{skill.upper().replace('-', '_')}"
            said = f"environment {name}" if env else f"{layer.source} [skills.{skill}]"
            return str(getattr(own, key)), said
        if applies and getattr(layer, key):
            said = f"environment VERIFY_DAG_{key.upper()}" if env else layer.source
            return str(getattr(layer, key)), said
    return None, "default"


def explain(config: BackendsConfig, skill: str) -> dict[str, str]:
    """Where ``skill``'s backend, model and effort come from (``verify-dag config``)."""
    if skill == "codex-reviewer":
        kind: Kind | None = "codex" if codex_on_path() else None
        said = "codex on PATH" if kind else "no codex on PATH"
    else:
        kind = config.backend
        named = next((la for la in config.layers if la.backend), None)
        said = "none configured"
        if named is not None:
            said = named.source
            if said == "environment":
                set_by = "VERIFY_DAG_BACKEND" if os.environ.get("VERIFY_DAG_BACKEND") else ""
                said = f"environment {set_by or 'VERIFY_DAG_BACKEND_COMMAND'}"
    if kind is None:
        return {"backend": said}
    tier = skills.SKILLS[skill].tier if skill in skills.SKILLS else "general"
    out = {"backend": said}
    keys: tuple[Literal["model", "effort"], ...] = ("model", "effort")
    for key in keys:
        value, source = _picked(config, skill, kind, key)
        out[key] = source if value else f"default for the {tier} tier"
    return out


def load_config(repo: Path | None, env: Mapping[str, str] | None = None) -> BackendsConfig:
    """Read every source; a malformed one is a UsageError naming the file and the key."""
    env = os.environ if env is None else env
    notes: list[str] = []
    layers = read_layers(repo, env, notes)
    config = BackendsConfig(layers=tuple(layers), notes=tuple(notes))
    named = next((la for la in config.layers if la.backend), None)
    if named is not None and named.backend == "command" and not config.command:
        raise UsageError(
            f'{named.source}: backend is "command" but no command template is set '
            "(VERIFY_DAG_BACKEND_COMMAND or `command` in the user config file)"
        )
    return config
