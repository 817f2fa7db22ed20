"""Stored sentences (job events' reasons, audit messages, notifications) are written once, in one catalogue
per domain, so a msgid kept in rows has one place to be found and reworded (with a data migration)."""

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOMAINS = ("scheduling", "billing", "portal")
CATALOGUES = {f"{domain}/history_catalogue.py" for domain in DOMAINS}
# gettext_noop used for what is not stored history: said in the active language when shown, never kept
NOT_HISTORY = {
    "billing/quote_texts.py": "the quote's trade-offs, a catalogue of their own",
    "scheduling/kinds/": "a kind's noun and name-taken message, attributes of the kind",
    "scheduling/spec/": "a spec's hints, said when the spec is read",
    "scheduling/queue_tree.py": "a queue tree's validation errors, said by the form or YAML that edits it",
    "portal/api/errors.py": "the API's error titles",
    "portal/templatetags/money.py": "the month names",
}
CALL = re.compile(r"\bgettext_noop\(")


def _sources():
    for domain in DOMAINS:
        for path in sorted((ROOT / domain).rglob("*.py")):
            relative = path.relative_to(ROOT).as_posix()
            if "/migrations/" not in relative and "/tests/" not in relative:
                yield relative, path.read_text(encoding="utf-8")


def _msgid(value) -> str | None:
    is_noop = (isinstance(value, ast.Call) and getattr(value.func, "id", "") == "gettext_noop"
               and len(value.args) == 1 and isinstance(value.args[0], ast.Constant))
    return value.args[0].value if is_noop else None


def _entries(catalogue: str) -> dict[str, object]:
    """The catalogue's entries: NAME -> its msgid (a str), its (one, many) pair of msgids counted by
    `%(count)s`, or the node it was given instead."""
    entries = {}
    for node in ast.parse((ROOT / catalogue).read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign):
            value = node.value
            if isinstance(value, ast.Tuple):
                pair = tuple(map(_msgid, value.elts))
                counted = len(pair) == 2 and all(m and "%(count)s" in m for m in pair)
                entries[node.targets[0].id] = pair if counted else value
            else:
                entries[node.targets[0].id] = _msgid(value) or value
    return entries


def _msgids(entry) -> tuple:
    return entry if isinstance(entry, tuple) else (entry,)


def test_history_sentences_are_written_only_in_the_catalogues():
    outside = [relative for relative, text in _sources()
               if CALL.search(text) and relative not in CATALOGUES
               and not any(relative.startswith(allowed) for allowed in NOT_HISTORY)]
    assert outside == [], f"move these sentences to their domain's history_catalogue.py: {outside}"


@pytest.mark.parametrize("catalogue", sorted(CATALOGUES))
def test_each_catalogue_entry_is_a_msgid_used_by_its_domain(catalogue):
    domain = catalogue.split("/")[0]
    code = "\n".join(text for relative, text in _sources() if relative.startswith(f"{domain}/")
                     and relative != catalogue)
    entries = _entries(catalogue)
    assert entries
    not_msgids = [name for name, msgid in entries.items() if not isinstance(msgid, str | tuple)]
    assert not_msgids == [], f"entries not a gettext_noop of one string (or a counted pair): {not_msgids}"
    unused = [name for name in entries if not re.search(rf"\btexts\.{name}\b", code)]
    assert unused == [], f"entries no code says: {unused}"


def test_each_msgid_is_written_once():
    msgids = [msgid for catalogue in sorted(CATALOGUES) for entry in _entries(catalogue).values()
              for msgid in _msgids(entry)]
    assert sorted({m for m in msgids if msgids.count(m) > 1}) == []


@pytest.mark.parametrize(("count", "english", "chinese"), [
    (1, "1 replica on n1", "1 个副本位于 n1"),
    (3, "3 replicas on n1", "3 个副本位于 n1"),
])
def test_a_counted_sentence_says_one_replica_not_one_replicas(count, english, chinese):
    from django.utils import translation

    from scheduling import history_catalogue as texts
    from scheduling.history_texts import said, stored, text

    sentence = stored(said(texts.PLACED, count=count, nodes="n1"))
    with translation.override("en"):
        assert text(sentence) == english
    with translation.override("zh-hans"):
        assert text(sentence) == chinese
