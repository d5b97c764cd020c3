"""A run's repository as its user named it, decided once where the run is built.

A run names its repository by path or by URL. Whether a string is a URL depends on the host that
reads it (git's scp-like ``host:path`` is a path when such a directory exists), so it is decided
once, on the client, and carried: a worker on another host never re-guesses it.
"""

from __future__ import annotations

from pathlib import Path

from verify_dag import url_secrets
from verify_dag.models.base import Frozen


class RepoSource(Frozen):
    """A local repository (``location`` its absolute path) or a remote one (``location`` its URL,
    which workers mirror). A URL carrying credentials is refused before one is made
    (verify_dag.repos.refuse_credentials), so none is held here."""

    location: str
    remote: bool = False

    @property
    def shown(self) -> str:
        """The location safe to show (Flower, reports, logs): a credential that slipped past the
        refusal is masked all the same."""
        return url_secrets.mask(self.location)


def parse_source(text: str, relative_to: Path | None = None) -> RepoSource:
    """``text`` as a RepoSource: a URL as written, or a path made absolute (relative to
    ``relative_to``, default the working directory)."""
    path = (relative_to or Path.cwd()) / Path(text).expanduser()
    if _names_url(text, path):
        return RepoSource(location=text, remote=True)
    return RepoSource(location=str(path.resolve()), remote=False)


def _names_url(text: str, path: Path) -> bool:
    if "://" in text:
        return True
    # git's own rule (urls.txt): "host:path" is scp-like unless a slash comes before the colon,
    # and an existing path of that shape stays a path.
    head, colon, _ = text.partition(":")
    return bool(colon) and "/" not in head and not path.exists()
