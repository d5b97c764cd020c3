"""Reports never echo secrets (docs/security.md): output is redacted before anything keeps it.

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
import functools
import importlib.metadata
import re
import threading
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, quote_plus

from verify_dag import credentials, url_secrets
from verify_dag.credentials import MIN_LEN

if TYPE_CHECKING:
    from detect_secrets.plugins.base import RegexBasedDetector

MASK = "[REDACTED]"

# The whole block: one header, the key, the footer. Output cut short may have no footer; the
# base64 run after the header goes then (also when printed as a repr, with literal "\n").
_PEM = re.compile(
    r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"
    r"(?:.{0,20000}?-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|(?:[A-Za-z0-9+/=\s]|\\n)*)",
    re.DOTALL,
)
_TOKEN_CHARS = re.compile(r"[\w\-]*")


def redact(text: str) -> str:
    """``text`` with every secret the worker knows and every secret shape replaced by MASK."""
    if not text:
        return text
    text = _PEM.sub(MASK, text)
    known = _known()
    if known is not None:
        text = known.sub(MASK, text)
    text = url_secrets.mask_in(text, MASK)
    return _shapes(text)


# -- known secrets -------------------------------------------------------------------------

_lock = threading.Lock()
_cache: tuple[object, re.Pattern[str] | None] | None = None


def _known() -> re.Pattern[str] | None:
    """One regex for every known secret, rebuilt only when its sources change: redact runs on
    every finding and every captured stream, so reading files each time would not do."""
    global _cache
    stamp = credentials.stamp()
    with _lock:
        if _cache is None or _cache[0] != stamp:
            values = {v for v in _variants(credentials.known_values()) if len(v) >= MIN_LEN}
            _cache = (stamp, _trie(values) if values else None)
        return _cache[1]


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
    "IPPublicDetector",
    "PrivateKeyDetector",
    "CloudantDetector",
    "IbmCloudIamDetector",
    "IbmCosHmacDetector",
    "SoftlayerDetector",
)
# The releases whose detectors all have gates below. detect-secrets is imported only once a gate
# finds something (its package imports requests and every plugin: 0.2 s in every process that
# redacts, where almost no text holds a secret shape); under any other release it is imported
# at the first redaction, so that a detector it added, which has no gate here, scans every text.
_GATED_RELEASES = ("1.5.0",)

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


_GATE_PATTERNS = {name: [_gate(g) for g in gates] for name, gates in _GATES.items()}
_detectors: tuple[list[tuple[RegexBasedDetector, str]], list[RegexBasedDetector]] | None = None


def _loaded() -> tuple[list[tuple[RegexBasedDetector, str]], list[RegexBasedDetector]]:
    """detect-secrets' regex detectors, imported on first use: (gated, with their class name),
    and the ungated ones (those a release after _GATED_RELEASES added). No lock: two threads that
    both get here build the same lists, and a lock held by another thread when a prefork pool
    forks would stay held in the child."""
    global _detectors
    if _detectors is None:
        from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
        from detect_secrets.plugins.base import RegexBasedDetector

        plugins: list[type[Any]] = list(get_mapping_from_secret_type_to_class().values())
        found = [
            plugin()
            for plugin in plugins
            if issubclass(plugin, RegexBasedDetector) and plugin.__name__ not in _SKIPPED
        ]
        _detectors = (
            [(d, type(d).__name__) for d in found if type(d).__name__ in _GATES],
            [d for d in found if type(d).__name__ not in _GATES],
        )
    return _detectors


@functools.cache
def _all_gated() -> bool:
    """Whether the installed detect-secrets is a release whose detectors all have gates."""
    try:
        return importlib.metadata.version("detect-secrets") in _GATED_RELEASES
    except importlib.metadata.PackageNotFoundError:
        return False


def _shapes(text: str) -> str:
    """Mask what the detectors find. Like detect-secrets, a line at a time: a line a gate hits
    goes through the detector's regexes and is confirmed by the detector itself (the JWT one
    checks the token decodes); the secret part of each match is masked."""
    lowered = text.lower()
    if len(lowered) != len(text):  # a character whose lower case is longer: offsets would drift
        lowered = ""
    hits: dict[str, set[int]] = {}
    for name, gates in _GATE_PATTERNS.items():
        for gate, on_lowered in gates:
            if on_lowered and not lowered:
                gate = re.compile(gate.pattern, re.IGNORECASE)
            for m in gate.finditer(lowered if on_lowered and lowered else text):
                hits.setdefault(name, set()).add(text.rfind("\n", 0, m.start()) + 1)
    if not hits and _all_gated():
        return text
    gated, ungated = _loaded()
    spans: list[tuple[int, int]] = []
    for detector, name in gated:
        for start in hits.get(name, ()):
            end = text.find("\n", start)
            line = text[start : end if end >= 0 else len(text)]
            spans.extend((start + a, start + b) for a, b in _found(detector, line))
    for detector in ungated:
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
