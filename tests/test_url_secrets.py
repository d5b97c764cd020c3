"""One rule for credentials in URLs: a password, or a user part that is a token."""

from __future__ import annotations

import pytest

from verify_dag import git, url_secrets

TOKEN = "ghp_" + "C4nary" * 6


@pytest.mark.parametrize(
    ("url", "kind", "shown"),
    [
        ("https://bot:s3cret@example.com/a.git", "a password", "https://bot:***@example.com/a.git"),
        ("redis://:pw@127.0.0.1:6379/0", "a password", "redis://:***@127.0.0.1:6379/0"),
        (f"https://{TOKEN}@example.com/a.git", "a token", "https://***@example.com/a.git"),
        (f"{TOKEN}@example.com:team/a.git", "a token", "***@example.com:team/a.git"),
        ("https://ghp%5Fabc@example.com/a.git", "a token", "https://***@example.com/a.git"),
        # A private index's token has no prefix: a long run of token characters with a digit.
        ("https://1a2b3c4d5e6f7a8b9c0d@pypi.example/simple", "a token", None),
        ("https://alice@example.com/a.git", None, None),
        ("ssh://git@example.com/a.git", None, None),
        ("git@example.com:team/a.git", None, None),
        ("https://example.com/a@b", None, None),
        ("/srv/repos/a", None, None),
    ],
)
def test_credentials_of_one_url(url: str, kind: str | None, shown: str | None) -> None:
    assert url_secrets.credentials(url) == kind
    expected = shown or (url if kind is None else None)
    if expected is not None:
        assert url_secrets.mask(url) == expected == git.display_source(url)
    else:
        assert "1a2b3c4d5e6f7a8b9c0d" not in url_secrets.mask(url)


def test_urls_in_text() -> None:
    text = f"fetch https://bob:hunter22@pypi.example/simple and https://{TOKEN}@github.com/x, "
    text += "https://alice@example.com/y"
    assert url_secrets.mask_in(text, "[X]") == (
        "fetch https://bob:[X]@pypi.example/simple and https://[X]@github.com/x, "
        "https://alice@example.com/y"
    )
    assert url_secrets.mask_in(text, "[X]", whole=True) == (
        "fetch https://[X]@pypi.example/simple and https://[X]@github.com/x, https://[X]@example.com/y"
    )
    assert set(url_secrets.in_text("x https://u:p%40ss@h/ y")) == {"p%40ss", "p@ss"}
    assert set(url_secrets.in_text(text)) == {"hunter22", TOKEN}
    assert url_secrets.has_credentials(text)
    assert not url_secrets.has_credentials("https://alice@example.com/y https://h/")
