"""What counts as a credential: the rules that keep secrets out of repository code's environment
(processes.scrubbed_env), and the secrets this host holds (environment, the Celery app's URLs, the
user's config, credential files, SSH keys), which redaction masks in every output.

Apart from redaction because the environment rules are needed by every subprocess, and
redaction's detect-secrets import costs about 0.2 s that most processes never need.
"""

from __future__ import annotations

import base64
import binascii
import fnmatch
import itertools
import json
import os
import re
import tomllib
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from verify_dag import url_secrets
from verify_dag.errors import UsageError
from verify_dag.paths import user_file

MIN_LEN = 8  # shorter values are too likely to occur by chance ("true", a port, a short word)
_MAX_FILE = 1 << 20  # a credential file larger than this is not one
# Keys of the user's config whose values are credentials (api_key, token, github-secret...).
_CONFIG_KEY = re.compile(r"key|token|secret|passw|auth|credential", re.IGNORECASE)

# Names that look like credentials or point at our own infrastructure. Repository code has no
# business seeing them, and a finding must never echo one.
SECRET_NAME = re.compile(
    r"(TOKEN|SECRET|PASSWORD|PASSWD|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY|CREDENTIAL|SESSION|AUTH|COOKIE)",
    re.IGNORECASE,
)
_SECRET_PREFIXES = (
    "VERIFY_DAG_",
    "CELERY_",
    "AWS_",
    "AZURE_",
    "GOOGLE_",
    "GCP_",
    "OPENAI_",
    "ANTHROPIC_",
    "CLAUDE_",
    "CODEX_",
    "GITHUB_",
    "GITLAB_",
    "NPM_",
    "PYPI_",
    "TWINE_",
    "DOCKER_",
    "REDIS_",
    "AMQP_",
    "BROKER_",
    "SSH_AUTH_SOCK",
)


# What repository code may see of the caller's environment: an allow-list, never the environment
# minus known names (a DB_PASS or SIGNING_KEY has no name a deny-list knows). Locale, terminal
# and time zone; how to reach the package index (its URLs, proxies and certificates: provisioning
# needs them, and one carrying a password is still withheld by is_secret); CI's own flag, which
# test suites read. PATH and HOME are set by the chokepoint and the sandbox themselves.
PASSED_NAMES = frozenset(
    {
        "PATH",
        "HOME",
        "LANG",
        "LANGUAGE",
        "TERM",
        "TZ",
        "CI",
        "NO_COLOR",
        "FORCE_COLOR",
        "COLUMNS",
        "SOURCE_DATE_EPOCH",
        "SSL_CERT_FILE",
        "SSL_CERT_DIR",
        "REQUESTS_CA_BUNDLE",
        "CURL_CA_BUNDLE",
        "http_proxy",
        "https_proxy",
        "no_proxy",
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "NO_PROXY",
        "PIP_INDEX_URL",
        "PIP_EXTRA_INDEX_URL",
        "PIP_FIND_LINKS",
        "PIP_TRUSTED_HOST",
        "PIP_NO_INDEX",
        "PIP_CERT",
        "PIP_CONFIG_FILE",
        "UV_INDEX",
        "UV_INDEX_URL",
        "UV_DEFAULT_INDEX",
        "UV_EXTRA_INDEX_URL",
        "UV_FIND_LINKS",
        "UV_NO_INDEX",
        "UV_INDEX_STRATEGY",
        "NPM_CONFIG_REGISTRY",
        "npm_config_registry",
    }
)
PASSED_PREFIXES = ("LC_",)


def declared(patterns: Iterable[str]) -> dict[str, str]:
    """The caller's variables a project declares it needs (tox's pass_env: names and fnmatch
    patterns), but for those that name a secret: what its own runner would hand its tests."""
    wanted = [p for p in patterns if p]
    return {
        key: value
        for key, value in os.environ.items()
        if any(fnmatch.fnmatchcase(key, p) for p in wanted) and not is_secret(key, value)
    }


def passed(key: str, value: str) -> bool:
    """Whether a variable of the caller's environment reaches repository code."""
    return (key in PASSED_NAMES or key.startswith(PASSED_PREFIXES)) and not is_secret(key, value)


