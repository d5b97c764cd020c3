"""Credentials in URLs: the one rule for finding them and masking them.

A URL's userinfo (``scheme://USERINFO@host``, or ``USERINFO@host:path`` for git's scp-like form)
carries a credential when it has a non-empty password, or when its user part alone is a token
(``https://<token>@host``, as git, pip and npm take them). Every place that refuses, shows, logs
or hands on a URL asks this module: refusing repository URLs (repos.py), showing one
(git.display_source, fleet), collecting the secrets this host holds and masking them in output
(credentials.py, redaction.py), and the tester's messages about package indexes.

The rule is the stricter of the readings these places could take: a user part that is a token
is masked and refused like a password (it grants the same access), and a token is any long run of
token characters with a digit, not only a provider's prefixed one (a private index's token has no
prefix we could know). Free text is masked part by part, so a report still says whose access a
URL used; :func:`mask_in`'s ``whole`` is for text whose URLs may hold tokens of any shape.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Literal
from urllib.parse import unquote

Kind = Literal["a password", "a token"]

# A user part that is a token, not an account name: the prefixes of GitHub, GitLab and Hugging
# Face tokens, or a run of token characters with a digit longer than account names usually are
# (GitHub's classic tokens are 40 hex digits, Azure DevOps PATs 52 characters).
TOKEN_PREFIXES = (
    "ghp_",
    "gho_",
    "ghu_",
    "ghs_",
    "ghr_",
    "github_pat_",
    "glpat-",
    "gldt-",
    "glcbt-",
    "hf_",
)
_TOKEN_LIKE = re.compile(r"(?=[A-Za-z0-9_.~+=-]*[0-9])[A-Za-z0-9_.~+=-]{16,}")
# The userinfo of each URL in free text. Anchored on "://" rather than the scheme, so re skips
# ahead to each "://" instead of trying at every letter; the scheme does not matter here.
_IN_TEXT = re.compile(r"://([^/\s@]*)@")


def is_token(user: str) -> bool:
    """Whether a URL's user part is a token (git decodes %XX there, so a token may hide behind
    it: it is decoded first)."""
    user = unquote(user)
    return user.lower().startswith(TOKEN_PREFIXES) or bool(_TOKEN_LIKE.fullmatch(user))


def kind(userinfo: str) -> Kind | None:
    """What credential ``userinfo`` (``user[:password]``) carries, if any."""
    user, colon, password = userinfo.partition(":")
    if colon and password:
        return "a password"
    return "a token" if is_token(user) else None


def secrets(userinfo: str) -> Iterator[str]:
    """The secret parts of ``userinfo``: its password, and its user part when that is a token;
    each as written and %-decoded (git decodes it, so either may turn up in output)."""
    user, _, password = userinfo.partition(":")
    for part in (password, user if is_token(user) else ""):
        if part:
            yield part
            yield unquote(part)


def _span(url: str) -> tuple[int, int] | None:
    """Where the userinfo of the one URL ``url`` is (start, end), if it has one."""
    scheme, sep, rest = url.partition("://")
    if sep:
        start = len(scheme) + len(sep)
        # The authority ends at the first of / ? #; a password may hold an unencoded "@".
        authority = re.split(r"[/?#]", rest, maxsplit=1)[0]
    else:
        start, authority = 0, url.split("/", 1)[0]  # scp-like [user@]host:path
    end = authority.rfind("@")
    return (start, start + end) if end > 0 else None


def credentials(url: str) -> Kind | None:
    """What credential the one URL ``url`` carries: "a password", "a token", or None."""
    where = _span(url)
    return kind(url[where[0] : where[1]]) if where else None


def _masked(userinfo: str, shown: str, whole: bool) -> str:
    if whole:
        return shown if userinfo else userinfo
    found = kind(userinfo)
    if found == "a password":
        return f"{userinfo.partition(':')[0]}:{shown}"
    return shown if found == "a token" else userinfo


def mask(url: str, shown: str = "***") -> str:
    """The one URL ``url`` safe to show: a password becomes ``shown`` (the user name stays, it
    says whose access it was) and so does a user part that is a token."""
    where = _span(url)
    if where is None:
        return url
    start, end = where
    return url[:start] + _masked(url[start:end], shown, whole=False) + url[end:]


def mask_in(text: str, shown: str, *, whole: bool = False) -> str:
    """``text`` with the credentials of every URL in it replaced by ``shown``, as :func:`mask`
    does; ``whole``: every non-empty userinfo is replaced, credential or not (for URLs whose user
    part may be a token of a shape no rule knows, such as a private package index's)."""
    return _IN_TEXT.sub(lambda m: f"://{_masked(m.group(1), shown, whole)}@", text)


def in_text(text: str) -> Iterator[str]:
    """The secret parts (:func:`secrets`) of every URL in ``text``."""
    for m in _IN_TEXT.finditer(text):
        yield from secrets(m.group(1))


def has_credentials(text: str) -> bool:
    """Whether a URL in ``text`` carries a credential."""
    return any(kind(m.group(1)) for m in _IN_TEXT.finditer(text))
