"""A job's `after` (the jobs it waits for) and `array` (one run per index), as the document says them.

    after:
      - {job: prepare-data, condition: succeeded}   # by name: the latest job of that name in the workspace
      - {job: "1234", condition: finished}          # or by id
    array: {indices: "0-9,20,30-39", parallelism: 10}

What the document alone can say is checked here; which job a name or id is, in the workspace, is checked at
submit (`scheduling.lifecycle.chain.resolve_after`), naming the entry's line and column kept in `AfterSpec.where`.
"""

from __future__ import annotations

import re
from typing import Any

from django.utils.translation import gettext as _

from scheduling.core.arrays import MAX_INDICES, IndicesError, normalise_indices, parse_indices
from scheduling.spec.load import Path
from scheduling.spec.model import AFTER_CONDITIONS, AfterSpec, ArraySpec
from scheduling.spec.read import DNS_LABEL, Reader, show

AFTER_KEYS = ("job", "condition")
ARRAY_KEYS = ("indices", "parallelism")
MAX_AFTER = 16
JOB_ID = re.compile(r"^[1-9][0-9]{0,17}$")


def read_after(r: Reader) -> tuple[AfterSpec, ...] | None:
    """`after`: a list of {job, condition}; () when absent, None when wrong (an issue said)."""
    raw = r.doc.value.get("after")
    if raw is None:
        return ()
    path: Path = ("after",)
    if not isinstance(raw, list):
        r.error(path, _("after must be a list of {job, condition}, not %(value)s") % {"value": show(raw)})
        return None
    if len(raw) > MAX_AFTER:
        r.error(
            path, _("after has %(count)s entries; at most %(most)s") % {"count": len(raw), "most": MAX_AFTER}
        )
        return None
    found: list[AfterSpec] = []
    seen: set[str] = set()
    ok = True
    for i, item in enumerate(raw):
        entry_path: Path = (*path, i)
        if isinstance(item, (str, int)) and not isinstance(item, bool):
            item = {"job": item}  # the short form: just the job, condition succeeded
        entry = r.mapping(
            item, entry_path, _("job and condition, e.g. {job: prepare-data, condition: succeeded}")
        )
        if entry is None:
            ok = False
            continue
        r.check_keys(entry, entry_path, AFTER_KEYS, where=_("an after entry"))
        job = entry.get("job")
        if isinstance(job, int) and not isinstance(job, bool):
            job = str(job)
            entry = {**entry, "job": job}
        name = r.text(entry, entry_path, "job", required=True)
        condition = r.choice(entry, entry_path, "condition", AFTER_CONDITIONS, default="succeeded")
        if isinstance(name, str) and not (DNS_LABEL.fullmatch(name) or JOB_ID.fullmatch(name)):
            r.error(
                (*entry_path, "job"),
                _("%(name)s %(value)s is not a job name or id")
                % {"name": r.namer((*entry_path, "job")), "value": show(name)},
            )
            name = None
        if not isinstance(name, str) or condition is None:
            ok = False
            continue
        if name in seen:
            r.error((*entry_path, "job"), _("after names job %(job)s twice") % {"job": name})
            ok = False
            continue
        seen.add(name)
        pos = r.pos((*entry_path, "job"))
        where = (r.namer((*entry_path, "job")), *(pos if pos else (None, None)))
        found.append(AfterSpec(name, condition, where=where))
    return tuple(found) if ok else None


def read_array(r: Reader) -> ArraySpec | None | bool:
    """`array: {indices, parallelism}`; None when absent, False when wrong (an issue said)."""
    raw = r.doc.value.get("array")
    if raw is None:
        return None
    path: Path = ("array",)
    found = r.mapping(raw, path, _('indices and parallelism, e.g. {indices: "0-99", parallelism: 10}'))
    if found is None:
        return False
    r.check_keys(found, path, ARRAY_KEYS, where=_("array"))
    text: Any = found.get("indices")
    if isinstance(text, int) and not isinstance(text, bool):
        text = str(text)
        found = {**found, "indices": text}
    text = r.text(found, path, "indices", required=True)
    indices: tuple[int, ...] = ()
    if isinstance(text, str):
        try:
            indices = parse_indices(text)
        except IndicesError as exc:
            r.error((*path, "indices"), _indices_message(exc, text))
            return False
    else:
        return False
    parallelism = r.integer(found, path, "parallelism", lo=1, hi=MAX_INDICES, default=len(indices))
    if parallelism is None:
        return False
    return ArraySpec(normalise_indices(indices), min(parallelism, len(indices)), len(indices))


def _indices_message(exc: IndicesError, text: str) -> str:
    figures = {"value": show(text), "part": exc.part, "most": MAX_INDICES}
    if exc.code == "backwards":
        return _("array.indices %(value)s: the range %(part)s goes backwards") % figures
    if exc.code == "repeated":
        return _("array.indices %(value)s: index %(part)s is given twice") % figures
    if exc.code == "too_many":
        return _("array.indices %(value)s has more than %(most)s indices") % figures
    return _('array.indices %(value)s is not valid: give indices and ranges such as "0-9,20,30-39"') % figures