# Withheld values that are not secrets, so redaction leaves them in reports: our own settings'
# (documented, shown by `verify-dag config`; their URLs' passwords are masked as credentials),
# paths and path lists, version numbers, words a shell or terminal sets, and prose: a value with
# whitespace in it is a sentence or a command line (a test's expected reply, EDITOR="code -w"),
# not a token, key or password, and masking it would rewrite ordinary output.
_BENIGN_WORDS = (
    "PWD OLDPWD SHLVL _ SHELL USER LOGNAME HOSTNAME MAIL EDITOR VISUAL PAGER COLORTERM DISPLAY "
    "DEBIAN_FRONTEND PYTEST_CURRENT_TEST"
)
_BENIGN_NAMES = frozenset(_BENIGN_WORDS.split())
_NOT_SECRET_VALUE = re.compile(
    r"^(?:[~/][^:\s]*(?::[~/][^:\s]*)*|[\d.:-]+|true|false|yes|no|.*\s.*)$", re.I | re.S
)


def withheld_values() -> set[str]:
    """The values of the caller's environment kept from repository code that could be secrets:
    redaction masks them too, so a value a test found another way (a file, a parent's /proc)
    still never reaches a report."""
    return {
        value
        for key, value in os.environ.items()
        if not passed(key, value)
        and key not in _BENIGN_NAMES
        and not (key.startswith("VERIFY_DAG_") and not url_secrets.has_credentials(value))
        and len(value) >= MIN_LEN
        and not _NOT_SECRET_VALUE.match(value)
    }


def is_secret(key: str, value: str) -> bool:
    """Whether an environment variable is kept from repository code (processes.scrubbed_env)."""
    return bool(
        SECRET_NAME.search(key)
        or key.startswith(_SECRET_PREFIXES)
        # A URL with credentials in it (DATABASE_URL=postgres://user:pw@host/db) is one
        # whatever the variable is called.
        or url_secrets.has_credentials(value)
    )


# -- the secrets this host holds --------------------------------------------------------


def known_values() -> set[str]:
    """The secrets this process holds, as they are (encodings are added by the caller)."""
    found: set[str] = set()
    found.update(withheld_values())
    for key, value in os.environ.items():
        # A credential's name says so (TOKEN, API_KEY, PASSWORD, ...). The broader rule that
        # keeps VERIFY_DAG_*, GITHUB_*, ... from repository code is not one for output:
        # GITHUB_WORKSPACE or VERIFY_DAG_STORE are paths every report names.
        if SECRET_NAME.search(key):
            found.update(_key_file(value) if key.endswith("_FILE") else (value,))
        found.update(url_secrets.in_text(value))
    for url in _celery_urls():
        found.update(url_secrets.in_text(url))
    config = _config_file()
    if config is not None:
        found.update(_config_values(config))
    home = _home()
    for path, reader in _CREDENTIAL_FILES.items():
        text = _read(home / path)
        if text is not None:
            found.update(reader(text))
    for key_file in _ssh_files(home):
        text = _read(key_file)
        if text is not None:
            found.update(_private_key_lines(text))
    return {v for v in found if len(v) >= MIN_LEN}


def _key_file(path: str) -> Iterator[str]:
    """What a ``*_FILE`` setting names (VERIFY_DAG_API_KEY_FILE, a config's api-key-file)."""
    yield (_read(Path(path).expanduser()) or "").strip()


def stamp() -> object:
    """What the known set depends on, cheap to compute: the environment, the Celery app's URLs
    and the identity (inode, size, mtime) of every file read."""
    home = _home()
    paths = [home / p for p in _CREDENTIAL_FILES] + list(_ssh_files(home))
    paths += [Path(v).expanduser() for k, v in os.environ.items() if k.endswith("_FILE") and v]
    config = _config_file()
    if config is not None:
        paths.append(config)
    return (
        hash(frozenset(os.environ.items())),
        tuple(_celery_urls()),
        tuple((str(p), _file_id(p)) for p in paths),
    )


