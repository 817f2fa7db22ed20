"""Form widgets of the portal's own."""

from __future__ import annotations

from django import forms
from django.forms.utils import flatatt
from django.utils.html import format_html, format_html_join
from django.utils.safestring import mark_safe


class PlainSelect(forms.Select):
    """A select built in Python, the same HTML as Django's templates give: a list's filters offer a few
    hundred options (queues, members, models), and the template engine's include per option was most of
    the job list's CPU."""

    def render(self, name, value, attrs=None, renderer=None):
        widget = self.get_context(name, value, attrs)["widget"]
        parts = []
        for group_name, options, _index in widget["optgroups"]:
            rendered = format_html_join("", '\n  <option value="{}"{}>{}</option>', (
                (str(option["value"]), flatatt(option["attrs"]), option["label"]) for option in options))
            parts.append(format_html('\n  <optgroup label="{}">{}\n  </optgroup>', group_name, rendered)
                         if group_name else rendered)
        return format_html('<select name="{}"{}>{}\n</select>', name, flatatt(widget["attrs"]),
                           mark_safe("".join(parts)))  # noqa: S308 - each part came from format_html
