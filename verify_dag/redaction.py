"""Reports never echo secrets (DESIGN §5b): output is redacted before anything keeps it.

Two nets. *Known secrets*: every credential this worker holds (its secret-looking environment,
passwords of URLs anywhere in it, the Celery app's broker and result-backend credentials, the
user's verify-dag config, the credential files in HOME), with their base64 and URL-quoted forms.
Repository code may find them where we cannot stop it (a file it can read, an ancestor's
``/proc/<pid>/environ``), so the values themselves are removed wherever they appear. *Secret
shapes*, whoever's they are: private key blocks, passwords in URLs, and the token shapes
detect-secrets maintains (AWS, GitHub, GitLab, Slack, Stripe, JWT, OpenAI...).

detect-secrets' high-entropy and keyword plugins stay off: the first redact commit SHAs and
digests, the second every ``password = "wrong"`` in a test's source, and reports would lose the
evidence they exist for.
"""

from __future__ import annotations

import base64
import binascii
import itertools
import json
import os
import re
import sys
import threading
import tomllib
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, quote_plus, unquote

from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
from detect_secrets.plugins.base import RegexBasedDetector
from detect_secrets.plugins.cloudant import CloudantDetector
from detect_secrets.plugins.ibm_cloud_iam import IbmCloudIamDetector
from detect_secrets.plugins.ibm_cos_hmac import IbmCosHmacDetector
from detect_secrets.plugins.ip_public import IPPublicDetector
from detect_secrets.plugins.private_key import PrivateKeyDetector
from detect_secrets.plugins.softlayer import SoftlayerDetector

from verify_dag import util

MASK = "[REDACTED]"
MIN_LEN = 8  # shorter values are too likely to occur by chance ("true", a port, a short word)
_MAX_FILE = 1 << 20  # a credential file larger than this is not one

# The whole block: one header, the key, the footer. Output cut short may have no footer; the
# base64 run after the header goes then (also when printed as a repr, with literal "\n").
_PEM = re.compile(
    r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"
    r"(?:.{0,20000}?-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|(?:[A-Za-z0-9+/=\s]|\\n)*)",
    re.DOTALL,
)
# Anchored on "://" rather than the scheme, so re skips ahead to each "://" instead of trying
# at every letter; the scheme does not matter for what is masked.
_URL_USERINFO = re.compile(r"://([^/\s@'\"]*)@")
_URL_PASSWORD = re.compile(r"(://[^/\s:@]*:)[^/\s@]+@")
# Keys of the user's config whose values are credentials (api_key, token, github-secret...).
_CONFIG_KEY = re.compile(r"key|token|secret|passw|auth|credential", re.IGNORECASE)
_TOKEN_CHARS = re.compile(r"[\w\-]*")


def redact(text: str) -> str:
    """``text`` with every secret the worker knows and every secret shape replaced by MASK."""
    if not text:
        return text
    text = _PEM.sub(MASK, text)
    known = _known()
    if known is not None:
        text = known.sub(MASK, text)
    text = _URL_PASSWORD.sub(rf"\1{MASK}@", text)
    return _shapes(text)


# -- known secrets -------------------------------------------------------------------------

_lock = threading.Lock()
_cache: tuple[object, re.Pattern[str] | None] | None = None


def _known() -> re.Pattern[str] | None:
    """One regex for every known secret, rebuilt only when its sources change: redact runs on
    every finding and every captured stream, so reading files each time would not do."""
    global _cache
    stamp = _stamp()
    with _lock:
        if _cache is None or _cache[0] != stamp:
            values = {v for v in _variants(known_values()) if len(v) >= MIN_LEN}
            _cache = (stamp, _trie(values) if values else None)
        return _cache[1]


def known_values() -> set[str]:
    """The secrets this process holds, as they are (encodings are added by the caller)."""
    found: set[str] = set()
    for key, value in os.environ.items():
        # A credential's name says so (TOKEN, API_KEY, PASSWORD, ...). The broader rule that
        # keeps VERIFY_DAG_*, GITHUB_*, ... from repository code is not one for output:
        # GITHUB_WORKSPACE or VERIFY_DAG_STORE are paths every report names.
        if util._SECRET_NAME.search(key):
            found.add(value)
        found.update(_url_credentials(value))
    for url in _celery_urls():
        found.update(_url_credentials(url))
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


def _stamp() -> object:
    """What the known set depends on, cheap to compute: the environment, the Celery app's URLs
    and the identity (inode, size, mtime) of every file read."""
    home = _home()
    paths = [home / p for p in _CREDENTIAL_FILES] + list(_ssh_files(home))
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


