"""Specs that differ only by their name (a job array written out, a sweep's copies): read once.

A batch of submits sends thousands of JSON specs alike but for `name`. Reading one checks everything
but the name against the same cluster, queues and secrets, so the others' JobSpec is the first's with
their own name, once that name passes the same check (`Reader.text`'s for `name`). Their clean YAML is
likewise the first's with the name put in, where YAML writes the name as it is (not quoted).
Anything else (another form, a name that is not plain, a value that is not plain JSON) is read whole.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

import yaml

from scheduling.spec import dict_to_yaml
from scheduling.spec.model import JobSpec
from scheduling.spec.read import DNS_LABEL, MAX_TEXT

# a name YAML writes plain, and that no spec holds elsewhere (checked: it must appear once)
PLACEHOLDER = "name-placeholder-5f0c2e9a"


class SpecTemplates:
    """One batch's specs read, by everything but their name."""

    def __init__(self) -> None:
        self._read: dict[tuple, JobSpec] = {}
        self._yaml: dict[tuple, tuple[str, str] | None] = {}

    def parse(self, spec: Mapping[str, Any], read: Callable[[Mapping[str, Any]], JobSpec]) -> JobSpec:
        """`read(spec)`, or the JobSpec of a spec read before that differs from it only by its name."""
        key = _key_without_name(spec)
        if key is None:
            return read(spec)
        name = spec.get("name")
        template = self._read.get(key)
        if template is not None and _valid_name(name):
            return replace(template, name=name)
        parsed = read(spec)   # a SpecError keeps nothing
        if parsed.name == name and _valid_name(name):   # the name came from `name`, as in the clean form
            self._read[key] = parsed
        return parsed

    def yaml(self, out: dict[str, Any]) -> str:
        """`dict_to_yaml(out)` for the clean-form object of a spec."""
        name = out.get("name")
        if not (_valid_name(name) and _plain_in_yaml(name)):
            return dict_to_yaml(out)
        rest = _key_without_name(out)
        if rest is None:
            return dict_to_yaml(out)
        key = (list(out).index("name"), rest)   # where the name is written
        if key not in self._yaml:
            text = dict_to_yaml({**out, "name": PLACEHOLDER})
            before, found, after = text.partition(PLACEHOLDER)
            self._yaml[key] = (before, after) if found and PLACEHOLDER not in after else None
        parts = self._yaml[key]
        if parts is None:
            return dict_to_yaml(out)
        return parts[0] + name + parts[1]


def _valid_name(name: object) -> bool:
    """What `Reader.text` accepts for a job's `name` (required, DNS_LABEL)."""
    return isinstance(name, str) and bool(name.strip()) and len(name) <= MAX_TEXT and bool(DNS_LABEL.fullmatch(name))


def _plain_in_yaml(name: str) -> bool:
    """Whether YAML writes the name (a DNS label: nothing in it needs quoting) unquoted: when it reads back
    as text, as the representer asks its resolver ("123", "true" or "2024-1-1" are quoted)."""
    return _RESOLVER.resolve(yaml.ScalarNode, name, (True, False)) == _TEXT


_RESOLVER, _TEXT = yaml.resolver.Resolver(), "tag:yaml.org,2002:str"


def _key_without_name(spec: Mapping[str, Any]) -> tuple | None:
    """The spec but its name, as a key equal only for equal plain JSON (None: not plain JSON)."""
    if type(spec) is not dict or not all(type(key) is str for key in spec):
        return None
    try:
        return tuple((key, _frozen(value)) for key, value in spec.items() if key != "name")
    except TypeError:
        return None


def _frozen(value: Any) -> tuple:
    kind = type(value)
    if kind is dict:
        if not all(type(key) is str for key in value):
            raise TypeError
        return dict, tuple((key, _frozen(item)) for key, item in value.items())
    if kind is list:
        return list, tuple(_frozen(item) for item in value)
    if kind is float:
        return float, repr(value)   # -0.0 and 0.0, each NaN, told apart
    if kind in (str, int, bool) or value is None:
        return kind, value
    raise TypeError
