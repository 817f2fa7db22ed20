"""Sentences stored for later readers: a job event's reason or an audit entry's message is kept as its
English text (the API's `reason`, webhooks, logs) and as what was said, a msgid with its figures, so a
page renders it in the reader's language when it is read, not when it was written.

A stored value (JSON) is one of:
  {"t": msgid, "p": {name: value}}   a gettext_noop sentence with %(name)s figures
  {"c": code, "p": params}           a reason code of scheduling.reasons (a waiting job's reason)
  {"j": "; " | ", ", "i": [value]}   values joined
  {"admin": change_message}          a Django admin LogEntry's change message (rendered by Django)
and a figure is a plain value or one of these. What cannot be rendered (a msgid since reworded, figures of
another shape) falls back to the stored English text.

The msgids are written once, in each domain's history_catalogue (scheduling, billing, portal).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from django.utils import translation
from django.utils.translation import gettext, pgettext

SEPARATORS = ("; ", ", ")


@dataclass(frozen=True)
class Said:
    """One sentence: `template` is a gettext_noop msgid, `params` its figures (plain values or Said)."""

    template: str
    params: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Code:
    """A reason code of scheduling.reasons and its figures."""

    code: str
    params: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class AdminMessage:
    """A Django admin LogEntry's change message (its JSON), which Django words in the active language."""

    change_message: str


@dataclass(frozen=True)
class Joined:
    items: tuple
    sep: str = "; "


@dataclass(frozen=True)
class Worded:
    """A value whose English text the writer already has (a waiting job's reason, worded by the core)."""

    english: str
    value: Any


def said(template: str | tuple[str, str], **params: Any) -> Said:
    """A sentence to store; a catalogue's (one, many) pair is chosen by the `count` figure. Chinese words
    both alike, so the pair of msgids is enough for the platform's languages."""
    if isinstance(template, tuple):
        one, many = template
        template = one if params.get("count") == 1 else many
    return Said(template, params)


def joined(items: Iterable[Any], sep: str = "; ") -> Joined | Any:
    """Items joined by `sep` (one item stands alone); empty items are left out."""
    kept = tuple(i for i in items if i not in ("", None))
    return kept[0] if len(kept) == 1 else Joined(kept, sep)


# --------------------------------------------------------------------------- JSON


def to_json(value: Any) -> Any:
    if isinstance(value, Worded):
        return to_json(value.value)
    if isinstance(value, Said):
        return {"t": value.template, "p": {k: to_json(v) for k, v in value.params.items()}}
    if isinstance(value, Code):
        return {"c": value.code, "p": value.params}
    if isinstance(value, Joined):
        return {"j": value.sep, "i": [to_json(v) for v in value.items]}
    if isinstance(value, AdminMessage):
        return {"admin": value.change_message}
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)   # a Decimal, a date: kept as the text the English shows


def stored(value: Any) -> dict | None:
    """What a model stores for `value`: None for a plain text (nothing to translate)."""
    return to_json(value) if isinstance(value, Said | Code | Joined | Worded | AdminMessage) else None


# --------------------------------------------------------------------------- rendering


class Unreadable(ValueError):
    """A stored value of a shape this module does not know."""


def _render(value: Any, translate: bool) -> str:
    if isinstance(value, Worded) and not translate:
        return value.english
    if isinstance(value, Said | Code | Joined | Worded | AdminMessage):
        value = to_json(value)
    if not isinstance(value, dict):
        if isinstance(value, list | tuple):
            raise Unreadable(value)
        return "" if value is None else str(value)
    if "t" in value:
        params = {k: _render(v, translate) for k, v in (value.get("p") or {}).items()}
        template = gettext(value["t"]) if translate else value["t"]
        return template % params if params else template.replace("%%", "%")
    if "c" in value:
        from scheduling import reasons

        render = reasons.reason_text if translate else reasons.english
        return render(value["c"], value.get("p") or {})
    if "j" in value:
        sep = value["j"]
        if sep not in SEPARATORS:
            raise Unreadable(sep)
        if translate and sep == "; ":
            sep = pgettext("between reasons", "; ")
        return sep.join(_render(v, translate) for v in value["i"])
    if "admin" in value:
        from django.contrib.admin.models import LogEntry

        if translate:
            return LogEntry(change_message=value["admin"]).get_change_message()
        with translation.override("en"):
            return LogEntry(change_message=value["admin"]).get_change_message()
    raise Unreadable(value)


def english(value: Any) -> str:
    """The English text (stored beside the value, and the fallback)."""
    return _render(value, translate=False)


def text(value: Any, fallback: str = "") -> str:
    """The stored value in the active language; `fallback` (the stored English text) for none or one
    that cannot be rendered."""
    if not value:
        return fallback
    try:
        return _render(value, translate=True)
    except (Unreadable, KeyError, TypeError, ValueError, AttributeError, IndexError):
        return fallback