def _file_id(path: Path) -> tuple[int, int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def _home() -> Path:
    # The worker's own HOME, where its credential files are; repository code gets another one.
    return Path(os.environ.get("HOME") or Path.home())


def _read(path: Path) -> str | None:
    try:
        if not path.is_file() or path.stat().st_size > _MAX_FILE:
            return None
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


# The broker and result-backend URLs of a Celery app this process imported: tasks/app.py adds its
# app's when it is imported (the pipeline never imports the Celery side). Read live, because the
# app is configured after import and may be reconfigured.
_URL_SOURCES: list[Callable[[], Iterable[object]]] = []


def add_url_source(source: Callable[[], Iterable[object]]) -> None:
    _URL_SOURCES.append(source)


def _celery_urls() -> list[str]:
    urls = [url for source in _URL_SOURCES for url in source()]
    return [u for url in urls if isinstance(url, str) for u in url.split(";")]


def _config_file() -> Path | None:
    try:
        return user_file(os.environ)
    except UsageError:  # a missing VERIFY_DAG_CONFIG is reported where the config is loaded
        return None


def _config_values(path: Path) -> Iterator[str]:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return
    yield from _toml_secrets(data, "")


def _toml_secrets(value: Any, key: str) -> Iterator[str]:
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _toml_secrets(v, str(k))
    elif isinstance(value, list):
        words = [v for v in value if isinstance(v, str)]
        yield from _argv_secrets(words)
        for v in value:
            yield from _toml_secrets(v, key)
    elif isinstance(value, str):
        if key.endswith("-file") and _CONFIG_KEY.search(key):
            # api-key-file names where the secret is; the path itself is no secret.
            yield from _key_file(value)
        elif is_secret(key, value) or _CONFIG_KEY.search(key):
            yield value
        yield from _argv_secrets(value.split())
        yield from url_secrets.in_text(value)


def _argv_secrets(words: list[str]) -> Iterator[str]:
    """Credentials in a command template (``command = ["llm", "--api-key", "..."]``, or
    ``"env OPENAI_API_KEY=... llm"``), the one place config.toml has for them."""
    for word, following in itertools.pairwise(["", *words]):
        name, sep, value = following.partition("=")
        if sep and _CONFIG_KEY.search(name):
            yield value
        elif word.startswith("-") and _CONFIG_KEY.search(word):
            yield following


def _netrc(text: str) -> Iterator[str]:
    words = text.split()
    for word, following in itertools.pairwise(words):
        if word in ("password", "passwd"):
            yield following


def _git_credentials(text: str) -> Iterator[str]:
    for line in text.splitlines():
        yield from url_secrets.in_text(line.strip())


def _assignments(text: str, key: re.Pattern[str]) -> Iterator[str]:
    """Values of ``name = value`` lines (ini files, .npmrc) whose name matches ``key``."""
    for line in text.splitlines():
        name, sep, value = line.partition("=")
        if not sep and ":" in line:  # configparser also takes "name: value"
            name, sep, value = line.partition(":")
        value = value.strip().strip("\"'")
        if sep and key.search(name):
            yield value
            if name.strip().endswith("_password"):  # .npmrc keeps it base64-encoded
                yield from _b64decoded(value)


def _b64decoded(value: str) -> Iterator[str]:
    try:
        plain = base64.b64decode(value, validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return
    yield plain
    yield plain.partition(":")[2]  # docker's "auth" is base64 of user:password


def _docker(text: str) -> Iterator[str]:
    try:
        auths = json.loads(text).get("auths", {})
    except (ValueError, AttributeError):
        return
    for entry in auths.values() if isinstance(auths, dict) else ():
        for name, value in entry.items() if isinstance(entry, dict) else ():
            if isinstance(value, str) and name != "email":
                yield value
                if name == "auth":
                    yield from _b64decoded(value)


_PASSWORD = re.compile(r"passw", re.IGNORECASE)
_AWS = re.compile(r"secret|token|key", re.IGNORECASE)
_NPM = re.compile(r"_auth|token|passw", re.IGNORECASE)
_CREDENTIAL_FILES: dict[Path, Callable[[str], Iterable[str]]] = {
    Path(".netrc"): _netrc,
    Path(".git-credentials"): _git_credentials,
    Path(".config/git/credentials"): _git_credentials,
    Path(".pypirc"): lambda text: _assignments(text, _PASSWORD),
    Path(".aws/credentials"): lambda text: _assignments(text, _AWS),
    Path(".docker/config.json"): _docker,
    Path(".npmrc"): lambda text: _assignments(text, _NPM),
}


def _ssh_files(home: Path) -> list[Path]:
    try:
        return sorted(p for p in (home / ".ssh").iterdir() if not p.name.endswith(".pub"))
    except OSError:
        return []


def _private_key_lines(text: str) -> Iterator[str]:
    """The base64 body of every private key in ``text``: printed whole, line by line or as a
    repr, each body line is in the output verbatim."""
    inside = False
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("-----BEGIN") and "PRIVATE KEY" in line:
            inside = True
        elif line.startswith("-----END"):
            inside = False
        elif inside and ":" not in line:  # not a "Proc-Type: 4,ENCRYPTED" header
            yield line
