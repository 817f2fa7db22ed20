"""The README and the manual (docs/, built by MkDocs from mkdocs.yml): the README stays a short guide, every
page is in the navigation, no link leaves the repository, every setting the platform reads is documented,
and the task YAML examples the manual shows are specs the platform accepts."""

import re
from pathlib import Path

import pytest
import yaml

from scheduling.spec import parse_job_spec

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
LINK = re.compile(r"\]\(([^)\s]+)\)")
PAGES = sorted(DOCS.rglob("*.md"))
GUIDES = [ROOT / "README.md", *sorted((ROOT / "bench").glob("*.md")), *PAGES]


def nav_pages(entries) -> set[str]:
    found = set()
    for entry in entries:
        values = entry.values() if isinstance(entry, dict) else [entry]
        for value in values:
            found |= nav_pages(value) if isinstance(value, list) else {value}
    return found


def relative_links(path: Path) -> list[str]:
    links = (m.group(1).split("#")[0] for m in LINK.finditer(path.read_text(encoding="utf-8")))
    return [link for link in links if link and "://" not in link and not link.startswith("mailto:")]


def test_the_readme_is_a_short_guide():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) < 300
    for section in ("## Quick start", "## Demo users", "## Settings (environment)", "## Read more"):
        assert section in readme
    for command in ("make run", "make test", "make e2e"):
        assert command in readme


def test_every_page_of_the_manual_is_in_the_navigation():
    config = yaml.load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"), Loader=yaml.BaseLoader)
    listed = nav_pages(config["nav"])
    assert {str(page.relative_to(DOCS)) for page in PAGES} == listed
    # Other tools read these paths.
    assert {"DESIGN.md", "glossary.md", "install-kubernetes.md"} <= listed


@pytest.mark.parametrize("path", GUIDES, ids=lambda p: str(p.relative_to(ROOT)))
def test_links_stay_inside_the_repository_and_resolve(path):
    text = path.read_text(encoding="utf-8")
    assert "../shared" not in text
    for link in relative_links(path):
        target = (path.parent / link).resolve()
        assert target.is_relative_to(ROOT), f"{link} leaves the repository"
        assert target.exists(), f"{link} does not exist"


def test_the_readme_settings_table_the_manual_embeds_has_no_relative_links():
    # docs/reference/settings.md includes this part of the README, so its links would resolve from docs/reference/.
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    embedded = readme.split("--8<-- [start:settings]")[1].split("--8<-- [end:settings]")[0]
    links = [m.group(1) for m in LINK.finditer(embedded)]
    assert [link for link in links if "://" not in link] == []


def documented_settings() -> str:
    return (ROOT / "README.md").read_text(encoding="utf-8") + (DOCS / "reference" / "settings.md").read_text(
        encoding="utf-8")


def read_settings() -> set[str]:
    read = re.compile(r"""(?:env\w*|environ\.get|getenv)\(\s*["']([A-Z][A-Z0-9_]+)["']""")
    names = set()
    for module in (ROOT / "portal" / "settings").rglob("*.py"):
        names |= set(read.findall(module.read_text(encoding="utf-8")))
    return {name for name in names if not name.startswith("TEST_")}


def test_every_setting_the_platform_reads_is_documented():
    names = read_settings()
    assert {"DATABASE_URL", "REDIS_URL", "SECRET_KEY"} <= names  # the scan finds what it should
    documented = documented_settings()
    assert [name for name in sorted(names) if f"`{name}`" not in documented] == []


def yaml_blocks(path: Path) -> list[str]:
    return re.findall(r"```yaml\n(.*?)```", path.read_text(encoding="utf-8"), flags=re.S)


SPEC_PAGES = [DOCS / "reference" / "task-yaml.md", DOCS / "tenant" / "notebooks.md", DOCS / "tenant" / "inference.md"]


@pytest.mark.parametrize("path", SPEC_PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_task_yaml_examples_are_accepted(path):
    blocks = yaml_blocks(path)
    assert blocks
    kinds = {parse_job_spec(block).kind for block in blocks}
    assert kinds <= {"training", "notebook", "inference"}


def test_the_task_yaml_reference_shows_every_kind():
    kinds = {parse_job_spec(block).kind for block in yaml_blocks(DOCS / "reference" / "task-yaml.md")}
    assert kinds == {"training", "notebook", "inference"}
