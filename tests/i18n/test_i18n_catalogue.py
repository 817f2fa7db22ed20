"""The zh_Hans catalogue is complete (msgfmt: no untranslated, no fuzzy entry) and the committed
.mo is the compiled .po, so a fresh clone shows the translations without a build step."""

import gettext
import subprocess
from pathlib import Path

import pytest
from django.conf import settings

LC_MESSAGES = Path(settings.BASE_DIR) / "locale" / "zh_Hans" / "LC_MESSAGES"
PO = LC_MESSAGES / "django.po"
MO = LC_MESSAGES / "django.mo"


def statistics(po: Path) -> str:
    done = subprocess.run(["msgfmt", "--check-format", "--statistics", "-o", "/dev/null", str(po)],
                          capture_output=True, text=True, check=True)
    return done.stderr.strip()


def test_every_marked_string_is_translated():
    figures = statistics(PO)
    assert "translated" in figures
    assert "untranslated" not in figures, figures
    assert "fuzzy" not in figures, figures


def test_the_check_finds_an_untranslated_entry(tmp_path):
    broken = tmp_path / "django.po"
    broken.write_text(PO.read_text(encoding="utf-8") + '\nmsgid "A sentence nobody translated"\nmsgstr ""\n',
                      encoding="utf-8")
    assert "1 untranslated" in statistics(broken)


def test_the_committed_mo_is_the_compiled_po(tmp_path):
    fresh = tmp_path / "django.mo"
    subprocess.run(["msgfmt", "-o", str(fresh), str(PO)], check=True)
    with MO.open("rb") as committed, fresh.open("rb") as compiled:
        assert gettext.GNUTranslations(committed)._catalog == gettext.GNUTranslations(compiled)._catalog, (
            "locale/zh_Hans/LC_MESSAGES/django.mo is stale: run `make compilemessages`")


@pytest.mark.parametrize("term", ["显存", "队列", "抢占", "谷时", "账单", "预算"])
def test_the_glossary_defines_the_domain_terms(term):
    glossary = (Path(settings.BASE_DIR) / "docs" / "glossary.md").read_text(encoding="utf-8")
    assert term in glossary