def _celery_urls() -> list[str]:
    # Only an app this process imported can hold credentials; importing it here would build one.
    if "verify_dag.tasks.app" not in sys.modules:
        return []
    from verify_dag.tasks import app as celery_app

    conf = celery_app.app.conf
    urls = [conf.broker_url, conf.result_backend]
    return [u for url in urls if isinstance(url, str) for u in url.split(";")]


def _url_credentials(text: str) -> Iterator[str]:
    """The password, and a user part that is a token (``https://<token>@host``), of each URL."""
    for m in _URL_USERINFO.finditer(text):
        user, _, password = m.group(1).partition(":")
        for part in (password, user if _token_like(user) else ""):
            if part:
                yield part
                yield unquote(part)


def _token_like(user: str) -> bool:
    return len(user) >= 16 and any(c.isdigit() for c in user)


def _config_file() -> Path | None:
    from verify_dag.backends.sources import user_file
    from verify_dag.errors import UsageError

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
        if util._secret(key, value) or _CONFIG_KEY.search(key):
            yield value
        yield from _argv_secrets(value.split())
        yield from _url_credentials(value)


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
        yield from _url_credentials(line.strip())


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


def _variants(values: Iterable[str]) -> Iterator[str]:
    """Each value as it is, URL-quoted and base64-encoded. A value inside a longer base64 text
    is encoded at one of three offsets: the characters that depend only on it are kept for each
    (how CI systems mask encoded secrets)."""
    for value in values:
        yield value
        yield quote(value, safe="")
        yield quote_plus(value)
        raw = value.encode("utf-8")
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            yield encode(raw).decode("ascii")
            for offset in range(3):
                encoded = encode(b"\0" * offset + raw).decode("ascii")
                start = 4 if offset else 0
                # The last, partial group depends on what follows the value.
                end = 4 * ((offset + len(raw)) // 3)
                yield encoded[start:end]


def _trie(values: set[str]) -> re.Pattern[str]:
    """One alternation shaped as a prefix tree: ``re`` tries alternatives one by one, so a flat
    ``a|b|c`` over hundreds of values would cost hundreds of comparisons per character."""
    root: dict[str, Any] = {}
    for value in values:
        node = root
        for ch in value:
            node = node.setdefault(ch, {})
        node[""] = {}
    return re.compile(_emit(root))


def _emit(node: dict[str, Any]) -> str:
    alternatives = []
    for ch in sorted(k for k in node if k):
        child, run = node[ch], ch
        while len(child) == 1 and "" not in child:  # a chain without branches: one literal
            ((nxt, child),) = child.items()
            run += nxt
        alternatives.append(re.escape(run) + _emit(child))
    if not alternatives:
        return ""
    body = alternatives[0] if len(alternatives) == 1 else "(?:" + "|".join(alternatives) + ")"
    # A value that is a prefix of another: the longer one is tried first (greedy).
    return f"(?:{body})?" if "" in node else body


# -- secret shapes -------------------------------------------------------------------------

# Every regex detector detect-secrets ships except: the public-IP one (an address is not a
# secret); the private-key one (its match is the header, _PEM takes the whole block); and the
# vendor-keyword ones (Cloudant, IBM, SoftLayer), which look for ``<word>_key = <value>``
# assignments in source like the keyword plugin and, starting with a look-behind, cost re a try
# at every character: 400 ms on 1 MB of test output between them.
_SKIPPED = (
    IPPublicDetector,
    PrivateKeyDetector,
    CloudantDetector,
    IbmCloudIamDetector,
    IbmCosHmacDetector,
    SoftlayerDetector,
)
_PLUGINS: list[type[Any]] = list(get_mapping_from_secret_type_to_class().values())
_DETECTORS: list[RegexBasedDetector] = [
    plugin()
    for plugin in _PLUGINS
    if issubclass(plugin, RegexBasedDetector) and plugin not in _SKIPPED
]

# What every match of the detector contains, found in separate passes, each starting with a
# literal that re finds at memchr speed: one gate pass finds the few lines worth the detector's
# own regexes (its regexes over 1 MB take up to 90 ms each; one alternation of all the gates,
# several hundred). "(?i)" gates are matched, as literals, against the lowered text. A detector
# without gates here (one a later detect-secrets adds) scans the whole text.
_GATES: dict[str, tuple[str, ...]] = {
    "AWSKeyDetector": ("A3T", "ABIA", "ACCA", "AKIA", "ASIA", "(?i)aws"),
    "ArtifactoryDetector": ("AKC", "AP"),
    "AzureStorageKeyDetector": ("AccountKey=",),
    "BasicAuthDetector": ("://",),
    "DiscordBotTokenDetector": (r"\.[\w-]{6}\.[\w-]{27}",),
    "GitHubTokenDetector": ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
    "GitLabTokenDetector": (
        "glpat-",
        "gldt-",
        "glft-",
        "glsoat-",
        "glrt-",
        "GR1348941",
        "glcbt-",
        "glimt-",
        "glptt-",
        "glagent-",
        "gloas-",
    ),
    "JwtTokenDetector": ("eyJ",),
    "MailchimpDetector": (r"-us\d",),
    "NpmDetector": ("_authToken",),
    "OpenAIDetector": ("T3BlbkFJ",),
    "PypiTokenDetector": ("pypi-",),
    "SendGridDetector": ("SG.",),
    "SlackDetector": ("(?i)xox", "(?i)hooks.slack.com"),
    "SquareOAuthDetector": ("sq0csp-",),
    "StripeDetector": ("k_live_",),
    "TelegramBotTokenDetector": (r":[\w-]{35}",),
    "TwilioKeyDetector": ("AC", "SK"),
}


def _gate(pattern: str) -> tuple[re.Pattern[str], bool]:
    if pattern.startswith("(?i)"):
        return re.compile(re.escape(pattern[4:])), True
    return re.compile(pattern if "\\" in pattern else re.escape(pattern)), False


_GATED = [
    (d, [_gate(g) for g in _GATES[type(d).__name__]])
    for d in _DETECTORS
    if type(d).__name__ in _GATES
]
_UNGATED = [d for d in _DETECTORS if type(d).__name__ not in _GATES]


def _shapes(text: str) -> str:
    """Mask what the detectors find. Like detect-secrets, a line at a time: a line a gate hits
    goes through the detector's regexes and is confirmed by the detector itself (the JWT one
    checks the token decodes); the secret part of each match is masked."""
    lowered = text.lower()
    if len(lowered) != len(text):  # a character whose lower case is longer: offsets would drift
        lowered = ""
    spans: list[tuple[int, int]] = []
    for detector, gates in _GATED:
        starts: set[int] = set()
        for gate, on_lowered in gates:
            if on_lowered and not lowered:
                gate = re.compile(gate.pattern, re.IGNORECASE)
            for m in gate.finditer(lowered if on_lowered and lowered else text):
                starts.add(text.rfind("\n", 0, m.start()) + 1)
        for start in starts:
            end = text.find("\n", start)
            line = text[start : end if end >= 0 else len(text)]
            spans.extend((start + a, start + b) for a, b in _found(detector, line))
    for detector in _UNGATED:
        spans.extend(_found(detector, text))
    if not spans:
        return text
    out, last = [], 0
    for start, end in sorted(spans):
        if end <= last:
            continue
        out.append(text[last : max(start, last)])
        out.append(MASK)
        last = end
    out.append(text[last:])
    return "".join(out)


def _found(detector: RegexBasedDetector, text: str) -> Iterator[tuple[int, int]]:
    confirmed: dict[int, bool] = {}
    for regex in detector.denylist:
        for m in regex.finditer(text):
            line_start = text.rfind("\n", 0, m.start()) + 1
            if line_start not in confirmed:
                line_end = text.find("\n", m.start())
                line = text[line_start : line_end if line_end >= 0 else len(text)]
                confirmed[line_start] = any(True for _ in detector.analyze_string(line))
            if confirmed[line_start]:
                yield _secret_span(m, text)


def _secret_span(m: re.Match[str], text: str) -> tuple[int, int]:
    """The secret in a detector's match. Some regexes capture the secret (AWS secret keys, a
    URL's password), others capture only a prefix (``(ghp|gho)_...``): a group of MIN_LEN or
    more is the secret, else the whole match without the delimiters around it."""
    groups = [
        i for i in range(1, (m.re.groups or 0) + 1) if m.group(i) and len(m.group(i)) >= MIN_LEN
    ]
    start, end = m.span(groups[0]) if groups else m.span()
    # Regexes that stop early (the JWT one's lazy tail) would leave the rest of the token.
    tail = _TOKEN_CHARS.match(text, end)
    end = tail.end() if tail else end
    if not groups:
        while start < end and not (text[start].isalnum() or text[start] in "_-"):
            start += 1
        while end > start and not (text[end - 1].isalnum() or text[end - 1] in "_-="):
            end -= 1
    return start, end
