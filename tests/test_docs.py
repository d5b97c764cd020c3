"""The README and the docs say what the code does: the formats, queues, brokers and env builders
they name are the code's own (the exit code tables: tests/test_exitcodes.py), every relative
link lands, and the README stays a user's page (short, with an install path and the two
commands)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from verify_dag.phases.tester.env import registry
from verify_dag.report.formats import FORMATS
from verify_dag.tasks import app

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PAGES = [
    README,
    ROOT / "CONTRIBUTING.md",
    ROOT / "ops" / "README.md",
    *(ROOT / "docs").glob("*.md"),
]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    kept = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return kept.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    out: set[str] = set()
    fenced = False
    for line in text(path).splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and line.startswith("#"):
            out.add(slug(line.lstrip("#")))
    return out


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_lands(page: Path) -> None:
    broken = []
    prose = re.sub(r"`[^`\n]*`", "", re.sub(r"(?ms)^```.*?^```", "", text(page)))
    for target in LINK.findall(prose):
        if re.match(r"[a-z]+:", target):  # https:, mailto:
            continue
        rel, _, anchor = target.partition("#")
        dest = (page.parent / rel).resolve() if rel else page
        if not dest.exists() or (anchor and dest.suffix == ".md" and anchor not in anchors(dest)):
            broken.append(target)
    assert broken == []


def test_the_readme_is_a_users_page() -> None:
    readme = text(README)
    assert len(readme.splitlines()) < 200
    assert "pipx install" in readme and "uv tool install" in readme
    # The two commands: a verification on the embedded default, and the test command CI runs.
    first_block = readme.split("```sh\n", 1)[1].split("```", 1)[0]
    assert "bash examples/demo.sh" in first_block and "python3 -m pytest" in first_block
    assert "\npython3 -m pytest\n" in text(ROOT / ".ci" / "run")
    assert (ROOT / "CONTRIBUTING.md").exists() and (ROOT / "docs" / "architecture.md").exists()


def test_the_formats_named_are_the_codes() -> None:
    for page in (README, ROOT / "docs" / "usage.md"):
        named = re.search(r"\[--format=([a-z|]+)\]", text(page))
        assert named is not None, page
        assert named.group(1).split("|") == list(FORMATS), page


def test_the_queues_named_are_the_codes() -> None:
    readme = text(README)
    named = re.search(r"Queues are resource classes \(([^)]*)\)", readme)
    assert named is not None
    assert set(re.findall(r"`([a-z]+)`", named.group(1))) == {*app.QUEUES, app.FLEET_QUEUE}


def test_the_brokers_named_are_brokers_celery_takes() -> None:
    from kombu.transport import TRANSPORT_ALIASES

    readme = text(README)
    for name, scheme in (("Redis", "redis"), ("RabbitMQ", "amqp")):
        assert name in readme and scheme in TRANSPORT_ALIASES
    assert "not used yet" not in readme


def test_every_env_builder_is_named() -> None:
    readme, usage = text(README), text(ROOT / "docs" / "usage.md")
    for builder in registry.BUILDERS:
        if builder.NAME != "venv":  # a plain virtualenv is the fallback, not a tool to install
            assert builder.NAME in readme and f"by {builder.NAME}" in usage, builder.NAME


def test_no_stale_statement() -> None:
    for page in PAGES:
        said = " ".join(text(page).split())
        for stale in ("RabbitMQ is not used yet", "Markdown or a versioned JSON", "Four tools"):
            assert stale not in said, (page, stale)
